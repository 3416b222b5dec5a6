#!/usr/bin/python3
"""The security features against the running binaries (scripts/checks/security.sh runs this module).

The stack: the executables of --bin-dir on 127.0.0.1 (RabbitMQ 8600, which also derives 9600,
28600 and 29600-29610; Redis 8601; apns-sandbox 8602 and its admin API 8603; push-ingest 8604;
push-render and push-send's admin listeners 8605-8606; push-console 8608; the check's own HTTP
CONNECT proxy 8609). An apps file of its own with three apps: com.example.security (the default
app), com.example.bounded (ingest.max_activity_slots 3, ingest.new_tokens_per_minute 5) and
com.example.legacy (ingest.credential hmac-sha256 with a random secret). An operators file written
with `pushctl console hash-password`/`hash-key`: an operator with `admin`, an API key with only
`send:com.example.security`, an API key with `admin`. The environment:

- push-ingest: PUSH_INGEST_RATE_PER_CLIENT=2, PUSH_INGEST_HEADER_TIMEOUT_S=2,
  PUSH_INGEST_TRUSTED_PROXIES=127.0.0.1/32 (every request names its client in X-Forwarded-For, so
  each check has its own client allowance of 2 requests a second);
- push-send: PUSH_APNS_PROXY=http://user:<password>@127.0.0.1:8609 (the check's proxy, which wants
  that Proxy-Authorization and records every CONNECT), PUSH_LOG_LEVEL=info;
- push-console: PUSH_CONSOLE_OPERATORS_FILE, PUSH_CONSOLE_SESSION_KEYS_FILE (`openssl rand -hex
  32`), PUSH_CONSOLE_TRUSTED_PROXIES=127.0.0.1/32, PUSH_LOG_FORMAT=json, PUSH_LOG_LEVEL=info.

The checks (each compares with what the check itself saw: HTTP statuses, Redis read with
redis-cli, apns-sandbox's /deliveries, the proxy's records, `ss`, the services' log files):
1. Roles: the send-only key gets 202 for a push to its app, 403 naming `scope send` for another
   app, `scope read` on GET /api/v1/requests, `scope tokens` on a token lookup; the admin key 200 on
   both; the console's audit log has the refusals (push.reason scope) and the token.lookup.
2. Sessions: a login's Redis value is `<csrf> <created> <operator> <mac>`, the MAC an HMAC-SHA256
   under the keys file's key; the value copied under an invented cookie and one with a made-up MAC
   are no sessions (303 /login, the key deleted, `forged_session` audited), the real cookie stays
   200, and (a control) a value the check signs with the keys file's key is accepted.
3. Logins: 60 concurrent logins with made-up names from X-Forwarded-For 203.0.113.9: at least 25
   answered 429 with Retry-After, each audited as login_budget for that address, and Redis counts
   the tries under that address; the operator logs in meanwhile from 198.51.100.7 (303), and how
   long it took.
4. RabbitMQ 4: scripts/checks/rabbitmq4.sh.
5. Bounded state: 3 push-to-start slots, the 4th 409 naming max_activity_slots, HLEN of the slots
   hash 3; exactly 5 new tokens a minute (the device counts), then 429 naming
   new_tokens_per_minute (and the refused token not in Redis); an update of a known token 200. An
   info line says what a push-to-start slot for the refused device token is answered (not budgeted).
6. Legacy credential: with the client's allowance spent, a signed GET /register is 429 (ret 5) and
   leaves the credential unclaimed in Redis; the identical URL 1.2 s later 200 (ret 0); again 403
   (ret 2).
7. (a) a request head sent a byte every 200 ms is cut off within PUSH_INGEST_HEADER_TIMEOUT_S + 1 s,
   while an idle keep-alive connection outlives it; (b) a device name with an escape sequence is
   400 naming device.name and not stored; (c) a bundle id that does not exist is 401 without a key
   and 403 with another app's key, the same answer as for an existing app (never 404).
8. Egress proxy: a push published with `pushctl publish` reaches apns-sandbox, the proxy saw an
   authorized CONNECT to the sandbox's port and carried bytes, push-send holds no direct connection
   to the sandbox, and its log names the proxy with the password masked, never the password.
Afterwards every process exits 0 on SIGTERM.

    scripts/checks/security.sh [--bin-dir DIR] [-k roles]

Logs and the generated files: .local/security/.
"""
import base64
import concurrent.futures
import hashlib
import hmac
import itertools
import json
import os
import re
import secrets
import select
import socket
import subprocess
import threading
import time
import urllib.parse

import pytest
from conftest import serve
from harness import registry_keys
from harness.net import call, http_json, wait_for
from harness.stack import SetupError, Stack

BASE_PORT = 8600
CONSOLE_PORT = BASE_PORT + 8
PROXY_PORT = BASE_PORT + 9
APP = "com.example.security"
BOUNDED = "com.example.bounded"
LEGACY = "com.example.legacy"
NOWHERE = "com.nothere"
OPERATOR = "security-admin"
SEND_KEY_NAME = "security-send-bot"
ADMIN_KEY_NAME = "security-admin-bot"
MAX_SLOTS = 3
NEW_TOKENS_PER_MINUTE = 5
RATE_PER_CLIENT = 2
HEADER_TIMEOUT_S = 2
FLOOD_ADDRESS = "203.0.113.9"
OPERATOR_ADDRESS = "198.51.100.7"
FLOOD_LOGINS = 60
PROXY_USER = "user"
SERVICES = ["push-ingest", "push-render", "push-send", "push-console"]
RUN = secrets.token_hex(3)


