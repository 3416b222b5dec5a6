"""push-ingest against its own OpenAPI document, openapi.yaml (scripts/checks/openapi.sh runs this
module in its venv: schemathesis, openapi-spec-validator, jsonschema, PyYAML).

The document: valid OpenAPI 3.1 (openapi-spec-validator), its examples match their schemas
(scripts/checks/openapi_examples.py), and Sources/PushIngest/OpenAPISpec.swift embeds it unchanged
(scripts/openapi-embed.sh --check). Then the --bin-dir push-ingest on a private stack: RabbitMQ
127.0.0.1:8960 (it derives 9960, 28960, 29960-29970), Redis 8961, push-ingest 8962 (no apns-sandbox:
push-ingest talks to no APNs), an apps file of its own (credential `none` and /push_token enabled,
so every operation can succeed, and an API key schemathesis presents), PUSH_LOG_LEVEL=warning:

- GET /openapi.yaml serves the document byte for byte as application/yaml;
- schemathesis generates requests for every operation (examples, boundary cases, fuzzing, stateful
  sequences; OPENAPI_MAX_EXAMPLES per operation, default 50, deterministic) with its own default
  checks, all of them (no 5xx; every status, content type, header and body documented; valid data
  accepted, invalid data refused; ...): one check per operation of its JUnit report and one for the
  run (150 s at most);
- push-ingest exits 0 on SIGTERM, having logged no failed or unexpected request.

    scripts/checks/openapi.sh [--bin-dir DIR] [--max-examples N] [-k schemathesis]

The stack's logs, schemathesis' config, output and JUnit report: .local/openapi/.
"""
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from conftest import serve
from harness.net import call
from harness.stack import Stack

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "openapi.yaml"
BASE_PORT = 8960
APP = "com.example.game"
API_KEY = "openapi-ingest-key"
MAX_EXAMPLES = int(os.environ.get("OPENAPI_MAX_EXAMPLES", "50"))
SCHEMATHESIS_TIMEOUT = 150
VENV_BIN = Path(sys.executable).parent  # openapi-spec-validator and schemathesis, beside the venv's python
# What push-ingest logs when it answered a request with an internal error.
FAILED_REQUEST = re.compile(r"Unexpected error answering a request|Registration request failed")


def tail(text, lines):
    return "\n".join(text.strip().splitlines()[-lines:])


# MARK: the document


def test_document_is_valid_openapi_3_1(checks):
    run = subprocess.run([str(VENV_BIN / "openapi-spec-validator"), "--schema", "3.1.0", str(SPEC)],
                         capture_output=True, text=True, timeout=120)
    version = importlib.metadata.version("openapi-spec-validator")
    checks(run.returncode == 0, f"openapi.yaml is valid OpenAPI 3.1 (openapi-spec-validator {version})",
           tail(run.stdout + run.stderr, 5))


def test_examples_match_their_schemas(checks):
    spec = importlib.util.spec_from_file_location("openapi_examples", ROOT / "scripts/checks/openapi_examples.py")
    examples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(examples)
    checked, failures = examples.check_examples(yaml.safe_load(SPEC.read_text(encoding="utf-8")))
    checks(checked > 0 and not failures,
           f"its examples match their schemas ({checked} examples checked, {len(failures)} mismatches)",
           "; ".join(failures[:5]))


def test_embedded_copy_is_unchanged(checks):
    run = subprocess.run(["bash", str(ROOT / "scripts/openapi-embed.sh"), "--check"], capture_output=True, text=True,
                         timeout=60, cwd=str(ROOT))
    checks(run.returncode == 0, "Sources/PushIngest/OpenAPISpec.swift embeds it unchanged",
           f"exit {run.returncode}: {tail(run.stdout + run.stderr, 5)}")


# MARK: the live push-ingest


class OpenAPIStack(Stack):
    """RabbitMQ, Redis and push-ingest alone, push-ingest on base+2 (8962, where openapi.sh always had
    it) with the environment openapi.sh gave it: no apns-sandbox, no APNs variables."""

    APP = APP
    WITH_SANDBOX = False

    def __init__(self, bin_dir):
        super().__init__(bin_dir, "openapi", BASE_PORT, log_level="warning")
        self.services = ["push-ingest"]
        self.ingest_key = API_KEY
        self.port = {"amqp": BASE_PORT, "redis": BASE_PORT + 1, "push-ingest": BASE_PORT + 2}
        self.url = f"http://127.0.0.1:{self.port['push-ingest']}"

    def service_env(self, name):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PUSH_")}
        env.update(PUSH_AMQP_URL=self.amqp_url, PUSH_REDIS_URL=self.redis_url, PUSH_APPS_FILE=str(self.apps),
                   PUSH_HTTP_HOST="127.0.0.1", PUSH_HTTP_PORT=str(self.port[name]), PUSH_LOG_LEVEL=self.log_level)
        return env

    def app_definitions(self, apns):
        return {APP: {"display_names": ["Monopoly Party"], "default": True, "environment": "sandbox", "apns": apns,
                      "ingest": {"api_keys": [API_KEY], "credential": "none", "push_token": True}}}

    def ingest_log(self):
        """push-ingest's log of this run (the log file keeps earlier runs' above the harness's marker)."""
        return self.log_text("push-ingest").rpartition("=== harness: starting push-ingest")[2]


