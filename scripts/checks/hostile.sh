#!/usr/bin/env bash
# The hostile-input catalogue, as `make test` runs it after the Swift tests: every queue and
# push-ingest's HTTP API fed extreme and malformed input through a real AMQP client against the
# running binaries of --bin-dir (run-tests.sh passes the debug executables). Every service must stay
# up with its PID, every invalid message end in push.dead with its reason (or a documented clamp),
# every HTTP refusal be a 4xx naming the field, nothing be left in a queue, and a good registration,
# push and feedback event afterwards must arrive. About a minute; a private stack on 127.0.0.1:8800-
# 8807 (RabbitMQ also derives 9800, 28800, 29800-29810), stopped afterwards, also on failure or
# Ctrl-C. Prints a table and `N passed, N failed`; exits non-zero on any failure.
#
#   scripts/checks/hostile.sh [--bin-dir DIR] [--only TEXT ...] [--list] [--json FILE]
#
# See scripts/hostile/hostile.py (--help) for the phases and every case (--list).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '2,13s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
fi
exec bash "$ROOT/scripts/hostile.sh" "$@"
