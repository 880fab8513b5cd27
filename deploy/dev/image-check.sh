#!/usr/bin/env bash
# Builds the container image (deploy/dev/image.sh) and runs covmerge from it, as an
# operator would, against this machine's RabbitMQ and the S3 and GCS emulators
# (podman --network host reaches them on loopback). Run by .ci/run. Checks:
#   1. the image is at most 60 MB, its user is 65532:65532, and `covmerge --version`
#      runs in it with a read-only root filesystem and no capabilities;
#   2. a fleet job on S3: two workers in containers (non-root, read-only root, /tmp a
#      tmpfs), the coordinator on the host; the result equals the embedded merge's,
#      byte for byte (decompressed);
#   3. the same on GCS with the coordinator in a container too;
#   4. SIGTERM: a worker container stopped with `podman stop` in the middle of a task
#      (its store slowed by a relay) hands the task back within --grace and exits 0;
#      two other workers then complete the job, equal to the embedded merge;
#   5. a worker container is ready (/readyz answers 200) within 1 s of `podman run`
#      (median of the workers started here; printed, checked against 2 s to spare
#      CI a flake on a busy machine).
# Each check prints what it measured. A private RabbitMQ vhost, deleted at the end.
# The image's binary is the release build unless COVMERGE_IMAGE_PROFILE says otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
t_all=$(date +%s.%N)
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
say() { echo "image-check: $*"; }
fail() { echo "image-check: FAILED: $*" >&2; exit 1; }

