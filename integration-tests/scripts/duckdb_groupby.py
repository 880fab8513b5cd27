#!/usr/bin/env python3
"""DuckDB's bare GROUP BY over a corpus's parts: the benchmark's general-engine baseline.

Usage: duckdb_groupby.py THREADS PART.csv.gz ...

Reads every part (gzip CSV, header by name) and sums `hit_count` by GROUPING SETS of
(kernel_commit, file_path, func_name, sl) with and without `manager`: the sums a merge
starts from, without its projection onto the base commit, its checks or its output (the
groups are only counted). Prints the number of groups. Needs PyPI's `duckdb`."""
import sys

import duckdb


def main():
    threads, parts = int(sys.argv[1]), sys.argv[2:]
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    files = ", ".join("'" + p.replace("'", "''") + "'" for p in parts)
    n = con.execute(
        f"""SELECT count(*) FROM (
              SELECT kernel_commit, file_path, func_name, manager, sl, sum(TRY_CAST(hit_count AS BIGINT))
              FROM read_csv([{files}], header = true, compression = 'gzip',
                            union_by_name = true, all_varchar = true)
              GROUP BY GROUPING SETS (
                (kernel_commit, file_path, func_name, manager, sl),
                (kernel_commit, file_path, func_name, sl)))"""
    ).fetchone()[0]
    print(n)


if __name__ == "__main__":
    main()
