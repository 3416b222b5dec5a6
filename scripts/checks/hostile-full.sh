#!/usr/bin/env bash
# tier: check
# The whole hostile-input catalogue (746 cases; `make test` runs a sample of it, checks/hostile.sh):
# every queue and push-ingest's HTTP API fed extreme and malformed input through a real AMQP client
# against the running binaries of --bin-dir. About 90 s on the private stack on 127.0.0.1:8800-8807.
#
#   scripts/checks/hostile-full.sh [--bin-dir DIR] [--only TEXT ...] [--list] [--json FILE]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '3,7s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
fi
exec bash "$ROOT/scripts/hostile.sh" "$@"
