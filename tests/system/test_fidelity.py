"""apns-sandbox against clients nobody here wrote (scripts/checks/fidelity.sh runs this in its venv).

Starts the --bin-dir apns-sandbox alone on 127.0.0.1:8840 (admin 8841; TLS with a CA it generates;
a provider key FIDKEY0001 of team FIDTEAM001 it verifies; a client CA for certificate auth), then:

- aioapns (PyPI; Python's ssl offers no ALPN, so it connects with HTTP/2 prior knowledge): token
  auth with the .p8 key: valid alert, background and voip notifications answer 200; a bad device
  token, a voip push type on a topic without .voip, an oversized payload, priority 7, a 65-byte
  collapse id, a token set unregistered through the admin API, an expired provider token and a token
  naming another team answer Apple's reasons, as aioapns reports them; a token whose iat is a string
  of digits (APNSwift 5/6's form) is accepted. Certificate auth: a client certificate from the
  client CA delivers to the UID topic; one from another CA answers BadCertificate.
- nghttp (Debian nghttp2-client): one valid request (200, the apns-id it sent echoed, an
  apns-unique-id) and invalid ones (no authorization, an unknown push type, GET, a bad path, a
  repeated header, an expired token), each answered with Apple's status and JSON reason body and an
  apns-id header.
- h2load: 2,000 valid requests over 2 connections, 50 streams each: every response 2xx.

Everything runs on loopback and every client call has a timeout. Keys and the sandbox's log:
.local/fidelity/.
"""

import asyncio
import json
import re
import ssl
import subprocess
import time
import uuid
from datetime import datetime, timedelta, timezone

import jwt
import pytest
from aioapns import APNs, NotificationRequest, PushType
from aioapns import connection as aioapns_connection
from conftest import serve
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from harness.net import call
from harness.stack import Stack

# aioapns reads a certificate's UID with pyOpenSSL's deprecated call: its warning, not ours.
pytestmark = pytest.mark.filterwarnings("ignore:X509.get_subject is deprecated:DeprecationWarning")

HOST = "127.0.0.1"
KEY_ID = "FIDKEY0001"
TEAM_ID = "FIDTEAM001"
TOPIC = "com.example.fidelity"
CERT_TOPIC = "com.example.certified"
TOKEN = "fd" * 32
CALL_TIMEOUT = 10  # seconds for any one client call
H2LOAD_REQUESTS = 2000



# MARK: keys and certificates


def write(path, data):
    path.write_bytes(data)
    return str(path)


def make_credentials(directory):
    """The provider key (.p8 + public PEM) and two client CAs with a client certificate each."""
    key = ec.generate_private_key(ec.SECP256R1())
    p8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    credentials = {
        "p8": p8.decode(),
        "p8_key": key,
        "public_pem": write(directory / f"AuthKey_{KEY_ID}.pub.pem", public),
    }
    now = datetime.now(timezone.utc)

    def certificate(subject, issuer_name, public_key, signing_key, ca):
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer_name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        return builder.sign(signing_key, hashes.SHA256())

    for name in ("trusted", "stranger"):
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"fidelity {name} client CA")])
        ca = certificate(ca_name, ca_name, ca_key.public_key(), ca_key, True)
        client_key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name(
            [
                x509.NameAttribute(NameOID.USER_ID, CERT_TOPIC),
                x509.NameAttribute(NameOID.COMMON_NAME, f"Apple Push Services: {CERT_TOPIC}"),
            ]
        )
        client = certificate(subject, ca_name, client_key.public_key(), ca_key, False)
        bundle = client.public_bytes(serialization.Encoding.PEM) + client_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        credentials[f"{name}_ca"] = write(directory / f"{name}-client-ca.pem", ca.public_bytes(serialization.Encoding.PEM))
        credentials[f"{name}_client"] = write(directory / f"{name}-client.pem", bundle)
    return credentials


def provider_token(key, iat=None, team=TEAM_ID, iat_as_string=False):
    issued = int(time.time()) if iat is None else iat
    claims = {"iss": team, "iat": str(issued) if iat_as_string else issued}
    return jwt.encode(claims, key, algorithm="ES256", headers={"kid": KEY_ID})


# MARK: the sandbox


