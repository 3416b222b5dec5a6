#!/usr/bin/env bash
# The hostile-input catalogue's sample, as `make test` runs it after the Swift tests: the first and
# every 8th case of each queue or HTTP target, phase and expectation (about 110 of 746), through a
# real AMQP client against the running binaries of --bin-dir, with the same checks as the whole
# catalogue (scripts/checks/hostile-full.sh, in `make check`): every service stays up with its PID,
# every invalid message ends in push.dead with a reason that starts with the field, every HTTP
# refusal is a 4xx naming the field, every ok case shows its effect, nothing is left in a queue, and
# a good registration, push and feedback event afterwards arrive. A private stack on
# 127.0.0.1:8800-8807 (RabbitMQ also derives 9800, 28800, 29800-29810), stopped afterwards.
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
exec bash "$ROOT/scripts/hostile.sh" --smoke "$@"
