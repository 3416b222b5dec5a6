# Local development: `make run`, `make test`, `make bench`. See scripts/*.sh for the details
# (each prints its usage with --help).

SHELL := /bin/bash
.DEFAULT_GOAL := build

# `make test FILTER=RedisTests` passes `--filter RedisTests` to swift test.
FILTER ?=
export FILTER

.PHONY: deps deps-bench build test run demo bench clean-local

deps:
	@bash scripts/install-deps.sh

deps-bench:
	@bash scripts/install-deps.sh --bench

build: deps
	swift build

# Starts RabbitMQ and Redis for the tests, runs swift test, always stops them (also on failure
# or Ctrl-C) and exits with swift test's status.
test: deps
	@bash scripts/run-tests.sh

# Everything on loopback in the foreground; Ctrl-C stops it all.
run: build
	@bash scripts/run-local.sh

# The whole path once on a private stack: register a device, publish a localized push, print what
# apns-sandbox received, stop everything.
demo: build
	@bash scripts/demo.sh

bench: deps-bench
	swift build -c release --product foundation-bench
	@bash scripts/with-test-servers.sh bash -c \
	  'PUSH_AMQP_URL="$$PUSH_TEST_AMQP_URL" PUSH_REDIS_URL="$$PUSH_TEST_REDIS_URL" exec swift run -c release --skip-build foundation-bench'

# Stops every local RabbitMQ/Redis instance (by PID) and removes .local.
clean-local:
	@bash scripts/clean-local.sh

# push-ingest under wrk: PUT /v1/apps/{app}/devices/{token} and the legacy /register (release
# build, private Redis and push-ingest, stopped afterwards). See Benchmarks/ingest/README.md.
.PHONY: bench-ingest
bench-ingest: deps-bench
	@bash Benchmarks/ingest/run.sh

# push-render fanning one {"all": true} request out over 1,000,000 registered tokens (release
# build, private RabbitMQ and Redis, stopped afterwards). See Benchmarks/render/run.sh.
.PHONY: bench-render
bench-render: deps-bench
	@bash Benchmarks/render/run.sh

# push-feedback: 100,000 feedback events through the consumer (release build, private RabbitMQ and
# Redis, stopped afterwards). See Benchmarks/feedback/run.sh.
.PHONY: bench-feedback
bench-feedback: deps-bench
	@bash Benchmarks/feedback/run.sh

# The APNs client against an APNSwift-style sender (AsyncHTTPClient) and aioapns, all against one
# apns-sandbox on loopback (release builds; the sandbox is stopped afterwards). See
# Benchmarks/apns-compare/README.md.
.PHONY: bench-apns
bench-apns: deps
	@bash Benchmarks/apns-compare/run.sh

# push-send draining 1,000,000 pre-filled tokens into apns-sandbox (release build, private RabbitMQ,
# Redis and sandbox, stopped afterwards). Prints notifications/s, peak RSS and the CPU split.
.PHONY: bench-send
bench-send: deps-bench
	@bash Benchmarks/send/run.sh
