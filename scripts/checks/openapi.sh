#!/usr/bin/env bash
# tier: check (the long tier: `make check`, which CI runs after `make test`; see scripts/run-checks.sh)
# push-ingest against its own OpenAPI document (openapi.yaml; tests/system/test_openapi.py): the
# document is valid OpenAPI 3.1 (openapi-spec-validator), its examples match its schemas,
# Sources/PushIngest/OpenAPISpec.swift embeds it unchanged, and the --bin-dir push-ingest serves it at
# GET /openapi.yaml and answers as it says: schemathesis generates requests for every operation
# (examples, boundary cases, fuzzing, stateful sequences; about 50 per operation, deterministic) with
# schemathesis' own default checks, all of them (no 5xx; every status, content type, header and body
# documented; valid data accepted, invalid data refused; ...).
#
#   scripts/checks/openapi.sh [--bin-dir DIR] [--max-examples N] [pytest arguments, e.g. -k document]
#
# --max-examples: per operation (default 50). A private stack on 127.0.0.1: RabbitMQ 8960 (it derives
# 9960, 28960, 29960-29970), Redis 8961, push-ingest 8962; its logs and schemathesis' report stay in
# .local/openapi/. The pins of openapi-requirements.txt go to .local/venv-openapi. Exits as
# scripts/pytest.sh says (1 a check failed, 3 the stack cannot start). About 90 s once installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PROG=openapi.sh
OPENAPI_MAX_EXAMPLES=50
args=()
while (($#)); do
    case $1 in
        --max-examples) OPENAPI_MAX_EXAMPLES=${2:?--max-examples needs a number}; shift 2 ;;
        --max-examples=*) OPENAPI_MAX_EXAMPLES=${1#*=}; shift ;;
        -h | --help) sed -n '2,17s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) args+=("$1"); shift ;;
    esac
done
[[ $OPENAPI_MAX_EXAMPLES =~ ^[1-9][0-9]{0,3}$ ]] || { echo "$PROG: --max-examples must be 1-9999" >&2; exit 2; }
export OPENAPI_MAX_EXAMPLES
exec bash "$ROOT/scripts/pytest.sh" openapi tests/system/test_openapi.py \
    --requirements "$ROOT/scripts/checks/openapi-requirements.txt" "${args[@]}"
