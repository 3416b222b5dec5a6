#!/usr/bin/env bash
# The pytest system tests of the shared stack, as `make test` runs them after the Swift tests: Live
# Activities end to end and the producer examples of examples/producers/ (Python pika and aio-pika,
# Go amqp091-go), each checked at apns-sandbox, and the README's examples run as printed against
# `make run` (scripts/run-local.sh on make run's ports, as instance `readme` with fresh data, so a
# developer's `dev` data is untouched; it fails while a `make run` holds them). Installs what is
# missing first with apt (python3-aio-pika golang-go golang-github-rabbitmq-amqp091-go-dev).
#
#   scripts/checks/system.sh [--bin-dir DIR] [pytest arguments, e.g. -k producers]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PROG=system.sh
needed=()
/usr/bin/python3 -c 'import aio_pika' 2>/dev/null || needed+=(python3-aio-pika)
command -v go >/dev/null || needed+=(golang-go)
[[ -d /usr/share/gocode/src/github.com/rabbitmq/amqp091-go ]] || needed+=(golang-github-rabbitmq-amqp091-go-dev)
if ((${#needed[@]})); then
    # shellcheck source=scripts/apt.sh
    . "$ROOT/scripts/apt.sh"
    apt_install "${needed[@]}" || { echo "$PROG: could not install ${needed[*]}" >&2; exit 3; }
fi
exec bash "$ROOT/scripts/pytest.sh" system tests/system/test_live_activities.py tests/system/test_producers.py \
    tests/system/test_readme.py "$@"