_addresses = itertools.count(1)


def fresh_address():
    """A client address of its own for X-Forwarded-For (push-ingest trusts 127.0.0.1), so one
    check's requests do not spend another's allowance of PUSH_INGEST_RATE_PER_CLIENT."""
    n = next(_addresses)
    return f"10.86.{n // 250}.{n % 250 + 1}"


def new_token():
    return secrets.token_hex(32)


# --- the CONNECT proxy in front of apns-sandbox ----------------------------------------------

class ConnectProxy:
    """An HTTP CONNECT proxy on 127.0.0.1 that wants `Proxy-Authorization: Basic user:password`,
    tunnels only to loopback, and records every CONNECT (target, status) and the bytes carried."""

    def __init__(self, port, user, password):
        self.port = port
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.connects = []
        self.carried = {}
        self.lock = threading.Lock()
        self.sockets = []
        self.listener = None

    def start(self):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", self.port))
        except OSError as e:
            sock.close()
            raise SetupError(f"the CONNECT proxy cannot listen on 127.0.0.1:{self.port}: {e}") from e
        sock.listen(64)
        self.listener = sock
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def stop(self):
        with self.lock:
            sockets = ([self.listener] if self.listener else []) + self.sockets
            self.sockets = []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _track(self, sock):
        with self.lock:
            self.sockets.append(sock)

    def _record(self, target, status, authorization):
        with self.lock:
            self.connects.append({"target": target, "status": status, "authorized": authorization == self.expected,
                                  "had_authorization": bool(authorization)})

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self._track(conn)
            threading.Thread(target=self._handle, args=(conn,), name="proxy-conn", daemon=True).start()

    def _handle(self, conn):
        upstream = None
        try:
            conn.settimeout(10)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk or len(head) > 16384:
                    return
                head += chunk
            text, _, rest = head.partition(b"\r\n\r\n")
            lines = text.decode("latin-1").split("\r\n")
            parts = lines[0].split()
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            authorization = headers.get("proxy-authorization", "")
            if len(parts) != 3 or parts[0] != "CONNECT":
                self._record(lines[0][:100], 405, authorization)
                conn.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            target = parts[1]
            if not hmac.compare_digest(authorization.encode(), self.expected.encode()):
                self._record(target, 407, authorization)
                conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"security\"\r\n"
                             b"Content-Length: 0\r\nConnection: close\r\n\r\n")
                return
            host, _, port = target.rpartition(":")
            if host.strip("[]") not in ("127.0.0.1", "localhost", "::1") or not port.isdigit():
                self._record(target, 403, authorization)
                conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            try:
                upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
            except OSError:
                self._record(target, 502, authorization)
                conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            self._track(upstream)
            self._record(target, 200, authorization)
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
                self._count(target, len(rest))
            conn.settimeout(None)
            upstream.settimeout(None)
            back = threading.Thread(target=self._pump, args=(upstream, conn, target), name="proxy-pump", daemon=True)
            back.start()
            self._pump(conn, upstream, target)
            back.join(timeout=5)
        except OSError:
            pass
        finally:
            for sock in (conn, upstream):
                if sock is not None:
                    sock.close()

    def _count(self, target, n):
        with self.lock:
            self.carried[target] = self.carried.get(target, 0) + n

    def _pump(self, src, dst, target):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                self._count(target, len(data))
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


# --- the stack -------------------------------------------------------------------------------

