#!/usr/bin/env bash
# A/B benchmark of the HTTP/2 transport (Sources/HTTP2Transport: nghttp2 + OpenSSL) that the APNs
# client (`pushctl bench`) and the APNs-compatible server (`apns-sandbox`) share, between a new build
# and an optional baseline build. See Benchmarks/transport/README.md.
#
#   bash Benchmarks/transport/run.sh [--bin DIR] [--baseline-bin DIR] [--rounds N] [--count N]
#                                    [--connections "1 2"]        (or: make bench-transport)
#
# Builds nothing: the directories must already hold release builds of apns-sandbox and pushctl. For
# each round, and for each build in turn (baseline, new, baseline, new, … so that drift in machine
# load hits both alike), it starts that build's apns-sandbox (one worker thread, pinned to the server
# CPU, a private loopback port, generated CA) and, for each connection count K, runs against it:
#   h2load   (nghttp2-client; pinned to the client CPU) -n COUNT -c K -m CONCURRENCY: the same POST
#            /3/device/<token> (1,000 tokens cycled), headers, body and ES256 provider token as
#            pushctl: the server-side reference, with a client that is not ours;
#   pushctl  bench --count COUNT --concurrency CONCURRENCY --connections K (pinned to the client CPU).
# A run counts only when every request was answered 200 (h2load's counters, pushctl's `accepted` and
# `errors`, and the sandbox's own GET /stats by_status delta); otherwise it is reported as an error,
# not as a rate. Prints per build the rates per round and their median, pushctl/h2load (per round,
# same sandbox, seconds apart), CPU µs per notification of client and sandbox, the share of the
# machine other processes used during the runs, and new/baseline of the medians. Stops everything it
# started (trap on EXIT). Raw outputs stay in .local/transport-bench/.
#
# Exit status: 0 when every run answered only 200s; 1 when a run failed (the table is printed anyway);
# 2 on a usage error.
#
# Environment (flags override): TRANSPORT_BENCH_BIN (default: `swift build -c release
# --show-bin-path`, which prints the path without building), TRANSPORT_BENCH_BASELINE_BIN (unset: no
# A/B, the new build alone), TRANSPORT_BENCH_ROUNDS (3), TRANSPORT_BENCH_COUNT (200000 per run),
# TRANSPORT_BENCH_CONNECTIONS ("1 2"), TRANSPORT_BENCH_CONCURRENCY (1000), TRANSPORT_BENCH_WORKERS
# (1: the sandbox's event-loop threads), TRANSPORT_BENCH_SERVER_CPUS (0), TRANSPORT_BENCH_CLIENT_CPUS
# (1) (taskset lists; pinning is skipped on a 1-core machine), TRANSPORT_BENCH_PORT (7841),
# TRANSPORT_BENCH_ADMIN_PORT (7842), TRANSPORT_BENCH_TIMEOUT (300: seconds one run may take).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

BIN=${TRANSPORT_BENCH_BIN:-}
BASELINE_BIN=${TRANSPORT_BENCH_BASELINE_BIN:-}
ROUNDS=${TRANSPORT_BENCH_ROUNDS:-3}
COUNT=${TRANSPORT_BENCH_COUNT:-200000}
CONNECTIONS=${TRANSPORT_BENCH_CONNECTIONS:-1 2}
CONCURRENCY=${TRANSPORT_BENCH_CONCURRENCY:-1000}
WORKERS=${TRANSPORT_BENCH_WORKERS:-1}
SERVER_CPUS=${TRANSPORT_BENCH_SERVER_CPUS:-0}
CLIENT_CPUS=${TRANSPORT_BENCH_CLIENT_CPUS:-1}
PORT=${TRANSPORT_BENCH_PORT:-7841}
ADMIN_PORT=${TRANSPORT_BENCH_ADMIN_PORT:-7842}
RUN_TIMEOUT=${TRANSPORT_BENCH_TIMEOUT:-300}
OUT_DIR="$ROOT/.local/transport-bench"
VENV="$ROOT/.local/transport-bench-venv"
H2LOAD=/usr/bin/h2load
TOPIC=com.example.bench
# pushctl bench's payload (Sources/pushctl/BenchCommand.swift), so both clients send the same bytes.
PAYLOAD='{"aps":{"alert":{"title":"Benchmark","body":"Hello from pushctl bench"},"sound":"default"}}'

