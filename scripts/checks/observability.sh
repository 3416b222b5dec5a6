#!/usr/bin/env bash
# The Grafana dashboards (deploy/grafana/*.json) and the Prometheus alert rules
# (deploy/prometheus/alerts.yml) against promtool and against the metrics the running services
# really export, as `make test` runs it after the Swift tests: promtool check/test rules and check
# config, every alert annotated with a runbook that exists, every dashboard importable,
# deploy/kubernetes/monitoring/prometheus-rule.yaml equal to alerts.yml as a PrometheusRule; then a
# private stack on 127.0.0.1:8900-8910 (RabbitMQ 8900 with rabbitmq_prometheus on 8908; it also
# derives 9900, 28900 and 29900-29910) whose traffic makes every labelled series appear, each
# service's /metrics compared with every name and label the dashboards and alerts use.
# tests/system/test_observability.py says what each check compares with. About 35 s.
#
#   scripts/checks/observability.sh [--bin-dir DIR] [pytest arguments, e.g. -k file]
#   scripts/checks/observability.sh --write    regenerates the PrometheusRule from alerts.yml, nothing else
#
# Installs Debian's prometheus package (for promtool; its own server is not started) when missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PROG=observability.sh
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3) || { echo "$PROG: python3 is missing" >&2; exit 3; }
for arg in "$@"; do
    [[ $arg == --write ]] && exec "$PY" "$ROOT/tests/system/test_observability.py" --write
done

# shellcheck source=scripts/apt.sh
. "$ROOT/scripts/apt.sh"
if ! command -v promtool >/dev/null; then
    # A policy-rc.d for the duration, so the package's own Prometheus server is not started (without
    # systemd, init.d would start it); one the install started anyway is stopped.
    sudo=()
    ((EUID == 0)) || sudo=(sudo)
    policy=/usr/sbin/policy-rc.d added=""
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\n# added by observability.sh for the duration of an install\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
        "${sudo[@]}" chmod 755 "$policy"
        added=1
    fi
    apt_install prometheus || true
    [[ -n $added ]] && "${sudo[@]}" rm -f "$policy"
    pids=$(pgrep -u prometheus 2>/dev/null || true)
    # shellcheck disable=SC2086 # one PID per word
    [[ -n $pids ]] && "${sudo[@]}" kill -TERM $pids 2>/dev/null
    command -v promtool >/dev/null || { echo "$PROG: cannot install promtool (Debian's prometheus)" >&2; exit 3; }
fi
exec bash "$ROOT/scripts/pytest.sh" observability tests/system/test_observability.py "$@"
