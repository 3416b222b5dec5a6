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

# shellcheck source=Benchmarks/lib.sh
. Benchmarks/lib.sh
NAME=send-bench
bench_build "$SCRATCH" "${SEND_BENCH_SKIP_BUILD:-}" push-send apns-sandbox send-bench

SEND_PID=""
SANDBOX_PID=""
cleanup() {
    stop_child "$SEND_PID" "$SANDBOX_PID"
    servers_stop "$NAME" "$AMQP_PORT" "$REDIS_PORT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

servers_start "$NAME" "$AMQP_PORT" "$REDIS_PORT"
start_sandbox "$SCRATCH/release" "$OUT_DIR" "$APNS_PORT" "$ADMIN_PORT"

# The .p8 of the benchmark app: a fresh P-256 key (the sandbox accepts any well-formed ES256 JWT).
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$OUT_DIR/AuthKey_BENCH00001.p8" 2>/dev/null
sed "s#@KEY_FILE@#$OUT_DIR/AuthKey_BENCH00001.p8#" "$BENCH_DIR/apps.json" >"$OUT_DIR/apps.json"

say "filling push.send: $COUNT tokens in batches of $BATCH"
"$SCRATCH/release/send-bench" --amqp-url "$AMQP_URL" --prefix bench --app com.example.bench --count "$COUNT" --batch-size "$BATCH"

accepted() { curl -fsS "http://127.0.0.1:$ADMIN_PORT/stats" | python3 -c 'import json, sys; print(json.load(sys.stdin)["delivered"])'; }

busy0=$(machine_busy) sandbox0=$(process_cpu "$SANDBOX_PID") rabbit0=$(process_cpu "$RABBIT_PID") redis0=$(process_cpu "$REDIS_PID")
start=$(date +%s%N)
PUSH_APPS_FILE="$OUT_DIR/apps.json" PUSH_AMQP_URL="$AMQP_URL" PUSH_REDIS_URL="$REDIS_URL" \
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
say "push-send peak RSS: $(peak_rss "$SEND_PID") (prefetch $PREFETCH batches, $CONNECTIONS connections)"
say "CPU (% of one core, $(nproc) cores): push-send $(((send1 - send0) * 100 / ticks)), apns-sandbox $(((sandbox1 - sandbox0) * 100 / ticks)), RabbitMQ $(((rabbit1 - rabbit0) * 100 / ticks)), Redis $(((redis1 - redis0) * 100 / ticks)), everything else $((((busy1 - busy0) - (send1 - send0) - (sandbox1 - sandbox0) - (rabbit1 - rabbit0) - (redis1 - redis0)) * 100 / ticks))"
say "sandbox stats: $(curl -fsS "http://127.0.0.1:$ADMIN_PORT/stats")"