# shellcheck source=Benchmarks/lib.sh
. Benchmarks/lib.sh
usage() { sed -n '2,32s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

while (($#)); do
    case $1 in
        --bin) BIN=${2:?--bin needs a directory}; shift 2 ;;
        --baseline-bin) BASELINE_BIN=${2:?--baseline-bin needs a directory}; shift 2 ;;
        --rounds) ROUNDS=${2:?--rounds needs a number}; shift 2 ;;
        --count) COUNT=${2:?--count needs a number}; shift 2 ;;
        --connections) CONNECTIONS=${2:?--connections needs a list}; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done

for n in ROUNDS COUNT CONCURRENCY WORKERS RUN_TIMEOUT; do
    [[ ${!n} =~ ^[1-9][0-9]*$ ]] || die "$n must be a positive whole number (got '${!n}')"
done
((ROUNDS <= 20)) || die "TRANSPORT_BENCH_ROUNDS must be at most 20"
for k in $CONNECTIONS; do
    if ! [[ $k =~ ^[1-9][0-9]*$ ]] || ((k > 64)); then die "TRANSPORT_BENCH_CONNECTIONS holds 1–64 (got '$k')"; fi
done
[[ -n ${CONNECTIONS// /} ]] || die "TRANSPORT_BENCH_CONNECTIONS is empty"
for p in PORT ADMIN_PORT; do
    if ! [[ ${!p} =~ ^[0-9]+$ ]] || ((${!p} < 1024 || ${!p} > 65535)); then die "$p must be 1024–65535"; fi
done
[[ $PORT != "$ADMIN_PORT" ]] || die "TRANSPORT_BENCH_PORT and TRANSPORT_BENCH_ADMIN_PORT must differ"

# MARK: binaries and tools

if [[ -z $BIN ]]; then
    # --show-bin-path only prints the path; it builds nothing.
    BIN=$(timeout 120 swift build -c release --show-bin-path 2>/dev/null) || BIN="$ROOT/.build/release"
fi
check_bin() {
    local dir=$1 what=$2 product
    [[ -d $dir ]] || die "$what: $dir is not a directory (build first: swift build -c release --product apns-sandbox && swift build -c release --product pushctl)"
    for product in apns-sandbox pushctl; do
        [[ -x $dir/$product ]] || die "$what: $dir/$product is missing (build it: swift build -c release --product $product; this script builds nothing)"
    done
}
check_bin "$BIN" "TRANSPORT_BENCH_BIN"
BIN=$(cd "$BIN" && pwd)
BUILDS=(new)
if [[ -n $BASELINE_BIN ]]; then
    check_bin "$BASELINE_BIN" "TRANSPORT_BENCH_BASELINE_BIN"
    BASELINE_BIN=$(cd "$BASELINE_BIN" && pwd)
    [[ $BASELINE_BIN != "$BIN" ]] || say "note: the baseline and the new build are the same directory (an A/A run)"
    BUILDS=(baseline new)
fi
# bin_of BUILD: the directory the runs use, a snapshot (below) of that build's binaries.
bin_of() { say "$OUT_DIR/bin/$1"; }

# h2load comes with nghttp2-client, which scripts/install-deps.sh installs.
if [[ ! -x $H2LOAD ]]; then
    say "h2load is missing; installing nghttp2-client (scripts/install-deps.sh)"
    bash scripts/install-deps.sh
    [[ -x $H2LOAD ]] || die "$H2LOAD is still missing (Debian package nghttp2-client)"
fi
[[ -x /usr/bin/time ]] || die "/usr/bin/time is missing (Debian package 'time')"
command -v taskset >/dev/null || die "taskset is missing (Debian package util-linux)"
command -v curl >/dev/null || die "curl is missing"

# The provider token for h2load: python3 with `cryptography`, or a venv under .local with it.
PYTHON=python3
if ! "$PYTHON" -c 'import cryptography' 2>/dev/null; then
    if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" -c 'import cryptography' 2>/dev/null; then
        say "installing the Python package cryptography into $VENV (to mint h2load's ES256 provider token)"
        mkdir -p "$ROOT/.local"
        { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q cryptography; } >"$ROOT/.local/transport-bench-pip.log" 2>&1 ||
            die "pip could not install cryptography (see $ROOT/.local/transport-bench-pip.log)"
    fi
    PYTHON="$VENV/bin/python"
fi

# Pinning: the sandbox on SERVER_CPUS, every client on CLIENT_CPUS (README: why).
SERVER_PIN=()
CLIENT_PIN=()
if (($(nproc) >= 2)); then
    SERVER_PIN=(taskset -c "$SERVER_CPUS")
    CLIENT_PIN=(taskset -c "$CLIENT_CPUS")
    taskset -c "$SERVER_CPUS" true 2>/dev/null || die "taskset cannot use CPUs '$SERVER_CPUS'"
    taskset -c "$CLIENT_CPUS" true 2>/dev/null || die "taskset cannot use CPUs '$CLIENT_CPUS'"
else
    say "note: 1 CPU; the sandbox and the clients are not pinned (they share the core)"
fi

rm -rf "$OUT_DIR"
mkdir -p "$OUT_DIR"

# Snapshot the binaries: a rebuild of the source directory during the run (another build in the same
# tree) must not swap one build for another between rounds.
for build in "${BUILDS[@]}"; do
    if [[ $build == baseline ]]; then src=$BASELINE_BIN; else src=$BIN; fi
    mkdir -p "$OUT_DIR/bin/$build"
    cp -p "$src/apns-sandbox" "$src/pushctl" "$OUT_DIR/bin/$build/"
done
# describe DIR: where a build comes from and when its binaries were built.
describe() { say "$1 (apns-sandbox $(date -r "$1/apns-sandbox" '+%F %T'), pushctl $(date -r "$1/pushctl" '+%F %T'))"; }

# MARK: request material (the same for every run)

printf '%s' "$PAYLOAD" >"$OUT_DIR/body.json"
# 1,000 random device tokens, as pushctl bench cycles through; h2load takes the URIs in turn.
"$PYTHON" -c 'import secrets, sys
for _ in range(1000): print(f"https://127.0.0.1:{sys.argv[1]}/3/device/{secrets.token_hex(32)}")' "$PORT" >"$OUT_DIR/uris.txt"
# An ES256 JWT as a provider mints it: header {alg, kid}, claims {iss, iat}, raw r||s signature with
# a throw-away P-256 key. apns-sandbox without --public-key accepts any well-formed one under an hour
# old (Sources/APNsSandbox/ProviderTokenVerifier.swift); one token serves the whole run (< 1 h).
JWT=$("$PYTHON" - <<'EOF'
import base64, json, time
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

key = ec.generate_private_key(ec.SECP256R1())
header = b64(json.dumps({"alg": "ES256", "kid": "BENCH00001"}, separators=(",", ":")).encode())
claims = b64(json.dumps({"iss": "TEAM000001", "iat": int(time.time())}, separators=(",", ":")).encode())
r, s = decode_dss_signature(key.sign(f"{header}.{claims}".encode(), ec.ECDSA(hashes.SHA256())))
print(f"{header}.{claims}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}")
EOF
)
[[ $JWT =~ ^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$ ]] || die "could not mint the provider token"

# MARK: processes

SANDBOX_PID=""
# stop_sandbox: SIGTERM (the sandbox drains and exits 0), up to 10 s, then SIGKILL; only our child.
stop_sandbox() {
    local pid=$SANDBOX_PID
    SANDBOX_PID=""
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        say "run.sh: apns-sandbox $pid did not exit within 10 s of SIGTERM; SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}
trap stop_sandbox EXIT
trap 'exit 130' INT TERM

# start_build_sandbox BUILD TAG: that build's apns-sandbox on 127.0.0.1:PORT, ready (/healthz and the CA).
start_build_sandbox() {
    local build=$1 tag=$2 dir
    dir=$(bin_of "$build")
    { ! port_open "$PORT" && ! port_open "$ADMIN_PORT"; } || die "127.0.0.1:$PORT or :$ADMIN_PORT is in use (set TRANSPORT_BENCH_PORT / TRANSPORT_BENCH_ADMIN_PORT)"
    rm -f "$OUT_DIR/ca.pem"
    PUSH_LOG_LEVEL=warning "${SERVER_PIN[@]}" "$dir/apns-sandbox" --port "$PORT" --admin-port "$ADMIN_PORT" \
        --ca-out "$OUT_DIR/ca.pem" --workers "$WORKERS" --record-limit 1000 \
        >"$OUT_DIR/apns-sandbox-$tag.log" 2>&1 &
    SANDBOX_PID=$!
    for _ in $(seq 1 150); do
        [[ -s $OUT_DIR/ca.pem ]] && curl -fsS "http://127.0.0.1:$ADMIN_PORT/healthz" >/dev/null 2>&1 && break
        kill -0 "$SANDBOX_PID" 2>/dev/null || {
            cat "$OUT_DIR/apns-sandbox-$tag.log" >&2
            die "apns-sandbox ($build) exited during start-up"
        }
        sleep 0.1
    done
    { [[ -s $OUT_DIR/ca.pem ]] && curl -fsS "http://127.0.0.1:$ADMIN_PORT/healthz" >/dev/null 2>&1; } ||
        die "apns-sandbox ($build) is not ready within 15 s (see $OUT_DIR/apns-sandbox-$tag.log)"
    [[ $(readlink "/proc/$SANDBOX_PID/exe") == "$(readlink -f "$dir/apns-sandbox")" ]] || die "process $SANDBOX_PID is not $dir/apns-sandbox"
}

# MARK: measurement

HZ=$(getconf CLK_TCK)
# The sandbox's answers so far by status, as "200=N 403=M …".
sandbox_status() {
    curl -fsS --max-time 10 "http://127.0.0.1:$ADMIN_PORT/stats" |
        "$PYTHON" -c 'import json, sys; print(" ".join(f"{k}={v}" for k, v in sorted(json.load(sys.stdin)["by_status"].items())))'
}

RESULTS="$OUT_DIR/results.tsv"
: >"$RESULTS"
FAILED=0
SANDBOX_DIED=0

# run ROUND BUILD TOOL K: one measurement against the running sandbox; appends a line to $RESULTS:
# round, build, tool, K, rate (or ERR), p99 ms, client CPU s, sandbox CPU s, other CPU %, load, note.
run() {
    local round=$1 build=$2 tool=$3 k=$4 dir tag out
    dir=$(bin_of "$build")
    tag="r$round-$build-$tool-c$k"
    out="$OUT_DIR/$tag.out"
    local command=()
    case $tool in
        h2load)
            command=("$H2LOAD" -n "$COUNT" -c "$k" -t 1 -m "$CONCURRENCY" -d "$OUT_DIR/body.json" -i "$OUT_DIR/uris.txt"
                -H "apns-topic: $TOPIC" -H "apns-push-type: alert" -H "apns-priority: 10" -H "authorization: bearer $JWT")
            ;;
        pushctl)
            command=("$dir/pushctl" bench --endpoint "https://127.0.0.1:$PORT" --ca-file "$OUT_DIR/ca.pem"
                --count "$COUNT" --concurrency "$CONCURRENCY" --connections "$k" --topic "$TOPIC" --json)
            ;;
    esac
    local load status=0 before after s0 s1 m0 m1 t0 t1
    load=$(cut -d' ' -f1 /proc/loadavg)
    before=$(sandbox_status)
    s0=$(process_cpu "$SANDBOX_PID") m0=$(machine_busy) t0=$(date +%s%N)
    # `timeout --foreground` keeps the client in our process group (Ctrl-C reaches it); /usr/bin/time
    # reports its CPU.
    /usr/bin/time -f '%U %S' -o "$OUT_DIR/$tag.time" timeout --foreground --kill-after=10 "$RUN_TIMEOUT" \
        "${CLIENT_PIN[@]}" "${command[@]}" >"$out" 2>"$OUT_DIR/$tag.err" || status=$?
    t1=$(date +%s%N)
    if ! kill -0 "$SANDBOX_PID" 2>/dev/null; then
        printf '%s\t%s\t%s\t%s\tERR\t-\t-\t-\t-\t%s\tapns-sandbox died (see %s)\n' "$round" "$build" "$tool" "$k" "$load" \
            "$OUT_DIR/apns-sandbox-r$round-$build.log" >>"$RESULTS"
        say "  round $round $build $tool -c $k: ERROR apns-sandbox died"
        tail -20 "$OUT_DIR/apns-sandbox-r$round-$build.log" >&2 || true
        FAILED=1
        SANDBOX_DIED=1
        return 0
    fi
    s1=$(process_cpu "$SANDBOX_PID") m1=$(machine_busy)
    after=$(sandbox_status)
    local client_s sandbox_s other_pct wall_ticks
    client_s=$(awk '{printf "%.2f", $1 + $2}' "$OUT_DIR/$tag.time" 2>/dev/null || say "-")
    [[ -n $client_s ]] || client_s="-"
    sandbox_s=$(awk -v a="$s0" -v b="$s1" -v hz="$HZ" 'BEGIN {printf "%.2f", (b - a) / hz}')
    # What the rest of the machine (not the sandbox, not the client) used, in % of one core.
    wall_ticks=$(awk -v a="$t0" -v b="$t1" -v hz="$HZ" 'BEGIN {printf "%.2f", (b - a) / 1e9 * hz}')
    other_pct=$(awk -v m="$((m1 - m0))" -v s="$((s1 - s0))" -v c="$client_s" -v hz="$HZ" -v w="$wall_ticks" \
        'BEGIN {o = m - s - (c == "-" ? 0 : c * hz); if (o < 0) o = 0; printf "%.0f", (w > 0 ? o * 100 / w : 0)}')
    local parsed
    parsed=$("$PYTHON" - "$tool" "$out" "$COUNT" "$status" "$before" "$after" <<'EOF'
import json, re, sys

tool, path, count, status, before, after = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
text = open(path, errors="replace").read()
b = dict(p.split("=") for p in before.split())
a = dict(p.split("=") for p in after.split())
delta = {k: int(a.get(k, 0)) - int(b.get(k, 0)) for k in set(a) | set(b)}
delta = {k: v for k, v in delta.items() if v}
ok200 = delta.get("200", 0)
others = {k: v for k, v in delta.items() if k != "200"}
problems = []
if status:
    problems.append(f"exit {status}" + (" (timeout)" if status == 124 else ""))
if others:
    problems.append("sandbox answered " + ", ".join(f"{v}x{k}" for k, v in sorted(others.items())))
rate = p99 = None
if tool == "h2load":
    m = re.search(r"finished in [^,]+, ([0-9.]+) req/s", text)
    rate = float(m.group(1)) if m else None
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", text)
    if m:
        done, succeeded, failed, errored, timeout = (int(m.group(i)) for i in (3, 4, 5, 6, 7))
        if succeeded != count or failed or errored or timeout:
            problems.append(f"h2load: {succeeded} succeeded, {failed} failed, {errored} errored, {timeout} timeout of {count}")
    else:
        problems.append("no h2load summary")
    m = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
    if m and int(m.group(1)) != count:
        problems.append(f"h2load status codes: {m.group(1)} 2xx, {m.group(2)} 3xx, {m.group(3)} 4xx, {m.group(4)} 5xx")
    if ok200 != count:
        problems.append(f"sandbox counted {ok200} 200s for {count} requests")
else:
    try:
        j = json.loads(text.strip().splitlines()[-1])
        rate, p99 = j["notifications_per_second"], j["p99_ms"]
        if j["accepted"] != count or j["errors"]:
            problems.append(f"pushctl: {j['accepted']} accepted of {count}, errors {json.dumps(j['errors'], sort_keys=True)}")
    except Exception:
        problems.append("no pushctl JSON")
    # pushctl sends one warm-up notification before the measured ones.
    if ok200 not in (count, count + 1):
        problems.append(f"sandbox counted {ok200} 200s for {count} (+1 warm-up) notifications")
if problems or rate is None:
    print("ERR\t-\t" + "; ".join(problems or ["no rate"]))
else:
    print(f"{rate:.0f}\t{p99:.2f}\t" if p99 is not None else f"{rate:.0f}\t-\t")
EOF
    )
    local rate p99 note
    IFS=$'\t' read -r rate p99 note <<<"$parsed"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$build" "$tool" "$k" "$rate" "$p99" "$client_s" \
        "$sandbox_s" "$other_pct" "$load" "${note:-}" >>"$RESULTS"
    if [[ $rate == ERR ]]; then
        FAILED=1
        say "  round $round $build $tool -c $k: ERROR $note (load $load; output $out, $OUT_DIR/$tag.err)"
    else
        say "  round $round $build $tool -c $k: $rate/s$([[ $p99 != - ]] && printf ', p99 %s ms' "$p99"), CPU client ${client_s}s sandbox ${sandbox_s}s, others ${other_pct}% of a core (load $load)"
    fi
}

# MARK: rounds

say "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(awk '{printf "%d MB", $2 / 1024}' <(grep MemTotal /proc/meminfo))"
say "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
say "new: $(describe "$BIN")"
[[ -n $BASELINE_BIN ]] && say "baseline: $(describe "$BASELINE_BIN")"
say "per run: $COUNT requests, $CONCURRENCY in flight, connections: $CONNECTIONS; $ROUNDS round(s), builds interleaved"
if ((${#SERVER_PIN[@]})); then
    say "pinning: apns-sandbox --workers $WORKERS on CPU $SERVER_CPUS, h2load / pushctl on CPU $CLIENT_CPUS"
fi
START_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)

for round in $(seq 1 "$ROUNDS"); do
    for build in "${BUILDS[@]}"; do
        SANDBOX_DIED=0
        start_build_sandbox "$build" "r$round-$build"
        for k in $CONNECTIONS; do
            run "$round" "$build" h2load "$k"
            if ((SANDBOX_DIED)); then break; fi
            run "$round" "$build" pushctl "$k"
            if ((SANDBOX_DIED)); then break; fi
        done
        stop_sandbox
    done
done
END_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)

# MARK: table

say ""
"$PYTHON" - "$RESULTS" "$COUNT" "$START_LOAD" "$END_LOAD" <<'EOF'
import statistics, sys

path, count, start_load, end_load = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = [line.rstrip("\n").split("\t") for line in open(path) if line.strip()]
builds = [b for b in ("baseline", "new") if any(r[1] == b for r in rows)]
rounds = sorted({int(r[0]) for r in rows})
ks = sorted({int(r[3]) for r in rows})
cell = {(int(r[0]), r[1], r[2], int(r[3])): r for r in rows}

def rate(rd, b, tool, k):
    r = cell.get((rd, b, tool, k))
    return float(r[4]) if r and r[4] != "ERR" else None

def cpu_us(rd, b, tool, k, column):
    r = cell.get((rd, b, tool, k))
    if not r or r[4] == "ERR" or r[column] == "-":
        return None
    return float(r[column]) * 1e6 / count

def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None

def fmt(v, digits=0):
    return "-" if v is None else f"{v:,.{digits}f}"

def ratio(a, b):
    return a / b if a is not None and b else None

def show(title, table):
    widths = [max(len(str(row[i])) for row in table) for i in range(len(table[0]))]
    print(title)
    for n, row in enumerate(table):
        print("  " + "  ".join(str(c).ljust(widths[i]) if i == 0 else str(c).rjust(widths[i]) for i, c in enumerate(row)))
        if n == 0:
            print("  " + "  ".join("-" * w for w in widths))
    print()

medians = {}
for b in builds:
    table = [["", *[f"round {rd}" for rd in rounds], "median"]]
    for k in ks:
        for label, tool, col, digits in (
            (f"h2load req/s, {k} conn", "h2load", None, 0),
            (f"pushctl notifications/s, {k} conn", "pushctl", None, 0),
            (f"pushctl/h2load, {k} conn", "ratio", None, 2),
            (f"pushctl p99 ms, {k} conn", "p99", None, 2),
            (f"h2load: sandbox CPU us/req, {k} conn", "h2load", 7, 2),
            (f"h2load: h2load CPU us/req, {k} conn", "h2load", 6, 2),
            (f"pushctl: sandbox CPU us/notif, {k} conn", "pushctl", 7, 2),
            (f"pushctl: pushctl CPU us/notif, {k} conn", "pushctl", 6, 2),
        ):
            if tool == "ratio":
                values = [ratio(rate(rd, b, "pushctl", k), rate(rd, b, "h2load", k)) for rd in rounds]
            elif tool == "p99":
                values = []
                for rd in rounds:
                    r = cell.get((rd, b, "pushctl", k))
                    values.append(float(r[5]) if r and r[4] != "ERR" and r[5] != "-" else None)
            elif col is None:
                values = [rate(rd, b, tool, k) for rd in rounds]
            else:
                values = [cpu_us(rd, b, tool, k, col) for rd in rounds]
            m = median(values)
            medians[(b, label)] = m
            medians[(b, label, "rounds")] = values
            shown = []
            for rd, v in zip(rounds, values):
                r = cell.get((rd, b, "pushctl" if tool in ("ratio", "p99") else tool, k))
                shown.append("ERR" if v is None and r and r[4] == "ERR" else fmt(v, digits))
            table.append([label, *shown, fmt(m, digits)])
    others = [r for r in rows if r[1] == b and r[8] not in ("-", "")]
    table.append(["others' CPU during runs, % of a core (median)", *[""] * len(rounds),
                  fmt(median([float(r[8]) for r in others]), 0)])
    show(f"== {b} ==", table)

if len(builds) == 2:
    table = [["median of rounds", "baseline", "new", "new/baseline", "paired rounds new/baseline (median)"]]
    for k in ks:
        for label, digits in ((f"h2load req/s, {k} conn", 0), (f"pushctl notifications/s, {k} conn", 0),
                              (f"pushctl/h2load, {k} conn", 2), (f"pushctl p99 ms, {k} conn", 2),
                              (f"h2load: sandbox CPU us/req, {k} conn", 2),
                              (f"pushctl: sandbox CPU us/notif, {k} conn", 2),
                              (f"pushctl: pushctl CPU us/notif, {k} conn", 2)):
            base, new = medians[("baseline", label)], medians[("new", label)]
            paired = median([ratio(n, bb) for bb, n in zip(medians[("baseline", label, "rounds")], medians[("new", label, "rounds")])])
            table.append([label, fmt(base, digits), fmt(new, digits), fmt(ratio(new, base), 3), fmt(paired, 3)])
    show("== new / baseline ==", table)

errors = [r for r in rows if r[4] == "ERR"]
for r in errors:
    print(f"ERROR round {r[0]} {r[1]} {r[2]} {r[3]} conn: {r[10]}")
print(f"load average: {start_load} at start, {end_load} at the end")
EOF
say "raw figures: $OUT_DIR"
exit "$FAILED"
