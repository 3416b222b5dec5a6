#!/usr/bin/env bash
# The Grafana dashboards (deploy/grafana/*.json) and the Prometheus alert rules
# (deploy/prometheus/alerts.yml) against promtool and against the metrics the running services
# really export, as `make test` runs it after the Swift tests:
#
#   scripts/checks/observability.sh [--bin-dir DIR] [--write]
#
# 1. promtool check rules / test rules (deploy/prometheus/alerts.test.yml: a firing and a
#    non-firing case per alert) / check config (deploy/prometheus/prometheus.yml); every alert has
#    for:, a severity, summary, description and a runbook naming docs that exist; every dashboard is JSON Grafana
#    imports as it is (datasource variable, unique panel ids, a PromQL expression per target);
#    deploy/kubernetes/monitoring/prometheus-rule.yaml is alerts.yml as a PrometheusRule, byte for
#    byte (`--write` regenerates it from alerts.yml and does nothing else).
# 2. Every metric name (and every label selected on) in a dashboard or alert expression must be
#    exported by the real services: a private stack of --bin-dir's executables (default
#    .build/debug) on 127.0.0.1:8900-8910 (RabbitMQ 8900 with the rabbitmq_prometheus plugin on
#    8908, /metrics/per-object; it also derives 9900, 28900 and 29900-29910), devices registered
#    through push-ingest's API, pushes the sandbox answers 200, Unregistered, BadDeviceToken, 503 and
#    BadCertificate, one over a rate limit, one request that is not JSON; then every service's
#    /metrics is compared with the names. See scripts/checks/observability.py for the details.
#
# Installs Debian's prometheus package (for promtool) when promtool is missing (apt-get update
# first, a retry once; the package's own server is not started). Needs python3-yaml and
# python3-pika (scripts/install-deps.sh). Prints one line per check and `observability: N passed,
# N failed`; exits 1 when a check failed, 2 on a usage error, 3 when a prerequisite is missing.
# Everything it started is stopped at the end, also on failure or Ctrl-C. About 30 s.
# Environment: PUSH_LOCAL_DIR (where the servers' directories and logs go, default .local).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PROG=observability.sh
BIN_DIR=$ROOT/.build/debug
WRITE=()
while (($#)); do
    case $1 in
        --bin-dir) BIN_DIR=${2:?--bin-dir needs a directory}; shift 2 ;;
        --bin-dir=*) BIN_DIR=${1#*=}; shift ;;
        --write) WRITE=(--write); shift ;;
        -h | --help) sed -n '2,28s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "$PROG: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
# A relative --bin-dir is the caller's; from here on everything runs in the package root.
[[ -d $BIN_DIR ]] && BIN_DIR=$(cd "$BIN_DIR" && pwd)
cd "$ROOT"

PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3) || { echo "$PROG: python3 is missing" >&2; exit 3; }
"$PY" -c 'import yaml, pika' 2>/dev/null || {
    echo "$PROG: python3-yaml or python3-pika is not installed (run scripts/install-deps.sh)" >&2
    exit 3
}
if ((${#WRITE[@]})); then
    exec "$PY" scripts/checks/observability.py "${WRITE[@]}"
fi

# install_prometheus: Debian's prometheus package (it ships promtool), as scripts/install-deps.sh
# installs packages: lock timeout, update first, a retry once, and a policy-rc.d for the duration so
# the package's own Prometheus server is not started (without systemd, init.d would start it).
# shellcheck source=scripts/apt.sh
. "$ROOT/scripts/apt.sh"
install_prometheus() {
    local sudo=()
    ((EUID == 0)) || sudo=(sudo)
    local policy=/usr/sbin/policy-rc.d added="" rc=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\n# added by observability.sh for the duration of an install\nexit 101\n' |
            "${sudo[@]}" tee "$policy" >/dev/null
        "${sudo[@]}" chmod 755 "$policy"
        added=1
    fi
    apt_install prometheus || rc=$?
    [[ -n $added ]] && "${sudo[@]}" rm -f "$policy"
    # Belt and braces: a Prometheus server the install started anyway (its system user's processes).
    local pids
    pids=$(pgrep -u prometheus 2>/dev/null || true)
    # shellcheck disable=SC2086 # one PID per word
    [[ -n $pids ]] && "${sudo[@]}" kill -TERM $pids 2>/dev/null
    return "$rc"
}
if ! command -v promtool >/dev/null; then
    install_prometheus && command -v promtool >/dev/null || { echo "$PROG: cannot install promtool (Debian's prometheus)" >&2; exit 3; }
fi

LOCAL="${PUSH_LOCAL_DIR:-$ROOT/.local}"
PIDS="$LOCAL/observability/pids"
# cleanup: whatever observability.py started and did not stop (it stops everything itself; this is
# for a Python that was killed): its processes by PID, if they still run one of --bin-dir's
# executables, then the private RabbitMQ and Redis.
cleanup() {
    local pid exe bin
    bin=$(cd "$BIN_DIR" 2>/dev/null && pwd -P || echo "$BIN_DIR")
    # shellcheck disable=SC2094 # read from, then removed
    if [[ -f $PIDS ]]; then
        while read -r pid; do
            [[ $pid =~ ^[0-9]+$ ]] || continue
            exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
            [[ -n $exe && $exe == "$bin"/* ]] || continue
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 50); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.2
            done
            kill -KILL "$pid" 2>/dev/null || true
        done <"$PIDS"
        rm -f "$PIDS"
    fi
    PUSH_QUIET=1 bash scripts/rabbitmq.sh stop --name observability --port 8900 >/dev/null 2>&1 || true
    PUSH_QUIET=1 bash scripts/redis.sh stop --name observability --port 8901 >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

rc=0
# --foreground: Ctrl-C reaches the Python, which stops the stack itself; 200 s bounds a hung run.
timeout --foreground --signal=TERM --kill-after=20 200 "$PY" scripts/checks/observability.py --bin-dir "$BIN_DIR" || rc=$?
exit "$rc"
