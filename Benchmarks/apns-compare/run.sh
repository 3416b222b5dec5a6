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
# First, the pinned comparison (DESIGN.md's target: >= 60% of h2load): Benchmarks/transport/run.sh with
# this build, one connection, ROUNDS rounds: in each, one apns-sandbox (--workers 1) pinned to one core,
# h2load (same path, headers, body and a valid ES256 provider token, -c 1 -m 1000) and then
# `pushctl bench --connections 1 --concurrency 1000` pinned to the other; it prints each rate, each
# round's pushctl/h2load and their median, CPU per notification of both sides, and the machine. It
# waits (up to APNS_BENCH_QUIET_WAIT s, checking every 60 s) for the 1-minute load average to fall to
# APNS_BENCH_QUIET_LOAD first, and says so when it gives up waiting. It prints figures; it asserts none.
#
# Environment: APNS_BENCH_COUNT (200000), APNS_BENCH_AIOAPNS_COUNT (50000: aioapns is ~10x slower),
# APNS_BENCH_CONCURRENCY (1000), APNS_BENCH_CONNECTIONS ("1 2"), APNS_BENCH_REPEAT (2),
# APNS_BENCH_TOOLS ("pushctl ahc ahc-drain aioapns"), APNS_BENCH_TIMEOUT (600: seconds one run may take),
# APNS_BENCH_SCRATCH (.build: the main package's SwiftPM scratch path), APNS_BENCH_SKIP_BUILD=1 (use
# the binaries already built), APNS_BENCH_PINNED (1; 0 skips the pinned comparison, `only` runs
# nothing else), APNS_BENCH_PINNED_ROUNDS (3), APNS_BENCH_PINNED_COUNT (200000 per run),
# APNS_BENCH_QUIET_LOAD (1.0), APNS_BENCH_QUIET_WAIT (1800; 0 does not wait).
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
PINNED=${APNS_BENCH_PINNED:-1}
PINNED_ROUNDS=${APNS_BENCH_PINNED_ROUNDS:-3}
PINNED_COUNT=${APNS_BENCH_PINNED_COUNT:-200000}
QUIET_LOAD=${APNS_BENCH_QUIET_LOAD:-1.0}
QUIET_WAIT=${APNS_BENCH_QUIET_WAIT:-1800}
BENCH_DIR="$ROOT/Benchmarks/apns-compare"
AHC_DIR="$BENCH_DIR/ahc-bench"
VENV="$ROOT/.local/apns-compare-venv"
AIOAPNS_VERSION=4.0
OUT_DIR="$ROOT/.local/apns-compare"

# shellcheck source=Benchmarks/lib.sh
. Benchmarks/lib.sh

for value in "$COUNT" "$AIOAPNS_COUNT" "$CONCURRENCY" "$REPEAT" "$RUN_TIMEOUT"; do
    [[ $value =~ ^[1-9][0-9]*$ ]] || die "counts, concurrency, repeat and timeout must be positive integers (got '$value')"
done
((REPEAT <= 10)) || die "APNS_BENCH_REPEAT must be at most 10"
[[ $PINNED == 0 || $PINNED == 1 || $PINNED == only ]] || die "APNS_BENCH_PINNED is 0, 1 or only (got '$PINNED')"
for value in "$PINNED_ROUNDS" "$PINNED_COUNT"; do
    [[ $value =~ ^[1-9][0-9]*$ ]] || die "APNS_BENCH_PINNED_ROUNDS and APNS_BENCH_PINNED_COUNT must be positive integers (got '$value')"
