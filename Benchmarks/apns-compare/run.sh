#!/usr/bin/env bash
# The provider's APNs client against what a user would pick instead, in one run, against the same
# apns-sandbox on loopback (DESIGN.md):
#   pushctl  `pushctl bench` (Sources/APNs: nghttp2 + OpenSSL)
#   ahc      Benchmarks/apns-compare/ahc-bench: what APNSwift does, on AsyncHTTPClient 1.37.0
#   ahc-drain  the same, but reading each 200's empty body to its end (APNSwift does not; see README)
#   aioapns  Benchmarks/apns-compare/aioapns_bench.py: aioapns (Python asyncio, h2), from PyPI
#
#   bash Benchmarks/apns-compare/run.sh        (or: make bench-apns)
#
# Builds pushctl and apns-sandbox (release) and ahc-bench (release, its own package), installs aioapns
# into a venv under .local (skipped with a message when pip cannot), starts apns-sandbox on two free
# loopback ports with --ca-out, runs every tool with the same fixed alert, C in flight, over 1 and 2
# connections, each measurement REPEAT times keeping the fastest, and prints one table:
# notifications/s, p50/p99, the client's peak RSS, and CPU seconds of the client (user+system of the
# whole process, /usr/bin/time) and of the sandbox (/proc/<pid>/stat utime+stime across the run),
# with the 1-minute load average when each run started (other work on the machine skews the figures).
# Stops apns-sandbox afterwards, also on failure or Ctrl-C.
#
# Environment: APNS_BENCH_COUNT (200000), APNS_BENCH_AIOAPNS_COUNT (50000: aioapns is ~10x slower),
# APNS_BENCH_CONCURRENCY (1000), APNS_BENCH_CONNECTIONS ("1 2"), APNS_BENCH_REPEAT (2),
# APNS_BENCH_TOOLS ("pushctl ahc ahc-drain aioapns"), APNS_BENCH_TIMEOUT (600: seconds one run may take),
# APNS_BENCH_SCRATCH (.build: the main package's SwiftPM scratch path), APNS_BENCH_SKIP_BUILD=1 (use
# the binaries already built).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

COUNT=${APNS_BENCH_COUNT:-200000}
AIOAPNS_COUNT=${APNS_BENCH_AIOAPNS_COUNT:-50000}
CONCURRENCY=${APNS_BENCH_CONCURRENCY:-1000}
CONNECTIONS=${APNS_BENCH_CONNECTIONS:-1 2}
REPEAT=${APNS_BENCH_REPEAT:-2}
TOOLS=${APNS_BENCH_TOOLS:-pushctl ahc ahc-drain aioapns}
RUN_TIMEOUT=${APNS_BENCH_TIMEOUT:-600}
SCRATCH=${APNS_BENCH_SCRATCH:-.build}
BENCH_DIR="$ROOT/Benchmarks/apns-compare"
AHC_DIR="$BENCH_DIR/ahc-bench"
VENV="$ROOT/.local/apns-compare-venv"
AIOAPNS_VERSION=4.0
OUT_DIR="$ROOT/.local/apns-compare"

say() { printf '%s\n' "$*"; }
die() {
    printf 'run.sh: %s\n' "$*" >&2
    exit 1
}

for value in "$COUNT" "$AIOAPNS_COUNT" "$CONCURRENCY" "$REPEAT" "$RUN_TIMEOUT"; do
    [[ $value =~ ^[1-9][0-9]*$ ]] || die "counts, concurrency, repeat and timeout must be positive integers (got '$value')"
done
((REPEAT <= 10)) || die "APNS_BENCH_REPEAT must be at most 10"
for k in $CONNECTIONS; do
    [[ $k =~ ^[1-9][0-9]*$ ]] && ((k <= 64)) || die "APNS_BENCH_CONNECTIONS holds 1–64 (got '$k')"
done
for tool in $TOOLS; do
    [[ $tool == pushctl || $tool == ahc || $tool == ahc-drain || $tool == aioapns ]] || die "unknown tool '$tool' (pushctl, ahc, ahc-drain, aioapns)"
