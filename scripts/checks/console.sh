#!/usr/bin/env bash
# tier: check (the long tier: `make check`, which CI runs after `make test`; see scripts/run-checks.sh)
# push-console in a real browser, as `make check` runs it after the Swift tests: headless Chromium
# (Debian's chromium and chromium-driver) driven by Selenium through the console's pages, on a
# private stack of --bin-dir's executables (default .build/debug):
#
#   scripts/checks/console.sh [--bin-dir DIR]
#
# The stack on 127.0.0.1 (RabbitMQ 8980, which also derives 9980, 28980 and 29980-29990; Redis
# 8981; apns-sandbox 8982 and its admin API 8983; push-ingest 8984; push-render, push-send and
# push-feedback's admin listeners 8985-8987; push-console 8988; chromedriver 8989), an apps file and
# an operators file of its own (a random password hashed by `pushctl console hash-password`, a
# random API key hashed by `pushctl console hash-key`). The scenario: 12 devices registered through
# push-ingest's API (locales en, de, zh-Hant-TW, fr; topic news); an unauthenticated page redirects
# to /login; a wrong password shows #error; login; a server-localized push to the topic previewed
# (target count, German and Chinese rows from localization/*.strings) and sent; its request page
# reaches `done` with as many delivered as apns-sandbox received; a push dead-lettered by push-send
# (the sandbox answering 500, PUSH_SEND_MAX_ATTEMPTS=1) shown in /dead and replayed from there to
# the sandbox; a token looked up, deleted and not found; GET /api/v1/status with a bearer key;
# logout. See scripts/checks/console.py for the details.
#
# Installs what is missing first: chromium and chromium-driver with apt (apt-get update first, a
# retry once), a font with Chinese glyphs for the screenshots (fonts-wqy-zenhei), python3-venv, and
# the pinned packages of scripts/checks/console-requirements.txt from PyPI into the venv
# .local/venv-console (reused while the pins are the same). Prints one line per check and
# `console: N passed, N failed`; exits 1 when a check failed, 2 on a usage error, 3 when a
# prerequisite is missing or the stack cannot be set up. Everything it started is stopped at the
# end, also on failure or Ctrl-C. Logs, the operators file and a screenshot of every step (PNG,
# named by step): .local/console/. About 30 s once installed.
# Environment: PUSH_LOCAL_DIR (where the servers' directories and logs go, default .local).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PROG=console.sh
BIN_DIR=$ROOT/.build/debug
while (($#)); do
    case $1 in
        --bin-dir) BIN_DIR=${2:?--bin-dir needs a directory}; shift 2 ;;
        --bin-dir=*) BIN_DIR=${1#*=}; shift ;;
        -h | --help) sed -n '2,29s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "$PROG: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
# A relative --bin-dir is the caller's; from here on everything runs in the package root.
[[ -d $BIN_DIR ]] && BIN_DIR=$(cd "$BIN_DIR" && pwd)
cd "$ROOT"

LOCAL="${PUSH_LOCAL_DIR:-$ROOT/.local}"
VENV="$LOCAL/venv-console"
REQUIREMENTS="$ROOT/scripts/checks/console-requirements.txt"
NAME=console
AMQP_PORT=8980
REDIS_PORT=8981

# --- prerequisites --------------------------------------------------------------------------

for product in apns-sandbox push-ingest push-render push-send push-feedback push-console pushctl; do
    [[ -x $BIN_DIR/$product ]] || { echo "$PROG: $BIN_DIR/$product is missing (swift build first)" >&2; exit 3; }
done
for tool in redis-server redis-cli openssl; do
    command -v "$tool" >/dev/null || { echo "$PROG: $tool is missing (scripts/install-deps.sh installs it)" >&2; exit 3; }
done
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3) || { echo "$PROG: python3 is missing" >&2; exit 3; }

