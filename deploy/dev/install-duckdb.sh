#!/usr/bin/env bash
# Installs DuckDB's Python package from PyPI into a virtualenv of its own, for the test
# that reads a partial with DuckDB's `read_parquet` (contract §10). Idempotent.
# Prints progress on stderr and the path of the venv's `python3` on stdout.
set -euo pipefail
venv=${COVMERGE_DUCKDB_VENV:-$HOME/.cache/covmerge-duckdb-venv}
want=${COVMERGE_DUCKDB_VERSION:-2.0.1}
py="$venv/bin/python3"
if [ ! -x "$py" ] || ! "$py" -c "import duckdb, sys; sys.exit(duckdb.__version__ != '$want')" 2>/dev/null; then
  echo "duckdb: installing duckdb==$want into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "duckdb==$want"
fi
"$py" -c 'import duckdb; print("duckdb", duckdb.__version__)' >&2
echo "$py"
