#!/usr/bin/env bash
# The pytest system tests (tests/system/), as `make test` runs them after the Swift tests: Live
# Activities end to end and the producer examples of examples/producers/ (Python pika and aio-pika,
# Go amqp091-go), each on a private stack of the --bin-dir executables and checked at apns-sandbox,
# and the README's examples run as printed against `make run` (scripts/run-local.sh on make run's
# ports, as instance `readme` with fresh data, so a developer's `dev` data is untouched; it fails
# while a `make run` holds them). Installs what is missing first with apt (python3-pytest
# python3-aio-pika golang-go golang-github-rabbitmq-amqp091-go-dev). pytest's own report; JUnit XML
# in .local/system/junit.xml.
#
#   scripts/checks/system.sh [--bin-dir DIR] [pytest arguments, e.g. -k producers]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PROG=system.sh
BIN_DIR=.build/debug
args=()
while (($#)); do
    case $1 in
        --bin-dir) BIN_DIR="${2:?--bin-dir needs a directory}"; shift 2 ;;
        -h | --help) sed -n '2,11s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) args+=("$1"); shift ;;
    esac
done

# Debian's python3 (its pika, aio-pika and pytest), not one earlier on PATH.
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)
needed=()
"$PY" -c 'import pytest' 2>/dev/null || needed+=(python3-pytest)
"$PY" -c 'import aio_pika' 2>/dev/null || needed+=(python3-aio-pika)
"$PY" -c 'import pika' 2>/dev/null || needed+=(python3-pika)
command -v go >/dev/null || needed+=(golang-go)
[[ -d /usr/share/gocode/src/github.com/rabbitmq/amqp091-go ]] || needed+=(golang-github-rabbitmq-amqp091-go-dev)
if ((${#needed[@]})); then
    # shellcheck source=scripts/apt.sh
    . "$ROOT/scripts/apt.sh"
    apt_install "${needed[@]}" || { echo "$PROG: could not install ${needed[*]}" >&2; exit 3; }
fi

LOCAL="${PUSH_LOCAL_DIR:-$ROOT/.local}"
mkdir -p "$LOCAL/system"
exec "$PY" -m pytest tests/system --bin-dir "$BIN_DIR" -p no:cacheprovider -ra \
    --junitxml "$LOCAL/system/junit.xml" -o junit_suite_name=system "${args[@]}"
