#!/usr/bin/env bash
# The chaos suite: faults (kill -9 of each service, RabbitMQ and Redis restarts, apns-sandbox faults,
# connections closed by the broker) in the middle of a broadcast, checked for lost and duplicated
# notifications. `make chaos` runs every scenario; `make chaos-smoke` (and `make test`) the smoke.
#
#   scripts/chaos.sh [--scenario NAME ...] [--latency 0|150|both] [--tokens N] [--list] [--smoke]
#                    [--bin-dir DIR] [--drain-timeout S] [--json FILE]
#
# See scripts/chaos/chaos.py (--help) for what each scenario does and checks.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)
if ! "$PY" -c 'import pika' 2>/dev/null; then
    echo "chaos.sh: python3-pika is not installed (run scripts/install-deps.sh)" >&2
    exit 3
fi
exec "$PY" scripts/chaos/chaos.py "$@"
