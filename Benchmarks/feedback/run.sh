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

# shellcheck source=Benchmarks/lib.sh
. Benchmarks/lib.sh
AMQP_PORT=${FEEDBACK_BENCH_AMQP_PORT:-7400}
REDIS_PORT=${FEEDBACK_BENCH_REDIS_PORT:-7421}
SCRATCH=${FEEDBACK_BENCH_SCRATCH:-.build}
NAME=feedback-bench

bench_build "$SCRATCH" "${FEEDBACK_BENCH_SKIP_BUILD:-}" feedback-bench
BINARY="$SCRATCH/release/feedback-bench"

trap 'servers_stop "$NAME" "$AMQP_PORT" "$REDIS_PORT"' EXIT
trap 'exit 130' INT TERM
servers_start "$NAME" "$AMQP_PORT" "$REDIS_PORT"

machine_line
say "redis pid $REDIS_PID, rabbitmq pid $RABBIT_PID"
# Twice unless FEEDBACK_BENCH_LISTENER says which: with nobody bound to token.removed (push-feedback's
# own work), then with a durable listener queue storing every event (what a subscriber adds).
for listener in ${FEEDBACK_BENCH_LISTENER:-0 1}; do
    redis-cli -p "$REDIS_PORT" FLUSHALL >/dev/null
    say "-- listener queue on token.removed: $([[ $listener == 0 ]] && echo none || echo durable)"
    PUSH_AMQP_URL="$AMQP_URL" PUSH_REDIS_URL="$REDIS_URL" FEEDBACK_BENCH_SERVER_PIDS="$REDIS_PID,$RABBIT_PID" FEEDBACK_BENCH_LISTENER=$listener "$BINARY"
done
say "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