class Sandbox(Stack):
    """apns-sandbox alone, with the provider key and client CA of `credentials`."""

    WITH_SERVERS = False

    def __init__(self, bin_dir):
        super().__init__(bin_dir, "fidelity", 8838)
        self.services = []
        self.h2_port, self.admin_port, self.ca_file = self.port["apns"], self.port["admin"], str(self.ca)
        self.out.mkdir(parents=True, exist_ok=True)
        self.credentials = make_credentials(self.out)

    def sandbox_args(self):
        return ["--public-key", f"{KEY_ID}={self.credentials['public_pem']}", "--key-team", f"{KEY_ID}={TEAM_ID}",
                "--client-ca", self.credentials["trusted_ca"], "--workers", "1"]

    def admin(self, method, path, body=None):
        reply = call(self.admin_port, method, path, body=body, timeout=CALL_TIMEOUT)
        return reply.status, reply.json() or {}


# MARK: aioapns


def point_aioapns_at(sandbox):
    """aioapns knows only Apple's hosts: its development protocol class is pointed at the sandbox."""
    aioapns_connection.APNsDevelopmentClientProtocol.APNS_SERVER = HOST
    aioapns_connection.APNsDevelopmentClientProtocol.APNS_PORT = sandbox.h2_port


def trusting(sandbox):
    context = ssl.create_default_context(cafile=sandbox.ca_file)
    return context


class TokenProvider(aioapns_connection.JWTAuthorizationHeaderProvider):
    """aioapns's provider token, made with a chosen age, team or iat type."""

    age = 0
    team = TEAM_ID
    iat_as_string = False

    def get_header(self):
        token = provider_token(self.key, int(time.time()) - self.age, self.team, self.iat_as_string)
        return f"bearer {token}"


def token_client(sandbox, credentials, **provider):
    """An aioapns client with token auth; `provider` overrides TokenProvider's age, team or iat type."""
    client = APNs(
        key=credentials["p8"],
        key_id=KEY_ID,
        team_id=TEAM_ID,
        topic=TOPIC,
        use_sandbox=True,
        ssl_context=trusting(sandbox),
        max_connections=1,
        max_connection_attempts=2,
    )
    if provider:
        factory = type("CustomTokenProvider", (TokenProvider,), provider)
        original = client.pool.create_connection

        async def create_connection():
            saved = aioapns_connection.JWTAuthorizationHeaderProvider
            aioapns_connection.JWTAuthorizationHeaderProvider = factory
            try:
                return await original()
            finally:
                aioapns_connection.JWTAuthorizationHeaderProvider = saved

        client.pool.create_connection = create_connection
    return client


async def send(client, request):
    async def quiet(_request, _result):
        pass  # aioapns logs refusals at ERROR otherwise; the check prints them

    client.err_func = quiet
    try:
        result = await asyncio.wait_for(client.send_notification(request), CALL_TIMEOUT)
        return result.status, result.description, result.timestamp
    except Exception as error:  # a hang, a refused connection: observed, not fatal
        return None, f"{type(error).__name__}: {error}", None


def alert(text="hello"):
    return {"aps": {"alert": text}}


