#!/usr/bin/python3
"""The dashboards and alert rules against the services that feed them (scripts/checks/observability.sh
runs this module).

1. Files (the test_file_* tests need no stack: `-k file` runs them alone): `promtool check rules`
   and `promtool test rules` (deploy/prometheus/alerts.yml and alerts.test.yml), `promtool check
   config` (deploy/prometheus/prometheus.yml); every alert has `for:`, a severity (warning or
   critical), summary, description and runbook, and a test case where it fires and one where it does
   not; every runbook is `path[#heading] [(note)]` entries separated by `;`, each path a file of the
   repository and each heading one of that markdown file (GitHub's anchors, as
   scripts/checks/docs_links.py computes them); every dashboard of deploy/grafana/ is JSON Grafana
   imports as it is (uid, title, unique panel ids, every query on the `datasource` variable, a PromQL
   expression in every target); deploy/kubernetes/monitoring/prometheus-rule.yaml is alerts.yml as a
   PrometheusRule, byte for byte as --write makes it.
2. Metric names (the test_stack_* tests, in this order; each builds on the ones before): every
   metric a dashboard or alert expression uses (histogram suffixes _bucket, _sum, _count name their
   histogram; `up` is Prometheus' own) must be exported by a running service, and every label an
   expression selects on must exist on it (with the value, for `=` matchers on fixed values). The
   stack: the executables of --bin-dir on 127.0.0.1 (RabbitMQ 8900 with the rabbitmq_prometheus
   plugin on 8908, Redis 8901, apns-sandbox 8902 and its admin API 8903, push-ingest 8904,
   push-render 8905, push-send 8906, push-feedback 8907, and a second push-render on 8909 whose
   RabbitMQ and Redis URLs point at 8910, where nothing listens, so it reports its dependencies down
   and fails /readyz; RabbitMQ also derives 9900, 28900 and 29900-29910). Traffic that makes the
   labelled series appear: devices registered through push-ingest's API and on push.registrations;
   a push request to an app with a .p8 key whose tokens the sandbox answers 200, 410 Unregistered and
   BadDeviceToken, and one device whose settings disable everything; one to an app whose certificate
   the sandbox refuses (BadCertificate: the app pauses; the certificate gives
   push_credential_expiry_days); one over the per-device rate limit; one while the sandbox answers
   503 (retries); one request that is not JSON (push.dead). Then /metrics of every service and
   /metrics/per-object of RabbitMQ are compared with the names, one test per alerts file and
   dashboard. Afterwards every process exits 0 on SIGTERM.

    scripts/checks/observability.sh [--bin-dir DIR] [pytest arguments, e.g. -k dashboards]
    scripts/checks/observability.sh --write    (or: python3 tests/system/test_observability.py --write)

--write rewrites the PrometheusRule from alerts.yml and checks nothing. Logs and each service's
/metrics as scraped: .local/observability/.
"""
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pika
import pytest
import yaml
from conftest import serve
from harness.net import answers, call, metric_lines, wait_for
from harness.stack import RMQ_BIN, SERVICES, SetupError, Stack

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy/prometheus/alerts.yml"
ALERT_TESTS = ROOT / "deploy/prometheus/alerts.test.yml"
PROMETHEUS_CONFIG = ROOT / "deploy/prometheus/prometheus.yml"
RULE = ROOT / "deploy/kubernetes/monitoring/prometheus-rule.yaml"
DASHBOARDS = ROOT / "deploy/grafana"

BASE_PORT = 8900
RABBITMQ_METRICS_PORT = BASE_PORT + 8
BROKEN_PORT = BASE_PORT + 9
NOTHING_PORT = BASE_PORT + 10
UNREACHABLE = "push-render-unreachable"
TOKEN_APP = "com.example.obs"
CERT_APP = "com.example.obs.cert"
API_KEY = "obs-ingest-key"
CERT_API_KEY = "obs-cert-ingest-key"
# Series Prometheus makes itself for every target.
PROMETHEUS_OWN = {"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling",
                  "scrape_series_added"}
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"job", "instance"}


