#!/usr/bin/env bash
# tier: check (the long tier: `make check`, which CI runs after `make test`; see scripts/run-checks.sh)
# push-ingest against its own OpenAPI document (openapi.yaml), as `make check` runs it after the
# Swift tests: the document is valid OpenAPI 3.1 (openapi-spec-validator), its examples match its
# schemas, Sources/PushIngest/OpenAPISpec.swift embeds it unchanged, and the --bin-dir push-ingest
# serves it at GET /openapi.yaml and answers as it says: schemathesis generates requests for every
# operation (examples, boundary cases, fuzzing, stateful sequences; about 50 per operation,
# deterministic) with schemathesis' own default checks, all of them (no 5xx; every status, content
# type, header and body documented; valid data accepted, invalid data refused; ...).
#
#   scripts/checks/openapi.sh [--bin-dir DIR] [--max-examples N] [--keep]
#
# --bin-dir: the executables (default .build/debug); --max-examples: per operation (default 50);
# --keep: leave the stack's logs and schemathesis' report in .local/openapi/ (they are kept on
# failure anyway).
# A private stack on 127.0.0.1: RabbitMQ 8960 (it derives 9960, 28960, 29960-29970) and Redis 8961
# (scripts/rabbitmq.sh, scripts/redis.sh, instance `openapi`), push-ingest on 8962 with an apps file
# of its own (credential `none` and /push_token enabled, so every operation can succeed, and an API
# key schemathesis presents). Installs what is missing first: python3-venv with apt (apt-get update
# first, a retry once), and the pinned tools of scripts/checks/openapi-requirements.txt from PyPI
# into the venv .local/venv-openapi (reused while the pins are the same). Prints one line per check
# and `openapi: N passed, N failed`; exits 1 when a check failed, 2 on a usage error, 3 when a
# prerequisite is missing or the stack cannot start. Everything it started is stopped at the end,
# also on failure or Ctrl-C. About a minute once installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PROG=openapi.sh
BIN_DIR=.build/debug
MAX_EXAMPLES=50
KEEP=0
while (($#)); do
    case $1 in
        --bin-dir) BIN_DIR=${2:?--bin-dir needs a directory}; shift 2 ;;
        --bin-dir=*) BIN_DIR=${1#*=}; shift ;;
        --max-examples) MAX_EXAMPLES=${2:?--max-examples needs a number}; shift 2 ;;
        --max-examples=*) MAX_EXAMPLES=${1#*=}; shift ;;
        --keep) KEEP=1; shift ;;
        -h | --help) sed -n '2,23s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "$PROG: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $MAX_EXAMPLES =~ ^[1-9][0-9]{0,3}$ ]] || { echo "$PROG: --max-examples must be 1-9999" >&2; exit 2; }

NAME=openapi
AMQP_PORT=8960
REDIS_PORT=8961
INGEST_PORT=8962
APP=com.example.game
API_KEY=openapi-ingest-key
LOCAL="${PUSH_LOCAL_DIR:-$ROOT/.local}"
OUT="$LOCAL/$NAME"
VENV="$LOCAL/venv-openapi"
REQUIREMENTS="$ROOT/scripts/checks/openapi-requirements.txt"
SPEC="$ROOT/openapi.yaml"
START=$SECONDS

log() { printf 'openapi | %s %s\n' "$(date +%H:%M:%S)" "$*"; }
passed=0
failed=0
check() { # check NAME OK [DETAIL]
    if [[ $2 == 1 ]]; then
        passed=$((passed + 1))
        log "PASS $1"
    else
        failed=$((failed + 1))
        log "FAIL $1${3:+: $3}"
    fi
}

# --- prerequisites --------------------------------------------------------------------------

# shellcheck source=scripts/apt.sh
. "$ROOT/scripts/apt.sh"

INGEST="$BIN_DIR/push-ingest"
[[ -x $INGEST ]] || { echo "$PROG: $INGEST is missing (swift build --product push-ingest first)" >&2; exit 3; }
INGEST="$(cd "$(dirname "$INGEST")" && pwd)/push-ingest"
for tool in redis-server redis-cli openssl curl; do
    command -v "$tool" >/dev/null || { echo "$PROG: $tool is missing (scripts/install-deps.sh installs it)" >&2; exit 3; }
