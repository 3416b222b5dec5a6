#!/usr/bin/env bash
# tier: check (the long tier: `make check`, which CI runs after `make test`; see scripts/run-checks.sh)
# The broker tests on RabbitMQ 4 as well: `make test` runs the whole suite against Debian 12's
# RabbitMQ 3.10; this check starts a private RabbitMQ 4.0.5 (scripts/rabbitmq4.sh: Debian trixie's
# packages unpacked under .local, nothing installed) and runs against it, with RabbitMQ 4's defaults
# (no policies), the tests of what differs there: dead letters looked at more often than RabbitMQ
# 4's default delivery limit of 20 (DeadLetterQueueTests: with neither push.dead's own limit nor
# the renewal of often-seen letters, every letter is gone at the 21st look), the topology with its
# creation arguments, dead-lettering and retry tiers (AMQPBrokerTests), pushctl's dead list and
# replay, and the delivery settler. Two tests that close connections through scripts/rabbitmq.sh's
# instance are left out (they need that script's node).
#
#   scripts/checks/rabbitmq4.sh [--bin-dir DIR]   (DIR: where swift build put the test bundle; default .build/debug)
#
# Stops the node afterwards. About 20 s to download and start the first time, 2 minutes of tests.
# Exits with the tests' status; 3 when RabbitMQ 4 cannot be fetched or started.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN_DIR="$ROOT/.build/debug"
while (($#)); do
    case $1 in
        --bin-dir) BIN_DIR=${2:?--bin-dir needs a value}; shift 2 ;;
        --bin-dir=*) BIN_DIR=${1#--bin-dir=}; shift ;;
        -h | --help) sed -n '2,15s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "rabbitmq4.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
cd "$ROOT"
BUNDLE="$BIN_DIR/pushPackageTests.xctest"
# `make check` on its own (without `make test` first) has built the products but not the tests.
if [[ ! -x $BUNDLE ]]; then
    echo "rabbitmq4.sh: building the test bundle (swift build --build-tests)"
    swift build --build-tests || { echo "rabbitmq4.sh: swift build --build-tests failed" >&2; exit 3; }
    [[ -x $BUNDLE ]] || { echo "rabbitmq4.sh: no test bundle at $BUNDLE after the build (--bin-dir is not swift build's)" >&2; exit 2; }
fi
PORT=${PUSH_RABBITMQ4_PORT:-5699}
trap 'bash scripts/rabbitmq4.sh stop --port "$PORT" || true' EXIT
bash scripts/rabbitmq4.sh start --port "$PORT" || exit 3
status=0
PUSH_TEST_AMQP_URL="amqp://guest:guest@127.0.0.1:$PORT/%2f" timeout -k 10 900 "$BUNDLE" --testing-library swift-testing \
    --filter 'DeadLetterQueueTests|AMQPBrokerTests|deadLettersAreListedThenReplayed|DeliverySettlerBrokerTests' \
    --skip 'theConnectionNameIsSentToTheBroker|nothingIsPublishedForADeliveryWhoseConnectionTheBrokerClosed' || status=$?
if ((status == 0)); then echo "rabbitmq4: the broker tests passed on RabbitMQ 4"; else echo "rabbitmq4: FAILED on RabbitMQ 4 (exit $status)"; fi
exit "$status"
