#!/bin/sh
# The image's HEALTHCHECK (installed as /usr/local/bin/push-healthcheck): GET /healthz on the admin
# listener of the program this container runs (PID 1), so one image serves every service.
#
#   push-ingest/-render/-send/-feedback: PUSH_ADMIN_PORT, else PUSH_HTTP_PORT, else the service's
#     default (8080, 9101, 9102, 9103); the environment only (not PUSH_CONFIG_FILE);
#   push-console: PUSH_HTTP_PORT, else 8090 (no admin port: /healthz, /readyz and /metrics are
#     served on the console's own port);
#   apns-sandbox: its --admin-port (default 2198);
#   anything else (pushctl, a one-shot shell): healthy, there is nothing to ask.
# /healthz answers whether the process runs (liveness); readiness is /readyz, for the orchestrator.
# PUSH_HEALTHCHECK_CMDLINE names another cmdline file (scripts/checks/containers.sh tests it so).
set -eu
cmdline=${PUSH_HEALTHCHECK_CMDLINE:-/proc/1/cmdline}
program=$(basename "$(tr '\0' '\n' <"$cmdline" | head -n 1)")
case $program in
    push-ingest) port=${PUSH_ADMIN_PORT:-${PUSH_HTTP_PORT:-8080}} ;;
    push-render) port=${PUSH_ADMIN_PORT:-${PUSH_HTTP_PORT:-9101}} ;;
    push-send) port=${PUSH_ADMIN_PORT:-${PUSH_HTTP_PORT:-9102}} ;;
    push-feedback) port=${PUSH_ADMIN_PORT:-${PUSH_HTTP_PORT:-9103}} ;;
    push-console) port=${PUSH_HTTP_PORT:-8090} ;;
    apns-sandbox)
        port=$(tr '\0' '\n' <"$cmdline" | sed -n -e '/^--admin-port$/{n;p;q;}' -e 's/^--admin-port=//p')
        port=${port:-2198}
        ;;
    *) exit 0 ;;
esac
exec curl --fail --silent --show-error --max-time 4 --output /dev/null "http://127.0.0.1:$port/healthz"
