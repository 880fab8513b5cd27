#!/usr/bin/env python3
"""Two covmerge binaries on one corpus at the same time, one core each (docs/benchmarks-log.md,
"fifth session"): the machine's drift between runs, larger on this VM than the changes being
measured, hits both alike.

Usage: paired.py N OLD NEW   (env: CORPUS=/tmp/r20u, W=1 task loops per process)
Runs N pairs, OLD and NEW each pinned to a core with taskset, swapping cores every pair,
and prints each pair's NEW/OLD wall ratio and their median. Each process is pinned to
one core, so its wall time is its CPU time."""
import glob, json, os, statistics, subprocess, sys, time

n, old, new = int(sys.argv[1]), sys.argv[2], sys.argv[3]
corpus = os.environ.get("CORPUS", "/tmp/r20u")
base = json.load(open(os.path.join(corpus, "corpus.json")))["base_commit"]
inputs = sorted(glob.glob(os.path.join(corpus, "input-*.csv.gz")))


def command(binary, cpu, out):
    return ["taskset", "-c", str(cpu), binary, "merge", "--quiet",
            "--workers", os.environ.get("W", "1"),
            "--source", "dir:" + os.path.join(corpus, "sources"),
            "--base-repo", "git://example.invalid/linux.git", "--base-commit", base,
            "--out", out, "--input"] + inputs


ratios = []
for i in range(n):
    cores = (0, 1) if i % 2 == 0 else (1, 0)
    t0 = time.time()
    procs = {
        "old": subprocess.Popen(command(old, cores[0], "/tmp/paired-old.jsonl.gz"), stdout=subprocess.DEVNULL),
        "new": subprocess.Popen(command(new, cores[1], "/tmp/paired-new.jsonl.gz"), stdout=subprocess.DEVNULL),
    }
    done = {}
    while len(done) < 2:
        for name, p in procs.items():
            if name not in done and p.poll() is not None:
                if p.returncode != 0:
                    sys.exit(f"{name} failed with exit code {p.returncode}")
                done[name] = time.time() - t0
        time.sleep(0.005)
    r = done["new"] / done["old"]
    ratios.append(r)
    print(f"pair {i}: old {done['old']:.2f} s, new {done['new']:.2f} s, new/old {r:.3f}", flush=True)
print(f"median new/old {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})")
