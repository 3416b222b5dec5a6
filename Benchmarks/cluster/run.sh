#!/usr/bin/env bash
# One app's broadcast over a Redis Cluster (`make bench-cluster`): how its registry, its keys and the
# commands of its fan-out spread over the masters, and what the broadcast costs there.
#
# Builds push-render, push-send, apns-sandbox, pushctl and render-bench in release; starts a Redis
# Cluster of 3 masters (scripts/redis-cluster.sh --name cluster-bench, 127.0.0.1:7501-7503; no
# replicas unless CLUSTER_BENCH_REPLICAS=1: the measure is the masters' share) and a private RabbitMQ
# (127.0.0.1:7511); fills the cluster with CLUSTER_BENCH_TOKENS tokens of com.example.bench in the
# sharded layout (render-bench --fill-only: 24 shards, every 10th token in the sandbox environment);
# starts apns-sandbox and push-render and push-send on the cluster (PUSH_REDIS_URL=redis+cluster://);
# then Benchmarks/cluster/balance.py publishes one {"all": true} request, waits until every token was
# accepted once, and prints per master: slots, shards, tokens, keys, memory, the commands it
# processed during the broadcast and its CPU time, each with its share; then the broadcast's rate and
# `pushctl bench` on the same sandbox. Everything is stopped at the end.
#
# Environment: CLUSTER_BENCH_TOKENS (1000000), CLUSTER_BENCH_REPLICAS (0), CLUSTER_BENCH_SCRATCH
# (.build), CLUSTER_BENCH_SKIP_BUILD=1, CLUSTER_BENCH_PUSHCTL_COUNT (300000).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

TOKENS=${CLUSTER_BENCH_TOKENS:-1000000}
REPLICAS=${CLUSTER_BENCH_REPLICAS:-0}
SCRATCH=${CLUSTER_BENCH_SCRATCH:-.build}
PUSHCTL_COUNT=${CLUSTER_BENCH_PUSHCTL_COUNT:-300000}
NAME=cluster-bench
REDIS_PORT=7501
AMQP_PORT=7511
APNS_PORT=7521
ADMIN_PORT=7522
RENDER_PORT=7523
SEND_PORT=7524
APP=com.example.bench
KEY_ID=BENCH00001
TEAM_ID=TEAM000001
OUT_DIR="$ROOT/.local/$NAME"
PYTHON=/usr/bin/python3
PRODUCTS=(push-render push-send apns-sandbox pushctl render-bench)

# shellcheck source=Benchmarks/lib.sh
. Benchmarks/lib.sh
[[ $TOKENS =~ ^[0-9]+$ ]] && ((TOKENS > 0)) || die "CLUSTER_BENCH_TOKENS must be a positive whole number"
[[ $REPLICAS =~ ^[01]$ ]] || die "CLUSTER_BENCH_REPLICAS must be 0 or 1"
"$PYTHON" -c 'import pika' 2>/dev/null || die "$PYTHON cannot import pika (make deps-bench)"
mkdir -p "$OUT_DIR"
machine_line

bench_build "$SCRATCH" "${CLUSTER_BENCH_SKIP_BUILD:-}" "${PRODUCTS[@]}"
BIN="$ROOT/$SCRATCH/release"
[[ $SCRATCH == /* ]] && BIN="$SCRATCH/release"

PIDS=()
servers_down() {
    PUSH_QUIET=1 bash scripts/redis-cluster.sh stop --name "$NAME" >/dev/null 2>&1 || true
    rm -rf "$ROOT/.local/redis-cluster-$NAME" "$ROOT/.local/redis-$NAME-"[0-9]
    PUSH_QUIET=1 bash scripts/rabbitmq.sh stop --name "$NAME" --port "$AMQP_PORT" || true
    rm -rf "$ROOT/.local/rabbitmq-$NAME/mnesia"
}
cleanup() {
    stop_child "${PIDS[@]}"
    servers_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM

servers_down
PUSH_QUIET=1 bash scripts/redis-cluster.sh start --name "$NAME" --port "$REDIS_PORT" --masters 3 --replicas "$REPLICAS" --node-timeout 5000
PUSH_QUIET=1 bash scripts/rabbitmq.sh start --name "$NAME" --port "$AMQP_PORT"
REDIS_URL=$(bash scripts/redis-cluster.sh url --name "$NAME")
AMQP_URL="amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f"
MASTERS=$(bash scripts/redis-cluster.sh nodes --name "$NAME" | awk '$3 == "master" {print $2}' | paste -sd, -)
say "Redis Cluster: masters $MASTERS, $REPLICAS replica(s) each"

say "filling the cluster with $TOKENS tokens of $APP"
"$BIN/render-bench" --fill-only --redis-url "$REDIS_URL" --tokens "$TOKENS"
wait_aof_rewrite ${MASTERS//,/ }

start_sandbox "$BIN" "$OUT_DIR" "$APNS_PORT" "$ADMIN_PORT" --track-duplicates
PIDS+=("$SANDBOX_PID")
KEY_FILE="$OUT_DIR/AuthKey_$KEY_ID.p8"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$KEY_FILE" 2>/dev/null
sed "s#@KEY_FILE@#$KEY_FILE#" "$ROOT/Benchmarks/broadcast/apps.json" >"$OUT_DIR/apps.json"
service_env=(
    PUSH_APPS_FILE="$OUT_DIR/apps.json" PUSH_AMQP_URL="$AMQP_URL" PUSH_REDIS_URL="$REDIS_URL"
    PUSH_APNS_ENDPOINT="https://127.0.0.1:$APNS_PORT" PUSH_APNS_CA_FILE="$OUT_DIR/ca.pem"
    PUSH_LOCALIZATION_DIR="$ROOT/localization" PUSH_LOG_LEVEL=warning PUSH_HTTP_HOST=127.0.0.1
)
env "${service_env[@]}" PUSH_HTTP_PORT="$RENDER_PORT" "$BIN/push-render" >"$OUT_DIR/push-render.log" 2>&1 &
PIDS+=($!)
env "${service_env[@]}" PUSH_HTTP_PORT="$SEND_PORT" "$BIN/push-send" >"$OUT_DIR/push-send.log" 2>&1 &
PIDS+=($!)
for port in "$RENDER_PORT" "$SEND_PORT"; do
    for _ in $(seq 1 300); do curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || die "the service on port $port is not ready (see $OUT_DIR/*.log)"
done

"$PYTHON" "$ROOT/Benchmarks/cluster/balance.py" --amqp-url "$AMQP_URL" --redis-url "$REDIS_URL" --masters "$MASTERS" \
    --admin-port "$ADMIN_PORT" --apns-port "$APNS_PORT" --app "$APP" --tokens "$TOKENS" --pushctl "$BIN/pushctl" \
    --ca-file "$OUT_DIR/ca.pem" --key-file "$KEY_FILE" --key-id "$KEY_ID" --team-id "$TEAM_ID" --pushctl-count "$PUSHCTL_COUNT"
