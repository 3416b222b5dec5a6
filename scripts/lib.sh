# shellcheck shell=bash
# Helpers shared by the local-server scripts (sourced, not executed).
#
# Every server instance lives in its own directory under ${PUSH_LOCAL_DIR:-<package root>/.local}.
# Processes we spawn are detached (own session, stdio on files, no inherited lock fds) and carry
# PUSH_LOCAL_INSTANCE=<instance dir> in their environment, so a PID read from a pidfile is only
# trusted (and only ever signalled) if that process really belongs to the instance.

PUSH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PUSH_LOCAL_DIR="${PUSH_LOCAL_DIR:-$PUSH_ROOT/.local}"
# `.local` may be given relative to the caller's directory; make it absolute once.
mkdir -p "$PUSH_LOCAL_DIR"
PUSH_LOCAL_DIR="$(cd "$PUSH_LOCAL_DIR" && pwd)"

PROG="$(basename "$0")"

say() { printf '%s\n' "$*"; }
warn() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
    warn "$*"
    exit 1
}

# now_ms: milliseconds since the epoch.
now_ms() {
    local t
    t=$(date +%s%N)
    printf '%s\n' "$((t / 1000000))"
}

# alive PID: the process exists and is not a zombie.
alive() {
    local pid=$1 stat
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    # Field 3 of /proc/PID/stat is the state; the command (field 2) may contain spaces, so cut
    # after the last ')'.
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat:0:1} != Z ]]
}

