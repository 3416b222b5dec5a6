"""The system tests' fixtures: private stacks of the real executables on loopback ports (the
harness's `Stack`, tests/harness/stack.py), soft checks, and helpers that drive the shared stack as a
producer and an app do.

    scripts/checks/<check>.sh [--bin-dir DIR] [pytest arguments]   (each runs its own modules)

`stack` is the session's shared stack (RabbitMQ, Redis, apns-sandbox and the four services on
127.0.0.1:8740-8747; RabbitMQ also derives 9740, 28740 and 29740-29750); a module whose stack is
configured otherwise builds its own with `serve` in a module fixture.
"""
import http.client
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pika
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from harness import net  # noqa: E402
from harness.checks import Checks  # noqa: E402
from harness.stack import SERVICES, SetupError, Stack  # noqa: E402

APP = "com.example.producers"
API_KEY = "system-ingest-key"
BASE_PORT = 8740


def pytest_addoption(parser):
    parser.addoption("--bin-dir", default=str(ROOT / ".build" / "debug"), help="the built executables (default .build/debug)")
    parser.addoption("--full", action="store_true", help="every case of a catalogue, not make test's sample of it")
    chaos = parser.getgroup("chaos", "the chaos suite (test_chaos.py, scripts/chaos.sh)")
    chaos.addoption("--scenario", action="append", default=[], metavar="NAME", help="run this scenario (repeatable; default all)")
    chaos.addoption("--latency", choices=["0", "150", "both"], help="the sandbox's answer latency in ms (default both; 0 with --smoke)")
    chaos.addoption("--tokens", type=int, help="tokens registered (default 100000; 3000 with --smoke or --cluster)")
    chaos.addoption("--smoke", action="store_true", help="kill -9 push-send once and restart RabbitMQ, 3,000 tokens, loopback")
    chaos.addoption("--cluster", action="store_true", help="the cluster scenarios on a RabbitMQ cluster and a Redis Cluster")
    chaos.addoption("--drain-timeout", type=float, help="seconds from the broadcast to drained (default 300; 120 smoke, 180 cluster)")
    chaos.addoption("--json", metavar="FILE", help="also write the results as JSON")


def pytest_configure(config):
    # A SIGTERM (a timeout, `kill`) or a closed terminal runs the fixtures' teardowns as Ctrl-C does.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.default_int_handler)
    config.check_counts = {}
    config.summary_lines = []   # what a module reports after pytest's own report (the chaos table)


@pytest.fixture(scope="session")
def bin_dir(request):
    path = Path(request.config.getoption("--bin-dir")).resolve()
    missing = [name for name in SERVICES + ["apns-sandbox", "pushctl"] if not (path / name).exists()]
    if missing:
        pytest.exit(f"--bin-dir {path} lacks {', '.join(missing)} (swift build first)", returncode=3)
    return path


