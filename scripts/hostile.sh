#!/usr/bin/env bash
# The hostile-input catalogue: extreme and malformed messages to every queue and push-ingest's HTTP
# API, through a real AMQP client (pika) against the running binaries; checks that every service
# stays up, every invalid message is in push.dead with its reason, and a good push still arrives.
# `make hostile` runs it with release builds; `make check` runs it with the debug ones
# (scripts/checks/hostile-full.sh), `make test` a sample (scripts/checks/hostile.sh, --smoke).
#
#   scripts/hostile.sh [--bin-dir DIR] [--only TEXT ...] [--smoke] [--list] [--json FILE] [--log-level LEVEL]
#
# See scripts/hostile/hostile.py (--help) for the phases, the ports (127.0.0.1:8800-8807) and what
# is checked.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)
if ! "$PY" -c 'import pika' 2>/dev/null; then
    echo "hostile.sh: python3-pika is not installed (run scripts/install-deps.sh)" >&2
    exit 3
fi
exec "$PY" scripts/hostile/hostile.py "$@"