done
[[ $QUIET_LOAD =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "APNS_BENCH_QUIET_LOAD must be a number (got '$QUIET_LOAD')"
[[ $QUIET_WAIT =~ ^[0-9]+$ ]] || die "APNS_BENCH_QUIET_WAIT must be whole seconds (got '$QUIET_WAIT')"
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
    if [[ $PINNED != only && " $TOOLS " == *" ahc"* ]]; then
        say "building ahc-bench (release; its own package in $AHC_DIR)"
        build "$OUT_DIR/build-ahc-bench.log" --package-path "$AHC_DIR"
    fi
fi
BIN="$SCRATCH/release"
[[ -x $BIN/pushctl && -x $BIN/apns-sandbox ]] || die "$BIN/pushctl or $BIN/apns-sandbox is missing"
AHC_BIN="$AHC_DIR/.build/release/ahc-bench"
if [[ $PINNED != only && " $TOOLS " == *" ahc"* ]]; then
    [[ -x $AHC_BIN ]] || die "$AHC_BIN is missing"
fi

# MARK: pinned, against h2load

# wait_for_quiet: waits until the 1-minute load average is at most QUIET_LOAD, checking every 60 s for
# at most QUIET_WAIT s; goes on either way and says which.
wait_for_quiet() {
    local waited=0 load
    while true; do
        load=$(cut -d' ' -f1 /proc/loadavg)
        if awk -v l="$load" -v q="$QUIET_LOAD" 'BEGIN {exit !(l <= q)}'; then
            say "load average $load <= $QUIET_LOAD: measuring"
            return 0
        fi
        if ((waited >= QUIET_WAIT)); then
            say "load average still $load after ${waited} s (> $QUIET_LOAD): measuring anyway; read the ratios, not the rates"
            return 0
        fi
        say "load average $load > $QUIET_LOAD (another build?): checking again in 60 s ($waited of $QUIET_WAIT s waited)"
        sleep 60
        waited=$((waited + 60))
    done
}

if [[ $PINNED != 0 ]]; then
    say ""
    say "== pinned: pushctl bench against h2load, 1 connection, $CONCURRENCY in flight, one core each =="
    wait_for_quiet
    # The transport benchmark does exactly this with one build: sandbox on CPU 0, clients on CPU 1,
    # h2load then pushctl against the same sandbox in every round (Benchmarks/transport/README.md).
    if ! TRANSPORT_BENCH_BIN="$BIN" TRANSPORT_BENCH_CONNECTIONS=1 TRANSPORT_BENCH_ROUNDS="$PINNED_ROUNDS" \
        TRANSPORT_BENCH_COUNT="$PINNED_COUNT" TRANSPORT_BENCH_CONCURRENCY="$CONCURRENCY" bash "$ROOT/Benchmarks/transport/run.sh"; then
        say "pinned comparison: a run failed (see the ERROR lines above)"
    fi
    # One line to quote: every round's rates and ratio, and the median ratio.
    python3 - "$ROOT/.local/transport-bench/results.tsv" <<'EOF' || say "pinned: no results to summarise"
import statistics, sys

rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
rate = {(r[0], r[2]): float(r[4]) for r in rows if r[4] != "ERR"}
rounds = sorted({r[0] for r in rows}, key=int)
pairs = [(rate[(rd, "h2load")], rate[(rd, "pushctl")]) for rd in rounds if (rd, "h2load") in rate and (rd, "pushctl") in rate]
if pairs:
    ratios = [p / h for h, p in pairs]
    shown = ", ".join(f"{p:,.0f}/{h:,.0f} = {p / h:.2f}" for h, p in pairs)
    print(f"pinned, pushctl/h2load per round: {shown}; median {statistics.median(ratios):.2f}")
else:
    print("pinned: no round with both rates")
EOF
    [[ $PINNED == only ]] && exit 0
    say ""
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
trap 'stop_child "$SANDBOX_PID"' EXIT
trap 'exit 130' INT TERM
start_sandbox "$BIN" "$OUT_DIR" "$PORT" "$ADMIN_PORT"
[[ $(readlink "/proc/$SANDBOX_PID/exe") == */apns-sandbox ]] || die "process $SANDBOX_PID is not apns-sandbox"
say "apns-sandbox $SANDBOX_PID on 127.0.0.1:$PORT (admin $ADMIN_PORT), CA $CA"
machine_line

# MARK: runs

# utime + stime of a process, in seconds.
process_seconds() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }

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
    sandbox0=$(process_seconds "$SANDBOX_PID")
    # `timeout --foreground` keeps the client in this script's process group, so Ctrl-C reaches it
    # (without it, timeout makes a group of its own and an interrupted run would go on in the
    # background). /usr/bin/time reports the client's CPU and peak RSS (timeout's own is negligible).
    /usr/bin/time -f '%U %S %M' -o "$times" timeout --foreground --kill-after=10 "$RUN_TIMEOUT" "${command[@]}" \
        >"$out" 2>"$OUT_DIR/$tool-$k-$rep.err" || status=$?
    sandbox1=$(process_seconds "$SANDBOX_PID")
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
