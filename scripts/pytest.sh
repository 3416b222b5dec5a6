#!/usr/bin/env bash
# One system check as pytest runs it: the given modules of tests/system on private stacks of the
# --bin-dir executables (tests/harness), with pytest's report, -k selection and JUnit XML in
# .local/junit/NAME.xml. Installs what the harness needs first (apt: python3-pytest, python3-pika,
# python3-yaml, python3-jsonschema, redis-tools, openssl, iproute2); RabbitMQ and Redis come from
# scripts/install-deps.sh.
#
#   scripts/pytest.sh NAME tests/system/test_X.py... [--bin-dir DIR] [--requirements FILE]
#                     [pytest arguments, e.g. -k roles]
#
# --requirements runs the modules in the virtualenv .local/venv-NAME holding exactly FILE's pins
# (which bring pytest and pika themselves), made or remade when the pins change.
# Exits as pytest does: 0 passed, 1 a test failed, 2 interrupted, 3 the stack could not be set up.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROG=pytest.sh
NAME=${1:?usage: scripts/pytest.sh NAME MODULE... [--bin-dir DIR] [pytest arguments]}
shift
BIN_DIR=$ROOT/.build/debug
REQUIREMENTS=""
modules=()
args=()
while (($#)); do
    case $1 in
        --bin-dir) BIN_DIR=${2:?--bin-dir needs a directory}; shift 2 ;;
        --bin-dir=*) BIN_DIR=${1#*=}; shift ;;
        --requirements) REQUIREMENTS=${2:?--requirements needs a file}; shift 2 ;;
        tests/*.py) modules+=("$1"); shift ;;
        *) args+=("$1"); shift ;;
    esac
done
# A relative --bin-dir is the caller's; from here on everything runs in the package root.
[[ -d $BIN_DIR ]] && BIN_DIR=$(cd "$BIN_DIR" && pwd)
cd "$ROOT"

# shellcheck source=scripts/apt.sh
. "$ROOT/scripts/apt.sh"
LOCAL="${PUSH_LOCAL_DIR:-$ROOT/.local}"
needed=()
if [[ -n $REQUIREMENTS ]]; then
    pinned_venv "$LOCAL/venv-$NAME" "$REQUIREMENTS" pytest pika || exit 3
    PY=$LOCAL/venv-$NAME/bin/python
else
    PY=/usr/bin/python3
    [[ -x $PY ]] || PY=$(command -v python3) || { echo "$PROG: python3 is missing" >&2; exit 3; }
    "$PY" -c 'import pytest' 2>/dev/null || needed+=(python3-pytest)
    "$PY" -c 'import pika' 2>/dev/null || needed+=(python3-pika)
    "$PY" -c 'import yaml' 2>/dev/null || needed+=(python3-yaml)
    "$PY" -c 'import jsonschema' 2>/dev/null || needed+=(python3-jsonschema)
fi
command -v redis-cli >/dev/null || needed+=(redis-tools)
command -v openssl >/dev/null || needed+=(openssl)
command -v ss >/dev/null || needed+=(iproute2)
if ((${#needed[@]})); then
    apt_install "${needed[@]}" || { echo "$PROG: could not install ${needed[*]}" >&2; exit 3; }
fi
if ! command -v redis-server >/dev/null || [[ ! -x ${PUSH_RABBITMQ_BIN_DIR:-/usr/lib/rabbitmq/bin}/rabbitmq-server ]]; then
    echo "$PROG: RabbitMQ or Redis is not installed (run scripts/install-deps.sh)" >&2
    exit 3
fi

# No proxy of the caller's sits between a check and its loopback stack (what a check fetches from
# outside, a package, may still go through it).
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}" no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}"
mkdir -p "$LOCAL/junit"
exec "$PY" -m pytest "${modules[@]}" --bin-dir "$BIN_DIR" -p no:cacheprovider -ra \
    --junitxml "$LOCAL/junit/$NAME.xml" -o junit_suite_name="$NAME" "${args[@]}"
