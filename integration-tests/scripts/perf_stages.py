#!/usr/bin/env python3
"""Per-stage CPU breakdown of a covmerge profile (docs/benchmarks-log.md).

Usage: perf record -F 499 -e cpu-clock --call-graph dwarf,32768 -o p.data -- covmerge merge ...
       perf script -i p.data | perf_stages.py [CPU_SECONDS]
A sample goes to the first CONTEXT stage any frame of its stack matches, else to the
LEAF stage of the frame nearest the leaf that matches one. Inlined code is attributed
to the frame it was inlined into (the merge's projection runs inside
spill::for_each_block), unless perf names the inlined function itself: an inlined
frame carries only the function's short name (`id+0x12 (inlined)`), matched exactly
against INLINED (the split's interning is inlined into its parse loop)."""
import sys, collections
# Context stages: a sample belongs to them if any frame matches (first rule wins).
CONTEXT = [
    ("source read: git (gix: pack inflate, deltas, trees)", ["gix_", "GitSource"]),
    ("source read: dir (file reads)", ["DirSource"]),
    ("source: blob hashing (sha1)", ["sha1_smol", "sha1::", "BlobId::of"]),
    ("source: cache", ["source::cache"]),
    ("diff (imara-diff line maps)", ["imara_diff", "project::line_map", "ProjectionCache"]),
    ("output gzip (deflate)", ["zlib_rs::deflate", "GzEncoder", "flate2::zio::Writer", "flate2::gz::write"]),
    ("encode (JSON records)", ["output::write_mcr", "output::write_fl", "write_file"]),
    ("memory (malloc/free, page faults)", ["malloc", "_int_free", "realloc", "cfree", "exc_page_fault", "munmap", "__mmap"]),
]
# Leaf-first stages: the frame nearest the leaf that matches any of these decides.
LEAF = [
    ("spill decode (merge reads chunks)", ["spill::for_each_block", "spill::Cursor"]),
    ("merge: projection + sums", ["merge_shard"]),
    ("input inflate", ["isal_inflate", "decode_huffman_code_block", "libisal", "IsalGz", "zlib_rs::inflate", "MultiGzDecoder", "GzDecoder", "open::Decoded", "zlib_rs::crc32", "zlib_rs::adler32"]),
    ("spill encode (aggregate + write block)", ["finish_into"]),
    ("shard aggregation (split: intern, append)", ["EntryTable::add", "StringTable::intern", "StringIndex::intern", "ThreadStrings", "shard_of", "spill::Pending"]),
    ("cut (record-aligned pieces)", ["Pieces", "count_newlines", "read_full", "ChannelReader"]),
    ("parse (CSV rows)", ["csv_rows", "for_each_unquoted", "RowReader", "csv_core", "parse_count", "parse_thread"]),
    ("spill/part I/O (store, files)", ["object_store", "covmerge_storage", "tokio::fs", "std::fs", "ksys_write", "ksys_read", "vfs_write", "vfs_read", "do_sys_open", "do_filp_open"]),
]
# Inlined frames by their exact short name: ThreadStrings::id and repo_ok,
# StringIndex::intern and EntryTable::add, inlined into the split's parse loop.
INLINED = {
    "id": "shard aggregation (split: intern, append)",
    "repo_ok": "shard aggregation (split: intern, append)",
    "intern": "shard aggregation (split: intern, append)",
    "add": "shard aggregation (split: intern, append)",
}
def inlined_name(frame):
    """The short name of an inlined frame (`7be80f intern+0x12f (inlined)`), else None."""
    if not frame.endswith("(inlined)"):
        return None
    parts = frame.split()
    return parts[1].split("+0x")[0] if len(parts) >= 3 else None
counts = collections.Counter()
total = 0
stack = []
def flush():
    global total
    if not stack:
        return
    total += 1
    for name, pats in CONTEXT:
        if any(p in f for f in stack for p in pats):
            counts[name] += 1
            return
    for f in stack:
        short = inlined_name(f)
        if short in INLINED:
            counts[INLINED[short]] += 1
            return
        for name, pats in LEAF:
            if any(p in f for p in pats):
                counts[name] += 1
                return
    counts["other (runtime, kernel, scheduling)"] += 1
for line in sys.stdin:
    if not line.strip():
        flush(); stack = []
        continue
    if line.startswith((" ", "\t")):
        stack.append(line.strip())
    else:
        flush(); stack = []
flush()
secs = float(sys.argv[1]) if len(sys.argv) > 1 else None
print("| stage | share of CPU samples |" + (" CPU s |" if secs else ""))
print("|---|---|" + ("---|" if secs else ""))
for name, n in counts.most_common():
    row = f"| {name} | {100*n/total:.1f} % |"
    if secs:
        row += f" {secs*n/total:.2f} |"
    print(row)
print(f"| total ({total} samples) | 100 % |" + (f" {secs:.2f} |" if secs else ""))