done
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3) || { echo "$PROG: python3 is missing" >&2; exit 3; }
if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
    apt_install python3-venv || { echo "$PROG: cannot install python3-venv" >&2; exit 3; }
fi
# The venv is reused while it holds exactly the pinned set (a copy of the pins marks it complete).
if ! cmp -s "$REQUIREMENTS" "$VENV/.openapi-requirements" 2>/dev/null ||
    ! "$VENV/bin/python" -c 'import schemathesis, openapi_spec_validator, jsonschema, yaml' 2>/dev/null; then
    log "installing the pinned tools into $VENV"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    # Every pin is honoured; on another Python, pip adds what its markers need there.
    pip=("$VENV/bin/pip" install --quiet --disable-pip-version-check --timeout 60 -r "$REQUIREMENTS")
    if ! "${pip[@]}"; then
        echo "$PROG: pip failed; retrying once" >&2
        sleep 5
        "${pip[@]}" || { rm -rf "$VENV"; echo "$PROG: cannot install $REQUIREMENTS from PyPI" >&2; exit 3; }
    fi
    "$VENV/bin/python" -c 'import schemathesis, openapi_spec_validator, jsonschema, yaml' ||
        { rm -rf "$VENV"; echo "$PROG: the tools of $REQUIREMENTS do not import" >&2; exit 3; }
    cp "$REQUIREMENTS" "$VENV/.openapi-requirements"
fi

# --- the document ---------------------------------------------------------------------------

lint=$("$VENV/bin/openapi-spec-validator" --schema 3.1.0 "$SPEC" 2>&1) && ok=1 || ok=0
check "openapi.yaml is valid OpenAPI 3.1 (openapi-spec-validator $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("openapi-spec-validator"))'))" "$ok" "$(tail -5 <<<"$lint")"
examples=$("$VENV/bin/python" scripts/checks/openapi_examples.py "$SPEC" 2>&1) && ok=1 || ok=0
check "its examples match their schemas ($(tail -1 <<<"$examples" | sed 's/^openapi_examples: //'))" "$ok" "$(head -5 <<<"$examples")"
embedded=$(bash scripts/openapi-embed.sh --check 2>&1) && ok=1 || ok=0
check "Sources/PushIngest/OpenAPISpec.swift embeds it unchanged" "$ok" "$embedded"

# --- the stack ------------------------------------------------------------------------------

INGEST_PID=""
ST_PID=""
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
    local rc=$?
    trap '' INT TERM HUP
    trap - EXIT
    if [[ -n $ST_PID ]]; then
        # timeout passes the TERM on to schemathesis.
        kill -TERM "$ST_PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$ST_PID" 2>/dev/null || break; sleep 0.1; done
    fi
    if [[ -n $INGEST_PID ]] && kill -0 "$INGEST_PID" 2>/dev/null; then
        kill -TERM "$INGEST_PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$INGEST_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$INGEST_PID" 2>/dev/null || true
    fi
    PUSH_QUIET=1 bash scripts/rabbitmq.sh stop --name "$NAME" >/dev/null 2>&1 || log "could not stop RabbitMQ ($NAME)"
    PUSH_QUIET=1 bash scripts/redis.sh stop --name "$NAME" >/dev/null 2>&1 || log "could not stop Redis ($NAME)"
    rm -rf "$LOCAL/rabbitmq-$NAME/mnesia" "$LOCAL/redis-$NAME/data"
    if ((rc == 0 && KEEP == 0)); then
        rm -rf "$OUT"
    else
        log "logs and reports: $OUT"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