@pytest.fixture
def checks(request):
    """Soft checks for one test: each is printed and counted, and the test fails at its end naming
    every check that failed."""
    recorder = Checks(request.module.__name__.removeprefix("test_"))
    request.node.soft_checks = recorder
    yield recorder
    counts = request.config.check_counts.setdefault(recorder.label, [0, 0])
    counts[0] += recorder.passed
    counts[1] += recorder.failed


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test whose soft checks failed is a failed test (not an error of its teardown)."""
    report = (yield).get_result()
    recorder = getattr(item, "soft_checks", None)
    if call.when == "call" and report.passed and recorder and recorder.failures:
        report.outcome = "failed"
        report.longrepr = (f"{recorder.failed} of {recorder.passed + recorder.failed} checks failed:\n  "
                           + "\n  ".join(recorder.failures))


def pytest_terminal_summary(terminalreporter, config):
    for line in getattr(config, "summary_lines", []):
        terminalreporter.write_line(line)
    for label, (passed, failed) in sorted(getattr(config, "check_counts", {}).items()):
        terminalreporter.write_line(f"{label}: {passed} checks passed, {failed} failed")


def serve(stack):
    """Starts `stack` for a fixture and yields it; at the end, every process must still run and exit 0
    on SIGTERM (a process that died on its own fails the run), and the servers stop."""
    try:
        stack.start()
    except SetupError as error:
        pytest.exit(f"the {stack.name} stack did not start: {error} (logs in {stack.logdir})", returncode=3)
    try:
        yield stack
    finally:
        died = stack.exited()
        statuses = stack.stop()
    assert not died, f"exited while the tests ran (logs in {stack.logdir}): {died}"
    unclean = {name: status for name, status in statuses.items() if status != 0}
    assert not unclean, f"did not exit 0 on SIGTERM (logs in {stack.logdir}): {unclean}"


class SystemStack(Stack):
    """The shared stack, with one app whose ingest key the tests present."""

    APP = APP

    def __init__(self, bin_dir):
        super().__init__(bin_dir, "system", BASE_PORT)
        self.ingest_key = API_KEY

    # What a device, a producer and an operator do.
    def api(self, method, path, body=None):
        """push-ingest's registration API with the app's key: (status, JSON answer or {})."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port["push-ingest"], timeout=10)
        try:
            connection.request(method, path, body=None if body is None else json.dumps(body),
                               headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"})
            answer = connection.getresponse()
            status, data = answer.status, answer.read()
        finally:
            connection.close()
        try:
            return status, json.loads(data) if data else {}
        except ValueError:
            return status, {"raw": data[:300]}

    def register(self, token, user):
        """PUT the device through push-ingest's API, as an app does at launch."""
        status, body = self.api("PUT", f"/v1/apps/{APP}/devices/{token}", {"user": user, "locale": "en"})
        assert status in (200, 201), f"registering {token}: HTTP {status} {body}"

    def publish(self, request):
        """A push request on `push`/`request`, persistent, confirmed and routed (as the producers do)."""
        connection = pika.BlockingConnection(pika.URLParameters(self.amqp_url))
        try:
            channel = connection.channel()
            channel.confirm_delivery()
            channel.basic_publish("push", "request", json.dumps(request).encode(),
                                  pika.BasicProperties(content_type="application/json", delivery_mode=2), mandatory=True)
        finally:
            connection.close()

    def deliveries(self, token=None, channel=None):
        """What apns-sandbox accepted for a device token or a broadcast channel."""
        query = f"token={token}" if token else f"channel={channel}"
        status, body = net.hreq(self.port["admin"], "GET", f"/deliveries?{query}")
        assert status == 200, f"apns-sandbox /deliveries answered {status}"
        return json.loads(body)["deliveries"]

    def sandbox_token_state(self, token, state):
        """Tells apns-sandbox how APNs sees `token` (e.g. `liveactivity`: only liveactivity pushes)."""
        status, _ = net.hreq(self.port["admin"], "PUT", f"/tokens/{token}", {"state": state})
        assert status in (200, 204), f"apns-sandbox PUT /tokens/{token} answered {status}"

    def dead_letters(self):
        return self.queues().get("push.dead", (0, 0, 0))[0]

    def report(self, request_id):
        """The request's delivery report (`pushctl request --json`), or None before it has one."""
        r = subprocess.run([str(self.bin / "pushctl"), "request", request_id, "--app", APP, "--json"],
                           env=dict(self.service_env("push-ingest"), PUSH_REDIS_URL=self.redis_url),
                           capture_output=True, text=True, timeout=30)
        return json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else None

    def producer_env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PUSH_")}
        env["PUSH_AMQP_URL"] = self.amqp_url
        return env


def wait_for(what, probe, timeout=30.0):
    """probe() until it returns something true; fails the test naming `what` after `timeout` s."""
    last = net.wait_for(probe, timeout, step=0.2)
    if not last:
        pytest.fail(f"{what} within {timeout:.0f} s (last seen: {last!r})")
    return last


@pytest.fixture(scope="session")
def stack(bin_dir):
    """The whole system, started once for the session: the modules use their own tokens, users and
    request ids, so they share it (a stack start is most of a module's time)."""
    yield from serve(SystemStack(bin_dir))
