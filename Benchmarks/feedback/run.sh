#!/usr/bin/env bash
# push-feedback benchmark: 100,000 push.feedback events through the feedback consumer (release
# build), against a private RabbitMQ and Redis on loopback.
#
#   bash Benchmarks/feedback/run.sh        (or: make bench-feedback)
#
# Starts `scripts/rabbitmq.sh --name feedback-bench` and `scripts/redis.sh --name feedback-bench`
# (AOF, appendfsync everysec, like every local Redis; flushed first), runs the `feedback-bench`
# executable (Benchmarks/feedback/feedback-bench: setup, then the timed run) without and then with a listener
# queue bound to token.removed, prints its figures, CPU shares and the load of the machine, and stops
# both servers again (dropping their data), also on failure or Ctrl-C.
#
# Environment: FEEDBACK_BENCH_LISTENER (0 or 1: that run only), FEEDBACK_BENCH_COUNT (100000),
# FEEDBACK_BENCH_BATCH (500), FEEDBACK_BENCH_IN_FLIGHT (4), FEEDBACK_BENCH_AMQP_PORT (7400),
# FEEDBACK_BENCH_REDIS_PORT (7421), FEEDBACK_BENCH_SCRATCH (.build), FEEDBACK_BENCH_SKIP_BUILD=1
# (use the binary already built).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

AMQP_PORT=${FEEDBACK_BENCH_AMQP_PORT:-7400}
REDIS_PORT=${FEEDBACK_BENCH_REDIS_PORT:-7421}
SCRATCH=${FEEDBACK_BENCH_SCRATCH:-.build}

if [[ ${FEEDBACK_BENCH_SKIP_BUILD:-} != 1 ]]; then
    echo "building feedback-bench (release)"
    swift build -c release --scratch-path "$SCRATCH" --product feedback-bench 2>&1 | tail -1
fi
BINARY="$SCRATCH/release/feedback-bench"
[[ -x $BINARY ]] || { echo "run.sh: $BINARY is missing" >&2; exit 1; }

cleanup() {
    PUSH_QUIET=1 bash scripts/redis.sh stop --name feedback-bench --port "$REDIS_PORT" && rm -rf "$ROOT/.local/redis-feedback-bench/data"
    PUSH_QUIET=1 bash scripts/rabbitmq.sh stop --name feedback-bench --port "$AMQP_PORT" && rm -rf "$ROOT/.local/rabbitmq-feedback-bench/mnesia"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PUSH_QUIET=1 bash scripts/redis.sh start --name feedback-bench --port "$REDIS_PORT"
redis-cli -p "$REDIS_PORT" FLUSHALL >/dev/null
PUSH_QUIET=1 bash scripts/rabbitmq.sh start --name feedback-bench --port "$AMQP_PORT"

echo "machine: $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
REDIS_PID=$(cat "$ROOT/.local/redis-feedback-bench/redis.pid")
RABBIT_PID=$(cat "$ROOT/.local/rabbitmq-feedback-bench/rabbitmq.pid")
echo "redis pid $REDIS_PID, rabbitmq pid $RABBIT_PID"
# Twice unless FEEDBACK_BENCH_LISTENER says which: with nobody bound to token.removed (push-feedback's
# own work), then with a durable listener queue storing every event (what a subscriber adds).
for listener in ${FEEDBACK_BENCH_LISTENER:-0 1}; do
    redis-cli -p "$REDIS_PORT" FLUSHALL >/dev/null
    echo "-- listener queue on token.removed: $([[ $listener == 0 ]] && echo none || echo durable)"
    PUSH_AMQP_URL="amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f" PUSH_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0" \
        FEEDBACK_BENCH_SERVER_PIDS="$REDIS_PID,$RABBIT_PID" FEEDBACK_BENCH_LISTENER=$listener "$BINARY"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
