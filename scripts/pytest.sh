#!/usr/bin/env bash
# One system check as pytest runs it: the given modules of tests/system on private stacks of the
# --bin-dir executables (tests/harness), with pytest's report, -k selection and JUnit XML in
# .local/junit/NAME.xml. Installs what the harness needs first (apt: python3-pytest, python3-pika,
# python3-yaml, python3-jsonschema, redis-tools, openssl, iproute2); RabbitMQ and Redis come from
# scripts/install-deps.sh.
#
#   scripts/pytest.sh NAME tests/system/test_X.py... [--bin-dir DIR] [--requirements FILE]
#                     [--timeout S] [pytest arguments, e.g. -k roles]
#
# --requirements runs the modules in the virtualenv .local/venv-NAME holding exactly FILE's pins
# (which bring pytest and pika themselves), made or remade when the pins change (before the
# timeout starts). --timeout bounds the run (default 900 s): then SIGTERM, which pytest takes as
# Ctrl-C and tears every stack down; SIGKILL 30 s later. Whatever the run started and left running
# when it ended (pytest killed, say) is stopped afterwards: its processes and its RabbitMQ and Redis
# (the harness lists them in a cleanup file). Exits as pytest does: 0 passed, 1 a test failed, 2
# interrupted (or a module that does not import), 3 a stack could not be set up, 4 a usage error, 5
# nothing selected; 124 when the timeout ended it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROG=pytest.sh
NAME=${1:?usage: scripts/pytest.sh NAME MODULE... [--bin-dir DIR] [--requirements FILE] [--timeout S] [pytest arguments]}
shift
BIN_DIR=$ROOT/.build/debug
REQUIREMENTS=""
TIMEOUT=900
modules=()
args=()
while (($#)); do
    case $1 in
        --bin-dir) BIN_DIR=${2:?--bin-dir needs a directory}; shift 2 ;;
        --bin-dir=*) BIN_DIR=${1#*=}; shift ;;
        --requirements) REQUIREMENTS=${2:?--requirements needs a file}; shift 2 ;;
        --requirements=*) REQUIREMENTS=${1#*=}; shift ;;
        --timeout) TIMEOUT=${2:?--timeout needs seconds}; shift 2 ;;
        --timeout=*) TIMEOUT=${1#*=}; shift ;;
        tests/*.py) modules+=("$1"); shift ;;
        *) args+=("$1"); shift ;;
    esac
done
# A relative --bin-dir is the caller's; from here on everything runs in the package root.
[[ -d $BIN_DIR ]] && BIN_DIR=$(cd "$BIN_DIR" && pwd -P)
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
export PUSH_HARNESS_CLEANUP_FILE="$LOCAL/junit/$NAME.cleanup"
: >"$PUSH_HARNESS_CLEANUP_FILE"

# What the run left running: its processes that still run an executable of the bin dir (or the
# console check's browser), then its servers by their scripts. Nothing is left after a clean run.
cleanup() {
    local kind a b c exe pid
    trap '' INT TERM HUP
    while read -r kind a b c; do
        case $kind in
            pid | group)
                for pid in $([[ $kind == pid ]] && echo "$a" || pgrep -g "$a" 2>/dev/null); do
                    exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
                    [[ $exe == "$BIN_DIR"/* || $exe == /usr/lib/chromium/* || $exe == /usr/bin/chromedriver ]] &&
                        kill -KILL "$pid" 2>/dev/null && echo "$PROG: stopped $pid ($exe), left running" >&2
                done
                ;;
            server) PUSH_QUIET=1 bash "$ROOT/scripts/$a.sh" stop --name "$b" --port "$c" >/dev/null 2>&1 || true ;;
            cluster) PUSH_QUIET=1 bash "$ROOT/scripts/$a-cluster.sh" stop --name "$b" >/dev/null 2>&1 || true ;;
        esac
    done <"$PUSH_HARNESS_CLEANUP_FILE"
    rm -f "$PUSH_HARNESS_CLEANUP_FILE"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
status=0
# --foreground: a Ctrl-C reaches pytest, which stops its stacks itself.
timeout --foreground --signal=TERM --kill-after=30 "$TIMEOUT" \
    "$PY" -m pytest "${modules[@]}" --bin-dir "$BIN_DIR" -p no:cacheprovider -ra \
    --junitxml "$LOCAL/junit/$NAME.xml" -o junit_suite_name="$NAME" "${args[@]}" || status=$?
exit "$status"
