# shellcheck shell=bash
# What the benchmarks share (sourced by Benchmarks/*/run.sh once they are in the package root):
# scripts/lib.sh (say, warn and die naming the script, terminate, port_open, …) and the steps every
# benchmark repeats: release builds, private servers started fresh and stopped with their data
# dropped, apns-sandbox started and awaited, its own children stopped, CPU read from /proc.

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
# shellcheck source=scripts/apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/apt.sh"

# need_tool COMMAND [PACKAGE]: installs the Debian package (default: the command's name) when the
# command is missing.
need_tool() {
    command -v "$1" >/dev/null || apt_install "${2:-$1}" || die "cannot install ${2:-$1}"
}

# bench_build SCRATCH SKIP PRODUCT...: release builds of the PRODUCTs in the scratch path SCRATCH
# (unless SKIP is 1: the binaries already built); each must then be in SCRATCH/release.
bench_build() {
    local scratch=$1 skip=$2 product
    shift 2
    if [[ $skip != 1 ]]; then
        say "building $* (release)"
        for product in "$@"; do
            swift build -c release --scratch-path "$scratch" --product "$product" 2>&1 | tail -1
        done
    fi
    for product in "$@"; do
        [[ -x $scratch/release/$product ]] || die "$scratch/release/$product is missing"
    done
}

# stop_child PID...: SIGTERM, up to 10 s, then SIGKILL; empty and finished PIDs are skipped.
stop_child() {
    local pid
    for pid in "$@"; do
        [[ -n $pid ]] && terminate 10 "$pid" || true
    done
}

# servers_start NAME AMQP_PORT REDIS_PORT [KEEP_REDIS]: a private RabbitMQ (none when AMQP_PORT is 0)
# and Redis (scripts/rabbitmq.sh and scripts/redis.sh, instance NAME) with fresh data; KEEP_REDIS=1
# keeps what Redis held (a filled registry for the next run). Sets AMQP_URL, REDIS_URL, RABBIT_PID
# and REDIS_PID.
# shellcheck disable=SC2034 # AMQP_URL, REDIS_URL, RABBIT_PID and REDIS_PID are for the caller
servers_start() {
    local name=$1 amqp_port=$2 redis_port=$3 keep_redis=${4:-0}
    servers_stop "$name" "$amqp_port" "$redis_port" "$keep_redis"
    if [[ $amqp_port != 0 ]]; then
        PUSH_QUIET=1 bash scripts/rabbitmq.sh start --name "$name" --port "$amqp_port"
        AMQP_URL="amqp://guest:guest@127.0.0.1:$amqp_port/%2f"
        RABBIT_PID=$(cat "$PUSH_LOCAL_DIR/rabbitmq-$name/rabbitmq.pid")
    fi
    PUSH_QUIET=1 bash scripts/redis.sh start --name "$name" --port "$redis_port"
    REDIS_URL="redis://127.0.0.1:$redis_port/0"
    REDIS_PID=$(cat "$PUSH_LOCAL_DIR/redis-$name/redis.pid")
}

# servers_stop NAME AMQP_PORT REDIS_PORT [KEEP_REDIS]: stops both (an AMQP_PORT of 0: no RabbitMQ)
# and drops their data (a Redis AOF of a million tokens is hundreds of MB nothing needs afterwards).
servers_stop() {
    local name=$1 amqp_port=$2 redis_port=$3 keep_redis=${4:-0}
    if [[ $amqp_port != 0 ]]; then
        PUSH_QUIET=1 bash scripts/rabbitmq.sh stop --name "$name" --port "$amqp_port" || true
        rm -rf "$PUSH_LOCAL_DIR/rabbitmq-$name/mnesia"
    fi
    PUSH_QUIET=1 bash scripts/redis.sh stop --name "$name" --port "$redis_port" || true
    [[ $keep_redis == 1 ]] || rm -rf "$PUSH_LOCAL_DIR/redis-$name/data"
}

# start_sandbox BIN_DIR OUT_DIR PORT ADMIN_PORT [ARG...]: BIN_DIR's apns-sandbox with a generated CA
# (OUT_DIR/ca.pem), a small delivery record (the /stats counts stay exact) and ARGs, logging to
# OUT_DIR/apns-sandbox.log; returns once it answers /healthz. Sets SANDBOX_PID.
start_sandbox() {
    local bin=$1 out=$2 port=$3 admin_port=$4
    shift 4
    rm -f "$out/ca.pem"
    PUSH_LOG_LEVEL=warning "$bin/apns-sandbox" --port "$port" --admin-port "$admin_port" --ca-out "$out/ca.pem" \
        --record-limit 1000 "$@" >"$out/apns-sandbox.log" 2>&1 &
    SANDBOX_PID=$!
    for _ in $(seq 1 100); do
        [[ -s $out/ca.pem ]] && curl -fsS "http://127.0.0.1:$admin_port/healthz" >/dev/null 2>&1 && return 0
        kill -0 "$SANDBOX_PID" 2>/dev/null || {
            cat "$out/apns-sandbox.log" >&2
            die "apns-sandbox exited during start-up"
        }
        sleep 0.1
    done
    die "apns-sandbox does not answer /healthz (see $out/apns-sandbox.log)"
}

# wait_healthy URL PID LOG WHAT: until URL answers 2xx (at most 30 s); fails naming WHAT, with its
# log, when the process PID exits first or it never answers.
wait_healthy() {
    local url=$1 pid=$2 log=$3 what=$4
    for _ in $(seq 1 300); do
        curl -fsS "$url" >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || {
            cat "$log" >&2
            die "$what exited during start-up"
        }
        sleep 0.1
    done
    die "$what does not answer $url (see $log)"
}

# process_cpu PID: CPU time (user + system) the process has used, in ticks (1/100 s).
process_cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# machine_busy: the whole machine's busy CPU time, in ticks.
machine_busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
# peak_rss PID: the process's peak resident memory (VmHWM), e.g. `41236 kB`.
peak_rss() { awk '/VmHWM/ {print $2 " " $3}' "/proc/$1/status"; }

# wait_aof_rewrite PORT...: until no Redis on these ports has an AOF rewrite running or scheduled (at
# most 5 minutes each): a benchmark measures the work, not Redis housekeeping after a fill.
wait_aof_rewrite() {
    local port
    for port in "$@"; do
        for _ in $(seq 1 1200); do
            redis-cli -p "$port" INFO persistence | grep -qE 'aof_rewrite_(in_progress|scheduled):1' || break
            sleep 0.25
        done
    done
}

# machine_line: cores, CPU model and memory, for the figures' context.
machine_line() {
    say "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(awk '/MemTotal/ {printf "%d MB", $2 / 1024}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
}
