#!/usr/bin/env bash
# tier: check (the long tier: `make check`, which CI runs after `make test`; see scripts/run-checks.sh)
# The Swift suites and tests `make test` leaves out (LONG_SWIFT_SUITES in scripts/lib.sh: kill -9 of
# push-send under load, a three-node RabbitMQ cluster, broker restarts, the 30 s retry tier, a memory
# alarm, a blocked broker), against the shared test servers (scripts/with-test-servers.sh starts and
# always stops them), one test at a time. About 5 minutes.
#
#   scripts/checks/swift-long.sh [--bin-dir DIR]   (--bin-dir is accepted and unused: swift test builds)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
case ${1:-} in
    -h | --help) sed -n '2,7s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
esac
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"
exec bash scripts/with-test-servers.sh swift test --no-parallel --filter "$LONG_SWIFT_SUITES"
