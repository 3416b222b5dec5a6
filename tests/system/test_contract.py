"""The message contract producers read in docs/, against itself and against what the services declare
(scripts/checks/contract.sh runs this module in its venv: jsonschema, PyYAML, asyncapi3). No stack:
only `pushctl topology` of --bin-dir, which prints the RabbitMQ topology without a broker.

- Schemas: docs/schemas/*.schema.json are valid JSON Schema (draft-07, the version AsyncAPI 3.0
  takes).
- Examples, one test per kind (push requests, registrations, invalid-token reports, outcome events
  on push.events): every example in docs/examples/<kind>/valid/ matches its schema, and every one in
  invalid/ is refused by it at the field its file name names (`<field>--<what>.json`) or a parent of
  it. ContractExamplesTests (in PushCoreTests and PushIngestTests) run the same files through the
  services' own decoders (and compare the outcome events with what push-send and push-feedback
  encode), so the schema and the services agree on each.
- AsyncAPI: docs/asyncapi.yaml is a valid AsyncAPI 3.0.0 document (asyncapi3) and holds the
  topology the services declare: every exchange, work queue, binding and retry queue documented,
  nothing documented that is not declared, and every message's schema a file.
- The diagram: docs/architecture.md's Mermaid diagram draws every declared queue and exchange, no
  other.
- Links: scripts/checks/docs_links.py (every relative link and #anchor in the README and docs/
  resolves; the README stays under 400 lines) exits 0.

    scripts/checks/contract.sh [--bin-dir DIR] [-k examples]
"""
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# Each kind of message: docs/examples/<kind>/ and its schema docs/schemas/<name>.schema.json.
KINDS = {"push-requests": "push-request", "registrations": "registration", "feedback-events": "feedback-event",
         "outcome-events": "outcome-event"}


def path_text(error):
    """An error's place as push-render names fields: payload.aps.badge, to.tokens[0]."""
    text = ""
    for part in error.absolute_path:
        text += f"[{part}]" if isinstance(part, int) else (("." if text else "") + str(part))
    return text


def is_within(place, field):
    """Whether `place` is `field` or one of its parents (`payload.aps` of `payload.aps.orderID`)."""
    return place == "" or field == place or field.startswith(place + ".") or field.startswith(place + "[")


@pytest.fixture(scope="module")
def topology(bin_dir):
    """`pushctl topology`: {"exchanges": {name: type}, "bindings": {(exchange, key): queue}, "queues": {name}}."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PUSH_")}
    run = subprocess.run([str(bin_dir / "pushctl"), "topology"], capture_output=True, text=True, timeout=60, env=env)
    if run.returncode != 0:
        pytest.fail(f"pushctl topology exited {run.returncode}: {run.stderr.strip()[-500:]}")
    declared = json.loads(run.stdout)
    return {"exchanges": {e["name"]: e["type"] for e in declared["exchanges"]},
            "bindings": {(b["exchange"], b["routing_key"]): b["queue"] for b in declared["bindings"]},
            "queues": {q["name"] for q in declared["queues"]}}


@pytest.fixture(scope="module")
def asyncapi():
    return yaml.safe_load((DOCS / "asyncapi.yaml").read_text())


def test_schemas(checks):
    schemas = sorted((DOCS / "schemas").glob("*.schema.json"))
    checks(bool(schemas), "docs/schemas holds schemas", "none found")
    for path in schemas:
        try:
            jsonschema.Draft7Validator.check_schema(json.loads(path.read_text()))
            checks(True, f"{path.relative_to(ROOT)} is valid JSON Schema draft-07")
        except (ValueError, jsonschema.SchemaError) as error:
            checks(False, f"{path.relative_to(ROOT)} is valid JSON Schema draft-07", str(error)[:300])


@pytest.mark.parametrize("kind", KINDS)
def test_examples(kind, checks):
    """The kind's valid examples match its schema; each invalid one is refused where its name says."""
    schema_name = KINDS[kind]
    validator = jsonschema.Draft7Validator(json.loads((DOCS / f"schemas/{schema_name}.schema.json").read_text()))
    examples = DOCS / "examples" / kind
    valid = sorted((examples / "valid").glob("*.json"))
    invalid = sorted((examples / "invalid").glob("*.json"))
    checks(len(valid) >= 2 and len(invalid) >= 2, f"{kind}: there are valid and invalid examples",
           f"{len(valid)} valid, {len(invalid)} invalid")
    for path in valid:
        errors = list(validator.iter_errors(json.loads(path.read_text())))
        checks(not errors, f"{kind}/valid/{path.name} matches {schema_name}.schema.json",
               "; ".join(f"{path_text(e) or '(body)'}: {e.message[:120]}" for e in errors[:3]))
    for path in invalid:
        if "--" not in path.stem:
            checks(False, f"{kind}/invalid/{path.name} is named <field>--<what>.json")
            continue
        field = path.stem.split("--", 1)[0]
        errors = list(validator.iter_errors(json.loads(path.read_text())))
        places = [path_text(e) for e in errors]
        checks(bool(errors) and any(is_within(place, field) for place in places),
               f"{kind}/invalid/{path.name} is refused at {field} or a parent of it",
               f"refused at {places}" if errors else "the schema accepts it")


