#!/usr/bin/env bash
# `make test`: runs the whole test suite against the shared test servers, which are started first
# and always stopped afterwards; exits with swift test's status.
#
#   scripts/run-tests.sh [extra swift test arguments...]
#
# Tests run one at a time (`--no-parallel`): the suite holds load tests (20,000-token sends, a
# 100,000-token fan-out) and tests that bound how long a failure may take, and on a 2-core machine
# the first starve the second when everything runs at once. Serially the whole suite takes about
# 2 minutes after the build.
# Environment: FILTER (passed as `swift test --filter "$FILTER"`), PUSH_TEST_PARALLEL=1 (run tests in
# parallel: faster on big machines), SWIFT_TEST_CMD (a shell command run instead of swift test, e.g.
# to check the server handling: SWIFT_TEST_CMD='exit 3').
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [[ -n ${SWIFT_TEST_CMD:-} ]]; then
    exec bash scripts/with-test-servers.sh bash -c "$SWIFT_TEST_CMD"
fi
command -v swift >/dev/null || { echo "run-tests.sh: swift is not on PATH" >&2; exit 1; }
args=()
[[ -n ${FILTER:-} ]] && args+=(--filter "$FILTER")
[[ ${PUSH_TEST_PARALLEL:-} == 1 ]] && args+=(--parallel) || args+=(--no-parallel)
exec bash scripts/with-test-servers.sh swift test "${args[@]}" "$@"
