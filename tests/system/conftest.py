"""The system tests' fixtures: a private stack of the real executables (RabbitMQ, Redis,
apns-sandbox and the four services on 127.0.0.1:8740-8747; RabbitMQ also derives 9740, 28740 and
29740-29750) and helpers that drive it as a producer and an app do.

    python3 -m pytest tests/system --bin-dir .build/debug [-k producers] [--junitxml .local/system/junit.xml]

The stack is the one the chaos, hostile and Live Activity harnesses start (scripts/chaos/chaos.py).
"""
import http.client
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pika
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "chaos"))
import chaos  # noqa: E402  (the stack: servers, sandbox, services)

APP = "com.example.producers"
API_KEY = "system-ingest-key"
BASE_PORT = 8740


def pytest_addoption(parser):
    parser.addoption("--bin-dir", default=str(ROOT / ".build" / "debug"), help="the built executables (default .build/debug)")


@pytest.fixture(scope="session")
def bin_dir(request):
    path = Path(request.config.getoption("--bin-dir")).resolve()
    missing = [name for name in chaos.SERVICES + ["apns-sandbox", "pushctl"] if not (path / name).exists()]
    if missing:
        pytest.exit(f"--bin-dir {path} lacks {', '.join(missing)} (swift build first)", returncode=3)
    return path


class SystemStack(chaos.Stack):
    """chaos.Stack on ports of its own, with one app whose ingest key the tests present."""

    KEY_ID = "SYSTEM0001"
    TEAM_ID = "TEAM000001"

    def __init__(self, bin_dir):
        super().__init__(types.SimpleNamespace(smoke=False, tokens=1000, bin_dir=str(bin_dir), log_level="info"))
        self.relocate("system", BASE_PORT)
        self.key = self.out / f"AuthKey_{self.KEY_ID}.p8"

    def key_and_apps(self):
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(self.key)],
                       check=True, capture_output=True)
        self.apps.write_text(json.dumps({"apps": {APP: {
            "default": True, "environment": "production",
            "apns": {"key_file": str(self.key), "key_id": self.KEY_ID, "team_id": self.TEAM_ID},
            "ingest": {"api_keys": [API_KEY]},
        }}}, indent=2))

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
        status, body = chaos.hreq(self.port["admin"], "GET", f"/deliveries?{query}")
        assert status == 200, f"apns-sandbox /deliveries answered {status}"
        return json.loads(body)["deliveries"]

    def sandbox_token_state(self, token, state):
        """Tells apns-sandbox how APNs sees `token` (e.g. `liveactivity`: only liveactivity pushes)."""
        status, _ = chaos.hreq(self.port["admin"], "PUT", f"/tokens/{token}", {"state": state})
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
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.2)
    pytest.fail(f"{what} within {timeout:.0f} s (last seen: {last!r})")


@pytest.fixture(scope="session")
def stack(bin_dir):
    """The whole system on private loopback ports, started once for the session: the modules use
    their own tokens, users and request ids, so they share it (a stack start is most of a module's
    time). Every process must still run at the end and exit 0 on SIGTERM: a service that died on its
    own fails the run."""
    s = SystemStack(bin_dir)
    try:
        s.start_servers()
        s.start_sandbox()
        for name in chaos.SERVICES:
            s.start_service(name)
    except chaos.SetupError as error:
        s.stop_all()
        s.stop_servers()
        pytest.exit(f"the stack did not start: {error}", returncode=3)
    yield s
    died = {name: p.returncode for name, p in s.procs.items() if p.poll() is not None}
    statuses = s.stop_all()
    s.stop_servers()
    assert not died, f"exited while the tests ran (logs in {s.logdir}): {died}"
    unclean = {name: status for name, status in statuses.items() if status != 0}
    assert not unclean, f"did not exit 0 on SIGTERM (logs in {s.logdir}): {unclean}"
