#!/usr/bin/env bash
# push-send benchmark: push.send pre-filled with SEND_BENCH_COUNT tokens (default 1,000,000) in
# batches of 500, drained by push-send into apns-sandbox on loopback.
#
#   bash Benchmarks/send/run.sh        (or: make bench-send)
#
# Builds push-send, apns-sandbox and send-bench in release; starts a private RabbitMQ
# (`scripts/rabbitmq.sh --name send-bench`, fresh data) and Redis (`scripts/redis.sh --name
# send-bench`, flushed), and apns-sandbox (generated CA, a small delivery record); fills push.send
# under the queue prefix `bench` with send-bench; then starts push-send (Benchmarks/send/apps.json)
# and waits until the sandbox has accepted every notification. Prints notifications/s (from
# push-send's start to the last acceptance), push-send's peak RSS (VmHWM), and the CPU used by
# push-send, the sandbox, RabbitMQ and Redis over the drain. Stops everything it started (and drops
# the servers' data), also on failure or Ctrl-C.
#
# Environment: SEND_BENCH_COUNT (1000000), SEND_BENCH_BATCH (500), SEND_BENCH_AMQP_PORT (7321),
# SEND_BENCH_REDIS_PORT (7322), SEND_BENCH_APNS_PORT (7323), SEND_BENCH_ADMIN_PORT (7324),
# SEND_BENCH_HTTP_PORT (7325), SEND_BENCH_PREFETCH (40), SEND_BENCH_CONNECTIONS (2),
# SEND_BENCH_SCRATCH (.build), SEND_BENCH_SKIP_BUILD=1 (use the binaries already built).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

COUNT=${SEND_BENCH_COUNT:-1000000}
BATCH=${SEND_BENCH_BATCH:-500}
AMQP_PORT=${SEND_BENCH_AMQP_PORT:-7321}
REDIS_PORT=${SEND_BENCH_REDIS_PORT:-7322}
APNS_PORT=${SEND_BENCH_APNS_PORT:-7323}
ADMIN_PORT=${SEND_BENCH_ADMIN_PORT:-7324}
HTTP_PORT=${SEND_BENCH_HTTP_PORT:-7325}
PREFETCH=${SEND_BENCH_PREFETCH:-40}
CONNECTIONS=${SEND_BENCH_CONNECTIONS:-2}
SCRATCH=${SEND_BENCH_SCRATCH:-.build}
BENCH_DIR="$ROOT/Benchmarks/send"
OUT_DIR="$ROOT/.local/send-bench"
mkdir -p "$OUT_DIR"

say() { printf '%s\n' "$*"; }
die() {
    printf 'run.sh: %s\n' "$*" >&2
    exit 1
}

if [[ ${SEND_BENCH_SKIP_BUILD:-} != 1 ]]; then
    say "building push-send, apns-sandbox and send-bench (release)"
    for product in push-send apns-sandbox send-bench; do
        swift build -c release --scratch-path "$SCRATCH" --product "$product" 2>&1 | tail -1
    done
fi
for product in push-send apns-sandbox send-bench; do
    [[ -x $SCRATCH/release/$product ]] || die "$SCRATCH/release/$product is missing"
done