done
[[ -x /usr/bin/time ]] || die "/usr/bin/time is missing (Debian package 'time')"

rm -rf "$OUT_DIR"
mkdir -p "$OUT_DIR"

# MARK: build

# build LOG ARGS…: swift build with its output in LOG; prints the last line, or the last 30 and stops.
build() {
    local log=$1
    shift
    if swift build -c release "$@" >"$log" 2>&1; then
        tail -1 "$log"
    else
        tail -30 "$log" >&2
        die "swift build $* failed (full output in $log)"
    fi
}

if [[ ${APNS_BENCH_SKIP_BUILD:-} != 1 ]]; then
    say "building pushctl and apns-sandbox (release)"
    build "$OUT_DIR/build-pushctl.log" --scratch-path "$SCRATCH" --product pushctl
    build "$OUT_DIR/build-apns-sandbox.log" --scratch-path "$SCRATCH" --product apns-sandbox
    if [[ " $TOOLS " == *" ahc"* ]]; then
        say "building ahc-bench (release; its own package in $AHC_DIR)"
        build "$OUT_DIR/build-ahc-bench.log" --package-path "$AHC_DIR"
    fi
fi
BIN="$SCRATCH/release"
[[ -x $BIN/pushctl && -x $BIN/apns-sandbox ]] || die "$BIN/pushctl or $BIN/apns-sandbox is missing"
AHC_BIN="$AHC_DIR/.build/release/ahc-bench"
if [[ " $TOOLS " == *" ahc"* ]]; then
    [[ -x $AHC_BIN ]] || die "$AHC_BIN is missing"
fi

# aioapns: a venv under .local; without PyPI the aioapns rows are skipped, not faked.
AIOAPNS_SKIPPED=""
if [[ " $TOOLS " == *" aioapns "* ]]; then
    if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" -c 'import aioapns' 2>/dev/null; then
        say "installing aioapns $AIOAPNS_VERSION into $VENV"
        if ! { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q "aioapns==$AIOAPNS_VERSION"; } >"$OUT_DIR/pip.log" 2>&1; then
            AIOAPNS_SKIPPED="pip could not install aioapns $AIOAPNS_VERSION (see $OUT_DIR/pip.log)"
        fi
    fi
    [[ -n $AIOAPNS_SKIPPED ]] && say "skipping aioapns: $AIOAPNS_SKIPPED"
fi

# MARK: apns-sandbox

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
PORT=$(free_port)
ADMIN_PORT=$(free_port)
while [[ $ADMIN_PORT == "$PORT" ]]; do ADMIN_PORT=$(free_port); done
CA="$OUT_DIR/ca.pem"

SANDBOX_PID=""
cleanup() {
    if [[ -n $SANDBOX_PID ]] && kill -0 "$SANDBOX_PID" 2>/dev/null; then
        kill -TERM "$SANDBOX_PID" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$SANDBOX_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$SANDBOX_PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Deliveries kept for GET /deliveries: a few are enough here (the /stats counts stay exact).
PUSH_LOG_LEVEL=warning "$BIN/apns-sandbox" --port "$PORT" --admin-port "$ADMIN_PORT" --ca-out "$CA" --record-limit 1000 \
    >"$OUT_DIR/apns-sandbox.log" 2>&1 &
SANDBOX_PID=$!
for _ in $(seq 1 100); do
    [[ -s $CA ]] && curl -fsS "http://127.0.0.1:$ADMIN_PORT/healthz" >/dev/null 2>&1 && break
    kill -0 "$SANDBOX_PID" 2>/dev/null || {
        cat "$OUT_DIR/apns-sandbox.log" >&2
        die "apns-sandbox exited during start-up"
    }
    sleep 0.1
done
[[ -s $CA ]] && curl -fsS "http://127.0.0.1:$ADMIN_PORT/healthz" >/dev/null || die "apns-sandbox does not answer /healthz"
[[ $(readlink "/proc/$SANDBOX_PID/exe") == */apns-sandbox ]] || die "process $SANDBOX_PID is not apns-sandbox"
say "apns-sandbox $SANDBOX_PID on 127.0.0.1:$PORT (admin $ADMIN_PORT), CA $CA"
say "machine: $(nproc) cores, $(awk '/model name/ {sub(/.*: /, ""); print; exit}' /proc/cpuinfo); $(uptime)"

# MARK: runs

# utime + stime of a process, in seconds.
process_cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }

