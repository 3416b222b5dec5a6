#!/usr/bin/env bash
# `make test`: runs the whole test suite against the shared test servers, which are started first
# and always stopped afterwards; exits with swift test's status.
#
#   scripts/run-tests.sh [extra swift test arguments...]
#
# Environment: FILTER (passed as `swift test --filter "$FILTER"`), SWIFT_TEST_CMD (a shell command
# run instead of swift test, e.g. to check the server handling: SWIFT_TEST_CMD='exit 3').
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [[ -n ${SWIFT_TEST_CMD:-} ]]; then
    exec bash scripts/with-test-servers.sh bash -c "$SWIFT_TEST_CMD"
fi
command -v swift >/dev/null || { echo "run-tests.sh: swift is not on PATH" >&2; exit 1; }
args=()
[[ -n ${FILTER:-} ]] && args+=(--filter "$FILTER")
exec bash scripts/with-test-servers.sh swift test "${args[@]}" "$@"