def _docs_links():
    """scripts/checks/docs_links.py (GitHub's anchors of a markdown file), loaded by path: putting
    scripts/checks on sys.path would let its modules shadow others in the pytest session."""
    spec = importlib.util.spec_from_file_location("docs_links", ROOT / "scripts" / "checks" / "docs_links.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


anchors_of = _docs_links().anchors_of


# --- the PrometheusRule ------------------------------------------------------------------------

RULE_HEADER = """\
# The alert rules of deploy/prometheus/alerts.yml as a PrometheusRule (Prometheus Operator, e.g.
# kube-prometheus-stack): `kubectl -n push apply -f deploy/kubernetes/monitoring/prometheus-rule.yaml`.
# GENERATED from alerts.yml by `scripts/checks/observability.sh --write`; edit alerts.yml, not this
# file (`make test` fails while they differ). The operator loads PrometheusRules whose labels match
# the Prometheus resource's ruleSelector: kube-prometheus-stack's default selects
# `release: <its Helm release name>`: give it that label when you apply it (a kustomization's
# `labels`, or `kubectl -n push label prometheusrule push-alerts release=NAME`).
"""


def prometheus_rule_text(alerts_text):
    """The PrometheusRule for alerts.yml: its `groups:` (comments included) indented under `spec:`."""
    lines = alerts_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("groups:"))
    body = "".join(("  " + line if line.strip() else "") + "\n" for line in lines[start:])
    return (RULE_HEADER + "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n"
            "  name: push-alerts\n  labels:\n    app.kubernetes.io/part-of: push\n    role: alert-rules\nspec:\n" + body)


# --- PromQL metric names -----------------------------------------------------------------------

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset",
            "inf", "nan", "start", "end"}
