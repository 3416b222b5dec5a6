# Local development: `make run`, `make test`, `make bench`. See scripts/*.sh for the details
# (each prints its usage with --help).

SHELL := /bin/bash
.DEFAULT_GOAL := build

# `make test FILTER=RedisTests` passes `--filter RedisTests` to swift test.
FILTER ?=
export FILTER

.PHONY: deps deps-bench build test test-unit check run demo bench clean-local

deps:
	@bash scripts/install-deps.sh

deps-bench:
	@bash scripts/install-deps.sh --bench

build: deps
	swift build

# Starts RabbitMQ and Redis for the tests, runs swift test, always stops them (also on failure
# or Ctrl-C), then the chaos smoke and the test tier's system checks; fails when any failed.
test: deps
	@bash scripts/run-tests.sh

# The Swift tests that need no server: nothing is started (the build needs what deps installs).
test-unit: deps
	@bash scripts/test-unit.sh

# The long tier of system checks (scripts/checks/*.sh marked `# tier: check`: the image build,
# the cluster, RabbitMQ 4, the console in Chromium, schemathesis, fuzzing). CI runs it after `make test`.
check: deps
	swift build
	@bash scripts/run-checks.sh --tier check

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

# The credentials docker-compose.yml reads (compose loads .env by itself): RabbitMQ's user `push`
# and a random password, the Erlang cookie of docker-compose.cluster.yml's nodes, and Redis's
# password (REDIS_PASSWORD, which Redis requires and every PUSH_REDIS_URL carries); mode 600. Made
# once and never overwritten: on an existing .env (one of an older version) it only adds a random
# REDIS_PASSWORD when the file has none, which is what compose's `required variable REDIS_PASSWORD
# is missing a value: run make .env` asks for. For a new RabbitMQ password delete .env and the
# compose RabbitMQ volume (`docker compose down -v`), which keeps the user it was made with; Redis
# takes its password from the command line at every start, so a new one needs no new volume.
.PHONY: .env
.env:
	@umask 077 && pw=$$(openssl rand -hex 24) && cookie=$$(openssl rand -hex 24) && redis=$$(openssl rand -hex 24) && \
	  [[ $${#pw} == 48 && $${#cookie} == 48 && $${#redis} == 48 ]] && \
	  tmp=$$(mktemp .env.XXXXXX) && \
	  printf 'RABBITMQ_USER=push\nRABBITMQ_PASSWORD=%s\nRABBITMQ_ERLANG_COOKIE=%s\nREDIS_PASSWORD=%s\n' "$$pw" "$$cookie" "$$redis" >"$$tmp" && \
	  chmod 600 "$$tmp" && \
	  if mv -n "$$tmp" .env && [[ ! -e $$tmp ]]; then echo "wrote .env (RabbitMQ user push, a random password; a random Redis password)"; \
	  else rm -f "$$tmp"; \
	    if grep -Eq '^[[:space:]]*(export[[:space:]]+)?REDIS_PASSWORD=[^[:space:]]' .env; then echo "make: .env exists; left as it is" >&2; \
	    elif grep -Eq '^[[:space:]]*(export[[:space:]]+)?REDIS_PASSWORD=' .env; then \
	      echo "make: .env has an empty REDIS_PASSWORD; give it a value (openssl rand -hex 24) or delete the line" >&2; exit 1; \
	    else { [[ -z $$(tail -c 1 .env) ]] || echo; printf 'REDIS_PASSWORD=%s\n' "$$redis"; } >>.env && \
	      echo "added a random REDIS_PASSWORD to the existing .env (left the rest as it is)"; fi; \
	  fi

# Every fuzz target (Fuzz/: push requests, send batches, registrations, invalid-token reports, the
# legacy forms and feedback stream, the apps file, .strings catalogs, AMQP headers) under libFuzzer
# for FUZZ_SECONDS each (default 60), from the committed corpus; crash inputs go to .local/fuzz/.
# `make fuzz FUZZ_TARGETS=push-request` runs one. See scripts/fuzz.sh.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
.PHONY: fuzz
fuzz:
	@bash scripts/fuzz.sh --seconds $(FUZZ_SECONDS) $(FUZZ_TARGETS)

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

# The APNs client against h2load first, pinned (sandbox on one core, h2load then `pushctl bench` on the
# other, 1 connection, 1,000 in flight, 3 interleaved rounds: each rate, the median pushctl/h2load and
# the machine; it waits up to 30 min for a 1-minute load average <= 1.0), then against an
# APNSwift-style sender (AsyncHTTPClient) and aioapns, all against one apns-sandbox on loopback
# (release builds; the sandboxes are stopped afterwards). `APNS_BENCH_PINNED=only make bench-apns`
# runs the pinned part alone. See Benchmarks/apns-compare/README.md.
.PHONY: bench-apns
bench-apns: deps
	@bash Benchmarks/apns-compare/run.sh

# push-send draining 1,000,000 pre-filled tokens into apns-sandbox (release build, private RabbitMQ,
# Redis and sandbox, stopped afterwards). Prints notifications/s, peak RSS and the CPU split.
.PHONY: bench-send
bench-send: deps-bench
	@bash Benchmarks/send/run.sh

# One {"all": true} request over 1,000,000 registered tokens through the real push-render and
# push-send into apns-sandbox, end to end, against pushctl bench on the same sandbox; peak and idle
# RSS/CPU, Redis per token, targets PASS/MISS (release build, private RabbitMQ, Redis and sandbox,
# stopped afterwards). See Benchmarks/broadcast/README.md.
.PHONY: bench-broadcast
bench-broadcast: deps-bench
	@bash Benchmarks/broadcast/run.sh

# One app's broadcast (CLUSTER_BENCH_TOKENS, default 1,000,000) over a Redis Cluster of 3 masters:
# per master its slots, the app's shards and tokens, keys, memory, the commands of the fan-out and
# CPU, and the rate against pushctl bench (release build, private cluster, RabbitMQ and sandbox,
# stopped afterwards). See Benchmarks/cluster/run.sh.
.PHONY: bench-cluster
bench-cluster: deps-bench
	@bash Benchmarks/cluster/run.sh

# The chaos suite: kill -9 of each service, RabbitMQ and Redis restarts, apns-sandbox faults and
# connections closed by the broker in the middle of a 100,000-token broadcast, at loopback speed and
# with the sandbox answering after 150 ms; checks 0 lost, the duplicate bound, dead tokens removed and
# empty queues (release build; private RabbitMQ, Redis, sandbox and services on ports 7901-7908,
# stopped afterwards). `make chaos CHAOS_ARGS="--scenario kill-send --latency 0 --tokens 20000"`
# runs a part; `scripts/chaos.sh --list` names the scenarios. `make chaos-smoke` is the short run
# `make test` ends with (3,000 tokens, kill -9 of push-send and a RabbitMQ restart; ports 7951-7958).
CHAOS_ARGS ?=
CHAOS_PRODUCTS := apns-sandbox push-ingest push-render push-send push-feedback

.PHONY: chaos chaos-smoke
chaos: deps
	@for p in $(CHAOS_PRODUCTS); do swift build -c release --product $$p || exit 1; done
	@bash scripts/chaos.sh --bin-dir "$$(swift build -c release --show-bin-path)" $(CHAOS_ARGS)

chaos-smoke: deps
	@for p in $(CHAOS_PRODUCTS); do swift build -c release --product $$p || exit 1; done
	@bash scripts/chaos.sh --smoke --bin-dir "$$(swift build -c release --show-bin-path)" $(CHAOS_ARGS)

# The cluster scenarios (a RabbitMQ node and a Redis master killed mid-broadcast, both latencies) on
# a 3-node RabbitMQ cluster and a Redis Cluster, 100,000 tokens (make test runs 3,000).
.PHONY: chaos-cluster
chaos-cluster: deps
	@for p in $(CHAOS_PRODUCTS); do swift build -c release --product $$p || exit 1; done
	@bash scripts/chaos.sh --cluster --tokens 100000 --bin-dir "$$(swift build -c release --show-bin-path)" $(CHAOS_ARGS)

# The HTTP/2 transport that pushctl and apns-sandbox share: h2load and `pushctl bench` against
# apns-sandbox, sandbox and client pinned to separate cores, 1 and 2 connections, rounds interleaved
# (release build; the sandbox on 127.0.0.1:37841-37842, stopped afterwards). A/B against older
# binaries: `make bench-transport TRANSPORT_BENCH_BASELINE_BIN=/path/to/dir`. See
# Benchmarks/transport/README.md.
.PHONY: bench-transport
bench-transport: deps-bench
	@for p in apns-sandbox pushctl; do swift build -c release --product $$p || exit 1; done
	@TRANSPORT_BENCH_BIN="$$(swift build -c release --show-bin-path)" bash Benchmarks/transport/run.sh

# Regenerates docs/configuration.md's tables from the code's key tables (ConfigurationTable):
# the tests that check them run in record mode and write the tables they expect.
.PHONY: docs
docs: deps
	swift build --build-tests
	@PUSH_TEST_RECORD_README=1 swift test --skip-build --filter 'ConfigurationTableTests'

# Applies .swift-format to the Swift sources (`make lint` checks without changing; `make test` runs
# the check first).
.PHONY: format lint
format:
	@bash scripts/format.sh
lint:
	@bash scripts/format.sh --check

# The hostile-input catalogue: for every queue and push-ingest's HTTP API, extreme and
# malformed numbers, strings, nesting, encodings, sizes and AMQP headers through pika against the
# real services; checks every service stays up (same PIDs), every invalid message is in push.dead
# with its reason, HTTP refusals are 4xx naming the field, no queue keeps anything, and a good push
# still arrives (release build; private stack on 127.0.0.1:8800-8807, stopped afterwards).
# `make test` runs a sample of it (the first and every 8th case of each kind) with the debug build
# (scripts/checks/hostile.sh), `make check` the whole catalogue (scripts/checks/hostile-full.sh);
# `scripts/checks/hostile.sh --full --collect-only -q` lists every case, `make hostile HOSTILE_ARGS="-k push.send"` runs a part.
HOSTILE_ARGS ?=
.PHONY: hostile
hostile: deps
	@for p in $(CHAOS_PRODUCTS); do swift build -c release --product $$p || exit 1; done
	@bash scripts/checks/hostile.sh --full --bin-dir "$$(swift build -c release --show-bin-path)" $(HOSTILE_ARGS)