class SecurityStack(Stack):
    APP = APP

    def __init__(self, bin_dir):
        super().__init__(bin_dir, "security", BASE_PORT, tokens=100, log_level="warning")
        self.services = SERVICES
        self.port["push-console"] = CONSOLE_PORT
        self.port["proxy"] = PROXY_PORT
        self.operators = self.out / "operators.json"
        self.session_keys = self.out / "session-keys"
        self.password = secrets.token_urlsafe(18)
        self.send_key = "pcs_" + secrets.token_urlsafe(32)
        self.admin_key = "pca_" + secrets.token_urlsafe(32)
        self.ingest_keys = {app: f"security-ingest-{secrets.token_hex(12)}" for app in (APP, BOUNDED, LEGACY)}
        self.legacy_secret = secrets.token_hex(16)
        self.proxy_password = "pass" + secrets.token_hex(8)
        self.session_key = ""
        self.proxy = ConnectProxy(PROXY_PORT, PROXY_USER, self.proxy_password)
        self.extra_env = {
            "push-ingest": {"PUSH_INGEST_RATE_PER_CLIENT": str(RATE_PER_CLIENT), "PUSH_INGEST_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
                            "PUSH_INGEST_TRUSTED_PROXIES": "127.0.0.1/32"},
            "push-send": {"PUSH_APNS_PROXY": f"http://{PROXY_USER}:{self.proxy_password}@127.0.0.1:{PROXY_PORT}",
                          "PUSH_LOG_LEVEL": "info"},
            "push-console": {"PUSH_CONSOLE_OPERATORS_FILE": str(self.operators), "PUSH_CONSOLE_SESSION_KEYS_FILE": str(self.session_keys),
                             "PUSH_CONSOLE_TRUSTED_PROXIES": "127.0.0.1/32", "PUSH_LOG_FORMAT": "json", "PUSH_LOG_LEVEL": "info"},
        }

    CLEAN_OUT = True

    def start_servers(self):
        super().start_servers()
        self.write_console_files()
        self.proxy.start()

    def stop(self):
        try:
            return super().stop()
        finally:
            self.proxy.stop()

    def app_definitions(self, apns):
        limits = {"per_device_per_hour": 1000, "per_app_per_second": 10000}
        return {
            APP: {"default": True, "environment": "production", "apns": apns, "rate_limits": limits,
                  "ingest": {"api_keys": [self.ingest_keys[APP]]}},
            BOUNDED: {"environment": "production", "apns": apns, "rate_limits": limits,
                      "ingest": {"api_keys": [self.ingest_keys[BOUNDED]], "max_activity_slots": MAX_SLOTS,
                                 "new_tokens_per_minute": NEW_TOKENS_PER_MINUTE}},
            LEGACY: {"environment": "production", "apns": apns, "rate_limits": limits,
                     "ingest": {"api_keys": [self.ingest_keys[LEGACY]], "credential": "hmac-sha256",
                                "secret": self.legacy_secret}},
        }

    def write_private(self, path, text):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)

    def write_console_files(self):
        operators = {
            "operators": [{"name": OPERATOR, "password": self.console_hash("hash-password", self.password), "scopes": ["admin"]}],
            "api_keys": [
                {"name": SEND_KEY_NAME, "key_sha256": self.console_hash("hash-key", self.send_key), "scopes": [f"send:{APP}"]},
                {"name": ADMIN_KEY_NAME, "key_sha256": self.console_hash("hash-key", self.admin_key), "scopes": ["admin"]},
            ]}
        self.write_private(self.operators, json.dumps(operators, indent=2))
        r = subprocess.run(["openssl", "rand", "-hex", "32"], capture_output=True, text=True)
        if r.returncode != 0 or len(r.stdout.strip()) != 64:
            raise SetupError(f"`openssl rand -hex 32` failed: {r.stderr.strip()}")
        self.session_key = r.stdout.strip()
        self.write_private(self.session_keys, self.session_key + "\n")

    def console_records(self):
        """The JSON lines of push-console's log."""
        return self.log_records("push-console")

    def ingest(self, method, path, body=None, app_key=None, address=None, headers=None):
        """A request to push-ingest from its own client address (X-Forwarded-For)."""
        all_headers = {"X-Forwarded-For": address or fresh_address()}
        if app_key:
            all_headers["Authorization"] = f"Bearer {app_key}"
        all_headers.update(headers or {})
        return call(self.port["push-ingest"], method, path, body=body, headers=all_headers)

    def console(self, method, path, key=None, cookie=None, body=None, headers=None):
        all_headers = dict(headers or {})
        if key:
            all_headers["Authorization"] = f"Bearer {key}"
        if cookie:
            all_headers["Cookie"] = f"push_console_session={cookie}"
        return call(CONSOLE_PORT, method, path, body=body, headers=all_headers)

    def login(self, name, password, address=None):
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if address:
            headers["X-Forwarded-For"] = address
        form = urllib.parse.urlencode({"name": name, "password": password})
        return call(CONSOLE_PORT, "POST", "/login", body=form, headers=headers, timeout=30)

    def registry(self, app):
        return registry_keys.Registry(lambda *argv: self.redis(*argv), app)

    def scan(self, pattern):
        return [k for k in self.redis("--scan", "--pattern", pattern).split() if k]


def session_cookie(reply):
    match = re.search(r"push_console_session=([0-9a-f]{64})", reply.headers.get("set-cookie", ""))
    return match.group(1) if match else None


# --- the checks ------------------------------------------------------------------------------