STRING = r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`'


def grafana_plain(expr):
    """`expr` with Grafana's variables replaced by what PromQL accepts in their place."""
    expr = re.sub(r"\$\{?__(rate_interval|interval|range)(_ms|_s)?\}?", "5m", expr)
    return re.sub(r"\$\{[^}]*\}|\$\w+", "VAR", expr)


def selectors(expr):
    """(metric name, [(label, op, value)]) of every vector selector in a PromQL expression."""
    expr = grafana_plain(expr)
    found = []
    # Name the strings so the rest can be parsed without them; matchers keep theirs.
    strings = []

    def keep(m):
        strings.append(m.group(0))
        return f"\x00{len(strings) - 1}\x00"

    masked = re.sub(STRING, keep, expr)

    def matchers(body):
        out = []
        for m in re.finditer(r"([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!=|!~|=)\s*\x00(\d+)\x00", body):
            raw = strings[int(m.group(3))]
            value = raw[1:-1]
            if raw[0] == '"':
                value = value.encode().decode("unicode_escape")
            out.append((m.group(1), m.group(2), value))
        return out

    # Drop range and subquery brackets, offsets and grouping clauses.
    masked = re.sub(r"\[[^\]]*\]", " ", masked)
    masked = re.sub(r"\boffset\s+-?\w+", " ", masked)
    masked = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", masked)
    position = 0
    pattern = re.compile(r"(?<![0-9A-Za-z_:.\x00])([A-Za-z_:][A-Za-z0-9_:]*)|\{([^}]*)\}")
    while True:
        m = pattern.search(masked, position)
        if not m:
            break
        position = m.end()
        if m.group(2) is not None:
            # A selector without a name: {__name__="…"} (or a bare matcher list).
            ms = matchers(m.group(2))
            for label, op, value in ms:
                if label == "__name__" and op in ("=", "=~"):
                    for name in value.split("|"):
                        found.append((name, [x for x in ms if x[0] != "__name__"]))
            continue
        name = m.group(1)
        rest = masked[position:]
        if name in KEYWORDS or re.match(r"\s*\(", rest):
            continue
        ms = []
        brace = re.match(r"\s*\{([^}]*)\}", rest)
        if brace:
            ms = matchers(brace.group(1))
            position += brace.end()
        found.append((name, ms))
    return found


def grouping_labels(expr):
    """Labels named in by/without/on/ignoring/group_left/group_right clauses of a PromQL expression."""
    expr = re.sub(STRING, '""', grafana_plain(expr))
    labels = set()
    for m in re.finditer(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr):
        labels.update(x.strip() for x in m.group(1).split(",") if x.strip())
    return labels


def dashboard_queries(dashboard):
    """(where, PromQL) of every query of a Grafana dashboard: panel targets and query variables."""
    out = []

    def panels(items):
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            if target.get("expr"):
                out.append((f"panel '{panel.get('title')}'", target["expr"]))
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        query = query.get("query", "") if isinstance(query, dict) else (query or "")
        m = re.match(r"\s*(?:label_values|query_result)\((.*)\)\s*$", query, re.S)
        if m:
            inner = m.group(1)
            if query.lstrip().startswith("label_values"):
                head, _, _label = inner.rpartition(",")
                inner = head if head.strip() else ""
            if inner.strip():
                out.append((f"variable ${variable.get('name')}", inner))
    return out


def alert_queries(rules):
    return [(f"alert {r.get('alert') or r.get('record')}", r["expr"]) for g in rules["groups"] for r in g["rules"]]


# --- exposition ----------------------------------------------------------------------------------

def parse_exposition(text):
    """{sample name: [label dict, …]} and {family: type} of a Prometheus text exposition."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                types[parts[2]] = parts[3]
            continue
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s", line)
        if not m:
            continue
        labels = dict(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        samples.setdefault(m.group(1), []).append(labels)
    return samples, types




class Exported:
    """Everything the running stack exports, by source."""

    def __init__(self):
        self.samples = {}   # name -> [(source, labels)]
        self.types = {}

    def add(self, source, text):
        samples, types = parse_exposition(text)
        for name, label_sets in samples.items():
            self.samples.setdefault(name, []).extend((source, labels) for labels in label_sets)
        self.types.update(types)

    def series(self, name):
        """The samples that stand for `name` (a histogram's _bucket/_sum/_count its own), or None."""
        if name in self.samples:
            return self.samples[name]
        for suffix in ("_bucket", "_sum", "_count"):
            base = name[: -len(suffix)] if name.endswith(suffix) else None
            if base and self.types.get(base) in ("histogram", "summary"):
                return self.samples.get(name) or []
        if self.types.get(name) in ("histogram", "summary"):
            return self.samples.get(name + "_count") or self.samples.get(name + "_sum") or []
        return None

    def has_label(self, name, label):
        return any(label in labels for _, labels in (self.series(name) or []))

    def problems(self, name, matchers):
        """What is wrong with using `name{matchers}`: '' when it is exported with those labels."""
        if name in PROMETHEUS_OWN:
            return ""
        series = self.series(name)
        if series is None:
            return "no service exports it"
        wrong = []
        for label, op, value in matchers:
            if label in TARGET_LABELS or label == "__name__":
                continue
            values = {labels.get(label) for _, labels in series if label in labels}
            if not values:
                wrong.append(f"no label {label}")
            elif op == "=" and value and "VAR" not in value and value not in values:
                wrong.append(f'no {label}="{value}" (has {", ".join(sorted(values))[:200]})')
        return "; ".join(wrong)




# --- file checks ---------------------------------------------------------------------------------

def run(argv, timeout=60):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))
    return r.returncode, (r.stdout + r.stderr).strip()


# One runbook entry: a repository path, an optional #heading of it, an optional note in parentheses.
RUNBOOK_ENTRY = re.compile(r"^([A-Za-z0-9_.\-/]+?)(?:#([^\s#()]+))?(?:\s+\([^()]*\))?$")


def runbook_problems(runbook, root=ROOT):
    """What is wrong with an alert's runbook (empty when nothing is): it must name at least one
    `path` or `path#heading` of the repository, entries separated by `;`, each optionally followed by
    a note in parentheses; every path must exist (inside the repository) and every heading must be one
    of that markdown file, as GitHub names its anchors."""
    entries = [entry.strip() for entry in (runbook or "").split(";") if entry.strip()]
    if not entries:
        return ["names no documentation"]
    problems = []
    root = Path(root).resolve()
    for entry in entries:
        m = RUNBOOK_ENTRY.match(entry)
        if not m:
            problems.append(f"'{entry}' is not path[#heading] [(note)]")
            continue
        path, anchor = m.group(1), m.group(2)
        target = (root / path).resolve()
        if not target.is_relative_to(root) or not target.exists():
            problems.append(f"{path} does not exist")
        elif anchor is not None and target.suffix.lower() != ".md":
            problems.append(f"{path}#{anchor}: {path} is not a markdown file")
        elif anchor is not None and anchor not in anchors_of(target):
            problems.append(f"{path} has no heading #{anchor}")
    return problems


def load_rules():
    return yaml.safe_load(ALERTS.read_text())


def load_dashboard(path):
    """A dashboard's JSON, or None when it is not JSON (test_file_dashboards says so)."""
    try:
        return json.loads(path.read_text())
    except ValueError:
        return None