@pytest.fixture(scope="module")
def ingest(bin_dir):
    yield from serve(OpenAPIStack(bin_dir))


def test_serves_the_document(ingest, checks):
    reply = call(ingest.port["push-ingest"], "GET", "/openapi.yaml", timeout=10)
    (ingest.out / "served.yaml").write_bytes(reply.body)
    content_type = reply.headers.get("content-type")
    checks(reply.status == 200 and reply.body == SPEC.read_bytes() and content_type == "application/yaml",
           "GET /openapi.yaml serves it byte for byte as application/yaml",
           f"HTTP {reply.status}, Content-Type {content_type or 'none'}, {len(reply.body)} bytes")


SCHEMATHESIS_CONFIG = """\
# Written by tests/system/test_openapi.py: the stack's app and key.
[parameters]
"path.app" = "{app}"

[auth.openapi.bearerAuth]
bearer = "{key}"

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
include-path = "/v1/apps/{{app}}/devices/{{token}}/activities/{{activity_id}}"
include-method = "PUT"
checks.positive_data_acceptance.expected-statuses = ["2xx", 400, 401, 403, 404, 409, 429]
"""


def run_schemathesis(out, url):
    """schemathesis run against `url` (its output in out/schemathesis.txt, its JUnit report in
    out/junit.xml): its exit status, or a text saying it timed out. It is stopped when pytest is."""
    config = out / "schemathesis.toml"
    config.write_text(SCHEMATHESIS_CONFIG.format(app=APP, key=API_KEY))
    for name in ("junit.xml", "schemathesis.txt"):
        (out / name).unlink(missing_ok=True)
    argv = [str(VENV_BIN / "schemathesis"), "--config-file", str(config), "run", f"{url}/openapi.yaml", "--url", url,
            "--max-examples", str(MAX_EXAMPLES), "--generation-deterministic", "--workers", "1", "--request-timeout", "10",
            "--no-color", "--warnings", "off", "--report", "junit", "--report-junit-path", str(out / "junit.xml")]
    with open(out / "schemathesis.txt", "wb") as output:
        process = subprocess.Popen(argv, cwd=str(out), stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)
    try:
        return process.wait(timeout=SCHEMATHESIS_TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"timed out after {SCHEMATHESIS_TIMEOUT} s"
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def junit_cases(path):
    """(name, None or what went wrong) of each test case of schemathesis' JUnit report: it names each
    `METHOD /path`; a failure or error element marks a failed operation, and so does a skipped one
    (it was not tested)."""
    if not path.exists():
        return []
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        bad = next((case.find(kind) for kind in ("failure", "error", "skipped") if case.find(kind) is not None), None)
        detail = None if bad is None else bad.tag + ": " + " ".join((bad.get("message") or bad.text or "").split())[:300]
        cases.append((case.get("name"), detail))
    return cases


def test_schemathesis(ingest, checks):
    version = importlib.metadata.version("schemathesis")
    checks.log(f"schemathesis {version}: {ingest.url}/openapi.yaml, {MAX_EXAMPLES} examples per operation, its default checks")
    status = run_schemathesis(ingest.out, ingest.url)
    for name, problem in junit_cases(ingest.out / "junit.xml"):
        if name:
            checks(problem is None, f"schemathesis: {name}", problem or "")
    output = (ingest.out / "schemathesis.txt").read_text(errors="replace")
    summary = "; ".join(re.sub(r"=|^ +| +$", "", line).strip() for line in output.splitlines()
                       if re.match(r"^ *[0-9]+ generated|^=+ .* in [0-9.]+s =+$", line))
    first = re.search(r"FAILURES|ERRORS", output)
    failures = output[output.rfind("\n", 0, first.start()) + 1:] if first else ""
    checks(status == 0, f"schemathesis run ({summary or 'no summary'})",
           f"exit {status}; {ingest.out / 'schemathesis.txt'}:\n" + "\n".join(failures.splitlines()[:60]))


def test_push_ingest_stops_cleanly(ingest, checks):
    """Last: push-ingest exits 0 on SIGTERM, and its log of the run names no failed request."""
    died = ingest.exited().get("push-ingest")
    status = ingest.stop_proc("push-ingest")
    checks(died is None and status == 0, "push-ingest exits 0 on SIGTERM",
           f"it had exited on its own with {died}" if died is not None else f"exit {status}")
    internal = [line for line in ingest.ingest_log().splitlines() if FAILED_REQUEST.search(line)]
    checks(not internal, "push-ingest logged no failed or unexpected request",
           f"{len(internal)} lines in {ingest.logdir / 'push-ingest.log'}: {internal[:3]}")
