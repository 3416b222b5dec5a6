#!/usr/bin/env bash
# End-to-end broadcast benchmark: one {"all": true} push request over BROADCAST_BENCH_TOKENS
# (1,000,000) registered tokens, through the real push-render and push-send (release builds), until
# apns-sandbox has accepted every token; then `pushctl bench` against the same sandbox for the
# reference rate, then the services' idle footprint. See Benchmarks/broadcast/README.md.
#
#   bash Benchmarks/broadcast/run.sh        (or: make bench-broadcast)
#
# Builds push-render, push-send, apns-sandbox, pushctl and render-bench in release; starts a private
# RabbitMQ (`scripts/rabbitmq.sh --name broadcast-bench`, fresh data) and Redis (`scripts/redis.sh
# --name broadcast-bench`, AOF appendfsync everysec, flushed) on loopback; fills Redis with the tokens
# of app com.example.bench (`render-bench --fill-only`: locales BROADCAST_BENCH_LOCALES in turn, every
# BROADCAST_BENCH_SANDBOX_EVERY-th token in the sandbox environment, the rest production); starts
# apns-sandbox (generated CA, --track-duplicates when it has the flag), push-render and push-send
# (Benchmarks/broadcast/apps.json with a fresh .p8, PUSH_LOCALIZATION_DIR=localization, log level
# warning); then Benchmarks/broadcast/broadcast.py publishes the request with pika (publisher
# confirms), polls the sandbox's GET /stats and prints the figures and the targets (PASS/MISS).
# Stops everything it started and drops the servers' data, also on failure or Ctrl-C. Logs stay in
# .local/broadcast-bench/.
#
# Exit status: 0 when the run completed (a MISS is a figure, not a failure); non-zero when it failed
# (timeout, stall, a process died, tokens missing).
#
# Environment: BROADCAST_BENCH_TOKENS (1000000), BROADCAST_BENCH_LOCALES
# ("en-US,de-DE,fr-FR,ja-JP,zh-Hant-TW"), BROADCAST_BENCH_SANDBOX_EVERY (10: every 10th token is a
# sandbox-environment device), BROADCAST_BENCH_TIMEOUT_S (900: the broadcast's bound),
# BROADCAST_BENCH_STALL_S (120: fail when no delivery for that long), BROADCAST_BENCH_POLL_MS (50),
# BROADCAST_BENCH_APPENDFSYNC (unset: everysec as scripts/redis.sh; `always` to measure its cost),
# BROADCAST_BENCH_DELAY_MS (unset: the sandbox answers at once; e.g. 150 for Apple's latency, set
# with PUT /faults {"delay_ms": N}), BROADCAST_BENCH_PUSHCTL_COUNT (300000),
# BROADCAST_BENCH_PUSHCTL_CONCURRENCY (1000), BROADCAST_BENCH_IDLE_S (30),
# BROADCAST_BENCH_AMQP_PORT (7601; RabbitMQ also uses PORT+1000 for epmd and PORT+20000..+21010
# for Erlang distribution), BROADCAST_BENCH_REDIS_PORT (7602), BROADCAST_BENCH_APNS_PORT (7603),
# BROADCAST_BENCH_ADMIN_PORT (7604), BROADCAST_BENCH_RENDER_PORT (7605),
# BROADCAST_BENCH_SEND_PORT (7606), BROADCAST_BENCH_SCRATCH (.build), BROADCAST_BENCH_SKIP_BUILD=1
# (use the binaries already built), BROADCAST_BENCH_SHARDS (24; 1 fills the single-tag layout of
# registries made before virtual shards). BROADCAST_BENCH_PUSHCTL_CONNECTIONS (2) is pushctl bench's
# connection count; push-send opens connections as it needs them (PUSH_SEND_CONNECTIONS caps them); other PUSH_RENDER_* / PUSH_SEND_* variables in the environment reach the services.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

