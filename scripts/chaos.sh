#!/usr/bin/env bash
# The chaos suite (tests/system/test_chaos.py): faults (kill -9 of each service, RabbitMQ and Redis
# restarts, apns-sandbox faults, connections closed by the broker) in the middle of a broadcast,
# checked for lost and duplicated notifications. `make chaos` runs every scenario with the release
# build (the default --bin-dir here), `make chaos-smoke` (and `make test`) the smoke, `make check`
# the cluster scenarios (--cluster). --list names the scenarios.
#
#   scripts/chaos.sh [--scenario NAME ...] [--latency 0|150|both] [--tokens N] [--list]
#                    [--smoke | --cluster] [--bin-dir DIR] [--drain-timeout S] [--json FILE] [-k TEXT]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
args=()
for arg in "$@"; do
    if [[ $arg == --list ]]; then args+=(--collect-only -q); else args+=("$arg"); fi
done
# Bounded: a whole run of 28 rows takes about 40 minutes, the cluster's with 100,000 tokens longer.
exec bash "$ROOT/scripts/pytest.sh" chaos tests/system/test_chaos.py --bin-dir "$ROOT/.build/release" --timeout 10800 "${args[@]}"
