#!/usr/bin/env bash
# push-render benchmark: one {"all": true} push request over RENDER_BENCH_TOKENS (1,000,000)
# registered tokens, rendered by the real push-render executable into send batches on push.send.
#
#   bash Benchmarks/render/run.sh        (or: make bench-render)
#
# Builds push-render and render-bench in release, starts a private RabbitMQ
# (`scripts/rabbitmq.sh --name render-bench`) and Redis (`scripts/redis.sh --name render-bench`, AOF
# with appendfsync everysec like every local Redis), runs render-bench (which fills Redis with the
# token records through pipelines, starts push-render, publishes the request and prints the time to
# the last confirmed batch, throughput and push-render's peak RSS, then reads every batch back and
# checks each token came once), and stops both servers and drops their data, also on failure or Ctrl-C.
#
# Environment: RENDER_BENCH_TOKENS (1000000), RENDER_BENCH_BATCH_SIZE (500), RENDER_BENCH_AMQP_PORT
# (7272), RENDER_BENCH_REDIS_PORT (7279), RENDER_BENCH_SCRATCH (.build), RENDER_BENCH_SKIP_BUILD=1
# (use the binaries already built), RENDER_BENCH_KEEP_DATA=1 (keep the filled Redis for the next run).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

# shellcheck source=Benchmarks/lib.sh
. Benchmarks/lib.sh
TOKENS=${RENDER_BENCH_TOKENS:-1000000}
BATCH_SIZE=${RENDER_BENCH_BATCH_SIZE:-500}
AMQP_PORT=${RENDER_BENCH_AMQP_PORT:-7272}
REDIS_PORT=${RENDER_BENCH_REDIS_PORT:-7279}
SCRATCH=${RENDER_BENCH_SCRATCH:-.build}
KEEP=${RENDER_BENCH_KEEP_DATA:-0}
NAME=render-bench

bench_build "$SCRATCH" "${RENDER_BENCH_SKIP_BUILD:-}" push-render render-bench
trap 'servers_stop "$NAME" "$AMQP_PORT" "$REDIS_PORT" "$KEEP"' EXIT
trap 'exit 130' INT TERM
servers_start "$NAME" "$AMQP_PORT" "$REDIS_PORT" "$KEEP"

PUSH_AMQP_URL="$AMQP_URL" PUSH_REDIS_URL="$REDIS_URL" "$SCRATCH/release/render-bench" --tokens "$TOKENS" --batch-size "$BATCH_SIZE"