def dashboard_problems(dashboard):
    """(panels with a title, what keeps Grafana from importing `dashboard` as it is)."""
    problems = []
    for key in ("uid", "title", "panels", "templating", "schemaVersion"):
        if key not in dashboard:
            problems.append(f"no {key}")
    if dashboard.get("id") is not None:
        problems.append("id must be null (Grafana assigns it)")
    variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
    if variables.get("datasource", {}).get("type") != "datasource" or variables["datasource"].get("query") != "prometheus":
        problems.append("no Prometheus datasource variable `datasource`")
    ids, titles = set(), 0

    def walk(items):
        for panel in items:
            yield panel
            yield from walk(panel.get("panels", []))

    for panel in walk(dashboard.get("panels", [])):
        pid = panel.get("id")
        if pid in ids:
            problems.append(f"panel id {pid} twice")
        ids.add(pid)
        if "gridPos" not in panel:
            problems.append(f"panel '{panel.get('title')}' has no gridPos")
        if panel.get("type") == "row":
            continue
        titles += 1
        if panel.get("type") == "text":
            continue
        ds = panel.get("datasource", {})
        if not (isinstance(ds, dict) and ds.get("uid") == "${datasource}"):
            problems.append(f"panel '{panel.get('title')}' is not on ${{datasource}}")
        targets = panel.get("targets", [])
        if not targets or not all(t.get("expr", "").strip() for t in targets):
            problems.append(f"panel '{panel.get('title')}' has a target without expr")
        if not panel.get("description"):
            problems.append(f"panel '{panel.get('title')}' has no description")
    for name, variable in variables.items():
        if variable.get("type") == "query" and (variable.get("datasource") or {}).get("uid") != "${datasource}":
            problems.append(f"variable {name} is not on ${{datasource}}")
    return titles, problems


# What the metric names are compared with: the alert rules and every dashboard, one test each.
SOURCES = [ALERTS] + sorted(DASHBOARDS.glob("*.json"))


def queries_of(path):
    """(where, PromQL) of every expression of an alerts file or a dashboard; None when it does not parse."""
    if path == ALERTS:
        return alert_queries(load_rules())
    dashboard = load_dashboard(path)
    return None if dashboard is None else dashboard_queries(dashboard)


# --- 1. the files (no stack) ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def promtool():
    if not shutil.which("promtool"):
        pytest.exit("promtool is missing (Debian's prometheus package; observability.sh installs it)", returncode=3)


def test_file_promtool(promtool, checks):
    for verb, path, tail in (("check rules", ALERTS, 1500), ("test rules", ALERT_TESTS, 3000),
                             ("check config", PROMETHEUS_CONFIG, 1500)):
        rc, out = run(["promtool", *verb.split(), str(path.relative_to(ROOT))])
        checks(rc == 0, f"promtool {verb} {path.relative_to(ROOT)}", out[-tail:])


def test_file_alerts_annotated(checks):
    bad = []
    for group in load_rules()["groups"]:
        for rule in group["rules"]:
            name = rule.get("alert")
            if not name:
                continue
            a = rule.get("annotations", {})
            missing = [k for k in ("summary", "description", "runbook") if not a.get(k)]
            if "for" not in rule:
                missing.append("for")
            if rule.get("labels", {}).get("severity") not in ("warning", "critical"):
                missing.append("severity warning|critical")
            missing += [f"runbook: {p}" for p in runbook_problems(a.get("runbook", "")) if a.get("runbook")]
            if missing:
                bad.append(f"{name} ({', '.join(missing)})")
    checks(not bad, "every alert has for:, a severity, summary, description and a runbook naming docs that exist",
           "; ".join(bad))