TOKENS=${BROADCAST_BENCH_TOKENS:-1000000}
LOCALES=${BROADCAST_BENCH_LOCALES:-en-US,de-DE,fr-FR,ja-JP,zh-Hant-TW}
SANDBOX_EVERY=${BROADCAST_BENCH_SANDBOX_EVERY:-10}
TIMEOUT_S=${BROADCAST_BENCH_TIMEOUT_S:-900}
STALL_S=${BROADCAST_BENCH_STALL_S:-120}
POLL_MS=${BROADCAST_BENCH_POLL_MS:-50}
DELAY_MS=${BROADCAST_BENCH_DELAY_MS:-}
PUSHCTL_COUNT=${BROADCAST_BENCH_PUSHCTL_COUNT:-300000}
PUSHCTL_CONCURRENCY=${BROADCAST_BENCH_PUSHCTL_CONCURRENCY:-1000}
IDLE_S=${BROADCAST_BENCH_IDLE_S:-30}
AMQP_PORT=${BROADCAST_BENCH_AMQP_PORT:-7601}
REDIS_PORT=${BROADCAST_BENCH_REDIS_PORT:-7602}
APNS_PORT=${BROADCAST_BENCH_APNS_PORT:-7603}
ADMIN_PORT=${BROADCAST_BENCH_ADMIN_PORT:-7604}
RENDER_PORT=${BROADCAST_BENCH_RENDER_PORT:-7605}
SEND_PORT=${BROADCAST_BENCH_SEND_PORT:-7606}
SCRATCH=${BROADCAST_BENCH_SCRATCH:-.build}
CONNECTIONS=${BROADCAST_BENCH_PUSHCTL_CONNECTIONS:-2}
NAME=broadcast-bench
APP=com.example.bench
KEY_ID=BENCH00001
TEAM_ID=TEAM000001
BENCH_DIR="$ROOT/Benchmarks/broadcast"
OUT_DIR="$ROOT/.local/$NAME"
PYTHON=/usr/bin/python3
PRODUCTS=(push-render push-send apns-sandbox pushctl render-bench)

# shellcheck source=Benchmarks/lib.sh
. Benchmarks/lib.sh
for n in TOKENS SANDBOX_EVERY TIMEOUT_S STALL_S POLL_MS PUSHCTL_COUNT PUSHCTL_CONCURRENCY IDLE_S CONNECTIONS; do
    [[ ${!n} =~ ^[0-9]+$ ]] || die "$n must be a whole number (got '${!n}')"
done
((TOKENS > 0)) || die "BROADCAST_BENCH_TOKENS must be positive"
[[ -z $DELAY_MS || $DELAY_MS =~ ^[0-9]+$ ]] || die "BROADCAST_BENCH_DELAY_MS must be a whole number of ms"
"$PYTHON" -c 'import pika' 2>/dev/null || die "$PYTHON cannot import pika (apt-get install python3-pika, or: make deps-bench)"

mkdir -p "$OUT_DIR"
machine_line