# belongs PID DIR: the process is alive and was spawned for the instance in DIR: its initial
# environment carries the marker, or (for servers that rewrite their argv/environ area for a
# process title, like redis-server) its working directory is DIR or below.
belongs() {
    local pid=$1 dir=$2 cwd
    alive "$pid" || return 1
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "PUSH_LOCAL_INSTANCE=$dir" && return 0
    cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null) || return 1
    [[ $cwd == "$dir" || $cwd == "$dir"/* ]]
}

# read_pid FILE: prints the PID stored in FILE (nothing if absent or malformed).
read_pid() {
    local pid=""
    if [[ -f $1 ]]; then
        read -r pid <"$1" 2>/dev/null || true
    fi
    [[ $pid =~ ^[0-9]+$ ]] && printf '%s\n' "$pid"
    return 0
}

# pid_of FILE DIR: the PID in FILE if it is a live process of the instance in DIR.
pid_of() {
    local pid
    pid=$(read_pid "$1")
    [[ -n $pid ]] && belongs "$pid" "$2" && printf '%s\n' "$pid"
    return 0
}

# spawn_detached DIR PIDFILE LOGFILE CMD...: starts CMD in a new session with stdin from
# /dev/null, stdout and stderr appended to LOGFILE, marked as belonging to DIR; writes its PID
# (the PID CMD runs as) to PIDFILE before exec.
spawn_detached() {
    local dir=$1 pidfile=$2 logfile=$3
    shift 3
    rm -f "$pidfile"
    # fd 9 (the instance lock) must not leak into the server, or the lock would never be freed.
    (
        cd "$dir" || exit 1
        # shellcheck disable=SC2016 # $$ and $@ are the inner shell's
        PUSH_LOCAL_INSTANCE="$dir" exec setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' spawn "$pidfile" "$@" \
            </dev/null >>"$logfile" 2>&1 9>&-
    ) &
    local i
    for ((i = 0; i < 50; i++)); do
        [[ -s $pidfile ]] && return 0
        sleep 0.05
    done
    die "could not spawn $1"
}

# wait_gone SECONDS PID...: waits until none of the PIDs is alive; fails on timeout.
wait_gone() {
    local deadline=$(($(now_ms) + $1 * 1000)) pid any
    shift
    while :; do
        any=""
        for pid in "$@"; do
            if alive "$pid"; then
                any=1
                break
            fi
        done
        [[ -z $any ]] && return 0
        (($(now_ms) >= deadline)) && return 1
        sleep 0.1
    done
}

# terminate SECONDS PID...: SIGTERM, wait up to SECONDS, then SIGKILL and wait a little more.
terminate() {
    local secs=$1 pid
    shift
    for pid in "$@"; do alive "$pid" && kill -TERM "$pid" 2>/dev/null; done
    wait_gone "$secs" "$@" && return 0
    for pid in "$@"; do
        if alive "$pid"; then
            warn "PID $pid did not exit after SIGTERM within ${secs}s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null
        fi
    done
    wait_gone 5 "$@"
}

# kill_session SID: SIGKILLs whatever is left of a session we spawned (children of the server
# such as erl_child_setup), then waits for it to go.
kill_session() {
    local sid=$1 left
    [[ $sid =~ ^[0-9]+$ ]] || return 0
    left=$(pgrep -s "$sid" 2>/dev/null || true)
    [[ -z $left ]] && return 0
    # shellcheck disable=SC2086 # one PID per word
    kill -KILL $left 2>/dev/null || true
    # shellcheck disable=SC2086
    wait_gone 5 $left
}

# tail_logs FILE...: prints the last lines of each existing log file, for failure reports.
tail_logs() {
    local f
    for f in "$@"; do
        [[ -s $f ]] || continue
        printf -- '--- last lines of %s ---\n' "$f" >&2
        tail -n "${PUSH_LOG_TAIL_LINES:-40}" "$f" >&2
    done
}

# lock_instance DIR: takes the instance lock on fd 9 (serialises start/stop of one instance).
lock_instance() {
    mkdir -p "$1"
    exec 9>"$1/lock"
    flock -w "${PUSH_LOCK_TIMEOUT:-300}" 9 || die "timed out waiting for the lock on $1"
}

# port_open PORT: something accepts TCP connections on 127.0.0.1:PORT.
port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# parse_instance_args DEFAULT_PORT ARGS...: sets VERB, NAME, PORT, PORT_GIVEN (for the caller).
# EXTRA_VERBS (words) are verbs of the calling script's own besides start|stop|restart|status.
# shellcheck disable=SC2034
parse_instance_args() {
    local default_port=$1
    shift
    VERB="" NAME=dev PORT=$default_port PORT_GIVEN=""
    while (($#)); do
        case $1 in
            --name) NAME=${2:?--name needs a value}; shift 2 ;;
            --name=*) NAME=${1#*=}; shift ;;
            --port) PORT=${2:?--port needs a value}; PORT_GIVEN=1; shift 2 ;;
            --port=*) PORT=${1#*=}; PORT_GIVEN=1; shift ;;
            -h | --help) usage; exit 0 ;;
            *)
                [[ " start stop restart status ${EXTRA_VERBS:-} " == *" $1 "* && -z $VERB ]] || { usage >&2; exit 2; }
                VERB=$1
                shift
                ;;
        esac
    done
    [[ -n $VERB ]] || { usage >&2; exit 2; }
    [[ $NAME =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]] || die "invalid --name '$NAME' (letters, digits, . _ -)"
    if ! [[ $PORT =~ ^[0-9]+$ ]] || ((PORT < 1024 || PORT > 65535)); then
        die "invalid --port '$PORT'"
    fi
    PORT=$((10#$PORT))
}

# The Swift suites that start servers of their own and take the longest (kill -9 of push-send under
# load, a three-node RabbitMQ cluster, broker restarts), and the tests that wait out a broker's own
# timers (a 429 retried from the 30 s tier, a memory alarm raised and cleared, a blocked broker):
# about 5 of make test's minutes. `make check` runs them (scripts/checks/swift-long.sh); `make test`
# skips them, and its chaos smoke covers a kill -9 and a broker restart end to end. A swift test
# --filter/--skip regular expression (suite or test names).
LONG_SWIFT_SUITES='SendResilienceTests|AMQPClusterTests|AMQPRestartTests|aTooManyRequestsAnswerIsRetriedAfterThirtySeconds|aMemoryAlarmTheBacklogRaises|whileTheBrokerBlocksPublishingReadiness'

# The executables the chaos harness and the system checks run, built (debug) where missing from
# directory $1: swift test builds them, but a failed or filtered build may leave some out.
PUSH_EXECUTABLES=(apns-sandbox push-ingest push-render push-send push-feedback push-console pushctl)
build_missing_products() {
    local product
    for product in "${PUSH_EXECUTABLES[@]}"; do
        [[ -x $1/$product ]] || swift build --product "$product" || true
    done
}