def test_file_alerts_tested(checks):
    rules, tests = load_rules(), yaml.safe_load(ALERT_TESTS.read_text())
    firing, quiet = set(), set()
    for case in tests.get("tests", []):
        for t in case.get("alert_rule_test", []):
            (firing if t.get("exp_alerts") else quiet).add(t["alertname"])
    names = {r["alert"] for g in rules["groups"] for r in g["rules"] if r.get("alert")}
    untested = sorted(n for n in names if n not in firing or n not in quiet)
    checks(not untested, f"every alert ({len(names)}) has a firing and a non-firing test case",
           ", ".join(f"{n} ({'no firing case' if n not in firing else 'no non-firing case'})" for n in untested))


def test_file_prometheus_rule(checks):
    alerts_text = ALERTS.read_text()
    have = RULE.read_text() if RULE.exists() else None
    checks(have == prometheus_rule_text(alerts_text), f"{RULE.relative_to(ROOT)} is alerts.yml as a PrometheusRule",
           "missing" if have is None else "it differs: run scripts/checks/observability.sh --write")
    if have is not None:
        doc = yaml.safe_load(have)
        same = (doc.get("apiVersion") == "monitoring.coreos.com/v1" and doc.get("kind") == "PrometheusRule"
                and doc.get("spec", {}).get("groups") == yaml.safe_load(alerts_text)["groups"])
        checks(same, "its spec.groups equal alerts.yml's groups")


def test_file_dashboards(checks):
    paths = sorted(DASHBOARDS.glob("*.json"))
    expected = {f"{n}.json" for n in ("overview", "push-ingest", "push-render", "push-send", "push-feedback")}
    checks(expected <= {p.name for p in paths}, "deploy/grafana/ has the overview and one dashboard per service",
           f"missing {sorted(expected - {p.name for p in paths})}")
    for path in paths:
        rel = path.relative_to(ROOT)
        try:
            dashboard = json.loads(path.read_text())
        except ValueError as e:
            checks(False, f"{rel} is JSON", str(e))
            continue
        titles, problems = dashboard_problems(dashboard)
        checks(not problems, f"{rel}: {titles} panels, importable (uid {dashboard.get('uid')}, datasource variable)",
               "; ".join(problems[:10]))


# --- 2. the stack --------------------------------------------------------------------------------

