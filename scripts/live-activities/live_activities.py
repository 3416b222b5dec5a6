#!/usr/bin/env python3
"""Live Activities end to end, as a product uses them (issue 13): the running binaries of --bin-dir
on a private stack (RabbitMQ, Redis, apns-sandbox and the four services on 127.0.0.1:8700-8707;
RabbitMQ also derives 9700, 28700, 29700-29710).

1. A device registers (push-ingest's HTTP API), then its push-to-start token for MatchAttributes.
2. A push request `{"push_to_start": {"users": ["alice"]}}` starts a Live Activity: apns-sandbox must
   receive the `start` event on the push-to-start token, topic `<app>.push-type.liveactivity`,
   `apns-push-type: liveactivity`.
3. The app registers the activity's update token (`…/activities/match-1234`); a request
   `{"activity": "match-1234"}` updates it and a second one ends it, both on the update token.
4. `pushctl channel create` makes a broadcast channel at the sandbox; `{"channel": …}` requests update
   and end the activity for every listener: one broadcast request each, recorded with the channel.

Prints each check and `N passed, N failed`; exits non-zero on any failure. About 30 s.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chaos"))
import chaos  # noqa: E402  (the stack: servers, sandbox, services)
from chaos import SERVICES, SetupError, hreq  # noqa: E402

import pika  # noqa: E402

APP = "com.example.live"
API_KEY = "live-ingest-key"
BASE_PORT = 8700
START = time.time()


def log(text):
    print(f"live-activities | {time.strftime('%H:%M:%S')} {text}", flush=True)


class LiveStack(chaos.Stack):
    def __init__(self, args):
        args.smoke = False
        args.tokens = 100
        super().__init__(args)
        self.relocate("live-activities", BASE_PORT)
        self.key = self.out / "AuthKey_LIVEACT001.p8"

    def key_and_apps(self):
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(self.key)],
                       check=True, capture_output=True)
        apps = {"apps": {APP: {
            "default": True, "environment": "production",
            "apns": {"key_file": str(self.key), "key_id": "LIVEACT001", "team_id": "TEAM000001"},
            "ingest": {"api_keys": [API_KEY]},
        }}}
        self.apps.write_text(json.dumps(apps, indent=2))


class Checks:
    def __init__(self):
        self.results = []

    def check(self, name, ok, detail=""):
        self.results.append((name, bool(ok), detail))
        log(f"{'PASS' if ok else 'FAIL'} {name}{'' if ok else ': ' + detail}")
        return ok


def raw_api(stack, method, path, body):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", stack.port["push-ingest"], timeout=10)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def publish(stack, body):
    conn = pika.BlockingConnection(pika.URLParameters(stack.amqp_url))
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("push", "request", json.dumps(body),
                         pika.BasicProperties(content_type="application/json", delivery_mode=2), mandatory=True)
    finally:
        conn.close()


def deliveries(stack, query):
    status, data = hreq(stack.port["admin"], "GET", f"/deliveries?{query}")
    if status != 200:
        raise SetupError(f"sandbox /deliveries answered {status}")
    return json.loads(data)["deliveries"]


def wait_for(what, fn, timeout=30):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    return last


def execute(stack, args, checks):
    stack.start_servers()
    stack.start_sandbox()
    for name in SERVICES:
        stack.start_service(name)
    device = "de71ce" + "0" * 57 + "1"
    start_token = "57a270" + "0" * 57 + "1"
    update_token = "0bda7e" + "0" * 57 + "1"
    topic = f"{APP}.push-type.liveactivity"
    # The sandbox checks the activity tokens as APNs does: only liveactivity pushes on the
    # .push-type.liveactivity topic, anything else DeviceTokenNotForTopic.
    for token in (start_token, update_token):
        hreq(stack.port["admin"], "PUT", f"/tokens/{token}", {"state": "liveactivity"})

    status, _ = raw_api(stack, "PUT", f"/v1/apps/{APP}/devices/{device}", {"user": "alice", "locale": "en"})
    checks.check("device registered", status in (200, 201), f"HTTP {status}")
    status, data = raw_api(stack, "PUT", f"/v1/apps/{APP}/devices/{device}/push-to-start/MatchAttributes", {"push_token": start_token})
    record = json.loads(data or b"{}")
    checks.check("push-to-start token registered with the device's user", status == 201 and record.get("user") == "alice",
                 f"HTTP {status} {data[:200]!r}")

    now = int(time.time())
    publish(stack, {"id": "kickoff", "app": APP, "to": {"push_to_start": {"users": ["alice"]}}, "payload": {"aps": {
        "timestamp": now, "event": "start", "content-state": {"home": 0, "away": 0}, "attributes-type": "MatchAttributes",
        "attributes": {"home": "A", "away": "B"}, "alert": {"title": "Kick-off", "body": "A v B"}}}})
    got = wait_for("start", lambda: deliveries(stack, f"token={start_token}"))
    first = (got or [{}])[0]
    headers = first.get("headers", {})
    checks.check("start delivered on the push-to-start token", bool(got) and first.get("payload", {}).get("aps", {}).get("event") == "start",
                 json.dumps(got)[:300])
    checks.check("start topic and push type", headers.get("apns-topic") == topic and headers.get("apns-push-type") == "liveactivity",
                 json.dumps(headers)[:300])

    expires = now + 3600
    status, data = raw_api(stack, "PUT", f"/v1/apps/{APP}/devices/{device}/activities/match-1234",
                           {"push_token": update_token, "attributes_type": "MatchAttributes", "expires_at": expires})
    checks.check("update token registered", status == 201, f"HTTP {status} {data[:200]!r}")
    publish(stack, {"id": "goal-1", "app": APP, "to": {"activity": "match-1234"}, "payload": {"aps": {
        "timestamp": now + 1, "event": "update", "content-state": {"home": 1, "away": 0}, "stale-date": now + 600,
        "relevance-score": 75, "alert": {"title": "Goal!", "body": "1:0"}}}, "priority": 10})
    publish(stack, {"id": "final", "app": APP, "to": {"activity": "match-1234"}, "payload": {"aps": {
        "timestamp": now + 2, "event": "end", "content-state": {"home": 1, "away": 0}, "dismissal-date": now + 3600}}, "priority": 5})
    got = wait_for("update and end", lambda: (lambda d: d if len(d) >= 2 else None)(deliveries(stack, f"token={update_token}")))
    events = sorted(d.get("payload", {}).get("aps", {}).get("event") for d in (got or []))
    checks.check("update and end delivered on the update token", events == ["end", "update"], json.dumps(got)[:400])
    checks.check("update and end priorities as requested",
                 sorted(d.get("headers", {}).get("apns-priority") for d in (got or [])) == ["10", "5"], json.dumps(got)[:400])

    env = dict(os.environ, PUSH_APNS_CA_FILE=str(stack.ca))
    common = ["--endpoint", f"https://127.0.0.1:{stack.port['apns']}", "--ca-file", str(stack.ca), "--key-file", str(stack.key),
              "--key-id", "LIVEACT001", "--team-id", "TEAM000001", "--app", APP]
    r = subprocess.run([str(stack.bin / "pushctl"), "channel", "create", *common, "--storage-policy", "no-message-stored"],
                       capture_output=True, text=True, timeout=30, env=env)
    import re
    found = re.search(r"created channel (\S+)", r.stdout)
    channel = found.group(1) if r.returncode == 0 and found else ""
    checks.check("pushctl channel create", r.returncode == 0 and channel, f"exit {r.returncode}: {r.stdout[-300:]} {r.stderr[-300:]}")
    if channel:
        publish(stack, {"id": "channel-goal", "app": APP, "to": {"channel": channel}, "payload": {"aps": {
            "timestamp": now + 3, "event": "update", "content-state": {"home": 2, "away": 0}}}, "priority": 5})
        publish(stack, {"id": "channel-final", "app": APP, "to": {"channel": channel}, "payload": {"aps": {
            "timestamp": now + 4, "event": "end", "content-state": {"home": 2, "away": 0}}}})
        got = wait_for("broadcasts", lambda: (lambda d: d if len(d) >= 2 else None)(deliveries(stack, f"channel={channel}")))
        events = sorted(d.get("payload", {}).get("aps", {}).get("event") for d in (got or []))
        checks.check("one broadcast each for update and end on the channel", events == ["end", "update"] and len(got or []) == 2,
                     json.dumps(got)[:400])
        checks.check("broadcasts carry the channel id and liveactivity",
                     all(d.get("headers", {}).get("apns-channel-id") == channel and d.get("headers", {}).get("apns-push-type") == "liveactivity"
                         for d in (got or [])) and bool(got), json.dumps(got)[:400])
    # Nothing dead-lettered along the way.
    dead = stack.queues().get("push.dead", (0, 0, 0))[0]
    checks.check("nothing in push.dead", dead == 0, f"{dead} dead letters")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--timeout", type=float, default=240)
    args = parser.parse_args()
    missing = [n for n in ["apns-sandbox", "pushctl", *SERVICES] if not (Path(args.bin_dir) / n).exists()]
    if missing:
        print(f"live-activities: missing in {args.bin_dir}: {', '.join(missing)} (swift build first)", file=sys.stderr)
        return 3

    stack = LiveStack(args)
    checks = Checks()
    rc, statuses = chaos.run_stack(stack, lambda: execute(stack, args, checks), timeout=args.timeout, say=log)
    for name, code in statuses.items():
        checks.check(f"{name} exits 0 on SIGTERM", code in (0, None), f"exit {code}")
    failed = sum(1 for _, ok, _ in checks.results if not ok)
    passed = len(checks.results) - failed
    log(f"logs in {stack.out}; {time.time() - START:.0f}s in all")
    print(f"{passed} passed, {failed} failed")
    if rc:
        return rc
    return 1 if failed or not checks.results else 0


if __name__ == "__main__":
    sys.exit(main())
