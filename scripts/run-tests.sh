#!/usr/bin/env bash
# `make test`: runs the Swift test suite against the shared test servers, which are started first
# and always stopped afterwards, then the chaos smoke and the test tier's system checks; exits
# non-zero when any of them failed. `make check` (scripts/run-checks.sh --tier check) is the long tier.
#
#   scripts/run-tests.sh [extra swift test arguments...]
#
# Every suite but LONG_SWIFT_SUITES (scripts/lib.sh; `make check` runs those). Tests run one at a time (`--no-parallel`): the suite holds load tests (20,000-token sends, a
# 100,000-token fan-out) and tests that bound how long a failure may take, and on a 2-core machine
# the first starve the second when everything runs at once. Serially this takes about 6 minutes
# after the build on a 2-core machine (803 tests in 370 s, 2026-11-28).
# Then the chaos smoke (scripts/chaos.sh --smoke: 3,000 tokens, kill -9 of push-send and a RabbitMQ
# restart in the middle of a broadcast, on a private stack with the debug executables swift test
# built; about a minute), which ends with a line `N passed, N failed`. Both run even if the first
# fails; the exit status is non-zero if either failed.
# Then the checks of the test tier (scripts/run-checks.sh --tier test: every scripts/checks/*.sh
# without a `# tier: check` line, in name order, each given the debug executables' directory as
# --bin-dir); one that fails makes the run fail. The long checks are `make check`'s.
# Environment: FILTER (passed as `swift test --filter "$FILTER"`; also skips the chaos smoke and the
# checks), PUSH_TEST_PARALLEL=1 (run tests in parallel: faster on big machines), PUSH_CHAOS_SMOKE=0
# (skip the chaos smoke and the checks), SWIFT_TEST_CMD (a shell command run instead of swift test
# and the smoke, e.g. to check the server handling: SWIFT_TEST_CMD='exit 3').
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [[ -n ${SWIFT_TEST_CMD:-} ]]; then
    exec bash scripts/with-test-servers.sh bash -c "$SWIFT_TEST_CMD"
fi
command -v swift >/dev/null || { echo "run-tests.sh: swift is not on PATH" >&2; exit 1; }
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"
args=()
# A FILTER runs what it names; otherwise everything but the long suites, which are make check's.
if [[ -n ${FILTER:-} ]]; then args+=(--filter "$FILTER"); else args+=(--skip "$LONG_SWIFT_SUITES"); fi
[[ ${PUSH_TEST_PARALLEL:-} == 1 ]] && args+=(--parallel) || args+=(--no-parallel)
# Ctrl-C reaches swift test (or the smoke) directly, as the foreground process group; once that has
# stopped, this script stops too instead of going on to the next step.
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
test_status=0
# The tree stays formatted by .swift-format (`make format` applies it): a lint finding fails the run.
if [[ -z ${FILTER:-} ]]; then
    echo "run-tests.sh: swift format lint (.swift-format)"
    bash scripts/format.sh --check || test_status=$?
fi
# The output is kept too, so the end of the run can repeat which tests failed (a CI log may show
# only its last lines).
mkdir -p .local/test-logs
swift_log=.local/test-logs/swift-test.log
bash scripts/with-test-servers.sh swift test "${args[@]}" "$@" 2>&1 | tee "$swift_log" || test_status=$?

if [[ -n ${FILTER:-} || ${PUSH_CHAOS_SMOKE:-1} == 0 ]]; then
    exit "$test_status"
fi
# The smoke and the checks use the debug executables.
BIN_DIR="$(swift build --show-bin-path)"
build_missing_products "$BIN_DIR"
echo "run-tests.sh: chaos smoke (scripts/chaos.sh --smoke)"
smoke_status=0
bash scripts/chaos.sh --smoke --bin-dir "$BIN_DIR" || smoke_status=$?
check_status=0
bash scripts/run-checks.sh --tier test --bin-dir "$BIN_DIR" || check_status=$?
if ((test_status != 0)); then
    echo "run-tests.sh: swift test failed (exit $test_status); what failed (whole output in $swift_log):" >&2
    grep -aE '(✘ Test .*(recorded an issue|failed after))|(error: )|(Fatal error)|(exited with signal)' "$swift_log" | head -40 >&2 || true
    exit "$test_status"
fi
if ((smoke_status != 0)); then
    echo "run-tests.sh: the chaos smoke failed (exit $smoke_status)" >&2
    exit "$smoke_status"
fi
exit "$check_status"