class ObservabilityStack(Stack):
    """Two apps (a .p8 one and one with a self-signed certificate the sandbox refuses), the sandbox
    trusting only client-ca.pem, rabbitmq_prometheus on RABBITMQ_METRICS_PORT, and a push-render
    whose dependencies are unreachable started before the four services."""

    APP = TOKEN_APP

    def __init__(self, bin_dir):
        super().__init__(bin_dir, "observability", BASE_PORT, tokens=100, log_level="warning")
        self.port["rabbitmq-metrics"] = RABBITMQ_METRICS_PORT
        self.port[UNREACHABLE] = BROKEN_PORT
        self.ingest_key = API_KEY
        self.client_ca = self.out / "client-ca.pem"
        self.services = [UNREACHABLE, *SERVICES]
        self.extra_env = {
            "push-feedback": {"PUSH_FEEDBACK_STALE_DAYS": "30"},
            UNREACHABLE: {"PUSH_AMQP_URL": f"amqp://guest:guest@127.0.0.1:{NOTHING_PORT}/%2f",
                          "PUSH_REDIS_URL": f"redis://127.0.0.1:{NOTHING_PORT}/0"},
        }

    def start_servers(self):
        busy = self.wait_ports_free([NOTHING_PORT], timeout=30)
        if busy:
            raise SetupError(f"port {NOTHING_PORT} must be free (nothing listening) but is in use")
        # scripts/rabbitmq.sh rewrites rabbitmq.conf and enabled_plugins at every start, not
        # advanced.config: the plugin's listener is set there and the plugin enabled once the node
        # runs (rabbitmq-plugins, online).
        self.rmq_dir.mkdir(parents=True, exist_ok=True)
        (self.rmq_dir / "advanced.config").write_text(
            "%% Written by tests/system/test_observability.py: rabbitmq_prometheus on 127.0.0.1 only.\n"
            f'[{{rabbitmq_prometheus, [{{tcp_config, [{{port, {RABBITMQ_METRICS_PORT}}}, {{ip, "127.0.0.1"}}]}}]}}].\n')
        super().start_servers()
        self.enable_prometheus_plugin()

    def enable_prometheus_plugin(self):
        """`rabbitmq-plugins enable rabbitmq_prometheus` on the running node (Stack.ctl's
        environment plus the node's plugin files), then its listener awaited."""
        env = dict(self.ctl_env(), RABBITMQ_ENABLED_PLUGINS_FILE=str(self.rmq_dir / "enabled_plugins"),
                   RABBITMQ_PLUGINS_EXPAND_DIR=str(self.rmq_dir / "plugins-expand"))
        r = subprocess.run([f"{RMQ_BIN}/rabbitmq-plugins", "enable", "rabbitmq_prometheus"], env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise SetupError(f"rabbitmq-plugins enable rabbitmq_prometheus: {r.returncode} {r.stderr.strip()[-500:]}")
        if not wait_for(lambda: answers(RABBITMQ_METRICS_PORT, "/metrics/per-object"), 30, step=0.2):
            raise SetupError(f"rabbitmq_prometheus does not answer on 127.0.0.1:{RABBITMQ_METRICS_PORT}")

    def key_and_apps(self):
        def openssl(*argv):
            subprocess.run(["openssl", *argv], check=True, capture_output=True, cwd=str(self.out))

        # The sandbox trusts client certificates of client-ca.pem; the app's certificate is
        # self-signed (20 days), so every request on its connection is answered 403 BadCertificate.
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "client-ca.key", "-out", "client-ca.pem",
                "-days", "30", "-subj", "/CN=observability client CA")
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "cert-app.key", "-out", "cert-app.pem",
                "-days", "20", "-subj", f"/UID={CERT_APP}/CN=Apple Push Services: {CERT_APP}")
        super().key_and_apps()

    def app_definitions(self, apns):
        return {
            TOKEN_APP: {"default": True, "environment": "production", "apns": apns, "ingest": {"api_keys": [API_KEY]},
                        "rate_limits": {"per_device_per_hour": 1, "per_app_per_second": 10000}},
            CERT_APP: {"environment": "production",
                       "apns": {"certificate_file": str(self.out / "cert-app.pem"), "private_key_file": str(self.out / "cert-app.key")},
                       "ingest": {"api_keys": [CERT_API_KEY]}},
        }

    def sandbox_args(self):
        return ["--client-ca", str(self.client_ca)]

    def start_service(self, name, wait=True):
        if name != UNREACHABLE:
            return super().start_service(name, wait)
        # A push-render whose RabbitMQ and Redis do not answer (extra_env): never ready, not awaited.
        self.spawn(name, [str(self.bin / "push-render")], env=self.service_env(name))
        return None


def tokens():
    """64-hex-digit device tokens, one per role (their users: alice, bob, carol, dave, erin, frank, gina)."""
    roles = ["a11ce", "b0b", "ca201", "da7e", "e21a", "f2a4c", "9e2a"]
    return {role: (role + "0" * 64)[:63] + "1" for role in roles}


