#!/usr/bin/env bash
# The message contract producers read in docs/ against itself: docs/schemas/*.schema.json are valid
# JSON Schema (2020-12); for push requests, registrations, invalid-token reports and outcome events
# (push.events), every example in
# docs/examples/<kind>/valid/ matches its schema, and every one in invalid/ is refused by it at the
# field its file name names (`<field>--<what>.json`) or a parent of it. ContractExamplesTests (in
# PushCoreTests and PushIngestTests) run the same files through the services' own decoders (and
# compare the outcome events with what push-send and push-feedback encode), so the schema and the
# services agree on each.
#
#   scripts/checks/contract.sh [--bin-dir DIR]
#
# --bin-dir is accepted (scripts/run-checks.sh passes it to every check) and not used. Prints each
# check; exits 1 when one failed, 2 on a usage error, 3 when python3-jsonschema is missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
while (($#)); do
    case $1 in
        --bin-dir) shift; (($#)) && shift ;;
        --bin-dir=*) shift ;;
        -h | --help) sed -n '2,12s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "contract.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)
"$PY" -c 'import jsonschema' 2>/dev/null || { echo "contract.sh: python3-jsonschema is not installed (run scripts/install-deps.sh)" >&2; exit 3; }

exec "$PY" - "$ROOT" <<'PYEOF'
import json, re, sys
from pathlib import Path
import jsonschema

root = Path(sys.argv[1])
passed = failed = 0

def check(ok, what, why=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"  ok    {what}")
    else:
        failed += 1
        print(f"  FAIL  {what}{': ' + why if why else ''}")

def path_text(error):
    """An error's place as push-render names fields: payload.aps.badge, to.tokens[0]."""
    text = ""
    for part in error.absolute_path:
        text += f"[{part}]" if isinstance(part, int) else (("." if text else "") + str(part))
    return text

def is_within(place, field):
    """Whether `place` is `field` or one of its parents (`payload.aps` of `payload.aps.orderID`)."""
    return place == "" or field == place or field.startswith(place + ".") or field.startswith(place + "[")

schemas = sorted((root / "docs/schemas").glob("*.schema.json"))
check(bool(schemas), "docs/schemas holds schemas", "none found")
for path in schemas:
    try:
        jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text()))
        check(True, f"{path.relative_to(root)} is valid JSON Schema 2020-12")
    except (ValueError, jsonschema.SchemaError) as error:
        check(False, f"{path.relative_to(root)} is valid JSON Schema 2020-12", str(error)[:300])

# Each kind of message: its schema, and its examples in docs/examples/<kind>/{valid,invalid}/.
kinds = {"push-requests": "push-request", "registrations": "registration", "feedback-events": "feedback-event",
         "outcome-events": "outcome-event"}
for kind, schema_name in kinds.items():
    validator = jsonschema.Draft202012Validator(json.loads((root / f"docs/schemas/{schema_name}.schema.json").read_text()))
    examples = root / "docs/examples" / kind
    valid = sorted((examples / "valid").glob("*.json"))
    invalid = sorted((examples / "invalid").glob("*.json"))
    check(len(valid) >= 2 and len(invalid) >= 2, f"{kind}: there are valid and invalid examples", f"{len(valid)} valid, {len(invalid)} invalid")
    for path in valid:
        errors = list(validator.iter_errors(json.loads(path.read_text())))
        check(not errors, f"{kind}/valid/{path.name} matches {schema_name}.schema.json",
              "; ".join(f"{path_text(e) or '(body)'}: {e.message[:120]}" for e in errors[:3]))
    for path in invalid:
        name = path.stem
        if "--" not in name:
            check(False, f"{kind}/invalid/{path.name} is named <field>--<what>.json")
            continue
        field = name.split("--", 1)[0]
        errors = list(validator.iter_errors(json.loads(path.read_text())))
        places = [path_text(e) for e in errors]
        check(bool(errors) and any(is_within(place, field) for place in places),
              f"{kind}/invalid/{path.name} is refused at {field} or a parent of it",
              f"refused at {places}" if errors else "the schema accepts it")
print(f"contract: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PYEOF