RESULTS="$OUT_DIR/results.tsv"
: >"$RESULTS"

# run TOOL K REPETITION: one measurement; appends a line to $RESULTS (tool, connections, json, client
# CPU s, client max RSS KB, sandbox CPU s, load average).
run() {
    local tool=$1 k=$2 rep=$3 count=$COUNT
    local out="$OUT_DIR/$tool-$k-$rep.json" times="$OUT_DIR/$tool-$k-$rep.time"
    local command=()
    case $tool in
        pushctl) command=("$BIN/pushctl" bench --endpoint "https://127.0.0.1:$PORT" --ca-file "$CA" --connections "$k") ;;
        ahc) command=("$AHC_BIN" --endpoint "https://127.0.0.1:$PORT" --ca-file "$CA" --connections "$k") ;;
        ahc-drain) command=("$AHC_BIN" --endpoint "https://127.0.0.1:$PORT" --ca-file "$CA" --connections "$k" --drain-body) ;;
        aioapns)
            count=$AIOAPNS_COUNT
            command=("$VENV/bin/python" "$BENCH_DIR/aioapns_bench.py" --host 127.0.0.1 --port "$PORT" --ca-file "$CA" --connections "$k")
            ;;
    esac
    command+=(--count "$count" --concurrency "$CONCURRENCY" --json)
    local load sandbox0 sandbox1 status=0
    load=$(awk '{print $1}' /proc/loadavg)
    sandbox0=$(process_cpu "$SANDBOX_PID")
    # `timeout --foreground` keeps the client in this script's process group, so Ctrl-C reaches it
    # (without it, timeout makes a group of its own and an interrupted run would go on in the
    # background). /usr/bin/time reports the client's CPU and peak RSS (timeout's own is negligible).
    /usr/bin/time -f '%U %S %M' -o "$times" timeout --foreground --kill-after=10 "$RUN_TIMEOUT" "${command[@]}" \
        >"$out" 2>"$OUT_DIR/$tool-$k-$rep.err" || status=$?
    sandbox1=$(process_cpu "$SANDBOX_PID")
    kill -0 "$SANDBOX_PID" 2>/dev/null || die "apns-sandbox died during $tool (see $OUT_DIR/apns-sandbox.log)"
    if ((status != 0)) || [[ ! -s $out ]]; then
        say "  $tool, $k connection(s), run $rep: failed (exit $status; see $OUT_DIR/$tool-$k-$rep.err)"
        return 0
    fi
    local client_cpu rss
    client_cpu=$(awk '{printf "%.2f", $1 + $2}' "$times")
    rss=$(awk '{print $3}' "$times")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tool" "$k" "$(tr -d '\n' <"$out")" "$client_cpu" "$rss" \
        "$(awk -v a="$sandbox0" -v b="$sandbox1" 'BEGIN {printf "%.2f", b - a}')" "$load" >>"$RESULTS"
    say "  $tool, $k connection(s), run $rep: $(python3 "$BENCH_DIR/table.py" --line "$out") (load $load)"
}

say "each tool: $CONCURRENCY in flight; $COUNT notifications ($AIOAPNS_COUNT for aioapns); best of $REPEAT"
for k in $CONNECTIONS; do
    for rep in $(seq 1 "$REPEAT"); do
        for tool in $TOOLS; do
            [[ $tool == aioapns && -n $AIOAPNS_SKIPPED ]] && continue
            run "$tool" "$k" "$rep"
        done
    done
done

say ""
say "apns-sandbox /stats: $(curl -fsS "http://127.0.0.1:$ADMIN_PORT/stats")"
say "after the runs: $(uptime)"
say ""
python3 "$BENCH_DIR/table.py" "$RESULTS"
[[ -n $AIOAPNS_SKIPPED ]] && say "aioapns skipped: $AIOAPNS_SKIPPED"
say "raw figures: $OUT_DIR"