class Scenario:
    """What the stack tests share: the stack, the tokens, what the services exported. `check` is the
    running test's."""

    def __init__(self, stack):
        self.stack = stack
        self.check = None
        self.tokens = tokens()
        self.exported = Exported()

    def register(self, app, key, token, user, settings=None):
        body = {"user": user, "locale": "en", **({"settings": settings} if settings else {})}
        return call(self.stack.port["push-ingest"], "PUT", f"/v1/apps/{app}/devices/{token}", body=body,
                    headers={"Authorization": f"Bearer {key}"}, timeout=10).status

    def sandbox(self, method, path, body=None):
        return call(self.stack.port["admin"], method, path, body=body)

    def publish(self, routing_key, body):
        """One confirmed, persistent, routed message on the `push` exchange."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        connection = pika.BlockingConnection(pika.URLParameters(self.stack.amqp_url))
        try:
            channel = connection.channel()
            channel.confirm_delivery()
            channel.basic_publish("push", routing_key, data, pika.BasicProperties(
                content_type="application/json", delivery_mode=2, timestamp=int(time.time())), mandatory=True)
        finally:
            connection.close()

    def send_metric(self, name, labels=""):
        return [k for k in metric_lines(self.stack.port["push-send"], name) if labels in k]

    def scrape(self, port, path="/metrics"):
        """(status or the error, text) of a /metrics."""
        try:
            reply = call(port, "GET", path, timeout=5)
            status, text = reply.status, reply.text()
        except OSError as e:
            status, text = str(e), ""
        return status, text


ALERT = {"aps": {"alert": {"title": "observability", "body": "check"}}}


@pytest.fixture(scope="module")
def scenario(bin_dir):
    for stack in serve(ObservabilityStack(bin_dir)):
        yield Scenario(stack)


@pytest.fixture
def obs(scenario, checks):
    """The scenario, its checks counted in the running test."""
    scenario.check = checks
    return scenario


def test_stack_unreachable_render_not_ready(obs):
    # Asked whether it is ready a few times (as a probe would).
    wait_for(lambda: answers(BROKEN_PORT, "/healthz"), 20)
    statuses = []
    for _ in range(3):
        try:
            statuses.append(call(BROKEN_PORT, "GET", "/readyz", timeout=5).status)
        except OSError as e:
            statuses.append(str(e))
        time.sleep(0.3)
    obs.check(all(s == 503 for s in statuses), "a push-render without RabbitMQ and Redis answers /readyz 503", f"{statuses}")


def test_stack_registrations(obs):
    t = obs.tokens
    statuses = [obs.register(TOKEN_APP, API_KEY, t["a11ce"], "alice"),
                obs.register(TOKEN_APP, API_KEY, t["b0b"], "bob"),
                obs.register(TOKEN_APP, API_KEY, t["ca201"], "carol"),
                obs.register(TOKEN_APP, API_KEY, t["da7e"], "dave", {"alert": False, "badge": False, "sound": False}),
                obs.register(TOKEN_APP, API_KEY, t["e21a"], "erin"),
                obs.register(CERT_APP, CERT_API_KEY, t["f2a4c"], "frank")]
    obs.check(all(s in (200, 201) for s in statuses), "devices registered through push-ingest's API", f"HTTP {statuses}")


def test_stack_push_outcomes(obs):
    t = obs.tokens
    obs.sandbox("PUT", f"/tokens/{t['b0b']}", {"state": "unregistered", "timestamp": int(time.time() * 1000)})
    obs.sandbox("PUT", f"/tokens/{t['ca201']}", {"state": "bad"})
    obs.publish("registration", {"app": TOKEN_APP, "token": t["9e2a"], "user": "gina", "locale": "en",
                                 "registered_at": int(time.time() * 1000)})
    obs.publish("request", {"id": "obs-1", "app": TOKEN_APP, "to": {"users": ["alice", "bob", "carol", "dave"]}, "payload": ALERT})
    obs.publish("request", {"id": "obs-cert", "app": CERT_APP, "to": {"users": ["frank"]}, "payload": ALERT})
    obs.publish("request", b"this is not JSON")
    settled = wait_for(lambda: obs.send_metric("push_send_failed_total", "BadDeviceToken")
                       and obs.send_metric("push_send_failed_total", "Unregistered")
                       and obs.send_metric("push_send_delivered_total") and obs.send_metric("push_send_app_paused"), 30)
    obs.check(bool(settled), "delivered, Unregistered, BadDeviceToken and a paused app at push-send",
              f"push-send's /metrics lacks some of them (see {obs.stack.logdir}/*.log)")


def test_stack_rate_limited(obs):
    # alice again: over the app's per-device limit (1 an hour), deferred.
    obs.publish("request", {"id": "obs-2", "app": TOKEN_APP, "to": {"users": ["alice"]}, "payload": ALERT})
    limited = wait_for(lambda: obs.send_metric("push_send_rate_limited_total"), 20)
    obs.check(bool(limited), "a notification over the per-device rate limit is deferred")


def test_stack_retried_on_503(obs):
    # erin while the sandbox answers 503: retried.
    obs.sandbox("PUT", "/faults", {"status": 503, "rate": 1.0})
    try:
        obs.publish("request", {"id": "obs-3", "app": TOKEN_APP, "to": {"users": ["erin"]}, "payload": ALERT})
        retried = wait_for(lambda: obs.send_metric("push_send_retries_total"), 20)
    finally:
        obs.sandbox("DELETE", "/faults")
    obs.check(bool(retried), "a notification answered 503 is retried")


def test_stack_dead_tokens_removed(obs):
    removed = wait_for(lambda: metric_lines(obs.stack.port["push-feedback"], "push_feedback_tokens_removed_total"), 20)
    obs.check(bool(removed), "push-feedback removed the dead tokens")


def test_stack_rabbitmq_prometheus(obs):
    def per_object_has_queues():
        status, text = obs.scrape(RABBITMQ_METRICS_PORT, "/metrics/per-object")
        ready = {m.group(1) for m in re.finditer(r'^rabbitmq_queue_messages_ready\{[^}]*queue="([^"]*)"', text, re.M)}
        return text if status == 200 and {"push.send", "push.dead", "push.send.retry.1s"} <= ready else None

    # Queues report their counts every few seconds (quorum queues on their tick).
    waited = time.monotonic()
    rabbit = wait_for(per_object_has_queues, 40)
    obs.check.log(f"rabbitmq_prometheus: queue counts after {time.monotonic() - waited:.1f} s")
    obs.check(bool(rabbit), "rabbitmq_prometheus reports the push queues on /metrics/per-object")
    if rabbit:
        obs.exported.add("rabbitmq", rabbit)
        (obs.stack.out / "metrics-rabbitmq.txt").write_text(rabbit)


def test_stack_service_metrics(obs):
    for name in [*SERVICES, UNREACHABLE]:
        port = obs.stack.port[name]
        status, text = obs.scrape(port)
        obs.check(status == 200, f"{name}: /metrics on 127.0.0.1:{port}", f"{status}")
        obs.exported.add(name, text)
        (obs.stack.out / f"metrics-{name}.txt").write_text(text)


@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_stack_metric_names(obs, path):
    source = str(path.relative_to(ROOT))
    queries = queries_of(path)
    if queries is None:
        pytest.skip(f"{source} is not JSON (test_file_dashboards fails on it)")
    exported = obs.exported
    problems = {}
    names = set()
    for where, expr in queries:
        used = selectors(expr)
        for name, ms in used:
            names.add(name)
            why = exported.problems(name, ms)
            if why:
                problems.setdefault(f"{name}: {why}", []).append(where)
        # A label the expression groups or matches on must be on one of its metrics (unless one of
        # them is missing altogether: that is reported already).
        if any(exported.series(name) is None and name not in PROMETHEUS_OWN for name, _ in used):
            continue
        for label in grouping_labels(expr) - TARGET_LABELS - {"le"}:
            if not any(exported.has_label(name, label) for name, _ in used):
                problems.setdefault(f"label {label} (by/on): none of {', '.join(sorted({n for n, _ in used}))} has it",
                                    []).append(where)
    obs.check(not problems, f"{source}: its {len(names)} metrics are exported with the labels it selects",
              "; ".join(f"{p} (used by {', '.join(sorted(set(w))[:3])})" for p, w in sorted(problems.items())))


def write_rule():
    """--write: the PrometheusRule regenerated from alerts.yml."""
    RULE.parent.mkdir(parents=True, exist_ok=True)
    RULE.write_text(prometheus_rule_text(ALERTS.read_text()))
    print(f"observability: wrote {RULE.relative_to(ROOT)}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: tests/system/test_observability.py --write  (the checks: scripts/checks/observability.sh)")
    write_rule()