def test_asyncapi_is_valid(asyncapi, checks):
    verdict = "valid"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the models' own pydantic warnings (a field named `schema`)
            from asyncapi3 import AsyncAPI3

            AsyncAPI3.model_validate(asyncapi)
    except Exception as error:  # noqa: BLE001 - pydantic's ValidationError and whatever else the model raises
        verdict = "\n".join(str(error).splitlines()[-8:])
    checks(asyncapi.get("asyncapi") == "3.0.0" and verdict == "valid",
           "docs/asyncapi.yaml is a valid AsyncAPI 3.0.0 document (asyncapi3)",
           f"asyncapi: {asyncapi.get('asyncapi')!r}; {verdict}")


def test_asyncapi_matches_topology(asyncapi, topology, checks):
    """Every channel's exchange, binding and retry queues are declared; everything declared is a channel."""
    exchanges, bindings, queues = topology["exchanges"], topology["bindings"], topology["queues"]
    documented_queues, used_exchanges, documented_bindings = set(), set(), set()
    for name, channel in (asyncapi.get("channels") or {}).items():
        amqp = (channel.get("bindings") or {}).get("amqp") or {}
        exchange = amqp.get("exchange") or {}
        checks(amqp.get("is") == "routingKey" and exchange.get("name") in exchanges
               and exchanges.get(exchange.get("name")) == exchange.get("type"),
               f"channel {name}: exchange {exchange.get('name')} ({exchange.get('type')}) is declared so",
               f"declared exchanges {exchanges}")
        used_exchanges.add(exchange.get("name"))
        for reference in (channel.get("messages") or {}).values():
            target = reference.get("$ref", "")
            checks(target.startswith("#/components/messages/") and target.rsplit("/", 1)[1] in asyncapi["components"]["messages"],
                   f"channel {name}: message {target} exists")
        queue = channel.get("x-queue")
        if queue is None:
            continue
        key = (exchange.get("name"), channel.get("address"))
        documented_bindings.add(key)
        checks(bindings.get(key) == queue, f"channel {name}: {key[0]} routes {key[1]!r} to {queue}",
               f"the services bind it to {bindings.get(key)}")
        documented_queues.add(queue)
        retries = set(channel.get("x-retry-queues") or [])
        declared = {q for q in queues if q.startswith(queue + ".retry.")}
        checks(retries == declared, f"channel {name}: its retry queues are the declared ones",
               f"documented {sorted(retries)}, declared {sorted(declared)}")
        documented_queues |= retries
    checks(set(bindings) <= documented_bindings, "every binding the services declare is a channel",
           f"missing {sorted(set(bindings) - documented_bindings)}")
    checks(queues <= documented_queues, "every queue the services declare is documented",
           f"missing {sorted(queues - documented_queues)}")
    checks(set(exchanges) <= used_exchanges, "every exchange the services declare has channels",
           f"missing {sorted(set(exchanges) - used_exchanges)}")


def test_asyncapi_message_schemas_exist(asyncapi, checks):
    for name, message in asyncapi["components"]["messages"].items():
        schema = ((message.get("payload") or {}).get("schema") or {}).get("$ref")
        if schema:
            checks((DOCS / schema).is_file(), f"message {name}: its schema {schema} exists")


def test_architecture_diagram(topology, checks):
    """A queue node is `[["name"]]`, an exchange node `{{"exchange name (type)"}}`; every declared one
    is drawn, nothing else is."""
    diagram = "\n".join(re.findall(r"```mermaid\n(.*?)```", (DOCS / "architecture.md").read_text(), re.S))
    drawn_queues = set(re.findall(r'\[\["([^"]+)"\]\]', diagram))
    drawn_exchanges = dict(re.findall(r'\{\{"exchange (\S+) \((\w+)\)"\}\}', diagram))
    queues, exchanges = topology["queues"], topology["exchanges"]
    checks(drawn_queues == queues, "docs/architecture.md's diagram draws every declared queue and no other",
           f"not drawn {sorted(queues - drawn_queues)}, not declared {sorted(drawn_queues - queues)}")
    checks(drawn_exchanges == exchanges, "docs/architecture.md's diagram draws every declared exchange with its type and no other",
           f"drawn {drawn_exchanges}, declared {exchanges}")


def test_docs_links(checks):
    """scripts/checks/docs_links.py as it runs by hand: its exit status, its failures as the reason."""
    run = subprocess.run([sys.executable, str(ROOT / "scripts/checks/docs_links.py")], capture_output=True, text=True,
                         timeout=120, cwd=str(ROOT))
    summary = (run.stdout.strip().splitlines() or [""])[-1] if run.returncode == 0 else run.stderr.strip()
    checks.log(summary)
    checks(run.returncode == 0, "docs_links.py: every relative link and anchor resolves, the README stays under 400 lines",
           f"exit {run.returncode}: " + "; ".join(run.stdout.strip().splitlines()[:20]) + (f" ({summary})" if summary else ""))