bench_build "$SCRATCH" "${BROADCAST_BENCH_SKIP_BUILD:-}" "${PRODUCTS[@]}"
BIN="$ROOT/$SCRATCH/release"
[[ $SCRATCH == /* ]] && BIN="$SCRATCH/release"

MEASURE_PID=""
RENDER_PID=""
SEND_PID=""
SANDBOX_PID=""
cleanup() {
    stop_child "$MEASURE_PID" "$RENDER_PID" "$SEND_PID" "$SANDBOX_PID"
    servers_stop "$NAME" "$AMQP_PORT" "$REDIS_PORT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

servers_start "$NAME" "$AMQP_PORT" "$REDIS_PORT"

say "filling Redis with $TOKENS tokens of $APP (locales $LOCALES; every ${SANDBOX_EVERY}th in the sandbox environment)"
"$BIN/render-bench" --fill-only --redis-url "$REDIS_URL" --tokens "$TOKENS" --locales "$LOCALES" --sandbox-every "$SANDBOX_EVERY" \
    ${BROADCAST_BENCH_SHARDS:+--shards "$BROADCAST_BENCH_SHARDS"}
# Measure the broadcast, not Redis housekeeping: let the AOF rewrite the fill set off finish first.
wait_aof_rewrite "$REDIS_PORT"
# BROADCAST_BENCH_APPENDFSYNC=always measures what closing Redis' kill -9 window costs.
if [[ -n ${BROADCAST_BENCH_APPENDFSYNC:-} ]]; then
    redis-cli -p "$REDIS_PORT" CONFIG SET appendfsync "$BROADCAST_BENCH_APPENDFSYNC" >/dev/null
fi
say "Redis: appendfsync $(redis-cli -p "$REDIS_PORT" CONFIG GET appendfsync | tail -1), $(redis-cli -p "$REDIS_PORT" DBSIZE) keys, used_memory $(redis-cli -p "$REDIS_PORT" INFO memory | sed -n 's/^used_memory_human:\(.*\)\r$/\1/p')"

# apns-sandbox: generated CA, a small delivery record, exact duplicate counting.
SANDBOX_FLAGS=(--track-duplicates)
start_sandbox "$BIN" "$OUT_DIR" "$APNS_PORT" "$ADMIN_PORT" "${SANDBOX_FLAGS[@]}"
if [[ -n $DELAY_MS ]]; then
    curl -fsS -X PUT -H 'content-type: application/json' -d "{\"delay_ms\": $DELAY_MS}" \
        "http://127.0.0.1:$ADMIN_PORT/faults" >/dev/null || die "PUT /faults {\"delay_ms\": $DELAY_MS} failed"
fi

# The bench app's .p8: a fresh P-256 key (the sandbox accepts any well-formed ES256 JWT).
KEY_FILE="$OUT_DIR/AuthKey_$KEY_ID.p8"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$KEY_FILE" 2>/dev/null
sed "s#@KEY_FILE@#$KEY_FILE#" "$BENCH_DIR/apps.json" >"$OUT_DIR/apps.json"

service_env=(
    PUSH_APPS_FILE="$OUT_DIR/apps.json" PUSH_AMQP_URL="$AMQP_URL" PUSH_REDIS_URL="$REDIS_URL"
    PUSH_APNS_ENDPOINT="https://127.0.0.1:$APNS_PORT" PUSH_APNS_CA_FILE="$OUT_DIR/ca.pem"
    PUSH_LOCALIZATION_DIR="$ROOT/localization" PUSH_LOG_LEVEL=warning PUSH_HTTP_HOST=127.0.0.1
)
env "${service_env[@]}" PUSH_HTTP_PORT="$RENDER_PORT" "$BIN/push-render" >"$OUT_DIR/push-render.log" 2>&1 &
RENDER_PID=$!
env "${service_env[@]}" PUSH_HTTP_PORT="$SEND_PORT" "$BIN/push-send" >"$OUT_DIR/push-send.log" 2>&1 &
SEND_PID=$!
for port in "$RENDER_PORT" "$SEND_PORT"; do
    for _ in $(seq 1 300); do
        kill -0 "$RENDER_PID" 2>/dev/null || { cat "$OUT_DIR/push-render.log" >&2; die "push-render exited"; }
        kill -0 "$SEND_PID" 2>/dev/null || { cat "$OUT_DIR/push-send.log" >&2; die "push-send exited"; }
        curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 || die "the service on port $port is not ready within 30 s (see $OUT_DIR/*.log)"
done
say "running: push-render $RENDER_PID, push-send $SEND_PID, apns-sandbox $SANDBOX_PID ${SANDBOX_FLAGS[*]}, RabbitMQ $RABBIT_PID, Redis $REDIS_PID"
say ""

# In the background so that a signal to this script runs the traps at once (and stops it too).
status=0
"$PYTHON" "$BENCH_DIR/broadcast.py" \
    --amqp-url "$AMQP_URL" --redis-port "$REDIS_PORT" --admin-port "$ADMIN_PORT" --apns-port "$APNS_PORT" \
    --tokens "$TOKENS" --app "$APP" --timeout-s "$TIMEOUT_S" --stall-s "$STALL_S" --poll-ms "$POLL_MS" \
    --delay-ms "${DELAY_MS:-0}" \
    --pid "push-render=$RENDER_PID" --pid "push-send=$SEND_PID" --pid "apns-sandbox=$SANDBOX_PID" \
    --pid "rabbitmq=$RABBIT_PID" --pid "redis=$REDIS_PID" \
    --pushctl "$BIN/pushctl" --ca-file "$OUT_DIR/ca.pem" --key-file "$KEY_FILE" --key-id "$KEY_ID" --team-id "$TEAM_ID" \
    --connections "$CONNECTIONS" --pushctl-count "$PUSHCTL_COUNT" --pushctl-concurrency "$PUSHCTL_CONCURRENCY" \
    --idle-s "$IDLE_S" &
MEASURE_PID=$!
wait "$MEASURE_PID" || status=$?
MEASURE_PID=""

# SIGTERM drains and exits 0 (CONTRACT.md): say so when a service does not.
say ""
for svc in push-render push-send; do
    if [[ $svc == push-render ]]; then pid=$RENDER_PID; else pid=$SEND_PID; fi
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        rc=0
        if timeout 30 tail --pid="$pid" -f /dev/null; then
            wait "$pid" || rc=$?
            say "$svc exited with $rc after SIGTERM"
        else
            say "$svc did not exit within 30 s of SIGTERM"
        fi
    else
        rc=0
        wait "$pid" || rc=$?
        say "$svc had already exited ($rc)"
    fi
    [[ $svc == push-render ]] && RENDER_PID="" || SEND_PID=""
done
# What the services logged at warning and above (the full logs stay in .local/broadcast-bench/).
for log in push-render push-send apns-sandbox; do
    lines=$(grep -c . "$OUT_DIR/$log.log" || true)
    say "$log.log: $lines lines$( ((lines > 0)) && printf ', first 5:')"
    head -5 "$OUT_DIR/$log.log" | cut -c1-300 | sed 's/^/  /'
done
exit "$status"