class Scenario:
    """What the checks share on the module's stack: its tokens and the request the roles sent.
    `check` is the running test's."""

    def __init__(self, stack):
        self.stack = stack
        self.proxy = stack.proxy if stack else None
        self.check = None
        self.timings = {}
        self.roles_token = new_token()
        self.roles_request = f"security-roles-{RUN}"
        self.full_tokens = [self.roles_token]

    def register(self, app, token, body=None):
        return self.stack.ingest("PUT", f"/v1/apps/{app}/devices/{token}", body=body or {"user": "security-user", "locale": "en"},
                                 app_key=self.stack.ingest_keys[app])

    # 1
    def roles(self):
        s = self.stack
        r = self.register(APP, self.roles_token)
        self.check(r.status in (200, 201), "roles: a device registered for the console's requests", str(r))
        request = {"id": self.roles_request, "app": APP, "to": {"tokens": [self.roles_token]},
                   "payload": {"aps": {"alert": {"title": "Security check", "body": "sent with a send-only key"}}}}
        r = s.console("POST", "/api/v1/requests", key=s.send_key, body=request)
        data = r.json() or {}
        self.check(r.status == 202 and data.get("app") == APP and data.get("id") == self.roles_request,
                   f"roles: the key with scopes [send:{APP}] gets 202 for POST /api/v1/requests to {APP}", str(r))
        other = dict(request, id=f"{self.roles_request}-other", app=BOUNDED)
        r = s.console("POST", "/api/v1/requests", key=s.send_key, body=other)
        self.check(r.status == 403 and "scope send" in r.message() and BOUNDED in r.message(),
                   f"roles: the same key gets 403 naming `scope send` and the app for a push to {BOUNDED}", str(r))
        r = s.console("GET", "/api/v1/requests", key=s.send_key)
        self.check(r.status == 403 and "scope read" in r.message(),
                   "roles: the send-only key gets 403 naming `scope read` on GET /api/v1/requests", str(r))
        lookup = f"/api/v1/apps/{APP}/tokens/{self.roles_token}"
        r = s.console("GET", lookup, key=s.send_key)
        self.check(r.status == 403 and "scope tokens" in r.message(),
                   "roles: the send-only key gets 403 naming `scope tokens` on GET /api/v1/apps/{app}/tokens/{token}", str(r))
        self.check("\"token\"" not in r.body.decode(errors="replace") and self.roles_token not in r.body.decode(errors="replace"),
                   "roles: the refused lookup's body holds no record", str(r))
        r = s.console("GET", "/api/v1/requests", key=s.admin_key)
        listed = [x.get("id") for x in (r.json() or {}).get("requests", [])] if r.status == 200 else []
        self.check(r.status == 200 and isinstance((r.json() or {}).get("requests"), list),
                   f"roles: the admin key gets 200 on GET /api/v1/requests ({len(listed)} listed)", str(r))
        r = s.console("GET", lookup, key=s.admin_key)
        self.check(r.status == 200 and (r.json() or {}).get("token") == self.roles_token,
                   "roles: the admin key gets 200 and the record on the token lookup", str(r))
        r = s.console("GET", "/api/v1/requests", key=s.send_key + "x")
        self.check(r.status == 401, "roles: a key that is not in the operators file gets 401", str(r))

    def roles_audit(self):
        """The audit lines of check 1, read at the end (the log is written as it goes)."""
        records = [r for r in self.stack.console_records() if r.get("message") == "console action"]
        refused = {(r.get("push.scope"), r.get("push.app")) for r in records
                   if r.get("push.operator") == SEND_KEY_NAME and r.get("push.action") == "refused" and r.get("push.reason") == "scope"}
        self.check(("read", None) in refused and ("tokens", APP) in refused and ("send", BOUNDED) in refused,
                   "roles: push-console's log has `console action` push.action refused, push.reason scope for "
                   "read, tokens and send (push.operator the key's name)",
                   f"refusals by {SEND_KEY_NAME} (scope, app): {sorted(refused, key=str)}; "
                   f"{len(records)} `console action` lines in all")
        lookups = [r for r in records if r.get("push.action") == "token.lookup"]
        mine = [r for r in lookups if r.get("push.operator") == ADMIN_KEY_NAME and r.get("push.app") == APP
                and str(r.get("push.found")) == "true"]
        self.check(len(mine) == 1 and self.roles_token not in json.dumps(mine[0]) and
                   str(mine[0].get("push.token", "")).startswith(self.roles_token[:8]),
                   "roles: the admin key's lookup is logged as push.action token.lookup (app, found, the token's first digits only)",
                   f"token.lookup lines: {lookups[:3]}")
        sends = [r for r in records if r.get("push.action") == "refused" and r.get("push.operator") == SEND_KEY_NAME
                 and r.get("level") not in ("notice", None)]
        self.check(not sends, "roles: the audit lines are at level notice", f"{sends[:2]}")
        bad = [r for r in records if r.get("push.action") == "refused" and r.get("push.reason") == "bad_key"]
        self.check(bool(bad), "roles: the unknown key is logged as refused with push.reason bad_key", f"{len(bad)} lines")

    # 2
    def sessions(self):
        s = self.stack
        r = s.login(OPERATOR, s.password)
        cookie = session_cookie(r)
        if not self.check(r.status == 303 and cookie is not None, "sessions: POST /login (form) answers 303 with a session cookie",
                          f"{r}, Set-Cookie {r.headers.get('set-cookie')!r}"):
            return
        digest = hashlib.sha256(cookie.encode()).hexdigest()
        keys = s.scan(f"*console:session:{digest}")
        self.check(len(keys) == 1 and keys[0].endswith(f":console:session:{digest}"),
                   "sessions: Redis holds the cookie's SHA-256 under <prefix>:console:session:", f"keys {keys}")
        if not keys:
            return
        key = keys[0]
        self.check(not s.scan(f"*{cookie}*") and cookie not in s.redis("GET", key),
                   "sessions: the cookie itself is nowhere in Redis (no key or value holds it)")
        value = s.redis("GET", key)
        parts = value.split(" ")
        self.check(len(parts) == 4 and parts[2] == OPERATOR and parts[1].isdigit() and re.fullmatch(r"[0-9a-f]{64}", parts[3]),
                   "sessions: the value is `<csrf> <created ms> <operator> <mac>`", f"value {value!r}")
        if len(parts) != 4:
            return
        fields = " ".join(parts[:3])

        def mac(redis_key, text):
            message = f"push-console-session\n{redis_key}\n{text}".encode()
            return hmac.new(s.session_key.encode(), message, hashlib.sha256).hexdigest()

        self.check(parts[3] == mac(key, fields),
                   "sessions: its MAC is HMAC-SHA256 under PUSH_CONSOLE_SESSION_KEYS_FILE's key over the Redis key and the fields",
                   "the check's HMAC differs (another key, or another message)")
        prefix = key[:-len(digest)]
        copied_cookie, madeup_cookie, signed_cookie = (secrets.token_hex(32) for _ in range(3))
        copied_key = prefix + hashlib.sha256(copied_cookie.encode()).hexdigest()
        madeup_key = prefix + hashlib.sha256(madeup_cookie.encode()).hexdigest()
        signed_key = prefix + hashlib.sha256(signed_cookie.encode()).hexdigest()
        s.redis("SET", copied_key, value, "EX", "600")
        s.redis("SET", madeup_key, f"{fields} {secrets.token_hex(32)}", "EX", "600")
        for what, forged, forged_key in (("the real value copied under an invented cookie", copied_cookie, copied_key),
                                         ("a value with a made-up MAC", madeup_cookie, madeup_key)):
            before = s.redis("EXISTS", forged_key)
            r = s.console("GET", "/requests", cookie=forged)
            location = urllib.parse.urlsplit(r.headers.get("location", "")).path
            after = s.redis("EXISTS", forged_key)
            self.check(before == "1" and r.status == 303 and location == "/login",
                       f"sessions: {what}: GET /requests answers 303 /login (the value stays in Redis, refused)",
                       f"{r}, Location {r.headers.get('location')!r}, EXISTS before {before} after {after}")
        r = s.console("GET", "/api/v1/requests", cookie=copied_cookie)
        self.check(r.status == 401, "sessions: the invented cookie gets 401 from the API too", str(r))
        r = s.console("GET", "/requests", cookie=cookie)
        self.check(r.status == 200 and OPERATOR in r.body.decode(errors="replace"),
                   "sessions: the real cookie still gets 200 (its page names the operator)", str(r))
        # The control: a value signed with the file's key (which only the console should hold) is a
        # session, so the refusals above are the MAC's doing and not of a value the check got wrong.
        s.redis("SET", signed_key, f"{fields} {mac(signed_key, fields)}", "EX", "600")
        r = s.console("GET", "/requests", cookie=signed_cookie)
        self.check(r.status == 200, "sessions (control): a value signed with the keys file's key is accepted "
                   "(so the forgeries failed on their MAC alone)", str(r))
        s.redis("DEL", signed_key)
        forged = [x for x in s.console_records() if x.get("push.action") == "refused" and x.get("push.reason") == "forged_session"]
        self.check(len(forged) >= 2, f"sessions: push-console logged {len(forged)} refusals with push.reason forged_session (2 forged)",
                   f"{len(forged)} lines")

    # 3
    def logins(self):
        s = self.stack
        barrier = threading.Barrier(FLOOD_LOGINS + 1)

        retry_after = []

        def one(_):
            barrier.wait(timeout=30)
            try:
                reply = s.login(f"nobody-{secrets.token_hex(6)}", secrets.token_urlsafe(16), address=FLOOD_ADDRESS)
            except OSError as e:
                return f"{type(e).__name__}"
            if reply.status == 429:
                retry_after.append(reply.headers.get("retry-after", ""))
            return reply.status

        statuses = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=FLOOD_LOGINS) as pool:
            futures = [pool.submit(one, i) for i in range(FLOOD_LOGINS)]
            barrier.wait(timeout=30)
            flood_start = time.monotonic()
            time.sleep(0.05)
            t = time.monotonic()
            r = s.login(OPERATOR, s.password, address=OPERATOR_ADDRESS)
            took = time.monotonic() - t
            statuses = [f.result() for f in futures]
            flood = time.monotonic() - flood_start
        counts = {str(k): statuses.count(k) for k in sorted(set(statuses), key=str)}
        limited = statuses.count(429)
        self.timings["operator login during the flood"] = took
        self.check(limited >= 25 and all(x in (401, 429) for x in statuses),
                   f"logins: {FLOOD_LOGINS} concurrent logins with made-up names from X-Forwarded-For {FLOOD_ADDRESS}: "
                   f"{limited} answered 429 (at least 25), the rest 401", f"statuses {counts}")
        self.check(r.status == 303 and session_cookie(r) is not None,
                   f"logins: meanwhile the operator logs in from X-Forwarded-For {OPERATOR_ADDRESS}: 303 in {took:.2f} s "
                   f"(the flood took {flood:.2f} s)", f"{r}")
        self.check.log(f"logins: the operator's login took {took:.2f} s during the flood; flood statuses {counts}")
        self.check(bool(retry_after) and all(x.isdigit() and 1 <= int(x) <= 60 for x in retry_after),
                   "logins: every 429 has Retry-After (1-60 s)", f"Retry-After values {sorted(set(retry_after))}")

        def tries(address):
            digest = hashlib.sha256(address.encode()).digest()[:16].hex()
            keys = s.scan(f"*console:login:address:{digest}")
            return s.redis("GET", keys[0]) if len(keys) == 1 else f"keys {keys}"

        flood_count, operator_count = tries(FLOOD_ADDRESS), tries(OPERATOR_ADDRESS)
        self.check(flood_count == str(FLOOD_LOGINS) and operator_count == "1",
                   f"logins: Redis counts the tries by the X-Forwarded-For address: {flood_count} for {FLOOD_ADDRESS}, "
                   f"{operator_count} for {OPERATOR_ADDRESS}", f"{flood_count!r} and {operator_count!r}")
        records = s.console_records()
        budget = [x for x in records if x.get("push.reason") == "login_budget"]
        self.check(len(budget) == limited and all(x.get("push.client") == FLOOD_ADDRESS for x in budget),
                   f"logins: each 429 is logged as refused, push.reason login_budget, push.client {FLOOD_ADDRESS} "
                   "(X-Forwarded-For from the trusted proxy)",
                   f"{len(budget)} lines for {limited} answers, clients {sorted({x.get('push.client') for x in budget})}")
        mine = [x for x in records if x.get("push.action") == "login" and x.get("push.operator") == OPERATOR]
        self.check(any(x.get("push.client") == OPERATOR_ADDRESS for x in mine),
                   f"logins: the operator's login is logged with push.client {OPERATOR_ADDRESS}",
                   f"clients of {OPERATOR}'s logins: {[x.get('push.client') for x in mine]}")

    # 4
    def bounded_state(self):
        s = self.stack
        key = s.ingest_keys[BOUNDED]
        device = new_token()
        r = self.register(BOUNDED, device, {"user": "bounded-user", "locale": "en", "environment": "production"})
        self.check(r.status == 201, f"bounded: a device registered for {BOUNDED} (201)", str(r))
        slots = []
        for i in range(MAX_SLOTS + 1):
            slots.append(s.ingest("PUT", f"/v1/apps/{BOUNDED}/devices/{device}/push-to-start/SecurityAttributes{i}",
                                  body={"push_token": new_token()}, app_key=key))
        self.check([x.status for x in slots[:MAX_SLOTS]] == [201] * MAX_SLOTS,
                   f"bounded: {MAX_SLOTS} push-to-start slots accepted (201)", "; ".join(map(str, slots[:MAX_SLOTS])))
        last = slots[MAX_SLOTS]
        self.check(last.status == 409 and "max_activity_slots" in last.message(),
                   f"bounded: the {MAX_SLOTS + 1}th new slot is 409 naming max_activity_slots", str(last))
        hashes = [k for k in s.scan("*device-activities*") if k.endswith(device)]
        length = s.redis("HLEN", hashes[0]) if len(hashes) == 1 else None
        self.check(length == str(MAX_SLOTS), f"bounded: Redis HLEN of the device's slots hash is {MAX_SLOTS}",
                   f"keys {hashes}, HLEN {length}")

        # New tokens: the device above was the first of the app's budget this minute.
        accepted = 1
        refusal = None
        statuses = []
        for _ in range(NEW_TOKENS_PER_MINUTE + 3):
            token = new_token()
            r = self.register(BOUNDED, token)
            statuses.append(r.status)
            if r.status == 201:
                accepted += 1
                continue
            refusal = (token, r)
            break
        self.check(accepted == NEW_TOKENS_PER_MINUTE and refusal is not None and refusal[1].status == 429,
                   f"bounded: exactly {NEW_TOKENS_PER_MINUTE} new tokens accepted in the minute (the device included), then 429",
                   f"{accepted} accepted, statuses {statuses}")
        if refusal:
            token, r = refusal
            self.check(r.status == 429 and "new_tokens_per_minute" in r.message() and r.headers.get("retry-after", "").isdigit(),
                       "bounded: the 429 names ingest.new_tokens_per_minute and has Retry-After", f"{r}, Retry-After "
                       f"{r.headers.get('retry-after')!r}")
            left = s.scan(f"*{token}*")
            self.check(not left, "bounded: the refused token is nowhere in Redis", f"keys {left}")
        registry = s.registry(BOUNDED)
        count = sum(int(s.redis("SCARD", k) or 0) for k in registry.all_token_sets())
        self.check(count == NEW_TOKENS_PER_MINUTE, f"bounded: Redis holds {NEW_TOKENS_PER_MINUTE} tokens of {BOUNDED} (SCARD)",
                   f"SCARD {count}")
        r = self.register(BOUNDED, device, {"user": "bounded-user", "locale": "de", "environment": "production"})
        stored = s.redis("HGET", registry.record(device), "locale")
        self.check(r.status == 200 and stored == "de", "bounded: an update of the registered device is still 200 (and stored)",
                   f"{r}, locale in Redis {stored!r}")
        # docs/registering.md: a Live Activity token for a device the registry does not hold is charged too.
        if refusal:
            r = s.ingest("PUT", f"/v1/apps/{BOUNDED}/devices/{refusal[0]}/push-to-start/SecurityAttributes0",
                         body={"push_token": new_token()}, app_key=key)
            held = s.scan(f"*{refusal[0]}*")
            self.check(r.status == 429 and "new_tokens_per_minute" in r.message() and not held,
                       "bounded: a Live Activity token for a made-up device is charged to the spent budget too (429, nothing stored)",
                       f"{r}, Redis keys naming that device {held}")

    # 6
    def legacy_credential(self):
        s = self.stack
        address = "192.0.2.66"
        token = new_token()
        uuid = "5ECU21TY-" + secrets.token_hex(4).upper()
        timestamp = str(int(time.time() * 1000))
        credential = hmac.new(s.legacy_secret.encode(), (token + uuid + timestamp).encode(), hashlib.sha256).hexdigest()
        query = urllib.parse.urlencode({"device_token": token, "device_uuid": uuid, "device_name": "Security Check",
                                        "app_name": LEGACY, "timestamp": timestamp, "credential": credential})
        url = f"/register?{query}"
        spent = [s.ingest("GET", "/register", address=address).status for _ in range(RATE_PER_CLIENT)]
        first = s.ingest("GET", url, address=address)
        claims = s.scan(f"*once:credential:{credential}")
        record = s.scan(f"*token:{token}")
        self.check(first.status == 429 and (first.json() or {}).get("ret") == 5,
                   f"legacy: with the client's allowance spent ({RATE_PER_CLIENT} requests, HTTP {spent}), "
                   "a signed GET /register is 429 ret 5", str(first))
        self.check(not claims and not record, "legacy: after the 429 Redis holds neither the credential's claim nor the device",
                   f"claims {claims}, records {record}")
        time.sleep(1.2)
        second = s.ingest("GET", url, address=address)
        claims = s.scan(f"*once:credential:{credential}")
        # The record's key as the app's registry layout (read from Redis now that it is written) names it.
        record_key = s.registry(LEGACY).record(token)
        record = s.redis("EXISTS", record_key)
        self.check(second.status == 200 and second.json() == {"ret": 0, "msg": "ok"},
                   "legacy: the identical URL 1.2 s later is 200 ret 0", str(second))
        self.check(len(claims) == 1 and record == "1", "legacy: then Redis holds the device and the credential's claim",
                   f"claims {claims}, EXISTS {record_key} {record}")
        time.sleep(0.6)
        third = s.ingest("GET", url, address=address)
        self.check(third.status == 403 and (third.json() or {}).get("ret") == 2 and "already used" in third.message(),
                   "legacy: a third time it is 403 ret 2 (already used)", str(third))
        wrong = urllib.parse.urlencode({"device_token": token, "device_uuid": uuid, "app_name": LEGACY, "timestamp": timestamp,
                                        "credential": hmac.new(b"another secret", (token + uuid + timestamp).encode(),
                                                               hashlib.sha256).hexdigest()})
        r = s.ingest("GET", f"/register?{wrong}", address="192.0.2.67")
        self.check(r.status == 403 and (r.json() or {}).get("ret") == 2 and "does not match" in r.message(),
                   "legacy: an HMAC under another secret is 403 ret 2 (does not match)", str(r))

    # 7
    def small_ones(self):
        s = self.stack
        port = s.port["push-ingest"]
        results = {}

        def slow_head():
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            head = (f"PUT /v1/apps/{APP}/devices/{new_token()} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: {fresh_address()}\r\n"
                    "X-Slow: " + "z" * 400).encode()
            first = None
            received = b""
            how = None
            sent = 0
            try:
                for byte in head:
                    try:
                        sock.send(bytes([byte]))
                    except OSError as e:
                        how = f"send failed: {e}"
                        break
                    sent += 1
                    if first is None:
                        first = time.monotonic()
                    ready, _, _ = select.select([sock], [], [], 0.2)
                    if ready:
                        try:
                            data = sock.recv(4096)
                        except OSError as e:
                            how = f"recv failed: {e}"
                            break
                        if not data:
                            how = "closed by push-ingest"
                            break
                        received += data
                    if time.monotonic() - first > HEADER_TIMEOUT_S + 6:
                        how = "still open"
                        break
            finally:
                sock.close()
            results["slow"] = (time.monotonic() - first, how, sent, received)

        def idle_keep_alive():
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            answers = []
            try:
                for i in range(2):
                    if i:
                        time.sleep(HEADER_TIMEOUT_S + 1.5)
                    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    data = b""
                    while b"\r\n\r\n" not in data:
                        chunk = sock.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    answers.append(data.split(b"\r\n", 1)[0].decode(errors="replace") or "(closed)")
            except OSError as e:
                answers.append(f"{type(e).__name__}: {e}")
            finally:
                sock.close()
            results["idle"] = answers

        threads = [threading.Thread(target=slow_head), threading.Thread(target=idle_keep_alive)]
        for t in threads:
            t.start()

        # (b) and (c) while (a) runs.
        token = new_token()
        r = s.ingest("PUT", f"/v1/apps/{APP}/devices/{token}", body={"user": "security-user", "device": {"name": "x\u001b[2J"}},
                     app_key=s.ingest_keys[APP])
        self.check(r.status == 400 and "device.name" in r.message(),
                   "small: a device name with an escape sequence (x\\u001b[2J) is 400 naming device.name", str(r))
        self.check(not s.scan(f"*{token}*"), "small: that device is not stored (no Redis key names it)")

        path = f"/v1/apps/{NOWHERE}/devices/{new_token()}"
        body = {"user": "security-user"}
        none = s.ingest("PUT", path, body=body)
        wrong = s.ingest("PUT", path, body=body, app_key="not-a-key-of-any-app")
        other = s.ingest("PUT", path, body=body, app_key=s.ingest_keys[APP])
        existing = s.ingest("PUT", f"/v1/apps/{BOUNDED}/devices/{new_token()}", body=body, app_key=s.ingest_keys[APP])
        self.check(none.status == 401 and "bearer" in none.headers.get("www-authenticate", "").lower(),
                   f"small: PUT to {NOWHERE} without a key is 401 with WWW-Authenticate: Bearer", str(none))
        self.check(wrong.status == 401, f"small: PUT to {NOWHERE} with a key of no app is 401", str(wrong))
        same = (other.json() or {}).get("error") == (existing.json() or {}).get("error") and \
            other.message().replace(NOWHERE, "APP") == existing.message().replace(BOUNDED, "APP")
        self.check(other.status == 403 and existing.status == 403 and same,
                   f"small: with another app's key, {NOWHERE} (no such app) and {BOUNDED} (an app) get the same 403, no 404",
                   f"{NOWHERE}: {other}; {BOUNDED}: {existing}")

        for t in threads:
            t.join(timeout=HEADER_TIMEOUT_S + 10)
        took, how, sent, received = results.get("slow", (None, "did not finish", 0, b""))
        answer = received.split(b"\r\n", 1)[0].decode(errors="replace") if received else "nothing"
        self.timings["slow head cut off after"] = took or 0
        self.check(how == "closed by push-ingest" and took is not None and HEADER_TIMEOUT_S - 0.3 <= took <= HEADER_TIMEOUT_S + 1,
                   f"small: a request head sent one byte every 200 ms is cut off {took or 0:.2f} s after its first byte "
                   f"(PUSH_INGEST_HEADER_TIMEOUT_S={HEADER_TIMEOUT_S}, at most +1 s; {sent} bytes sent; answered: {answer})",
                   f"{how} after {took or 0:.2f} s, {sent} bytes sent, answered {answer!r}")
        idle = results.get("idle", [])
        self.check(len(idle) == 2 and all(" 200" in a for a in idle),
                   f"small: an idle keep-alive connection outlives the header timeout ({HEADER_TIMEOUT_S + 1.5:.1f} s idle, "
                   "then 200 on it)", f"answers {idle}")

    # 8
    def egress_proxy(self):
        s = self.stack
        token = new_token()
        self.full_tokens.append(token)
        r = self.register(APP, token)
        self.check(r.status == 201, "proxy: a device registered for the published push", str(r))
        request_id = f"security-proxy-{RUN}"
        request = {"id": request_id, "app": APP, "to": {"tokens": [token]},
                   "payload": {"aps": {"alert": {"title": "Security check", "body": f"through the egress proxy {RUN}"}}}}
        done = s.pushctl("publish", "-", "--amqp-url", s.amqp_url, "--redis-url", s.redis_url, stdin=json.dumps(request))
        self.check(done.returncode == 0, "proxy: `pushctl publish` published the push request",
                   f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}")

        def delivered(t):
            data = http_json(s.port["admin"], "GET", f"/deliveries?token={t}", timeout=10)
            return (data or {}).get("deliveries", [])

        got = wait_for(lambda: delivered(token), 30, step=0.3) or []
        body = json.dumps(got[0].get("payload")) if got else ""
        self.check(len(got) == 1 and f"through the egress proxy {RUN}" in body,
                   "proxy: apns-sandbox's /deliveries has the published push (its token and payload)", f"{len(got)} deliveries {body[:200]}")
        roles = wait_for(lambda: delivered(self.roles_token), 10, step=0.3) or []
        self.check(len(roles) == 1, "proxy: the push the send-only key sent through the console (check 1) reached apns-sandbox too",
                   f"{len(roles)} deliveries to its token")
        target = f"127.0.0.1:{s.port['apns']}"
        with self.proxy.lock:
            connects = list(self.proxy.connects)
            carried = dict(self.proxy.carried)
        ok = [c for c in connects if c["target"] == target and c["status"] == 200 and c["authorized"]]
        self.check(bool(ok) and carried.get(target, 0) > 0,
                   f"proxy: the proxy saw an authorized CONNECT {target} (apns-sandbox) and carried {carried.get(target, 0)} bytes",
                   f"CONNECTs {connects}, carried {carried}")
        refused = [c for c in connects if c["status"] != 200]
        self.check(not refused, "proxy: every CONNECT carried the right Proxy-Authorization (none refused)", f"{refused}")
        pid = s.procs["push-send"].pid if "push-send" in s.procs else None
        ss = subprocess.run(["ss", "-tnpH", "state", "established", f"( dport = :{s.port['apns']} )"], capture_output=True, text=True)
        direct = [line for line in ss.stdout.splitlines() if f"pid={pid}," in line]
        via = subprocess.run(["ss", "-tnpH", "state", "established", f"( dport = :{PROXY_PORT} )"], capture_output=True, text=True)
        tunnels = [line for line in via.stdout.splitlines() if f"pid={pid}," in line]
        self.check(ss.returncode == 0 and pid is not None and not direct and bool(tunnels),
                   f"proxy: push-send (pid {pid}) holds {len(tunnels)} connection(s) to the proxy and none to apns-sandbox's port (ss)",
                   f"ss exit {ss.returncode}; direct {direct}; to the proxy {tunnels}; {ss.stderr.strip()[:200]}")
        text = s.log_text("push-send")
        masked = f"reaching APNs through the proxy http://{PROXY_USER}:***@127.0.0.1:{PROXY_PORT}"
        self.check(masked in text, f"proxy: push-send logs `{masked}`",
                   f"lines naming the proxy: {[x for x in text.splitlines() if 'proxy' in x.lower()][:3]}")
        leaked = [p.name for p in s.out.glob("*.log") if s.proxy_password in p.read_text(errors="replace")]
        self.check(f"{PROXY_USER}:{s.proxy_password}" not in text and not leaked,
                   "proxy: the proxy's password is in no log (push-send's included)", f"in {leaked}")

    def no_secrets_in_logs(self):
        s = self.stack
        secrets_ = {"the operator's password": s.password, "the send key": s.send_key, "the admin key": s.admin_key,
                    "the session key": s.session_key, "the legacy secret": s.legacy_secret}
        logs = {p.name: p.read_text(errors="replace") for p in s.out.glob("*.log")}
        leaked = [f"{what} in {name}" for what, value in secrets_.items() for name, text in logs.items() if value in text]
        self.check(not leaked, f"no password, key or secret in the services' logs ({len(logs)} logs)", "; ".join(leaked))
        console = logs.get("push-console.log", "")
        full = [t[:12] for t in self.full_tokens if t in console]
        self.check(not full, "push-console's log holds no full device token", f"tokens {full}")



@pytest.fixture(scope="module")
def scenario(bin_dir):
    state = Scenario(None)
    for stack in serve(SecurityStack(bin_dir)):
        state.stack, state.proxy = stack, stack.proxy
        yield state
    print("timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in state.timings.items()))


@pytest.fixture
def sec(scenario, checks):
    """The scenario, its checks counted in the running test."""
    scenario.check = checks
    return scenario


def test_roles(sec):
    sec.roles()


def test_sessions(sec):
    sec.sessions()


def test_logins(sec):
    sec.logins()


def test_bounded_state(sec):
    sec.bounded_state()


def test_legacy_credential(sec):
    sec.legacy_credential()


def test_small_ones(sec):
    sec.small_ones()


def test_egress_proxy(sec):
    sec.egress_proxy()


def test_roles_audit(sec):
    time.sleep(0.3)  # the last audit lines reach the log
    sec.roles_audit()


def test_no_secrets_in_logs(sec):
    sec.no_secrets_in_logs()
