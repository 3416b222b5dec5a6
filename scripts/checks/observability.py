#!/usr/bin/python3
"""The dashboards and alert rules against the services that feed them (scripts/checks/observability.sh).

1. Files: `promtool check rules` and `promtool test rules` (deploy/prometheus/alerts.yml and
   alerts.test.yml), `promtool check config` (deploy/prometheus/prometheus.yml); every alert has
   `for:`, a severity (warning or critical), summary, description and runbook, and a test case where
   it fires and one where it does not; every runbook is `path[#heading] [(note)]` entries separated
   by `;`, each path a file of the repository and each heading one of that markdown file (GitHub's
   anchors, as scripts/checks/docs_links.py computes them); every dashboard of deploy/grafana/ is
   JSON Grafana imports as it is (uid, title, unique panel ids, every query on the `datasource`
   variable, a PromQL expression in every target); deploy/kubernetes/monitoring/prometheus-rule.yaml
   is alerts.yml as a PrometheusRule, byte for byte as --write makes it.
2. Metric names: every metric a dashboard or alert expression uses (histogram suffixes _bucket,
   _sum, _count name their histogram; `up` is Prometheus' own) must be exported by a running
   service, and every label an expression selects on must exist on it (with the value, for `=`
   matchers on fixed values). The stack: the executables of --bin-dir on 127.0.0.1 (RabbitMQ 8900
   with the rabbitmq_prometheus plugin on 8908, Redis 8901, apns-sandbox 8902 and its admin API
   8903, push-ingest 8904, push-render 8905, push-send 8906, push-feedback 8907, and a second
   push-render on 8909 whose RabbitMQ and Redis URLs point at 8910, where nothing listens, so it
   reports its dependencies down and fails /readyz; RabbitMQ also derives 9900, 28900 and
   29900-29910). Traffic that makes the labelled series appear: devices registered through
   push-ingest's API and on push.registrations; a push request to an app with a .p8 key whose
   tokens the sandbox answers 200, 410 Unregistered and BadDeviceToken, and one device whose
   settings disable everything; one to an app whose certificate the sandbox refuses (BadCertificate:
   the app pauses; the certificate gives push_credential_expiry_days); one over the per-device rate
   limit; one while the sandbox answers 503 (retries); one request that is not JSON (push.dead).
   Then /metrics of every service and /metrics/per-object of RabbitMQ are compared with the names.

    scripts/checks/observability.sh [--bin-dir DIR] [--write]

--write rewrites the PrometheusRule from alerts.yml and checks nothing else. Prints one line per
check and `observability: N passed, N failed`; exits 1 when a check failed, 3 when a prerequisite is
missing or the stack could not be set up. Everything started is stopped at the end, also on failure
or Ctrl-C. Logs: .local/observability/.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "chaos"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs_links import anchors_of  # noqa: E402 (GitHub's anchors of a markdown file)

ALERTS = ROOT / "deploy/prometheus/alerts.yml"
ALERT_TESTS = ROOT / "deploy/prometheus/alerts.test.yml"
PROMETHEUS_CONFIG = ROOT / "deploy/prometheus/prometheus.yml"
RULE = ROOT / "deploy/kubernetes/monitoring/prometheus-rule.yaml"
DASHBOARDS = ROOT / "deploy/grafana"
START = time.monotonic()

BASE_PORT = 8900
RABBITMQ_METRICS_PORT = BASE_PORT + 8
BROKEN_PORT = BASE_PORT + 9
NOTHING_PORT = BASE_PORT + 10
TOKEN_APP = "com.example.obs"
CERT_APP = "com.example.obs.cert"
API_KEY = "obs-ingest-key"
CERT_API_KEY = "obs-cert-ingest-key"
# Series Prometheus makes itself for every target.
PROMETHEUS_OWN = {"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling",
                  "scrape_series_added"}
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"job", "instance"}


def log(text):
    print(f"observability | {text}", flush=True)


class Report:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what, why=""):
        if ok:
            self.passed += 1
            log(f"ok   {what}")
        else:
            self.failed += 1
            log(f"FAIL {what}" + (f": {why}" if why else ""))
        return ok


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


def http_get(port, path, timeout=5):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.status, r.read().decode(errors="replace")


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


# --- the stack -----------------------------------------------------------------------------------

def make_stack_class():
    import chaos  # noqa: E402  (the chaos suite's stack: servers, sandbox, services)

    class ObservabilityStack(chaos.Stack):
        def __init__(self, args):
            args.smoke = False
            args.tokens = 100
            super().__init__(args)
            self.relocate("observability", BASE_PORT)
            self.port["rabbitmq-metrics"] = RABBITMQ_METRICS_PORT
            self.port["push-render-unreachable"] = BROKEN_PORT
            self.client_ca = self.out / "client-ca.pem"
            self.pids = self.out / "pids"

        def start_servers(self):
            self.out.mkdir(parents=True, exist_ok=True)
            self.pids.write_text("")
            busy = self.wait_ports_free([NOTHING_PORT], timeout=30)
            if busy:
                raise chaos.SetupError(f"port {NOTHING_PORT} must be free (nothing listening) but is in use")
            # scripts/rabbitmq.sh rewrites rabbitmq.conf and enabled_plugins at every start, not
            # advanced.config: the plugin's listener is set there and the plugin enabled once the
            # node runs (rabbitmq-plugins, online).
            self.rmq_dir.mkdir(parents=True, exist_ok=True)
            (self.rmq_dir / "advanced.config").write_text(
                "%% Written by scripts/checks/observability.py: rabbitmq_prometheus on 127.0.0.1 only.\n"
                f'[{{rabbitmq_prometheus, [{{tcp_config, [{{port, {RABBITMQ_METRICS_PORT}}}, {{ip, "127.0.0.1"}}]}}]}}].\n')
            super().start_servers()
            self.enable_prometheus_plugin()

        def enable_prometheus_plugin(self):
            p = self.port["amqp"]
            env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_EPMD_"))}
            env.update(HOME=str(self.rmq_dir), RABBITMQ_NODENAME=f"push-{self.name}@localhost", RABBITMQ_USE_LONGNAME="false",
                       ERL_EPMD_PORT=str(p + 1000), RABBITMQ_CTL_DIST_PORT_MIN=str(p + 21000),
                       RABBITMQ_CTL_DIST_PORT_MAX=str(p + 21010),
                       RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
                       RABBITMQ_ENABLED_PLUGINS_FILE=str(self.rmq_dir / "enabled_plugins"),
                       RABBITMQ_PLUGINS_EXPAND_DIR=str(self.rmq_dir / "plugins-expand"),
                       ERL_CRASH_DUMP=str(self.rmq_dir / "log" / "erl_crash.dump"))
            r = subprocess.run([f"{chaos.RMQ_BIN}/rabbitmq-plugins", "enable", "rabbitmq_prometheus"], env=env,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                raise chaos.SetupError(f"rabbitmq-plugins enable rabbitmq_prometheus: {r.returncode} {r.stderr.strip()[-500:]}")
            deadline = time.time() + 30
            while time.time() < deadline:
                try:
                    if http_get(RABBITMQ_METRICS_PORT, "/metrics/per-object")[0] == 200:
                        return
                except OSError:
                    pass
                time.sleep(0.2)
            raise chaos.SetupError(f"rabbitmq_prometheus does not answer on 127.0.0.1:{RABBITMQ_METRICS_PORT}")

        def key_and_apps(self):
            def openssl(*argv):
                subprocess.run(["openssl", *argv], check=True, capture_output=True, cwd=str(self.out))

            key = self.out / "AuthKey_OBSKEY0001.p8"
            openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(key))
            # The sandbox trusts client certificates of client-ca.pem; the app's certificate is
            # self-signed (20 days), so every request on its connection is answered 403 BadCertificate.
            openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "client-ca.key", "-out", "client-ca.pem",
                    "-days", "30", "-subj", "/CN=observability client CA")
            openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "cert-app.key", "-out", "cert-app.pem",
                    "-days", "20", "-subj", f"/UID={CERT_APP}/CN=Apple Push Services: {CERT_APP}")
            apps = {"apps": {
                TOKEN_APP: {
                    "default": True, "environment": "production",
                    "apns": {"key_file": str(key), "key_id": "OBSKEY0001", "team_id": "TEAM000001"},
                    "ingest": {"api_keys": [API_KEY]},
                    "rate_limits": {"per_device_per_hour": 1, "per_app_per_second": 10000},
                },
                CERT_APP: {
                    "environment": "production",
                    "apns": {"certificate_file": str(self.out / "cert-app.pem"), "private_key_file": str(self.out / "cert-app.key")},
                    "ingest": {"api_keys": [CERT_API_KEY]},
                },
            }}
            self.apps.write_text(json.dumps(apps, indent=2))

        def spawn(self, name, argv, env=None):
            p = super().spawn(name, argv, env)
            with open(self.pids, "a") as f:
                f.write(f"{p.pid}\n")
            return p

        def start_sandbox(self):
            self.ca.unlink(missing_ok=True)
            argv = [str(self.bin / "apns-sandbox"), "--port", str(self.port["apns"]), "--admin-port", str(self.port["admin"]),
                    "--ca-out", str(self.ca), "--client-ca", str(self.client_ca)]
            self.spawn("apns-sandbox", argv, env=dict(os.environ, PUSH_LOG_LEVEL="warning"))
            deadline = time.time() + 30
            while time.time() < deadline:
                if self.procs["apns-sandbox"].poll() is not None:
                    raise chaos.SetupError("apns-sandbox exited at start (see its log)")
                try:
                    if chaos.hreq(self.port["admin"], "GET", "/healthz")[0] == 200 and self.ca.exists() and self.ca.stat().st_size:
                        return
                except OSError:
                    pass
                time.sleep(0.1)
            raise chaos.SetupError("apns-sandbox did not come up")

        def start_unreachable(self):
            """A push-render whose RabbitMQ and Redis do not answer: dependencies down, /readyz 503."""
            name = "push-render-unreachable"
            env = self.service_env("push-render")
            env.update(PUSH_AMQP_URL=f"amqp://guest:guest@127.0.0.1:{NOTHING_PORT}/%2f",
                       PUSH_REDIS_URL=f"redis://127.0.0.1:{NOTHING_PORT}/0", PUSH_HTTP_PORT=str(BROKEN_PORT))
            self.spawn(name, [str(self.bin / "push-render")], env=env)

        def stop_all(self):
            statuses = {}
            if "push-render-unreachable" in self.procs:
                self.stop_proc("push-render-unreachable")
            statuses.update(super().stop_all())
            return statuses

    return ObservabilityStack, chaos


def _answers(port, path):
    try:
        return http_get(port, path)[0] == 200
    except OSError:
        return False


def wait_for(fn, timeout):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.25)
    return last


def tokens():
    """64-hex-digit device tokens, one per role (their users: alice, bob, carol, dave, erin, frank, gina)."""
    roles = ["a11ce", "b0b", "ca201", "da7e", "e21a", "f2a4c", "9e2a"]
    return {role: (role + "0" * 64)[:63] + "1" for role in roles}


def drive_traffic(stack, chaos, report):
    """Registrations and pushes whose outcomes make every labelled series appear."""
    import pika

    t = tokens()
    ingest = stack.port["push-ingest"]
    send_port = stack.port["push-send"]

    def register(app, key, token, user, settings=None):
        body = {"user": user, "locale": "en"}
        if settings:
            body["settings"] = settings
        conn = http.client.HTTPConnection("127.0.0.1", ingest, timeout=10)
        try:
            conn.request("PUT", f"/v1/apps/{app}/devices/{token}", body=json.dumps(body),
                         headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
            return conn.getresponse().status
        finally:
            conn.close()

    statuses = [register(TOKEN_APP, API_KEY, t["a11ce"], "alice"),
                register(TOKEN_APP, API_KEY, t["b0b"], "bob"),
                register(TOKEN_APP, API_KEY, t["ca201"], "carol"),
                register(TOKEN_APP, API_KEY, t["da7e"], "dave", {"alert": False, "badge": False, "sound": False}),
                register(TOKEN_APP, API_KEY, t["e21a"], "erin"),
                register(CERT_APP, CERT_API_KEY, t["f2a4c"], "frank")]
    report.check(all(s in (200, 201) for s in statuses), "devices registered through push-ingest's API", f"HTTP {statuses}")
    chaos.hreq(stack.port["admin"], "PUT", f"/tokens/{t['b0b']}", {"state": "unregistered", "timestamp": int(time.time() * 1000)})
    chaos.hreq(stack.port["admin"], "PUT", f"/tokens/{t['ca201']}", {"state": "bad"})

    conn = pika.BlockingConnection(pika.URLParameters(stack.amqp_url))
    try:
        ch = conn.channel()
        ch.confirm_delivery()

        def publish(routing_key, body):
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            ch.basic_publish("push", routing_key, data, pika.BasicProperties(
                content_type="application/json", delivery_mode=2, timestamp=int(time.time())), mandatory=True)

        publish("registration", {"app": TOKEN_APP, "token": t["9e2a"], "user": "gina", "locale": "en",
                                 "registered_at": int(time.time() * 1000)})
        alert = {"aps": {"alert": {"title": "observability", "body": "check"}}}
        publish("request", {"id": "obs-1", "app": TOKEN_APP, "to": {"users": ["alice", "bob", "carol", "dave"]}, "payload": alert})
        publish("request", {"id": "obs-cert", "app": CERT_APP, "to": {"users": ["frank"]}, "payload": alert})
        publish("request", b"this is not JSON")

        def send_metric(name, labels=""):
            return [k for k in chaos.metric_lines(send_port, name) if labels in k]

        settled = wait_for(lambda: send_metric("push_send_failed_total", "BadDeviceToken") and send_metric("push_send_failed_total", "Unregistered")
                           and send_metric("push_send_delivered_total") and send_metric("push_send_app_paused"), 30)
        report.check(bool(settled), "delivered, Unregistered, BadDeviceToken and a paused app at push-send",
                     "push-send's /metrics lacks some of them (see .local/observability/*.log)")
        # alice again: over the app's per-device limit (1 an hour), deferred.
        publish("request", {"id": "obs-2", "app": TOKEN_APP, "to": {"users": ["alice"]}, "payload": alert})
        limited = wait_for(lambda: send_metric("push_send_rate_limited_total"), 20)
        report.check(bool(limited), "a notification over the per-device rate limit is deferred")
        # erin while the sandbox answers 503: retried.
        chaos.hreq(stack.port["admin"], "PUT", "/faults", {"status": 503, "rate": 1.0})
        try:
            publish("request", {"id": "obs-3", "app": TOKEN_APP, "to": {"users": ["erin"]}, "payload": alert})
            retried = wait_for(lambda: send_metric("push_send_retries_total"), 20)
        finally:
            chaos.hreq(stack.port["admin"], "DELETE", "/faults")
        report.check(bool(retried), "a notification answered 503 is retried")
    finally:
        conn.close()
    removed = wait_for(lambda: chaos.metric_lines(stack.port["push-feedback"], "push_feedback_tokens_removed_total"), 20)
    report.check(bool(removed), "push-feedback removed the dead tokens")


def run_stack_checks(args, report, names_by_source):
    ObservabilityStack, chaos = make_stack_class()
    stack = ObservabilityStack(args)
    exported = Exported()

    def body():
        stack.start_servers()
        stack.start_sandbox()
        stack.start_unreachable()
        for name in chaos.SERVICES:
            stack.extra_env[name] = {"PUSH_FEEDBACK_STALE_DAYS": "30"} if name == "push-feedback" else {}
            stack.start_service(name)
        # The unreachable push-render: asked whether it is ready a few times (as a probe would).
        wait_for(lambda: _answers(BROKEN_PORT, "/healthz"), 20)
        answers = []
        for _ in range(3):
            try:
                answers.append(chaos.hreq(BROKEN_PORT, "GET", "/readyz", timeout=5)[0])
            except OSError as e:
                answers.append(str(e))
            time.sleep(0.3)
        report.check(all(a == 503 for a in answers), "a push-render without RabbitMQ and Redis answers /readyz 503", f"{answers}")
        drive_traffic(stack, chaos, report)

        def per_object_has_queues():
            try:
                status, text = http_get(RABBITMQ_METRICS_PORT, "/metrics/per-object")
            except OSError:
                return None
            ready = {m.group(1) for m in re.finditer(r'^rabbitmq_queue_messages_ready\{[^}]*queue="([^"]*)"', text, re.M)}
            return text if status == 200 and {"push.send", "push.dead", "push.send.retry.1s"} <= ready else None

        # Queues report their counts every few seconds (quorum queues on their tick).
        waited = time.monotonic()
        rabbit = wait_for(per_object_has_queues, 40)
        log(f"rabbitmq_prometheus: queue counts after {time.monotonic() - waited:.1f} s")
        report.check(bool(rabbit), "rabbitmq_prometheus reports the push queues on /metrics/per-object")
        if rabbit:
            exported.add("rabbitmq", rabbit)
            (stack.out / "metrics-rabbitmq.txt").write_text(rabbit)
        for name, port in [(n, stack.port[n]) for n in chaos.SERVICES] + [("push-render-unreachable", BROKEN_PORT)]:
            try:
                status, text = http_get(port, "/metrics")
            except OSError as e:
                status, text = str(e), ""
            report.check(status == 200, f"{name}: /metrics on 127.0.0.1:{port}", f"{status}")
            exported.add(name, text)
            (stack.out / f"metrics-{name}.txt").write_text(text)

    rc, statuses = chaos.run_stack(stack, body, timeout=args.timeout, say=log)
    for name in chaos.SERVICES:
        code = statuses.get(name)
        report.check(code in (0, None), f"{name} exits 0 on SIGTERM", f"exit {code}")
    if rc:
        report.check(False, "the stack ran", f"{'setup failed' if rc == 3 else 'interrupted'} (logs in {stack.out})")
        return rc
    for source, queries in names_by_source.items():
        problems = {}
        names = set()
        for where, expr in queries:
            used = selectors(expr)
            for name, ms in used:
                names.add(name)
                why = exported.problems(name, ms)
                if why:
                    problems.setdefault(f"{name}: {why}", []).append(where)
            # A label the expression groups or matches on must be on one of its metrics (unless one
            # of them is missing altogether: that is reported already).
            if any(exported.series(name) is None and name not in PROMETHEUS_OWN for name, _ in used):
                continue
            for label in grouping_labels(expr) - TARGET_LABELS - {"le"}:
                if not any(exported.has_label(name, label) for name, _ in used):
                    problems.setdefault(f"label {label} (by/on): none of {', '.join(sorted({n for n, _ in used}))} has it",
                                        []).append(where)
        report.check(not problems, f"{source}: its {len(names)} metrics are exported with the labels it selects",
                     "; ".join(f"{p} (used by {', '.join(sorted(set(w))[:3])})" for p, w in sorted(problems.items())))
    return 0


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


def check_rules(report, rules, tests):
    rc, out = run(["promtool", "check", "rules", str(ALERTS.relative_to(ROOT))])
    report.check(rc == 0, f"promtool check rules {ALERTS.relative_to(ROOT)}", out[-1500:])
    rc, out = run(["promtool", "test", "rules", str(ALERT_TESTS.relative_to(ROOT))])
    report.check(rc == 0, f"promtool test rules {ALERT_TESTS.relative_to(ROOT)}", out[-3000:])
    rc, out = run(["promtool", "check", "config", str(PROMETHEUS_CONFIG.relative_to(ROOT))])
    report.check(rc == 0, f"promtool check config {PROMETHEUS_CONFIG.relative_to(ROOT)}", out[-1500:])

    bad = []
    for group in rules["groups"]:
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
    report.check(not bad, "every alert has for:, a severity, summary, description and a runbook naming docs that exist",
                 "; ".join(bad))

    firing, quiet = set(), set()
    for case in tests.get("tests", []):
        for t in case.get("alert_rule_test", []):
            (firing if t.get("exp_alerts") else quiet).add(t["alertname"])
    names = {r["alert"] for g in rules["groups"] for r in g["rules"] if r.get("alert")}
    untested = sorted(n for n in names if n not in firing or n not in quiet)
    report.check(not untested, f"every alert ({len(names)}) has a firing and a non-firing test case",
                 ", ".join(f"{n} ({'no firing case' if n not in firing else 'no non-firing case'})" for n in untested))


def check_prometheus_rule(report, alerts_text):
    want = prometheus_rule_text(alerts_text)
    have = RULE.read_text() if RULE.exists() else None
    report.check(have == want, f"{RULE.relative_to(ROOT)} is alerts.yml as a PrometheusRule",
                 "missing" if have is None else "it differs: run scripts/checks/observability.sh --write")
    if have is not None:
        doc = yaml.safe_load(have)
        same = (doc.get("apiVersion") == "monitoring.coreos.com/v1" and doc.get("kind") == "PrometheusRule"
                and doc.get("spec", {}).get("groups") == yaml.safe_load(alerts_text)["groups"])
        report.check(same, "its spec.groups equal alerts.yml's groups")


def check_dashboard(report, path):
    rel = path.relative_to(ROOT)
    try:
        dashboard = json.loads(path.read_text())
    except ValueError as e:
        report.check(False, f"{rel} is JSON", str(e))
        return None
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
    report.check(not problems, f"{rel}: {titles} panels, importable (uid {dashboard.get('uid')}, datasource variable)",
                 "; ".join(problems[:10]))
    return dashboard


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", default=str(ROOT / ".build" / "debug"))
    parser.add_argument("--write", action="store_true", help="rewrite the PrometheusRule from alerts.yml")
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--timeout", type=float, default=120, help="seconds the stack part may take")
    args = parser.parse_args()

    alerts_text = ALERTS.read_text()
    if args.write:
        RULE.parent.mkdir(parents=True, exist_ok=True)
        RULE.write_text(prometheus_rule_text(alerts_text))
        print(f"observability: wrote {RULE.relative_to(ROOT)}")
        return 0
    if not shutil.which("promtool"):
        print("observability: promtool is missing (Debian's prometheus package)", file=sys.stderr)
        return 3
    missing = [n for n in ["apns-sandbox", "push-ingest", "push-render", "push-send", "push-feedback"]
               if not (Path(args.bin_dir) / n).exists()]
    if missing:
        print(f"observability: missing in {args.bin_dir}: {', '.join(missing)} (swift build first)", file=sys.stderr)
        return 3

    report = Report()
    rules = yaml.safe_load(alerts_text)
    tests = yaml.safe_load(ALERT_TESTS.read_text())
    check_rules(report, rules, tests)
    check_prometheus_rule(report, alerts_text)
    names_by_source = {str(ALERTS.relative_to(ROOT)): alert_queries(rules)}
    paths = sorted(DASHBOARDS.glob("*.json"))
    expected = {f"{n}.json" for n in ("overview", "push-ingest", "push-render", "push-send", "push-feedback")}
    report.check(expected <= {p.name for p in paths}, "deploy/grafana/ has the overview and one dashboard per service",
                 f"missing {sorted(expected - {p.name for p in paths})}")
    for path in paths:
        dashboard = check_dashboard(report, path)
        if dashboard is not None:
            names_by_source[str(path.relative_to(ROOT))] = dashboard_queries(dashboard)

    rc = run_stack_checks(args, report, names_by_source)
    print(f"observability: {report.passed} passed, {report.failed} failed ({time.monotonic() - START:.0f} s)", flush=True)
    if rc == 3:
        return 3
    return 1 if report.failed or rc else 0


if __name__ == "__main__":
    sys.exit(main())
