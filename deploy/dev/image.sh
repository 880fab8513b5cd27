#!/usr/bin/env bash
# Builds the container image localhost/covmerge:dev with podman on a machine that
# reaches Debian's packages and crates.io but no container registry (this project's
# development and CI machines):
#   1. installs podman, runc and mmdebstrap from Debian if missing;
#   2. makes the bases once (kept in podman's storage and reused): a Debian 12 root
#      filesystem from Debian's packages (mmdebstrap, 20-180 s) imported as
#      localhost/covmerge-base/debian:bookworm, and from it a distroless-like runtime
#      base localhost/covmerge-base/cc:bookworm (dev/runtime-base.Containerfile);
#   3. builds covmerge with cargo outside the image and strips it;
#   4. builds deploy/Dockerfile's `prebuilt` target on that base: the same file,
#      stages and user as the image built from source elsewhere.
# Says what it did, with the image's size. podman's settings: dev/containers.conf.
#
# Usage: deploy/dev/image.sh [--rebuild-base]
# Environment:
#   COVMERGE_IMAGE          the tag (default localhost/covmerge:dev)
#   COVMERGE_IMAGE_PROFILE  the cargo profile of the binary (default release)
#   COVMERGE_IMAGE_BIN      a covmerge binary to use instead of building one
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
image=${COVMERGE_IMAGE:-localhost/covmerge:dev}
profile=${COVMERGE_IMAGE_PROFILE:-release}
debian=localhost/covmerge-base/debian:bookworm
runtime=localhost/covmerge-base/cc:bookworm
rebuild_base=false
[ "${1:-}" = --rebuild-base ] && rebuild_base=true
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/deploy/dev/containers.conf}
say() { echo "image: $*"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

missing=()
for tool in podman:podman runc:runc mmdebstrap:mmdebstrap strip:binutils; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  t=$(now)
  say "installing ${missing[*]} (apt-get install)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; }
  say "installed ${missing[*]} in $(since "$t")"
fi

has_image() { podman image exists "$1"; }
if $rebuild_base; then
  podman rmi -f "$runtime" "$debian" >/dev/null 2>&1 || true
fi
if ! has_image "$runtime"; then
  if ! has_image "$debian"; then
    t=$(now)
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    say "making the Debian 12 base from Debian's packages (mmdebstrap --variant=apt --include=ca-certificates bookworm)"
    mmdebstrap --quiet --variant=apt --include=ca-certificates bookworm "$work/base.tar"
    podman import --quiet "$work/base.tar" "$debian" >/dev/null
    rm -f "$work/base.tar"
    say "made $debian in $(since "$t")"
  else
    say "reusing $debian"
  fi
  t=$(now)
  podman build --quiet --format docker --pull=never --layers=false \
    --build-arg "DEBIAN_IMAGE=$debian" -f deploy/dev/runtime-base.Containerfile \
    -t "$runtime" deploy/dev >/dev/null
  say "made the runtime base $runtime ($(podman image inspect --format '{{.Size}}' "$runtime") bytes) in $(since "$t")"
else
  say "reusing the runtime base $runtime"
fi

ctx=$root/target/image
mkdir -p "$ctx"
rm -f "$ctx/covmerge"
if [ -n "${COVMERGE_IMAGE_BIN:-}" ]; then
  bin=$COVMERGE_IMAGE_BIN
  say "binary: $bin (given)"
else
  t=$(now)
  cargo build --quiet --profile "$profile" --locked -p covmerge --bin covmerge
  case $profile in
    dev | test) dir=debug ;;
    bench) dir=release ;;
    *) dir=$profile ;;
  esac
  bin=target/$dir/covmerge
  say "built $bin (cargo profile $profile) in $(since "$t")"
fi
strip --strip-all -o "$ctx/covmerge" "$bin"
chmod 0755 "$ctx/covmerge"
say "stripped: $(stat -c %s "$bin") -> $(stat -c %s "$ctx/covmerge") bytes"

t=$(now)
old=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
podman build --quiet --format docker --pull=never --target prebuilt \
  --build-arg "RUNTIME_IMAGE=$runtime" -f deploy/Dockerfile -t "$image" "$ctx" >/dev/null
# The image this one replaced, now untagged: removed unless a container still uses it.
if [ -n "$old" ] && [ "$old" != "$(podman image inspect --format '{{.Id}}' "$image")" ]; then
  podman rmi "$old" >/dev/null 2>&1 || true
fi
size=$(podman image inspect --format '{{.Size}}' "$image")
say "built $image in $(since "$t"): $size bytes ($(awk -v s="$size" 'BEGIN { printf "%.1f MB", s / 1e6 }')), $(podman run --rm --network none "$image" --version)"