async def aioapns_checks(sandbox, credentials, check):
    point_aioapns_at(sandbox)
    client = token_client(sandbox, credentials)
    cases = [
        ("valid alert", NotificationRequest(TOKEN, alert(), priority=10, push_type=PushType.ALERT, time_to_live=3600), "200", None),
        (
            "valid background (priority 5)",
            NotificationRequest(TOKEN, {"aps": {"content-available": 1}}, priority=5, push_type=PushType.BACKGROUND),
            "200",
            None,
        ),
        (
            "valid voip of 5,000 bytes on TOPIC.voip",
            NotificationRequest(TOKEN, {"aps": {}, "x": "v" * 4980}, push_type=PushType.VOIP, apns_topic=f"{TOPIC}.voip"),
            "200",
            None,
        ),
        ("a 4-character device token", NotificationRequest("abcd", alert()), "400", "BadDeviceToken"),
        ("a voip push type on a topic without .voip", NotificationRequest(TOKEN, alert(), push_type=PushType.VOIP), "400", "BadTopic"),
        ("a payload over 4096 bytes", NotificationRequest(TOKEN, {"aps": {"alert": "x" * 4100}}), "413", "PayloadTooLarge"),
        ("apns-priority 7", NotificationRequest(TOKEN, alert(), priority=7), "400", "BadPriority"),
        ("a 65-byte collapse id", NotificationRequest(TOKEN, alert(), collapse_key="c" * 65), "400", "BadCollapseId"),
    ]
    delivered = 0
    for name, request, status, reason in cases:
        got_status, got_reason, _ = await send(client, request)
        ok = got_status == status and got_reason == reason
        delivered += 1 if got_status == "200" else 0
        check(ok, f"aioapns token auth: {name} -> {status} {reason or ''}".rstrip(), f"{got_status} {got_reason}")

    # The one connection aioapns made for all of the above offered no ALPN: prior knowledge.
    ssl_objects = [c.transport.get_extra_info("ssl_object") for c in client.pool.connections if c.transport]
    protocols = [o.selected_alpn_protocol() for o in ssl_objects if o is not None]
    check(protocols == [None], "aioapns's connection negotiated no ALPN (HTTP/2 with prior knowledge)", f"ALPN {protocols}")

    gone = "fe" * 32
    sandbox.admin("PUT", f"/tokens/{gone}", {"state": "unregistered", "timestamp": 1700000000000})
    got = await send(client, NotificationRequest(gone, alert()))
    check(got == ("410", "Unregistered", 1700000000000), "aioapns token auth: an unregistered token -> 410 Unregistered + timestamp", str(got))
    client.pool.close()

    for name, provider, status, reason in [
        ("a provider token 3,700 s old", {"age": 3700}, "403", "ExpiredProviderToken"),
        ("a provider token naming another team", {"team": "OTHERTEAM1"}, "403", "InvalidProviderToken"),
        ('a provider token with "iat" as a string of digits (APNSwift 5/6)', {"iat_as_string": True}, "200", None),
    ]:
        other = token_client(sandbox, credentials, **provider)
        got_status, got_reason, _ = await send(other, NotificationRequest(TOKEN, alert()))
        delivered += 1 if got_status == "200" else 0
        check(got_status == status and got_reason == reason, f"aioapns: {name} -> {status} {reason or ''}".rstrip(), f"{got_status} {got_reason}")
        other.pool.close()

    for name, certificate, status, reason in [
        ("a client certificate from --client-ca", credentials["trusted_client"], "200", None),
        ("a client certificate from another CA", credentials["stranger_client"], "403", "BadCertificate"),
    ]:
        # topic=None: aioapns takes the certificate's UID as apns-topic, as Apple's certificates carry it.
        cert_client = APNs(client_cert=certificate, use_sandbox=True, ssl_context=trusting(sandbox), max_connections=1, max_connection_attempts=2)
        got_status, got_reason, _ = await send(cert_client, NotificationRequest(TOKEN, alert("certificate")))
        check(got_status == status and got_reason == reason, f"aioapns certificate auth: {name} -> {status} {reason or ''}".rstrip(), f"{got_status} {got_reason}")
        cert_client.pool.close()

    _, recorded = sandbox.admin("GET", f"/deliveries?token={TOKEN}&app={TOPIC}")
    topics = sorted({delivery["topic"] for delivery in recorded.get("deliveries", [])})
    count = len(recorded.get("deliveries", []))
    check(count == delivered, f"the sandbox recorded the {delivered} notifications it accepted from aioapns for {TOPIC}", f"{count}: {topics}")
    _, cert_recorded = sandbox.admin("GET", f"/deliveries?app={CERT_TOPIC}")
    cert_deliveries = cert_recorded.get("deliveries", [])
    check(
        len(cert_deliveries) == 1 and cert_deliveries[0]["topic"] == CERT_TOPIC,
        "certificate auth delivered to the certificate's UID topic",
        json.dumps([d["topic"] for d in cert_deliveries]),
    )


# MARK: nghttp and h2load


def nghttp(sandbox, directory, headers, path=f"/3/device/{TOKEN}", body=None):
    """One request through nghttp -v: (status, headers, body text)."""
    command = ["nghttp", "-v", "-t", str(CALL_TIMEOUT)]
    for name, value in headers:
        command += ["-H", f"{name}: {value}"]
    if body is not None:
        body_file = directory / f"nghttp-{uuid.uuid4()}.json"
        body_file.write_text(body)
        command += ["-d", str(body_file)]
    command.append(f"https://{HOST}:{sandbox.h2_port}{path}")
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=CALL_TIMEOUT + 5)
    except subprocess.TimeoutExpired:
        return None, {}, "nghttp timed out"
    status, response_headers = None, {}
    for line in run.stdout.splitlines():
        match = re.search(r"\] recv \(stream_id=\d+\) (:status|[a-z0-9-]+): (.*)$", line)
        if match and match.group(1) == ":status":
            status = int(match.group(2))
        elif match:
            response_headers[match.group(1)] = match.group(2)
    # The body goes to stdout between the frame log lines, without a newline of its own.
    body = re.search(r'\{"reason":[^}]*\}', run.stdout)
    return status, response_headers, body.group(0) if body else run.stderr.strip()[-200:]


