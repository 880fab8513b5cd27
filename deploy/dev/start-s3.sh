#!/usr/bin/env bash
# Starts an S3-compatible server (moto's, from PyPI) on 127.0.0.1:${COVMERGE_S3_PORT:-9327}
# for the tests, installing it if needed. Prints nothing but progress; idempotent.
set -euo pipefail
port=${COVMERGE_S3_PORT:-9327}
answers() { curl -fsS -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; }
if answers; then echo "s3: running on $port"; exit 0; fi
if ! python3 -c 'import moto.server, flask, flask_cors' 2>/dev/null; then
  echo "s3: installing moto[server]"
  python3 -m pip install --quiet 'moto[server]>=5,<6'
fi
log=${TMPDIR:-/tmp}/covmerge-s3-$port.log
nohup python3 -m moto.server -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
for _ in $(seq 1 60); do
  if answers; then echo "s3: up on $port"; exit 0; fi
  sleep 0.5
done
echo "s3: moto did not come up; log:" >&2
cat "$log" >&2
exit 1