SEND_PID=""
SANDBOX_PID=""
# stop PID: SIGTERM, up to 10 s, then SIGKILL (only our own children).
stop() {
    local pid=$1
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}
cleanup() {
    stop "$SEND_PID"
    stop "$SANDBOX_PID"
    PUSH_QUIET=1 bash scripts/rabbitmq.sh stop --name send-bench --port "$AMQP_PORT" || true
    rm -rf "$ROOT/.local/rabbitmq-send-bench/mnesia"
    PUSH_QUIET=1 bash scripts/redis.sh stop --name send-bench --port "$REDIS_PORT" || true
    rm -rf "$ROOT/.local/redis-send-bench/data"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Fresh broker data: a previous run's leftovers would be drained too.
PUSH_QUIET=1 bash scripts/rabbitmq.sh stop --name send-bench --port "$AMQP_PORT" || true
rm -rf "$ROOT/.local/rabbitmq-send-bench/mnesia"
PUSH_QUIET=1 bash scripts/rabbitmq.sh start --name send-bench --port "$AMQP_PORT"
PUSH_QUIET=1 bash scripts/redis.sh start --name send-bench --port "$REDIS_PORT"
redis-cli -p "$REDIS_PORT" FLUSHALL >/dev/null
AMQP_URL="amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f"

"$SCRATCH/release/apns-sandbox" --port "$APNS_PORT" --admin-port "$ADMIN_PORT" --ca-out "$OUT_DIR/ca.pem" \
    --record-limit 1000 >"$OUT_DIR/apns-sandbox.log" 2>&1 &
SANDBOX_PID=$!
for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$ADMIN_PORT/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fsS "http://127.0.0.1:$ADMIN_PORT/healthz" >/dev/null || die "apns-sandbox does not answer (see $OUT_DIR/apns-sandbox.log)"

# The .p8 of the benchmark app: a fresh P-256 key (the sandbox accepts any well-formed ES256 JWT).
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$OUT_DIR/AuthKey_BENCH00001.p8" 2>/dev/null
sed "s#@KEY_FILE@#$OUT_DIR/AuthKey_BENCH00001.p8#" "$BENCH_DIR/apps.json" >"$OUT_DIR/apps.json"

say "filling push.send: $COUNT tokens in batches of $BATCH"
"$SCRATCH/release/send-bench" --amqp-url "$AMQP_URL" --prefix bench --app com.example.bench --count "$COUNT" --batch-size "$BATCH"

machine_busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
process_cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
accepted() { curl -fsS "http://127.0.0.1:$ADMIN_PORT/stats" | python3 -c 'import json, sys; print(json.load(sys.stdin)["delivered"])'; }
RABBIT_PID=$(cat "$ROOT/.local/rabbitmq-send-bench/rabbitmq.pid")
REDIS_PID=$(cat "$ROOT/.local/redis-send-bench/redis.pid")

busy0=$(machine_busy) sandbox0=$(process_cpu "$SANDBOX_PID") rabbit0=$(process_cpu "$RABBIT_PID") redis0=$(process_cpu "$REDIS_PID")
start=$(date +%s%N)
PUSH_APPS_FILE="$OUT_DIR/apps.json" PUSH_AMQP_URL="$AMQP_URL" PUSH_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0" \
    PUSH_APNS_ENDPOINT="https://127.0.0.1:$APNS_PORT" PUSH_APNS_CA_FILE="$OUT_DIR/ca.pem" \
    PUSH_SEND_QUEUE_PREFIX=bench PUSH_SEND_PREFETCH="$PREFETCH" PUSH_SEND_CONNECTIONS="$CONNECTIONS" \
    PUSH_HTTP_HOST=127.0.0.1 PUSH_HTTP_PORT="$HTTP_PORT" PUSH_LOG_LEVEL=warning \
    "$SCRATCH/release/push-send" >"$OUT_DIR/push-send.log" 2>&1 &
SEND_PID=$!
sleep 0.2
[[ $(readlink "/proc/$SEND_PID/exe" 2>/dev/null) == */push-send ]] || die "push-send did not start (see $OUT_DIR/push-send.log)"
send0=0

last=0
while :; do
    kill -0 "$SEND_PID" 2>/dev/null || { cat "$OUT_DIR/push-send.log" >&2; die "push-send exited"; }
    done_count=$(accepted)
    ((done_count >= COUNT)) && break
    now=$(date +%s%N)
    if ((now - last >= 5000000000)); then
        say "  $done_count accepted after $(((now - start) / 1000000)) ms, push-send RSS $(awk '/VmRSS/ {print $2 " " $3}' "/proc/$SEND_PID/status")"
        last=$now
    fi
    if (((now - start) / 1000000000 > 600)); then die "not done within 10 minutes"; fi
    sleep 0.2
done
end=$(date +%s%N)
busy1=$(machine_busy) send1=$(process_cpu "$SEND_PID") sandbox1=$(process_cpu "$SANDBOX_PID") rabbit1=$(process_cpu "$RABBIT_PID") redis1=$(process_cpu "$REDIS_PID")

elapsed_ms=$(((end - start) / 1000000))
ticks=$(((end - start) / 10000000))
say ""
say "push-send: $COUNT notifications accepted by apns-sandbox in $elapsed_ms ms = $((COUNT * 1000 / elapsed_ms)) notifications/s"
say "push-send peak RSS: $(awk '/VmHWM/ {print $2 " " $3}' "/proc/$SEND_PID/status") (prefetch $PREFETCH batches, $CONNECTIONS connections)"
say "CPU (% of one core, $(nproc) cores): push-send $(((send1 - send0) * 100 / ticks)), apns-sandbox $(((sandbox1 - sandbox0) * 100 / ticks)), RabbitMQ $(((rabbit1 - rabbit0) * 100 / ticks)), Redis $(((redis1 - redis0) * 100 / ticks)), everything else $((((busy1 - busy0) - (send1 - send0) - (sandbox1 - sandbox0) - (rabbit1 - rabbit0) - (redis1 - redis0)) * 100 / ticks))"
say "sandbox stats: $(curl -fsS "http://127.0.0.1:$ADMIN_PORT/stats")"