deploy/dev/ensure-rabbitmq.sh
deploy/dev/start-s3.sh
deploy/dev/start-gcs.sh
deploy/dev/image.sh
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/deploy/dev/containers.conf}
image=${COVMERGE_IMAGE:-localhost/covmerge:dev}
# The binary the image holds, for the embedded merge and the host's coordinator.
bin=$root/target/image/covmerge
s3=http://127.0.0.1:${COVMERGE_S3_PORT:-9327}
gcs=http://127.0.0.1:${COVMERGE_GCS_PORT:-9329}
run_id=$$-$(date +%s)
vhost=covmerge-image-$run_id
work=$(mktemp -d)
relay_pid=
cleanup() {
  local ids=()
  mapfile -t ids < <(podman ps -aq --filter "label=covmerge-image-check=$run_id" 2>/dev/null || true)
  [ ${#ids[@]} -eq 0 ] || podman rm -f -t 0 "${ids[@]}" >/dev/null 2>&1 || true
  [ -z "$relay_pid" ] || kill "$relay_pid" 2>/dev/null || true
  rabbitmqctl -q delete_vhost "$vhost" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
rabbitmqctl -q add_vhost "$vhost" >/dev/null
rabbitmqctl -q set_permissions -p "$vhost" guest '.*' '.*' '.*' >/dev/null
amqp=amqp://guest:guest@127.0.0.1:5672/$vhost

# --- 1. size, user, --version with a read-only root ---------------------------------
size=$(podman image inspect --format '{{.Size}}' "$image")
user=$(podman image inspect --format '{{.Config.User}}' "$image")
say "image $image: $size bytes ($(awk -v s="$size" 'BEGIN { printf "%.1f MB", s / 1e6 }')), user $user"
[ "$size" -le 60000000 ] || fail "the image is over 60 MB"
[ "$user" = 65532:65532 ] || fail "the image's user is $user, not 65532:65532"
v=$(podman run --rm --read-only --cap-drop all --network none "$image" --version)
[ "$v" = "$("$bin" --version)" ] || fail "--version in the image said '$v'"
say "--version as 65532 on a read-only root: $v"

# --- the job, and the embedded merge it must equal -----------------------------------
ex=$root/examples/small
job=(--source "dir:$ex/sources" --base-repo git://example.invalid/linux.git
  --base-commit e052b7c4bab6e041517151cef3dc8c0f4b4a43d6 --date-to 2024-04-08
  --shards 4 --input "$ex/input-00.csv.gz" "$ex/input-01.csv.gz")
"$bin" merge --quiet "${job[@]}" --out "$work/embedded.jsonl.gz" >"$work/embedded.out"
zcat "$work/embedded.jsonl.gz" >"$work/embedded.jsonl"
say "embedded merge: $(wc -l <"$work/embedded.jsonl") lines"

s3_env=(-e AWS_ACCESS_KEY_ID=covmerge-test -e AWS_SECRET_ACCESS_KEY=covmerge-test-secret
  -e AWS_ALLOW_HTTP=true -e AWS_REGION=us-east-1)
gcs_creds=$work/gcs.json
printf '{"gcs_base_url":"%s","disable_oauth":true,"client_email":"","private_key":"","private_key_id":""}\n' "$gcs" >"$gcs_creds"
chmod 0644 "$gcs_creds"
chmod 0755 "$work"
# What every covmerge container gets: the host's loopback, a read-only root with a
# tmpfs /tmp (as deploy/k8s), no capabilities, the example read-only at its own path.
ctr=(--network host --read-only --tmpfs "/tmp:rw,mode=1777,size=512m" --cap-drop all
  --security-opt no-new-privileges -v "$ex:$ex:ro" -v "$gcs_creds:/etc/covmerge-gcs.json:ro"
  --label "covmerge-image-check=$run_id" -e "COVMERGE_AMQP=$amqp" -e RUST_LOG=info)
starts=()
port=19460
# start_worker NAME STORE [ENV-ARGS...] -- [WORKER-ARGS...]: starts a worker container
# and waits until it is ready; records the time from `podman run` to ready, and
# leaves the port of its /metrics in $last_port.
start_worker() {
  local name=$1 store=$2
  shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  port=$((port + 1))
  local t
  t=$(now)
  podman run -d --name "$name-$run_id" "${ctr[@]}" "${envs[@]}" "$image" worker \
    --store "$store" --split-threads 1 --listen "127.0.0.1:$port" "$@" >/dev/null
  for _ in $(seq 1 400); do
    if curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; then
      local took
      took=$(since "$t")
      starts+=("$took")
      local pid uid
      pid=$(podman inspect --format '{{.State.Pid}}' "$name-$run_id")
      uid=$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")
      [ "$uid" = 65532 ] || fail "$name runs as uid $uid"
      say "worker $name ready in $took s (uid $uid, port $port)"
      last_port=$port
      return 0
    fi
    sleep 0.05
  done
  podman logs "$name-$run_id" >&2 || true
  fail "worker $name not ready within 20 s"
}
# stop NAME: podman stop (SIGTERM, then SIGKILL after 30 s); prints the seconds taken.
stop() {
  local t
  t=$(now)
  podman stop -t 30 "$1-$run_id" >/dev/null
  since "$t"
}
exit_code() { podman inspect --format '{{.State.ExitCode}}' "$1-$run_id"; }
# same WHAT FILE: FILE (gzip) decompresses to the embedded merge's bytes.
same() {
  if zcat "$2" | cmp -s - "$work/embedded.jsonl"; then
    say "$1: result identical to the embedded merge ($(zcat "$2" | wc -c) bytes)"
  else
    zcat "$2" | diff "$work/embedded.jsonl" - | head -20 >&2 || true
    fail "$1: the result differs from the embedded merge"
  fi
}
s3_bucket() { curl -fsS -X PUT "$s3/$1" >/dev/null; }
gcs_bucket() {
  curl -fsS -X POST -H 'content-type: application/json' -d "{\"name\":\"$1\"}" \
    "$gcs/storage/v1/b?project=test" >/dev/null
}

# --- 2. S3: workers in containers, coordinator on the host ---------------------------
t=$(now)
b=cm-image-s3-$run_id
s3_bucket "$b"
start_worker s3-w1 "s3://$b/fleet" "${s3_env[@]}" -e "AWS_ENDPOINT_URL=$s3"
start_worker s3-w2 "s3://$b/fleet" "${s3_env[@]}" -e "AWS_ENDPOINT_URL=$s3"
AWS_ACCESS_KEY_ID=covmerge-test AWS_SECRET_ACCESS_KEY=covmerge-test-secret AWS_ALLOW_HTTP=true \
  AWS_REGION=us-east-1 AWS_ENDPOINT_URL=$s3 timeout 180 "$bin" coordinator --quiet \
  --amqp "$amqp" --store "s3://$b/fleet" --out "s3://$b/out/result.jsonl.gz" "${job[@]}" \
  >"$work/s3.out" 2>"$work/s3.err" || { cat "$work/s3.err" >&2; fail "S3 fleet job"; }
curl -fsS -o "$work/s3.jsonl.gz" "$s3/$b/out/result.jsonl.gz"
same "S3 fleet job, workers in containers ($(head -1 "$work/s3.out"))" "$work/s3.jsonl.gz"
for w in s3-w1 s3-w2; do
  took=$(stop "$w")
  [ "$(exit_code "$w")" = 0 ] || fail "$w exited $(exit_code "$w") after SIGTERM"
  say "$w stopped idle in $took s, exit 0"
done
say "S3 run: $(since "$t") s"

# --- 3. GCS: workers and coordinator in containers ----------------------------------
t=$(now)
b=cm-image-gcs-$run_id
gcs_bucket "$b"
start_worker gcs-w1 "gs://$b/fleet" -e GOOGLE_SERVICE_ACCOUNT=/etc/covmerge-gcs.json
start_worker gcs-w2 "gs://$b/fleet" -e GOOGLE_SERVICE_ACCOUNT=/etc/covmerge-gcs.json
timeout 180 podman run --rm --name "gcs-coord-$run_id" "${ctr[@]}" \
  -e GOOGLE_SERVICE_ACCOUNT=/etc/covmerge-gcs.json "$image" coordinator --quiet --store "gs://$b/fleet" \
  --out "gs://$b/out/result.jsonl.gz" "${job[@]}" >"$work/gcs.out" 2>"$work/gcs.err" ||
  { cat "$work/gcs.err" >&2; fail "GCS fleet job"; }
curl -fsS -o "$work/gcs.jsonl.gz" "$gcs/storage/v1/b/$b/o/out%2Fresult.jsonl.gz?alt=media"
same "GCS fleet job, workers and coordinator in containers ($(head -1 "$work/gcs.out"))" "$work/gcs.jsonl.gz"
podman rm -f -t 0 "gcs-w1-$run_id" "gcs-w2-$run_id" >/dev/null
say "GCS run: $(since "$t") s"

# --- 4. SIGTERM mid-task: handed back within --grace, the job completes exactly ------
t=$(now)
grace=2
delay=3
relay_port=19459
b=cm-image-term-$run_id
s3_bucket "$b"
python3 deploy/dev/slow-relay.py "$relay_port" "${COVMERGE_S3_PORT:-9327}" "$delay" 300 >"$work/relay.log" 2>&1 &
relay_pid=$!
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$relay_port") 2>/dev/null && break; sleep 0.05; done
start_worker term-slow "s3://$b/fleet" "${s3_env[@]}" -e "AWS_ENDPOINT_URL=http://127.0.0.1:$relay_port" \
  -- --grace "$grace"
slow_port=$last_port
AWS_ACCESS_KEY_ID=covmerge-test AWS_SECRET_ACCESS_KEY=covmerge-test-secret AWS_ALLOW_HTTP=true \
  AWS_REGION=us-east-1 AWS_ENDPOINT_URL=$s3 timeout 240 "$bin" coordinator --quiet \
  --amqp "$amqp" --store "s3://$b/fleet" --out "s3://$b/out/result.jsonl.gz" "${job[@]}" \
  >"$work/term.out" 2>"$work/term.err" &
coord=$!
busy=false
for _ in $(seq 1 600); do
  if curl -fsS "http://127.0.0.1:$slow_port/metrics" 2>/dev/null |
    grep -Eq '^covmerge_tasks_in_flight(\{[^}]*\})? [1-9]'; then
    busy=true
    break
  fi
  sleep 0.05
done
$busy || fail "the slow worker took no task within 30 s"
took=$(stop term-slow)
code=$(exit_code term-slow)
podman logs "term-slow-$run_id" >"$work/term-slow.log" 2>&1
grep -q 'grace period over: handing the task back' "$work/term-slow.log" ||
  { cat "$work/term-slow.log" >&2; fail "the stopped worker did not hand its task back"; }
[ "$code" = 0 ] || fail "the stopped worker exited $code"
awk -v t="$took" -v g="$grace" 'BEGIN { exit !(t <= g + 3) }' ||
  fail "podman stop took $took s with --grace $grace"
say "SIGTERM mid-task (--grace $grace, store $delay s away): task handed back, exit 0, podman stop took $took s"
start_worker term-w1 "s3://$b/fleet" "${s3_env[@]}" -e "AWS_ENDPOINT_URL=$s3"
start_worker term-w2 "s3://$b/fleet" "${s3_env[@]}" -e "AWS_ENDPOINT_URL=$s3"
wait "$coord" || { cat "$work/term.err" >&2; fail "the job after SIGTERM"; }
curl -fsS -o "$work/term.jsonl.gz" "$s3/$b/out/result.jsonl.gz"
same "job after the SIGTERM ($(head -1 "$work/term.out"))" "$work/term.jsonl.gz"
podman rm -f -t 0 "term-w1-$run_id" "term-w2-$run_id" >/dev/null
say "SIGTERM run: $(since "$t") s"

# --- 5. worker start time ------------------------------------------------------------
median=$(printf '%s\n' "${starts[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
say "worker start (podman run to /readyz 200), ${#starts[@]} workers: median $median s, all: ${starts[*]}"
awk -v m="$median" 'BEGIN { exit !(m < 2) }' || fail "workers took a median $median s to start"
say "all checks passed in $(since "$t_all") s (image build included)"