# shellcheck source=scripts/apt.sh
. "$ROOT/scripts/apt.sh"
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    apt_install chromium chromium-driver || true
    if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
        echo "$PROG: cannot install Debian's chromium and chromium-driver" >&2
        exit 3
    fi
fi
# A font with Chinese glyphs, so the screenshots of the zh-Hant payloads are readable (the checks
# read the DOM and pass without it).
if ! fc-list :lang=zh 2>/dev/null | grep -q .; then
    apt_install fonts-wqy-zenhei || echo "$PROG: could not install fonts-wqy-zenhei; Chinese shows as boxes in the screenshots" >&2
fi
if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
    apt_install python3-venv || { echo "$PROG: cannot install python3-venv" >&2; exit 3; }
fi
# The venv is reused while it holds exactly the pinned set (a copy of the pins marks it complete).
if ! cmp -s "$REQUIREMENTS" "$VENV/.console-requirements" 2>/dev/null ||
    ! "$VENV/bin/python" -c 'import selenium, pika' 2>/dev/null; then
    echo "$PROG: installing $REQUIREMENTS into $VENV"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    pip=("$VENV/bin/pip" install --quiet --disable-pip-version-check --timeout 60 -r "$REQUIREMENTS")
    if ! "${pip[@]}"; then
        echo "$PROG: pip failed; retrying once" >&2
        sleep 5
        "${pip[@]}" || { rm -rf "$VENV"; echo "$PROG: cannot install $REQUIREMENTS from PyPI" >&2; exit 3; }
    fi
    "$VENV/bin/python" -c 'import selenium, pika' ||
        { rm -rf "$VENV"; echo "$PROG: the packages of $REQUIREMENTS do not import" >&2; exit 3; }
    cp "$REQUIREMENTS" "$VENV/.console-requirements"
fi

# --- the run ----------------------------------------------------------------------------------

PIDS="$LOCAL/$NAME/pids"
# cleanup: whatever console.py started and did not stop (it stops everything itself; this is for a
# Python that was killed): its processes by PID, if they still run one of --bin-dir's executables
# or chromedriver, the browsers of chromedriver's process group (console.py starts chromedriver as
# a group leader and writes `group PGID`), then the private RabbitMQ and Redis.
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
    local rc=$? word pid exe bin
    trap '' INT TERM HUP
    trap - EXIT
    bin=$(cd "$BIN_DIR" 2>/dev/null && pwd -P || echo "$BIN_DIR")
    # shellcheck disable=SC2094 # read from, then removed
    if [[ -f $PIDS ]]; then
        while read -r word pid; do
            [[ $pid =~ ^[0-9]+$ ]] || continue
            if [[ $word == group ]]; then
                for member in $(pgrep -g "$pid" 2>/dev/null || true); do
                    exe=$(readlink "/proc/$member/exe" 2>/dev/null || true)
                    [[ $exe == /usr/lib/chromium/* || $exe == /usr/bin/chromedriver ]] && kill -KILL "$member" 2>/dev/null
                done
                continue
            fi
            exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
            [[ -n $exe && ($exe == "$bin"/* || $exe == /usr/lib/chromium/*) ]] || continue
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 50); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.2
            done
            kill -KILL "$pid" 2>/dev/null || true
        done <"$PIDS"
        rm -f "$PIDS"
    fi
    PUSH_QUIET=1 bash scripts/rabbitmq.sh stop --name "$NAME" --port "$AMQP_PORT" >/dev/null 2>&1 || true
    PUSH_QUIET=1 bash scripts/redis.sh stop --name "$NAME" --port "$REDIS_PORT" >/dev/null 2>&1 || true
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

rc=0
# --foreground: Ctrl-C reaches the Python, which stops the stack itself; 420 s bounds a hung run.
timeout --foreground --signal=TERM --kill-after=30 420 \
    "$VENV/bin/python" scripts/checks/console.py --bin-dir "$BIN_DIR" || rc=$?
exit "$rc"
