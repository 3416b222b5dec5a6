#!/usr/bin/env bash
# The message contract producers read in docs/ against itself: docs/schemas/*.schema.json are valid
# JSON Schema (draft-07, the version AsyncAPI 3.0 takes); for push requests, registrations, invalid-token reports and outcome events
# (push.events), every example in
# docs/examples/<kind>/valid/ matches its schema, and every one in invalid/ is refused by it at the
# field its file name names (`<field>--<what>.json`) or a parent of it. ContractExamplesTests (in
# PushCoreTests and PushIngestTests) run the same files through the services' own decoders (and
# compare the outcome events with what push-send and push-feedback encode), so the schema and the
# services agree on each.
#
# docs/asyncapi.yaml (AsyncAPI 3.0) is held to the topology the services declare, as `pushctl
# topology` of --bin-dir prints it: every exchange, work queue, binding and retry queue documented,
# and nothing documented that is not declared; so is docs/architecture.md's Mermaid diagram (every
# declared queue and exchange drawn, no other). Then scripts/checks/docs_links.py: every relative
# link and #anchor in the README and docs/ resolves, and the README stays under 400 lines.
#
#   scripts/checks/contract.sh [--bin-dir DIR]
#
# --bin-dir: where pushctl is (default: swift build --show-bin-path). Prints each check; exits 1
# when one failed, 2 on a usage error, 3 when python3-jsonschema or python3-yaml is missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN_DIR=""
while (($#)); do
    case $1 in
        --bin-dir) BIN_DIR="${2:-}"; shift; (($#)) && shift ;;
        --bin-dir=*) BIN_DIR="${1#--bin-dir=}"; shift ;;
        -h | --help) sed -n '2,15s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "contract.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)
"$PY" -c 'import jsonschema, yaml' 2>/dev/null || { echo "contract.sh: python3-jsonschema or python3-yaml is not installed (run scripts/install-deps.sh)" >&2; exit 3; }
# asyncapi3 (PyPI, pinned in scripts/checks/contract-requirements.txt) in a venv of its own, reused
# while it holds exactly the pins, validates docs/asyncapi.yaml as an AsyncAPI 3.0 document.
VENV="${PUSH_LOCAL_DIR:-$ROOT/.local}/venv-contract"
REQUIREMENTS="$ROOT/scripts/checks/contract-requirements.txt"
# shellcheck source=scripts/apt.sh
. "$ROOT/scripts/apt.sh"
if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
    apt_install python3-venv || { echo "contract.sh: cannot install python3-venv" >&2; exit 3; }
fi
if ! cmp -s "$REQUIREMENTS" "$VENV/.contract-requirements" 2>/dev/null || ! "$VENV/bin/python" -c 'import asyncapi3, yaml' 2>/dev/null; then
    echo "contract.sh: installing the pinned tools into $VENV"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    pip=("$VENV/bin/pip" install --quiet --disable-pip-version-check --timeout 60 -r "$REQUIREMENTS")
    if ! "${pip[@]}"; then
        echo "contract.sh: pip failed; retrying once" >&2
        sleep 5
        "${pip[@]}" || { rm -rf "$VENV"; echo "contract.sh: cannot install $REQUIREMENTS from PyPI" >&2; exit 3; }
    fi
    cp "$REQUIREMENTS" "$VENV/.contract-requirements"
fi
ASYNCAPI="$("$VENV/bin/python" -W ignore -c '
import sys, yaml
from asyncapi3 import AsyncAPI3
AsyncAPI3.model_validate(yaml.safe_load(open(sys.argv[1])))
print("valid")
' "$ROOT/docs/asyncapi.yaml" 2>&1 | tail -n 8 || true)"
[[ -n $BIN_DIR ]] || BIN_DIR="$(cd "$ROOT" && swift build --show-bin-path)"
[[ -x $BIN_DIR/pushctl ]] || { echo "contract.sh: no pushctl in $BIN_DIR (build it: swift build --product pushctl)" >&2; exit 2; }
TOPOLOGY="$("$BIN_DIR/pushctl" topology)"

status=0
"$PY" - "$ROOT" "$TOPOLOGY" "$ASYNCAPI" <<'PYEOF' || status=$?
import json, re, sys
from pathlib import Path
import jsonschema, yaml

root = Path(sys.argv[1])
topology = json.loads(sys.argv[2])
asyncapi_verdict = sys.argv[3]
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
        jsonschema.Draft7Validator.check_schema(json.loads(path.read_text()))
        check(True, f"{path.relative_to(root)} is valid JSON Schema draft-07")
    except (ValueError, jsonschema.SchemaError) as error:
        check(False, f"{path.relative_to(root)} is valid JSON Schema draft-07", str(error)[:300])

# Each kind of message: its schema, and its examples in docs/examples/<kind>/{valid,invalid}/.
kinds = {"push-requests": "push-request", "registrations": "registration", "feedback-events": "feedback-event",
         "outcome-events": "outcome-event"}
for kind, schema_name in kinds.items():
    validator = jsonschema.Draft7Validator(json.loads((root / f"docs/schemas/{schema_name}.schema.json").read_text()))
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
# docs/asyncapi.yaml against what the services declare.
document = yaml.safe_load((root / "docs/asyncapi.yaml").read_text())
check(document.get("asyncapi") == "3.0.0" and asyncapi_verdict == "valid", "docs/asyncapi.yaml is a valid AsyncAPI 3.0.0 document (asyncapi3)",
      asyncapi_verdict)
exchanges = {e["name"]: e["type"] for e in topology["exchanges"]}
bindings = {(b["exchange"], b["routing_key"]): b["queue"] for b in topology["bindings"]}
queues = {q["name"] for q in topology["queues"]}
documented_queues, used_exchanges, documented_bindings = set(), set(), set()
for name, channel in (document.get("channels") or {}).items():
    amqp = ((channel.get("bindings") or {}).get("amqp") or {})
    exchange = (amqp.get("exchange") or {})
    check(amqp.get("is") == "routingKey" and exchange.get("name") in exchanges and exchanges.get(exchange.get("name")) == exchange.get("type"),
          f"channel {name}: exchange {exchange.get('name')} ({exchange.get('type')}) is declared so",
          f"declared exchanges {exchanges}")
    used_exchanges.add(exchange.get("name"))
    for reference in (channel.get("messages") or {}).values():
        target = reference.get("$ref", "")
        check(target.startswith("#/components/messages/") and target.rsplit("/", 1)[1] in document["components"]["messages"],
              f"channel {name}: message {target} exists")
    queue = channel.get("x-queue")
    if queue is None:
        continue
    key = (exchange.get("name"), channel.get("address"))
    documented_bindings.add(key)
    check(bindings.get(key) == queue, f"channel {name}: {key[0]} routes {key[1]!r} to {queue}", f"the services bind it to {bindings.get(key)}")
    documented_queues.add(queue)
    retries = set(channel.get("x-retry-queues") or [])
    declared = {q for q in queues if q.startswith(queue + ".retry.")}
    check(retries == declared, f"channel {name}: its retry queues are the declared ones", f"documented {sorted(retries)}, declared {sorted(declared)}")
    documented_queues |= retries
check(set(bindings) <= documented_bindings, "every binding the services declare is a channel", f"missing {sorted(set(bindings) - documented_bindings)}")
check(queues <= documented_queues, "every queue the services declare is documented", f"missing {sorted(queues - documented_queues)}")
check(set(exchanges) <= used_exchanges, "every exchange the services declare has channels", f"missing {sorted(set(exchanges) - used_exchanges)}")
for name, message in document["components"]["messages"].items():
    schema = ((message.get("payload") or {}).get("schema") or {}).get("$ref")
    if schema:
        check((root / "docs" / schema).is_file(), f"message {name}: its schema {schema} exists")
# docs/architecture.md's diagram against what the services declare: a queue node is `[["name"]]`, an
# exchange node `{{"exchange name (type)"}}`; every declared one is drawn, nothing else is.
diagram = "\n".join(re.findall(r"```mermaid\n(.*?)```", (root / "docs/architecture.md").read_text(), re.S))
drawn_queues = set(re.findall(r'\[\["([^"]+)"\]\]', diagram))
drawn_exchanges = dict(re.findall(r'\{\{"exchange (\S+) \((\w+)\)"\}\}', diagram))
check(drawn_queues == queues, "docs/architecture.md's diagram draws every declared queue and no other",
      f"not drawn {sorted(queues - drawn_queues)}, not declared {sorted(drawn_queues - queues)}")
check(drawn_exchanges == exchanges, "docs/architecture.md's diagram draws every declared exchange with its type and no other",
      f"drawn {drawn_exchanges}, declared {exchanges}")
print(f"contract: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PYEOF
# The documentation's links: every relative link and anchor resolves, the README stays short.
"$PY" "$ROOT/scripts/checks/docs_links.py" || status=1
exit "$status"