def nghttp_checks(sandbox, directory, credentials, check):
    key = credentials["p8_key"]
    payload = json.dumps(alert("from nghttp"))
    fresh = f"bearer {provider_token(key)}"
    valid = [("authorization", fresh), ("apns-topic", TOPIC), ("apns-push-type", "alert")]
    sent_id = str(uuid.uuid4())
    status, headers, body = nghttp(sandbox, directory, valid + [("apns-id", sent_id)], body=payload)
    check(
        status == 200 and headers.get("apns-id") == sent_id and re.fullmatch(r"[0-9a-fA-F-]{36}", headers.get("apns-unique-id", "")),
        "nghttp: a valid request -> 200, its apns-id echoed, an apns-unique-id",
        f"{status} {headers}",
    )
    stale = f"bearer {provider_token(key, int(time.time()) - 3700)}"
    cases = [
        ("no authorization header", [("apns-topic", TOPIC)], "POST", f"/3/device/{TOKEN}", 403, "MissingProviderToken"),
        ("apns-push-type banner", [("authorization", fresh), ("apns-topic", TOPIC), ("apns-push-type", "banner")], "POST", None, 400, "InvalidPushType"),
        ("GET", valid, "GET", None, 405, "MethodNotAllowed"),
        ("the path /3/devices/…", valid, "POST", f"/3/devices/{TOKEN}", 404, "BadPath"),
        ("apns-topic twice", valid + [("apns-topic", TOPIC)], "POST", None, 400, "DuplicateHeaders"),
        ("an expired provider token", [("authorization", stale), ("apns-topic", TOPIC)], "POST", None, 403, "ExpiredProviderToken"),
    ]
    for name, headers_sent, method, path, want_status, want_reason in cases:
        status, headers, body = nghttp(
            sandbox, directory, headers_sent, path=path or f"/3/device/{TOKEN}", body=payload if method == "POST" else None
        )
        try:
            reason = json.loads(body).get("reason")
        except ValueError:
            reason = None
        check(
            status == want_status and reason == want_reason and "apns-id" in headers,
            f"nghttp: {name} -> {want_status} {{\"reason\":\"{want_reason}\"}} + apns-id",
            f"{status} {body} {headers.get('apns-id', 'no apns-id')}",
        )


def h2load_check(sandbox, directory, credentials, check):
    payload = directory / "h2load.json"
    payload.write_text(json.dumps(alert("from h2load")))
    command = [
        "h2load",
        "-n", str(H2LOAD_REQUESTS), "-c", "2", "-m", "50",
        "-T", "30", "-N", "10",
        "-H", f"authorization: bearer {provider_token(credentials['p8_key'])}",
        "-H", f"apns-topic: {TOPIC}",
        "-H", "apns-push-type: alert",
        "-d", str(payload),
        f"https://{HOST}:{sandbox.h2_port}/3/device/{TOKEN}",
    ]  # fmt: skip
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=60)
        output = run.stdout
    except subprocess.TimeoutExpired:
        output = "h2load timed out"
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", output)
    finished = re.search(r"finished in ([^,]+), ([\d.]+) req/s", output)
    counts = [int(n) for n in codes.groups()] if codes else None
    observed = f"status codes {counts}" + (f", {finished.group(1)}, {finished.group(2)} req/s" if finished else "") if counts else output[-300:]
    check(counts == [H2LOAD_REQUESTS, 0, 0, 0], f"h2load: {H2LOAD_REQUESTS} requests, 2 connections x 50 streams -> all 2xx", observed)


@pytest.fixture(scope="module")
def sandbox(bin_dir):
    yield from serve(Sandbox(bin_dir))


def test_aioapns(sandbox, checks):
    asyncio.run(aioapns_checks(sandbox, sandbox.credentials, checks))


def test_nghttp(sandbox, checks):
    nghttp_checks(sandbox, sandbox.out, sandbox.credentials, checks)


def test_h2load(sandbox, checks):
    h2load_check(sandbox, sandbox.out, sandbox.credentials, checks)
    status, stats = sandbox.admin("GET", "/stats")
    checks.log(f"sandbox /stats: requests {stats.get('requests')}, by_status {stats.get('by_status')}")