setup_failed() {
    log "setup failed: $*"
    exit 3
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
rm -rf "$OUT"
mkdir -p "$OUT"
for which in redis rabbitmq; do
    PUSH_QUIET=1 bash "scripts/$which.sh" stop --name "$NAME" >/dev/null 2>&1 || true
done
rm -rf "$LOCAL/rabbitmq-$NAME/mnesia" "$LOCAL/redis-$NAME/data"
# A previous run's TIME_WAIT sockets may hold a port for up to a minute; a listener is an error.
for port in $REDIS_PORT $AMQP_PORT $((AMQP_PORT + 1000)) $((AMQP_PORT + 20000)) $INGEST_PORT; do
    port_free "$port" || setup_failed "127.0.0.1:$port is in use by another process (ss -ltnp shows which)"
done
server_start() { # server_start WHICH PORT: retried while a TIME_WAIT socket holds the port
    local attempt out
    for attempt in 1 2 3 4; do
        if out=$(PUSH_QUIET=1 bash "scripts/$1.sh" start --name "$NAME" --port "$2" 2>&1); then
            return 0
        fi
        [[ $out == *"in use"* && $attempt -lt 4 ]] || { printf '%s\n' "$out" | tail -20 >&2; return 1; }
        sleep 3
    done
}
log "starting Redis (127.0.0.1:$REDIS_PORT) and RabbitMQ (127.0.0.1:$AMQP_PORT)"
server_start redis "$REDIS_PORT" || setup_failed "scripts/redis.sh start failed"
server_start rabbitmq "$AMQP_PORT" || setup_failed "scripts/rabbitmq.sh start failed"

openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$OUT/AuthKey_OPENAPI001.p8" 2>/dev/null ||
    setup_failed "openssl could not make a signing key"
cat >"$OUT/apps.json" <<EOF
{"apps": {"$APP": {
  "display_names": ["Monopoly Party"], "default": true, "environment": "sandbox",
  "apns": {"key_file": "$OUT/AuthKey_OPENAPI001.p8", "key_id": "OPENAPI001", "team_id": "TEAM000001"},
  "ingest": {"api_keys": ["$API_KEY"], "credential": "none", "push_token": true}
}}}
EOF

log "starting push-ingest (127.0.0.1:$INGEST_PORT)"
env -u PUSH_ADMIN_PORT -u PUSH_CONFIG_FILE \
    PUSH_AMQP_URL="amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f" PUSH_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0" \
    PUSH_APPS_FILE="$OUT/apps.json" PUSH_HTTP_HOST=127.0.0.1 PUSH_HTTP_PORT="$INGEST_PORT" PUSH_LOG_LEVEL=warning \
    "$INGEST" </dev/null >"$OUT/push-ingest.log" 2>&1 &
INGEST_PID=$!
BASE="http://127.0.0.1:$INGEST_PORT"
ready=0
for _ in $(seq 600); do
    kill -0 "$INGEST_PID" 2>/dev/null || { tail -20 "$OUT/push-ingest.log" >&2; setup_failed "push-ingest exited at start"; }
    if [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$BASE/readyz" || true) == 200 ]]; then
        ready=1
        break
    fi
    sleep 0.1
done
((ready)) || { tail -20 "$OUT/push-ingest.log" >&2; setup_failed "push-ingest not ready within 60 s"; }

headers=$(curl -s -D - -o "$OUT/served.yaml" --max-time 10 "$BASE/openapi.yaml" | tr -d '\r') || true
content_type=$(sed -n 's/^[Cc]ontent-[Tt]ype: //p' <<<"$headers")
cmp -s "$OUT/served.yaml" "$SPEC" && [[ $content_type == application/yaml ]] && ok=1 || ok=0
check "GET /openapi.yaml serves it byte for byte as application/yaml" "$ok" \
    "$(head -1 <<<"$headers"), Content-Type ${content_type:-none}, $(wc -c <"$OUT/served.yaml") bytes"

# --- schemathesis ---------------------------------------------------------------------------

cat >"$OUT/schemathesis.toml" <<EOF
# Written by scripts/checks/openapi.sh: the stack's app and key.
[parameters]
"path.app" = "$APP"

[auth.openapi.bearerAuth]
bearer = "$API_KEY"

# The stateful phase reports valid requests as "schema-violating" ("Invalid component: positive
# test case", as in schemathesis issue 2983: each such token path is valid by the document under
# Python's re, jsonschema and jsonschema_rs alike), even when it generates positive cases only. So
# it runs positive cases, with every check but negative_data_rejection; the examples, coverage and
# fuzzing phases test negative data.
[phases.stateful.generation]
mode = "positive"

[phases.stateful.checks]
negative_data_rejection.enabled = false

# An update token's expires_at must lie between now and 7 days ahead, which no JSON Schema can say
# (the document says it in prose): a 400 naming expires_at is right there. LiveActivityTargetTests
# hold that bound.
[[operations]]
include-path = "/v1/apps/{app}/devices/{token}/activities/{activity_id}"
include-method = "PUT"
checks.positive_data_acceptance.expected-statuses = ["2xx", 400, 401, 403, 404, 409, 429]
EOF
log "schemathesis $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("schemathesis"))'): $BASE/openapi.yaml, $MAX_EXAMPLES examples per operation, its default checks"
st_rc=0
# In the background, waited for: a signal to this script is then handled at once (bash runs a trap
# only after a foreground command ends), and the clean-up stops schemathesis first.
(
    cd "$OUT"
    exec timeout --signal=TERM --kill-after=10 150 "$VENV/bin/schemathesis" --config-file "$OUT/schemathesis.toml" run \
        "$BASE/openapi.yaml" --url "$BASE" --max-examples "$MAX_EXAMPLES" --generation-deterministic \
        --workers 1 --request-timeout 10 --no-color --warnings off \
        --report junit --report-junit-path "$OUT/junit.xml"
) >"$OUT/schemathesis.txt" 2>&1 </dev/null &
ST_PID=$!
wait "$ST_PID" || st_rc=$?
ST_PID=""

# One line per operation from the JUnit report: schemathesis names each test case
# `METHOD /path`; a failure or error element marks a failed operation, and so does a skipped one
# (it was not tested).
if [[ -f $OUT/junit.xml ]]; then
    while IFS=$'\t' read -r status name detail; do
        [[ -n $name ]] || continue
        if [[ $status == pass ]]; then
            check "schemathesis: $name" 1
        else
            check "schemathesis: $name" 0 "$detail"
        fi
    done < <("$VENV/bin/python" - "$OUT/junit.xml" <<'EOF'
import sys
import xml.etree.ElementTree as ET
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    bad = next((case.find(kind) for kind in ("failure", "error", "skipped") if case.find(kind) is not None), None)
    detail = "" if bad is None else bad.tag + ": " + " ".join((bad.get("message") or bad.text or "").split())[:300]
    print(f"{'fail' if bad is not None else 'pass'}\t{case.get('name')}\t{detail}")
EOF
    )
fi
summary=$(grep -E '^ *[0-9]+ generated|^=+ .* in [0-9.]+s =+$' "$OUT/schemathesis.txt" | sed 's/^ *//; s/=//g; s/ *$//' | paste -sd ';' || true)
((st_rc == 0)) && ok=1 || ok=0
check "schemathesis run (${summary:-no summary})" "$ok" "exit $st_rc; $OUT/schemathesis.txt:
$(sed -n '/FAILURES\|ERRORS/,$p' "$OUT/schemathesis.txt" | head -60)"

# push-ingest stops cleanly, having logged no unexpected error.
kill -TERM "$INGEST_PID"
status=0
for _ in $(seq 150); do kill -0 "$INGEST_PID" 2>/dev/null || break; sleep 0.1; done
wait "$INGEST_PID" 2>/dev/null || status=$?
INGEST_PID=""
((status == 0)) && ok=1 || ok=0
check "push-ingest exits 0 on SIGTERM" "$ok" "exit $status"
internal=$(grep -c 'Unexpected error answering a request\|Registration request failed' "$OUT/push-ingest.log" || true)
((internal == 0)) && ok=1 || ok=0
check "push-ingest logged no failed or unexpected request" "$ok" "$internal lines in $OUT/push-ingest.log"

log "$((SECONDS - START)) s"
echo "openapi: $passed passed, $failed failed"
((failed == 0)) || exit 1
