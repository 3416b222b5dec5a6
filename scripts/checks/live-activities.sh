#!/usr/bin/env bash
# Live Activities end to end, as `make test` runs it after the Swift tests: a device, its
# push-to-start and update tokens registered through push-ingest's API, push requests that start,
# update and end the activity (`push_to_start`, `activity`), and a broadcast channel made with
# `pushctl channel create` that updates and ends it for every listener (`channel`), all checked at
# apns-sandbox (topic, push type, tokens, channel id). The running binaries of --bin-dir on a private
# stack on 127.0.0.1:8700-8707 (RabbitMQ also derives 9700, 28700, 29700-29710), stopped
# afterwards. Prints each check and `N passed, N failed`; exits non-zero on any failure. About 30 s.
#
#   scripts/checks/live-activities.sh --bin-dir DIR
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '2,10s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
fi
cd "$ROOT"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)
if ! "$PY" -c 'import pika' 2>/dev/null; then
    echo "live-activities.sh: python3-pika is not installed (run scripts/install-deps.sh)" >&2
    exit 3
fi
exec "$PY" scripts/live-activities/live_activities.py "$@"
