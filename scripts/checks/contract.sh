#!/usr/bin/env bash
# The message contract producers read in docs/ (tests/system/test_contract.py): docs/schemas/ are
# valid JSON Schema draft-07; every example in docs/examples/<kind>/valid/ matches its schema and
# every one in invalid/ is refused at the field its name names; docs/asyncapi.yaml is valid AsyncAPI
# 3.0 (asyncapi3) and holds `pushctl topology` of --bin-dir (every exchange, binding and queue, no
# other); so does docs/architecture.md's diagram; then scripts/checks/docs_links.py (links, anchors,
# the README under 400 lines). No stack; the pins of contract-requirements.txt go to
# .local/venv-contract. A few seconds once installed.
#
#   scripts/checks/contract.sh [--bin-dir DIR] [pytest arguments, e.g. -k examples]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
exec bash "$ROOT/scripts/pytest.sh" contract tests/system/test_contract.py \
    --requirements "$ROOT/scripts/checks/contract-requirements.txt" "$@"
