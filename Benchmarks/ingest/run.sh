#!/usr/bin/env bash
# push-ingest benchmark: wrk against PUT /v1/apps/{app}/devices/{token} (put.lua) and the legacy
# GET /register (register.lua), every request a new token, on loopback.
#
#   bash Benchmarks/ingest/run.sh        (or: make bench-ingest)
#
# Builds push-ingest in release, starts a private Redis (`scripts/redis.sh --name ingest-bench`, AOF
# with appendfsync everysec like every local Redis; flushed first), starts push-ingest with
# Benchmarks/ingest/apps.json (credential "none", one bearer key) and an unreachable RabbitMQ (the
# HTTP side does not need the broker; the service keeps serving while AMQP reconnects in the
# background), runs `wrk -t2 -c64 -d20s --latency` for each script, prints requests/s, p99, errors,
# push-ingest's peak RSS (VmHWM) and how the cores were shared, and stops everything it started (and
# drops the Redis data), also on failure or Ctrl-C.
#
# Environment: INGEST_BENCH_DURATION (20s), INGEST_BENCH_CONNECTIONS (64), INGEST_BENCH_THREADS (2),
# INGEST_BENCH_REDIS_PORT (7311), INGEST_BENCH_HTTP_PORT (7312), INGEST_BENCH_SCRATCH (.build: the
# SwiftPM scratch path), INGEST_BENCH_SKIP_BUILD=1 (use the binary already built).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

DURATION=${INGEST_BENCH_DURATION:-20s}
CONNECTIONS=${INGEST_BENCH_CONNECTIONS:-64}
THREADS=${INGEST_BENCH_THREADS:-2}
REDIS_PORT=${INGEST_BENCH_REDIS_PORT:-7311}
HTTP_PORT=${INGEST_BENCH_HTTP_PORT:-7312}
SCRATCH=${INGEST_BENCH_SCRATCH:-.build}
BENCH_DIR="$ROOT/Benchmarks/ingest"
OUT_DIR="$ROOT/.local/ingest-bench"
mkdir -p "$OUT_DIR"

# shellcheck source=Benchmarks/lib.sh
. Benchmarks/lib.sh
NAME=ingest-bench

need_tool wrk
need_tool redis-cli redis-tools

bench_build "$SCRATCH" "${INGEST_BENCH_SKIP_BUILD:-}" push-ingest pushctl
BINARY="$SCRATCH/release/push-ingest"

INGEST_PID=""
cleanup() {
    stop_child "$INGEST_PID"
    servers_stop "$NAME" 0 "$REDIS_PORT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
servers_start "$NAME" 0 "$REDIS_PORT"

# Port 1 on loopback refuses connections: AMQP stays down and reconnects with backoff all along.
# wrk is one client registering thousands of new devices a second: the budgets for new tokens (per
# client address, and the app's in apps.json) are off, or the run would measure 429s.
PUSH_INGEST_NEW_TOKENS_PER_CLIENT_PER_MINUTE=0 PUSH_APPS_FILE="$BENCH_DIR/apps.json" \
    PUSH_REDIS_URL="$REDIS_URL" \
    PUSH_AMQP_URL="amqp://guest:guest@127.0.0.1:1/%2f" \
    PUSH_HTTP_HOST=127.0.0.1 PUSH_HTTP_PORT="$HTTP_PORT" PUSH_LOG_LEVEL=warning \
    "$BINARY" >"$OUT_DIR/push-ingest.log" 2>&1 &
INGEST_PID=$!
sleep 0.2
[[ $(readlink "/proc/$INGEST_PID/exe" 2>/dev/null) == */push-ingest ]] || die "process $INGEST_PID is not push-ingest"

wait_healthy "http://127.0.0.1:$HTTP_PORT/healthz" "$INGEST_PID" "$OUT_DIR/push-ingest.log" push-ingest
say "push-ingest $INGEST_PID on 127.0.0.1:$HTTP_PORT (readiness: $(curl -sS "http://127.0.0.1:$HTTP_PORT/readyz"))"
say "idle RSS: $(awk '/VmRSS/ {print $2 " " $3}' "/proc/$INGEST_PID/status")"
machine_line

# A short warm-up so the first run does not pay for lazy initialisation.
wrk -t1 -c8 -d2s -s "$BENCH_DIR/put.lua" "http://127.0.0.1:$HTTP_PORT" >/dev/null

run() {
    local name=$1 script=$2 out="$OUT_DIR/$1.txt"
    local busy0 ingest0 redis0 busy1 ingest1 redis1 start end
    busy0=$(machine_busy) ingest0=$(process_cpu "$INGEST_PID") redis0=$(process_cpu "$REDIS_PID") start=$(date +%s%N)
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s "$BENCH_DIR/$script" "http://127.0.0.1:$HTTP_PORT" >"$out"
    busy1=$(machine_busy) ingest1=$(process_cpu "$INGEST_PID") redis1=$(process_cpu "$REDIS_PID") end=$(date +%s%N)
    local rps p50 p99 errors ticks
    rps=$(awk '/^Requests\/sec:/ {print $2}' "$out")
    p50=$(awk '$1 == "50%" {print $2}' "$out")
    p99=$(awk '$1 == "99%" {print $2}' "$out")
    errors=$(awk '/Non-2xx or 3xx responses:/ {print $NF} /Socket errors:/ {print $0}' "$out" | paste -sd' ' -)
    printf '%-9s %10s req/s   p50 %8s   p99 %8s   errors: %s   peak RSS %s\n' \
        "$name" "$rps" "$p50" "$p99" "${errors:-none}" "$(peak_rss "$INGEST_PID")"
    # A rate of refusals is no throughput: the run fails (after printing what it saw).
    [[ -z $errors ]] || FAILED="$FAILED $name"
    # Jiffies are 1/100 s: CPU % of one core = jiffies / seconds.
    ticks=$(((end - start) / 10000000))
    printf '          CPU (%% of one core, %s cores): push-ingest %s, redis %s, wrk and everything else %s\n' "$(nproc)" \
        "$(((ingest1 - ingest0) * 100 / ticks))" "$(((redis1 - redis0) * 100 / ticks))" \
        "$((((busy1 - busy0) - (ingest1 - ingest0) - (redis1 - redis0)) * 100 / ticks))"
}

FAILED=""
say "wrk -t$THREADS -c$CONNECTIONS -d$DURATION --latency (full output in $OUT_DIR)"
run put put.lua
run register register.lua
say "tokens registered: $("$SCRATCH/release/pushctl" registry status --redis-url "$REDIS_URL" --app com.example.bench | head -1)"
[[ -z $FAILED ]] || die "non-2xx answers or socket errors in:$FAILED (see $OUT_DIR/*.txt)"
