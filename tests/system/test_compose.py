"""docker-compose.yml delivers: checked without a container engine (scripts/checks/compose.sh runs
this module; `-k static` runs the file's checks alone, without a stack).

1. The file (test_static_*): valid against the Compose Specification's JSON schema (vendored in
   deploy/compose-spec/), after interpolation with a .env made by `make .env` (mode 600, user push,
   random RabbitMQ and Redis passwords, not overwritten by a second `make .env`, which adds a
   REDIS_PASSWORD to an older .env without one and changes nothing else); without .env, or with one
   without REDIS_PASSWORD, it does not interpolate, naming `make .env`. Redis runs with
   --protected-mode yes, --requirepass ${REDIS_PASSWORD:?…}, --maxmemory and --maxmemory-policy
   noeviction, its healthcheck's redis-cli with REDISCLI_AUTH; every PUSH_REDIS_URL is
   redis://:${REDIS_PASSWORD}@redis…. The push image's containers, Redis and the policy import have
   read_only: true, cap_drop: [ALL], security_opt: [no-new-privileges:true] (the push image's a
   tmpfs /tmp); push-console mounts no signing keys (no keys volume, only its operators file).
   Every container runs as a non-root user; `guest` appears nowhere; RabbitMQ's default user and
   every PUSH_AMQP_URL come from RABBITMQ_USER and RABBITMQ_PASSWORD; apns-sandbox has --host
   0.0.0.0 and --tls-name apns-sandbox and that is the name the services reach it by;
   deploy/rabbitmq/policies.json is imported by a one-shot service every service that uses RabbitMQ
   waits for; PUSH_ADMIN_PORT is set apart from PUSH_HTTP_PORT (but for push-console, which has one
   port); every published port is on 127.0.0.1; the image prepares the volumes its non-root user
   writes to. push-console: profile console, PUSH_HTTP_PORT 8090 published as 127.0.0.1:8090:8090,
   no default operator or password in the file; PUSH_CONSOLE_OPERATORS_FILE is
   config/console-operators.json bind-mounted read-only in the long form (a missing file fails the
   start); that file is not in git and .gitignore and .dockerignore keep it out.
2. The stack (test_stack[STEP], a test per step in compose's order): every compose service started
   as compose would start it, from the real binaries of --bin-dir: its command or entrypoint and its
   environment exactly as the file gives them after interpolation with that .env, the image's ENV
   (deploy/Dockerfile) under it. What a container engine would add is stood in for:
   - Networks: a private network and mount namespace (`unshare --net --mount`; as root, or a user
     namespace otherwise), so nothing of the host's network is touched or reachable and compose's
     own port numbers are used (RabbitMQ 5672 and 15672, Redis 6379, apns-sandbox 2197/2198, the
     services 8080/9090, push-console 8090). Inside it a private /etc/hosts (bind-mounted over the
     namespace's view of /etc/hosts) maps each compose service name to its own loopback address:
     rabbitmq and redis to 127.0.0.1 (where scripts/rabbitmq.sh and scripts/redis.sh listen), every
     other service to one of 127.0.0.2 and up. The binaries resolve names with getaddrinfo, which
     reads it. In one namespace the services would all bind 0.0.0.0:8080, so each gets
     PUSH_HTTP_HOST=its address: the one variable added to compose's environment.
   - Images: container paths (/app, the WORKDIR with config/ and localization/ as the Dockerfile
     copies them, and every volume's mount point) become directories of a private root, named
     volumes directories of their own with the owner the image gives their mount point; bind mounts
     are copies. The push image's programs are --bin-dir's; the rabbitmq image's rabbitmqadmin is
     Debian's copy of the same script.
   - Users: as root, services of the push image run as uid 10001 (its USER push), rabbitmqadmin as
     uid 999 (the image's rabbitmq user), via setpriv; otherwise as the invoking user.
   - Containers: each service runs in a mount namespace of its own (unshare --mount) where the
     volumes and bind mounts of the other services are hidden, its `:ro` ones are read-only and, with
     read_only: true, so are the image's paths; setpriv empties its bounding and inheritable
     capability sets (cap_drop: [ALL]) and sets no_new_privs (no-new-privileges). /tmp is the host's.
   - RabbitMQ and Redis are the project's own instances (scripts/rabbitmq.sh with the management
     plugin, scripts/redis.sh), set up like the official images: the .env user as administrator, no
     guest. The policy scripts/rabbitmq.sh sets is removed first, so the one-shot's import is what
     puts it back. Redis gets the compose command's options with CONFIG SET (the password last); a
     client without the password must be refused, the healthcheck's command answer PONG.
   The steps: prepare (the names, the private root, an operators file made as
   docs/reports-and-console.md says with `pushctl console hash-password` and `hash-key` of --bin-dir,
   a random password and key, in place of config/console-operators.json); servers; up (in compose's
   dependency order: dev-keys and rabbitmq-policies run to exit 0, the policy then on the broker
   equal to the file; apns-sandbox writes its CA; the services become ready on PUSH_ADMIN_PORT,
   push-console, run as `--profile console` would, on PUSH_HTTP_PORT 8090); sandbox_name
   (https://apns-sandbox:2197 verifies with that CA, https://ITS-ADDRESS:2197 does not); users (the
   expected uids, CapBnd 0, NoNewPrivs 1, the image's paths mounted read-only; push-ingest's
   PUSH_HTTP_PORT serves the API, not /healthz); deliver (a device registered through
   http://push-ingest:8080, a push request published with pika to PUSH_AMQP_URL, apns-sandbox's
   admin API shows it delivered); console (redirects to /login, 401 without a session or key, its
   operator logs in; with the API key it reports that request done and delivered and push.send with
   its consumer; its keys directory is empty in its mount namespace and its status still lists the
   app); stop (every service exits 0 on SIGTERM).

How the stack gets its namespace: a running pytest cannot step into a private network and mount
namespace and out again, so this module is also a small program. The module fixture `stack` starts
`unshare --mount --net --propagation private [--user --map-root-user] python3
tests/system/test_compose.py BIN_DIR WORKDIR [UID]` (in a session of its own), whose `inside()`
stands the stack up there a step at a time: each test_stack[STEP] writes its step's name on the
program's stdin, and the program runs that step (and any earlier one -k left out) and answers with
JSON lines, one per check ({"check": [ok, what, why]}) or info line ({"log": text}), then {"end":
step, "error": …}; the test records them with `checks`. An error (a step that could not go on) is a
failed check and the later steps are skipped. At the end the fixture closes the program's stdin, and
the program stops the services, RabbitMQ and Redis and exits (as it does when pytest dies: its stdin
ends; SIGTERM too). Ctrl-C reaches pytest only, whose teardown does the same.

The private directory (/tmp/push-compose-check.*: .env, the private root, the logs) is removed at the
end unless a test failed. About 25 s.
"""

import base64
import fcntl
import http.client
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pika
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # the program inside the namespace runs without conftest
from harness.deployment import (  # noqa: E402
    COMPOSE_FILE, DOCKERFILE, HARDENED, PUSH_IMAGE, SCHEMA_FILE, Failed, InterpolationError, argv_of, depends_of, hardened,
    image_user, interpolate, parse_dockerfile, read_env_file, redis_options, service_env, strings_of, topological, volumes_of,
)
from harness import net  # noqa: E402

POLICIES_FILE = ROOT / "deploy" / "rabbitmq" / "policies.json"
# Compose services that are the project's own local instances here rather than emulated containers.
SERVERS = ("rabbitmq", "redis")
RABBITMQADMIN_GLOB = "/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/rabbitmq_management-*/priv/www/cli/rabbitmqadmin"
TOOLS = ("unshare", "setpriv", "mount", "nsenter", "curl", "make", "openssl", "redis-server")
START_TIMEOUT_S = 20
STOP_TIMEOUT_S = 25
# push-console: one port for its pages, its API and /healthz, /readyz, /metrics (no PUSH_ADMIN_PORT);
# its operators file is made by ops (docs/reports-and-console.md), never committed, and bind-mounted read-only.
CONSOLE = "push-console"
CONSOLE_PORT = "8090"
OPERATORS_FILE = ROOT / "config" / "console-operators.json"
# Where the push image's services find the apps' signing keys (the apps file names keys/…).
KEYS_DIR = "/app/config/keys"
# The stack's steps, in order (test_stack[STEP] each).
STEPS = ("prepare", "servers", "up", "sandbox_name", "users", "deliver", "console", "stop")


# --- compose semantics (test_cluster_deploy.py uses them too) -----------------------------------


def amqp_users(services):
    return [n for n, s in services.items() if "PUSH_AMQP_URL" in service_env(s)]


# --- the file: fixtures and checks (no stack) ----------------------------------------------------


@pytest.fixture(scope="module")
def work(request):
    """The private directory: .env, the stack's root and logs; kept when a test failed."""
    path = Path(tempfile.mkdtemp(prefix="push-compose-check."))
    failed_before = request.session.testsfailed
    yield path
    if request.session.testsfailed == failed_before:
        shutil.rmtree(path, ignore_errors=True)


def make_env(project):
    make = ["make", "-s", "--no-print-directory", "-f", str(ROOT / "Makefile"), "-C", str(project), ".env"]
    return subprocess.run(make, capture_output=True, text=True)


@pytest.fixture(scope="module")
def made(work):
    """`make .env` in an empty directory: the file compose reads, as it was then."""
    project = work / "project"
    project.mkdir()
    first = make_env(project)
    path = project / ".env"
    if first.returncode != 0 or not path.exists():
        pytest.fail(f"make .env failed (exit {first.returncode}): {first.stderr.strip()}", pytrace=False)
    return SimpleNamespace(path=path, content=path.read_text(), mode=stat.S_IMODE(path.stat().st_mode), env=read_env_file(path))


@pytest.fixture(scope="module")
def env(made):
    return made.env


@pytest.fixture(scope="module")
def raw():
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def dockerfile():
    return parse_dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def services(raw, env):
    """The file's services after interpolation with the .env."""
    return interpolate(raw, env)["services"]


def test_static_make_env(made, checks):
    env, content, path = made.env, made.content, made.path
    second = make_env(path.parent)
    checks(made.mode == 0o600, "make .env writes .env with mode 600", f"mode {made.mode:o}")
    checks(env.get("RABBITMQ_USER") == "push" and re.fullmatch(r"[0-9a-f]{48}", env.get("RABBITMQ_PASSWORD", "")),
           "make .env: RABBITMQ_USER=push and a random 48-hex-digit RABBITMQ_PASSWORD", f"got keys {sorted(env)}")
    checks(re.fullmatch(r"[0-9a-f]{48}", env.get("REDIS_PASSWORD", "")) and env["REDIS_PASSWORD"] != env.get("RABBITMQ_PASSWORD"),
           "make .env: a random 48-hex-digit REDIS_PASSWORD of its own", f"got keys {sorted(env)}")
    checks(second.returncode == 0 and path.read_text() == content, "a second make .env leaves .env as it is", second.stderr.strip())
    # An .env of an older version (no REDIS_PASSWORD): make .env adds one and changes nothing else.
    older = path.parent / "older"
    older.mkdir()
    old_lines = [l for l in content.splitlines() if not l.startswith("REDIS_PASSWORD=")]
    (older / ".env").write_text("\n".join(old_lines) + "\n")
    (older / ".env").chmod(0o600)
    third = make_env(older)
    added = (older / ".env").read_text()
    added_env = read_env_file(older / ".env")
    checks(third.returncode == 0 and added.startswith("\n".join(old_lines) + "\n")
           and re.fullmatch(r"[0-9a-f]{48}", added_env.get("REDIS_PASSWORD", "")) and stat.S_IMODE((older / ".env").stat().st_mode) == 0o600,
           "make .env on an older .env without REDIS_PASSWORD adds a random one and leaves the rest as it is",
           f"exit {third.returncode} {third.stderr.strip()}; keys {sorted(added_env)}")
    ignored = [l.strip() for l in (ROOT / ".gitignore").read_text().splitlines()]
    checks(".env" in ignored or "/.env" in ignored, ".env is in .gitignore")


def test_static_interpolation_and_schema(raw, env, checks):
    # Interpolation without .env stops with a message that says what to do.
    try:
        interpolate(raw, {})
        checks(False, "without .env the file must not interpolate (RABBITMQ_PASSWORD unset)")
    except InterpolationError as e:
        checks("make .env" in str(e), "without .env compose stops, saying: " + str(e), "the message does not name make .env")
    # An .env of an older version, without REDIS_PASSWORD: the same, naming the variable.
    try:
        interpolate(raw, {k: v for k, v in env.items() if k != "REDIS_PASSWORD"})
        checks(False, "without REDIS_PASSWORD in .env the file must not interpolate")
    except InterpolationError as e:
        checks("REDIS_PASSWORD" in str(e) and "make .env" in str(e),
               "with an .env without REDIS_PASSWORD compose stops, saying: " + str(e), "the message does not name REDIS_PASSWORD and make .env")
    schema = json.loads(SCHEMA_FILE.read_text())
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(interpolate(raw, env)), key=lambda e: list(e.absolute_path))
    checks(not errors, f"docker-compose.yml is valid against the compose schema ({SCHEMA_FILE.relative_to(ROOT)})",
           "; ".join(f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors[:5]))


def test_static_users_and_credentials(raw, env, services, dockerfile, checks):
    users, bad = [], []
    for name, svc in services.items():
        user, uid = image_user(name, svc, dockerfile)
        users.append(f"{name} {user}" + (f" ({uid})" if uid is not None else ""))
        if uid is None or uid == 0:
            bad.append(f"{name} runs as {user}" + (" (unknown uid)" if uid is None else ""))
    checks(not bad, "every container runs as a non-root user: " + ", ".join(users), "; ".join(bad))

    guest = [s for s in strings_of(raw) if "guest" in s.lower()]
    checks(not guest, "no guest credentials anywhere in the file", f"found {guest}")

    rabbit_env = service_env(raw["services"]["rabbitmq"])
    checks("${RABBITMQ_USER" in rabbit_env.get("RABBITMQ_DEFAULT_USER", "") and "${RABBITMQ_PASSWORD:?" in rabbit_env.get("RABBITMQ_DEFAULT_PASS", ""),
           "RabbitMQ's default user is RABBITMQ_USER/RABBITMQ_PASSWORD of .env (${RABBITMQ_PASSWORD:?...})",
           f"RABBITMQ_DEFAULT_USER/PASS are {rabbit_env.get('RABBITMQ_DEFAULT_USER')!r}/{rabbit_env.get('RABBITMQ_DEFAULT_PASS')!r}")
    names, bad = amqp_users(services), []
    for name in names:
        raw_url = service_env(raw["services"][name]).get("PUSH_AMQP_URL", "")
        url = urllib.parse.urlsplit(service_env(services[name])["PUSH_AMQP_URL"])
        if "${RABBITMQ_PASSWORD:?" not in raw_url or "${RABBITMQ_USER" not in raw_url:
            bad.append(f"{name}: {raw_url!r} does not take ${{RABBITMQ_USER}} and ${{RABBITMQ_PASSWORD:?...}}")
        elif (url.username, url.password) != (env["RABBITMQ_USER"], env["RABBITMQ_PASSWORD"]) or url.hostname not in services:
            bad.append(f"{name}: {url.username}@{url.hostname} is not the .env user at a compose service")
    checks(names and not bad, f"PUSH_AMQP_URL of {', '.join(names)} is built from RABBITMQ_USER and RABBITMQ_PASSWORD",
           "; ".join(bad) or "no service sets PUSH_AMQP_URL")


def test_static_apns_sandbox_name(services, checks):
    sandbox = argv_of(services.get("apns-sandbox", {}))
    pairs = list(zip(sandbox, sandbox[1:]))
    tls_names = [b for a, b in pairs if a == "--tls-name"]
    checks(("--host", "0.0.0.0") in pairs and "apns-sandbox" in tls_names,
           "apns-sandbox runs with --host 0.0.0.0 --tls-name apns-sandbox", f"its command is {sandbox}")
    endpoints = {n: service_env(s).get("PUSH_APNS_ENDPOINT") for n, s in services.items() if "PUSH_APNS_ENDPOINT" in service_env(s)}
    bad = [f"{n}: {e}" for n, e in endpoints.items()
           if urllib.parse.urlsplit(e).hostname not in tls_names or urllib.parse.urlsplit(e).hostname not in services]
    checks(endpoints and not bad, "the services reach apns-sandbox by a name its certificate holds ("
           + ", ".join(sorted(set(endpoints.values()))) + ")", "; ".join(bad) or "no PUSH_APNS_ENDPOINT")


def test_static_policy_import(services, checks):
    importers = []
    for name, svc in services.items():
        for kind, source, target, _ in volumes_of(svc):
            if kind == "bind" and (ROOT / source).resolve() == POLICIES_FILE:
                if any("rabbitmqadmin" in a and re.search(r"\bimport\s+" + re.escape(target) + r"(?=\s|$)", a) for a in argv_of(svc)):
                    importers.append(name)
    ok = len(importers) == 1
    if ok:
        one = importers[0]
        waiting = [n for n in amqp_users(services) if depends_of(services[n]).get(one) != "service_completed_successfully"]
        ok = not waiting and depends_of(services[one]).get("rabbitmq") == "service_healthy"
        why = f"not waited for by {waiting}" if waiting else f"{one} does not wait for rabbitmq to be healthy"
    else:
        why = f"services importing it: {importers}"
    checks(ok, f"{POLICIES_FILE.relative_to(ROOT)} is imported by the one-shot {importers[0] if importers else '?'} "
           "(rabbitmqadmin import), which every RabbitMQ user waits for (service_completed_successfully)", why)


def test_static_ports(services, checks):
    bad = [n for n in amqp_users(services) if n != CONSOLE and (not service_env(services[n]).get("PUSH_ADMIN_PORT")
           or service_env(services[n]).get("PUSH_ADMIN_PORT") == service_env(services[n]).get("PUSH_HTTP_PORT"))]
    checks(not bad, f"every service but {CONSOLE} sets PUSH_ADMIN_PORT apart from PUSH_HTTP_PORT", f"not: {bad}")
    published = {n: [str(p) for p in s.get("ports") or []] for n, s in services.items() if s.get("ports")}
    bad = [f"{n}: {p}" for n, ports in published.items() for p in ports if not p.startswith("127.0.0.1:")]
    checks(published and not bad, "every published port is on the host's loopback only ("
           + ", ".join(f"{n} {' '.join(p)}" for n, p in published.items()) + ")", "; ".join(bad))


def test_static_console(raw, services, checks):
    """push-console: its port on loopback, no admin port, the operators file bind-mounted read-only
    from config/console-operators.json, which is neither in git nor in the image, and no default."""
    console = services.get(CONSOLE)
    if not checks(console is not None and argv_of(console)[:1] == [CONSOLE], f"a {CONSOLE} service runs {CONSOLE}"):
        return
    env = service_env(console)
    checks(env.get("PUSH_HTTP_PORT") == CONSOLE_PORT and "PUSH_ADMIN_PORT" not in env
           and [str(p) for p in console.get("ports") or []] == [f"127.0.0.1:{CONSOLE_PORT}:{CONSOLE_PORT}"],
           f"{CONSOLE}: PUSH_HTTP_PORT {CONSOLE_PORT} (pages, API, /healthz, /readyz, /metrics; no PUSH_ADMIN_PORT), "
           f"published as 127.0.0.1:{CONSOLE_PORT}:{CONSOLE_PORT} only",
           f"PUSH_HTTP_PORT {env.get('PUSH_HTTP_PORT')!r}, PUSH_ADMIN_PORT {env.get('PUSH_ADMIN_PORT')!r}, ports {console.get('ports')}")
    target = env.get("PUSH_CONSOLE_OPERATORS_FILE", "")
    mounts = [v for v in console.get("volumes") or [] if isinstance(v, dict) and v.get("target") == target]
    mount = mounts[0] if mounts else {}
    checks(target and mount.get("type") == "bind" and mount.get("read_only") is True
           and (ROOT / str(mount.get("source", ""))).resolve() == OPERATORS_FILE
           and not (mount.get("bind") or {}).get("create_host_path"),
           f"{CONSOLE}: PUSH_CONSOLE_OPERATORS_FILE {target} is {OPERATORS_FILE.relative_to(ROOT)}, bind-mounted read-only in "
           "the long form (a missing file is an error, not an empty directory made in its place)",
           f"PUSH_CONSOLE_OPERATORS_FILE {target!r}, its mounts {mounts or console.get('volumes')}")
    rel = str(OPERATORS_FILE.relative_to(ROOT))
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--error-unmatch", rel], capture_output=True, text=True)
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "--no-index", rel], capture_output=True, text=True)
    docker_ignored = rel in {l.strip().rstrip("/") for l in (ROOT / ".dockerignore").read_text().splitlines()}
    checks(tracked.returncode != 0 and ignored.returncode == 0 and docker_ignored,
           f"{rel} (operators' password hashes) is not in git, and .gitignore and .dockerignore keep it out",
           f"tracked: {tracked.returncode == 0}, git-ignored: {ignored.returncode == 0}, docker-ignored: {docker_ignored}")
    # No operator, password or key in the compose file: the console reads them from that file only.
    bad = [k for k in service_env(raw["services"][CONSOLE]) if re.search(r"PASSWORD|OPERATOR(?!S_FILE)|API_KEY|SECRET", k)]
    checks(not bad, f"{CONSOLE} has no default operator, password or key in the file", f"{bad}")
    # No signing keys: the console shows the credential summaries push-send writes to Redis.
    keys = {(k, s) for n, svc in services.items() if n != CONSOLE for k, s, target, _ in volumes_of(svc) if target == KEYS_DIR}
    mounted = [f"{s}:{target}" for k, s, target, _ in volumes_of(console)
               if target == KEYS_DIR or target.startswith(KEYS_DIR + "/") or (k, s) in keys]
    checks(keys and not mounted, f"{CONSOLE} mounts no signing keys (not the volume others mount at {KEYS_DIR}): only its operators file",
           f"it mounts {mounted}" if mounted else f"no service mounts keys at {KEYS_DIR}")
    checks("console" in (console.get("profiles") or []) and not any(CONSOLE in depends_of(s) for n, s in services.items() if n != CONSOLE),
           f"{CONSOLE} is in the profile console (`docker compose up` runs the rest without the operators file) and nothing waits for it",
           f"profiles {console.get('profiles')}")


def test_static_redis(raw, env, services, checks):
    """Redis requires .env's REDIS_PASSWORD with protected-mode on and a memory ceiling without
    eviction; its healthcheck authenticates; every PUSH_REDIS_URL carries the password."""
    redis = services.get("redis", {})
    argv = argv_of(redis)
    options, _ = redis_options(argv)
    raw_argv = argv_of(raw["services"].get("redis", {}))
    raw_options, _ = redis_options(raw_argv)
    checks(argv[:1] == ["redis-server"] and options.get("protected-mode") == "yes"
           and options.get("requirepass") == env.get("REDIS_PASSWORD") and "${REDIS_PASSWORD:?" in raw_options.get("requirepass", "")
           and re.fullmatch(r"\d+[kmg]b?", options.get("maxmemory", "0").lower()) is not None and options.get("maxmemory-policy") == "noeviction",
           f"redis: --protected-mode yes, --requirepass from ${{REDIS_PASSWORD:?...}}, --maxmemory {options.get('maxmemory')} "
           f"with --maxmemory-policy {options.get('maxmemory-policy')}", f"its command is {raw_argv}")
    test = [str(w) for w in (redis.get("healthcheck") or {}).get("test") or []]
    checks("redis-cli" in test and service_env(redis).get("REDISCLI_AUTH") == env.get("REDIS_PASSWORD")
           and "${REDIS_PASSWORD:?" in service_env(raw["services"]["redis"]).get("REDISCLI_AUTH", ""),
           f"redis: its healthcheck ({' '.join(test)}) authenticates with REDISCLI_AUTH=${{REDIS_PASSWORD}}",
           f"healthcheck {test}, REDISCLI_AUTH set: {'REDISCLI_AUTH' in service_env(redis)}")
    users = [n for n, s in services.items() if "PUSH_REDIS_URL" in service_env(s)]
    bad = []
    for name in users:
        raw_url = service_env(raw["services"][name]).get("PUSH_REDIS_URL", "")
        url = urllib.parse.urlsplit(service_env(services[name])["PUSH_REDIS_URL"])
        if "${REDIS_PASSWORD:?" not in raw_url:
            bad.append(f"{name}: {raw_url!r} does not take ${{REDIS_PASSWORD:?...}}")
        elif urllib.parse.unquote(url.password or "") != env.get("REDIS_PASSWORD") or url.hostname != "redis":
            bad.append(f"{name}: PUSH_REDIS_URL does not carry .env's REDIS_PASSWORD for redis")
    checks(users and not bad, f"PUSH_REDIS_URL of {', '.join(users)} is redis://:${{REDIS_PASSWORD}}@redis:…",
           "; ".join(bad) or "no service sets PUSH_REDIS_URL")


def test_static_hardening(services, checks):
    """Every container of the push image, Redis and the policy import: a read-only root filesystem,
    no capabilities, no-new-privileges; the push image's with a tmpfs /tmp."""
    names = [n for n, s in services.items() if s.get("image") == PUSH_IMAGE or n == "redis" or any("rabbitmqadmin" in a for a in argv_of(s))]
    bad = [f"{n} lacks {', '.join(hardened(services[n]))}" for n in names if hardened(services[n])]
    checks(names and not bad, f"{', '.join(names)}: {', '.join(HARDENED)} (the push image's with tmpfs /tmp)", "; ".join(bad))


def test_static_volumes(services, dockerfile, checks):
    """What the push image's containers write to is a volume whose mount point the image gives to its user."""
    bad = []
    for name, svc in services.items():
        if svc.get("image") != PUSH_IMAGE:
            continue
        user, uid = image_user(name, svc, dockerfile)
        for kind, source, target, read_only in volumes_of(svc):
            owner = dockerfile["owner"].get(target)
            # By name or by number: the image may chown to `push` and run as USER 10001.
            if kind == "volume" and not read_only and (owner is None or dockerfile["uids"].get(owner, owner) != uid):
                bad.append(f"{name} writes to {target}, which the image does not give to {user}")
    checks(not bad, "deploy/Dockerfile gives the volumes its user writes to (their mount points) to that user", "; ".join(bad))


# --- the stack, inside the namespace ------------------------------------------------------------


def loopback_up():
    """`ip link set lo up` without iproute2: SIOCGIFFLAGS, then SIOCSIFFLAGS with IFF_UP."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))
    finally:
        s.close()


def http_request(method, host, port, path, body=None, headers=None, auth=None, timeout=5):
    """(status, body) of one request to a compose name (harness.net talks to 127.0.0.1 only)."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        hdrs = dict(headers or {})
        if auth:
            hdrs["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            hdrs.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def wait_until(what, timeout, probe, step=0.1, procs=()):
    """net.wait_for, failing the step when one of `procs` exits or after `timeout`; a probe's
    connection error is a try that failed."""
    last = []

    def attempt():
        for p in procs:
            if p.popen.poll() is not None:
                raise Failed(f"{what}: {p.name} exited with status {p.popen.returncode}")
        try:
            return probe()
        except (OSError, http.client.HTTPException, ValueError) as e:
            last[:] = [e]

    result = net.wait_for(attempt, timeout, step)
    if not result:
        raise Failed(f"{what}: not within {timeout} s" + (f" (last error: {last[0]})" if last else ""))
    return result


class Proc:
    def __init__(self, name, popen, log):
        self.name, self.popen, self.log = name, popen, log


class Stack:
    """The compose services in the namespace; its STEPS report through `emit` (JSON lines)."""

    def __init__(self, bin_dir, work, emit, unprivileged=None):
        self.bin_dir, self.work, self.emit, self.unprivileged = Path(bin_dir), Path(work), emit, unprivileged
        self.root_mode = unprivileged is None
        self.env = read_env_file(self.work / "project" / ".env")
        self.dockerfile = parse_dockerfile(DOCKERFILE.read_text())
        self.services = interpolate(yaml.safe_load(COMPOSE_FILE.read_text()), self.env)["services"]
        self.procs = {}
        self.servers_started = []
        self.fakeroot = self.work / "root"
        self.logs = self.work / "logs"
        self.logs.mkdir()
        self.local = self.work / "local"
        self.tool = {t: shutil.which(t) for t in ("setpriv", "unshare", "mount")}
        self.addr = {}
        n = 2
        for name in self.services:
            if name in SERVERS:
                self.addr[name] = "127.0.0.1"
            else:
                self.addr[name] = f"127.0.0.{n}"
                n += 1

    def check(self, ok, what, why=""):
        self.emit(check=[bool(ok), what, why])
        return bool(ok)

    def log(self, text):
        self.emit(log=text)

    # --- step prepare ---
    def prepare(self):
        self.network()
        self.filesystem()
        self.programs()

    # The namespace's view of the network: lo up, compose names in a private /etc/hosts.
    def network(self):
        loopback_up()
        hosts = self.work / "hosts"
        names = set(self.services)
        kept = [l for l in Path("/etc/hosts").read_text().splitlines() if not (set(l.split("#")[0].split()[1:]) & names)]
        lines = kept + [f"{self.addr[n]}\t{n}" for n in self.services]
        hosts.write_text("\n".join(lines) + "\n")
        hosts.chmod(0o644)
        subprocess.run(["mount", "--bind", str(hosts), "/etc/hosts"], check=True)
        resolved = {n: socket.gethostbyname(n) for n in self.services}
        wrong = {n: a for n, a in resolved.items() if a != self.addr[n]}
        if wrong:
            raise Failed(f"the private /etc/hosts is not used: {wrong}")
        self.log("names: " + ", ".join(f"{n} {a}" for n, a in resolved.items()))

    # The containers' filesystem: /app of the image, volumes, bind mounts.
    def filesystem(self):
        df = self.dockerfile
        push_uid = df["uids"][df["user"]]
        workdir = self.fakeroot / df["workdir"].lstrip("/")
        workdir.mkdir(parents=True)
        for src, dest in df["copies"]:
            target = Path(dest) if dest.startswith("/") else Path(df["workdir"]) / dest
            target = self.fakeroot / str(target).lstrip("/")
            if (ROOT / src).is_dir():
                # As .dockerignore leaves them out of the build context.
                shutil.copytree(ROOT / src, target, ignore=shutil.ignore_patterns("keys", OPERATORS_FILE.name))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(ROOT / src, target)
        self.prefixes = {df["workdir"]}
        for path, owner in df["owner"].items():
            d = self.fakeroot / path.lstrip("/")
            d.mkdir(parents=True, exist_ok=True)
            if self.root_mode:
                os.chown(d, df["uids"].get(owner, push_uid), df["uids"].get(owner, push_uid))
            d.chmod(df["mode"].get(path, 0o755))
            self.prefixes.add(path)
        targets = {}
        for name in self.emulated():
            for kind, source, target, _ in volumes_of(self.services[name]):
                if targets.setdefault(target, (kind, source)) != (kind, source):
                    raise Failed(f"{target} is mounted from different sources: {targets[target]} and {(kind, source)}")
        for target, (kind, source) in targets.items():
            here = self.fakeroot / target.lstrip("/")
            here.parent.mkdir(parents=True, exist_ok=True)
            if kind == "bind" and (ROOT / source).resolve() == OPERATORS_FILE:
                # Ops make this file; the check makes its own (the repository has none, and a
                # developer's real one is not read): the bind mount's content, as `docker compose` mounts it.
                self.make_operators_file(here)
            elif kind == "bind":
                if (ROOT / source).is_dir():
                    shutil.copytree(ROOT / source, here)
                else:
                    shutil.copy(ROOT / source, here)
                here.chmod(0o755 if here.is_dir() else 0o644)
            else:
                volume = self.work / "volumes" / source
                if not volume.exists():
                    # A new named volume takes the owner and mode of the image's mount point.
                    volume.mkdir(parents=True)
                    st = here.stat() if here.exists() else None
                    if self.root_mode:
                        os.chown(volume, st.st_uid if st else 0, st.st_gid if st else 0)
                    volume.chmod(stat.S_IMODE(st.st_mode) if st else 0o755)
                if here.exists():
                    here.rmdir()
                here.symlink_to(volume)
            self.prefixes.add(target)
        # Each service sees only its own mounts (container_argv); this is what to hide from the others.
        self.mount_targets = sorted(targets)
        self.empty_dir = self.work / "empty"
        self.empty_dir.mkdir()
        self.empty_dir.chmod(0o555)
        self.path_re = re.compile(
            r"(?<![\w./-])(" + "|".join(re.escape(p) for p in sorted(self.prefixes, key=len, reverse=True)) + r")(?=/|$|[^\w.-])"
        )
        os.chmod(self.work, 0o755)

    def make_operators_file(self, path):
        """An operators file as docs/reports-and-console.md has ops make it: an operator whose password hash
        `pushctl console hash-password` prints, and an API key whose digest `hash-key` prints (the
        --bin-dir's pushctl), both random."""
        pushctl = self.bin_dir / "pushctl"
        if not pushctl.is_file():
            raise Failed(f"missing in {self.bin_dir}: pushctl (for the operators file; swift build first)")
        self.console_login = ("compose-check", secrets.token_urlsafe(18))
        self.console_key = secrets.token_urlsafe(32)

        def pushctl_console(command, secret):
            r = subprocess.run([str(pushctl), "console", command], input=secret + "\n", capture_output=True, text=True, timeout=60)
            if r.returncode != 0 or not r.stdout.strip():
                raise Failed(f"pushctl console {command} failed (exit {r.returncode}): {r.stderr.strip()[-500:]}")
            return r.stdout.strip().splitlines()[-1].strip()

        password = pushctl_console("hash-password", self.console_login[1])
        digest = pushctl_console("hash-key", self.console_key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"operators": [{"name": self.console_login[0], "password": password}],
                                    "api_keys": [{"name": "compose-check-bot", "key_sha256": digest}]}, indent=2) + "\n")
        path.chmod(0o644)
        text = path.read_text()
        self.check(re.fullmatch(r"pbkdf2-sha256\$\d+\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+", password) and re.fullmatch(r"[0-9a-f]{64}", digest)
                   and self.console_login[1] not in text and self.console_key not in text,
                   f"operators file for {CONSOLE} made with `pushctl console hash-password` and `hash-key` (hashes only)",
                   f"hash-password printed {password[:40]!r}, hash-key {digest[:70]!r}")

    def to_host(self, text):
        return self.path_re.sub(lambda m: str(self.fakeroot) + m.group(1), text)

    def emulated(self):
        return [n for n in self.services if n not in SERVERS]

    def programs(self):
        """The push image's programs: --bin-dir, or a copy the service user can read."""
        names = sorted({argv_of(self.services[n])[0] for n in self.emulated() if self.services[n].get("image") == PUSH_IMAGE})
        names = [n for n in names if not shutil.which(n, path="/usr/bin:/bin")]  # sh is the system's
        missing = [n for n in names if not (self.bin_dir / n).is_file()]
        if missing:
            raise Failed(f"missing in {self.bin_dir}: {', '.join(missing)} (swift build first)")
        self.push_bin = self.bin_dir
        if self.root_mode:
            uid = self.dockerfile["uids"][self.dockerfile["user"]]
            probe = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", "test", "-x", str(self.bin_dir / names[0])])
            if probe.returncode != 0:
                self.push_bin = self.work / "bin"
                self.push_bin.mkdir()
                for n in names:
                    shutil.copy(self.bin_dir / n, self.push_bin / n)
                self.log(f"uid {uid} cannot run programs in {self.bin_dir}: using copies in {self.push_bin}")
        tools = self.work / "tools"
        tools.mkdir()
        admin = sorted(Path("/").glob(RABBITMQADMIN_GLOB.lstrip("/")))
        if not admin:
            raise Failed(f"rabbitmqadmin not found ({RABBITMQADMIN_GLOB}; rabbitmq-server ships it)")
        (tools / "rabbitmqadmin").symlink_to(admin[-1])
        self.tools = tools

    def process_env(self, name):
        svc = self.services[name]
        if svc.get("image") == PUSH_IMAGE:
            env = {"PATH": f"{self.push_bin}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": self.to_host(self.dockerfile["workdir"])}
            env.update({k: self.to_host(v) for k, v in self.dockerfile["env"].items()})
            cwd = self.to_host(self.dockerfile["workdir"])
        else:
            env = {"PATH": f"{self.tools}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(self.fakeroot)}
            cwd = str(self.fakeroot)
        env.update({k: self.to_host(v) for k, v in service_env(svc).items()})
        if "PUSH_HTTP_PORT" in env:
            env["PUSH_HTTP_HOST"] = self.addr[name]
        return env, cwd

    def container_argv(self, name, argv):
        """What a container engine puts around a service's command, stood in for: a mount namespace of
        its own (`unshare --mount`) where the volumes and bind mounts of other services are hidden
        (an empty read-only directory, or /dev/null, over them), its own `:ro` ones are read-only and,
        with `read_only: true`, so are the image's paths (the private root; the volumes it writes stay
        writable); then setpriv: its user (as root), no capabilities (`cap_drop: [ALL]`: empty
        bounding and inheritable sets) and no_new_privs (`security_opt: [no-new-privileges:true]`)."""
        svc = self.services[name]
        own = {target: read_only for _, _, target, read_only in volumes_of(svc)}

        def read_only(source, target):
            s, t = shlex.quote(str(source)), shlex.quote(str(target))
            return f"mount --bind {s} {t} && mount -o remount,bind,ro {t}"

        script = []
        if svc.get("read_only") is True:
            script.append(read_only(self.fakeroot, self.fakeroot))  # first: a bind of / hides later mounts
        for target in self.mount_targets:
            here = self.fakeroot / target.lstrip("/")
            if target not in own:
                script.append(read_only(self.empty_dir, here) if here.is_dir() else f"mount --bind /dev/null {shlex.quote(str(here))}")
            elif own[target]:
                script.append(read_only(here, here))
        priv = []
        if self.root_mode:
            _, uid = image_user(name, svc, self.dockerfile)
            priv += [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        if "ALL" in [str(c).upper() for c in svc.get("cap_drop") or []]:
            priv += ["--inh-caps=-all", "--bounding-set=-all"]
        if any(re.fullmatch(r"no-new-privileges(:true)?", str(o)) for o in svc.get("security_opt") or []):
            priv += ["--no-new-privs"]
        if priv:
            argv = [self.tool["setpriv"], *priv, "--"] + argv
        if script:
            argv = [self.tool["unshare"], "--mount", "--propagation", "private", "/bin/sh", "-ec",
                    " && ".join(script) + ' && exec "$@"', "sh"] + argv
        return argv

    def spawn(self, name):
        svc = self.services[name]
        env, cwd = self.process_env(name)
        argv = self.container_argv(name, [self.to_host(a) for a in argv_of(svc)])
        log = self.logs / f"{name}.log"
        with open(log, "ab") as out:
            popen = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        proc = Proc(name, popen, log)
        self.procs[name] = proc
        return proc

    def script(self, *argv):
        env = dict(os.environ, PUSH_LOCAL_DIR=str(self.local), PUSH_QUIET="1")
        r = subprocess.run([str(ROOT / "scripts" / argv[0]), *argv[1:]], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if r.returncode != 0:
            raise Failed(f"scripts/{' '.join(argv)} failed (exit {r.returncode}): {(r.stdout + r.stderr).strip()[-2000:]}")

    # --- step servers: RabbitMQ and Redis as the official images would be: the .env user, no guest, compose's ports.
    def servers(self):
        any_env = service_env(self.services[self.emulated_push()[0]])
        amqp = urllib.parse.urlsplit(any_env["PUSH_AMQP_URL"])
        redis = urllib.parse.urlsplit(any_env["PUSH_REDIS_URL"])
        mgmt = self.management_port()
        if amqp.hostname != "rabbitmq" or redis.hostname != "redis":
            raise Failed(f"PUSH_AMQP_URL/PUSH_REDIS_URL name {amqp.hostname}/{redis.hostname}, not the services rabbitmq/redis")
        started = time.monotonic()
        self.servers_started.append("rabbitmq")
        self.script("rabbitmq.sh", "start", "--name", "compose", "--port", str(amqp.port or 5672), "--management-port", str(mgmt))
        self.servers_started.append("redis")
        self.script("redis.sh", "start", "--name", "compose", "--port", str(redis.port or 6379))
        self.configure_redis(redis.port or 6379)
        user, password = self.env["RABBITMQ_USER"], self.env["RABBITMQ_PASSWORD"]
        guest = ("guest", "guest")
        for method, path, body, auth in [
            ("PUT", f"/api/users/{user}", {"password": password, "tags": "administrator"}, guest),
            ("PUT", f"/api/permissions/%2f/{user}", {"configure": ".*", "write": ".*", "read": ".*"}, guest),
            ("DELETE", "/api/users/guest", None, (user, password)),
        ]:
            status, _, text = http_request(method, "rabbitmq", mgmt, path, body, auth=auth)
            if status not in (200, 201, 204):
                raise Failed(f"RabbitMQ management {method} {path}: {status} {text[:200]!r}")
        status, _, _ = http_request("GET", "rabbitmq", mgmt, "/api/whoami", auth=guest)
        if status != 401:
            raise Failed(f"guest still logs in ({status})")
        for policy in json.loads(POLICIES_FILE.read_text())["policies"]:
            vhost = urllib.parse.quote(policy["vhost"], safe="")
            status, _, text = http_request("DELETE", "rabbitmq", mgmt, f"/api/policies/{vhost}/{policy['name']}", auth=(user, password))
            if status not in (204, 404):
                raise Failed(f"clearing policy {policy['name']}: {status} {text[:200]!r}")
        self.log(f"RabbitMQ (rabbitmq:{amqp.port}, management {mgmt}) with user {user} of .env and no guest, "
                 f"Redis (redis:{redis.port}) in {time.monotonic() - started:.1f} s")

    def redis_cli(self, port, *words, auth=None, argv=None):
        env = {k: v for k, v in os.environ.items() if k != "REDISCLI_AUTH"}
        if auth:
            env["REDISCLI_AUTH"] = auth
        r = subprocess.run(argv or ["redis-cli", "-h", "redis", "-p", str(port), *words], env=env, capture_output=True, text=True, timeout=10)
        return (r.stdout + r.stderr).strip()

    def configure_redis(self, port):
        """Redis as the file starts it: scripts/redis.sh runs it (AOF everysec, protected-mode yes),
        and the options of the compose command are set with CONFIG SET (--requirepass last: from then
        on a client needs the password). Then a client without the password is refused, and the
        healthcheck's command with the service's REDISCLI_AUTH answers PONG."""
        svc = self.services["redis"]
        options, _ = redis_options(argv_of(svc))
        password = options.get("requirepass")
        for key in [k for k in options if k != "requirepass"] + (["requirepass"] if password else []):
            out = self.redis_cli(port, "CONFIG", "SET", key, options[key])
            if out != "OK":
                raise Failed(f"redis: CONFIG SET {key} (from the compose command): {out}")
        got = dict(zip(*[iter(self.redis_cli(port, "CONFIG", "GET", "*", auth=password).splitlines())] * 2))
        bad = [f"{k} {got.get(k)!r}" for k in ("protected-mode", "maxmemory-policy") if k in options and got.get(k) != options[k]]
        self.check(not bad and int(got.get("maxmemory", "0")) > 0 and got.get("requirepass") == password,
                   f"redis runs with the file's options: protected-mode {got.get('protected-mode')}, maxmemory {int(got.get('maxmemory', '0')) >> 20} MB, "
                   f"maxmemory-policy {got.get('maxmemory-policy')}, a password", "; ".join(bad))
        out = self.redis_cli(port, "PING")
        self.check("NOAUTH" in out, f"redis refuses a client without the password (PING: {out[:60]})")
        test = [str(w) for w in (svc.get("healthcheck") or {}).get("test") or []]
        test = test[1:] if test[:1] == ["CMD"] else ["sh", "-c", " ".join(test[1:])] if test[:1] == ["CMD-SHELL"] else test
        out = self.redis_cli(port, auth=service_env(svc).get("REDISCLI_AUTH"), argv=test) if test else ""
        self.check(out == "PONG", f"redis's healthcheck ({' '.join(test)}, with its REDISCLI_AUTH) answers {out[:60]!r}")

    def emulated_push(self):
        return [n for n in self.emulated() if "PUSH_AMQP_URL" in service_env(self.services[n])]

    def management_port(self):
        for p in self.services["rabbitmq"].get("ports") or []:
            if isinstance(p, dict):
                return int(p["target"])
            return int(str(p).rsplit(":", 1)[-1].split("/")[0])
        return 15672

    # --- step up: the services in compose's dependency order, the one-shots run to their end.
    def up(self):
        one_shots = {d for s in self.services.values() for d, c in depends_of(s).items() if c == "service_completed_successfully"}
        ready = set(SERVERS)
        for name in topological(self.services):
            if name in SERVERS:
                continue
            for dep in depends_of(self.services[name]):
                if dep not in ready:
                    self.wait_ready(dep)
                    ready.add(dep)
            if name in one_shots:
                self.run_one_shot(name)
                ready.add(name)
            else:
                self.spawn(name)
        for name in self.emulated():
            if name not in ready:
                self.wait_ready(name)
                ready.add(name)

    def run_one_shot(self, name):
        started = time.monotonic()
        proc = self.spawn(name)
        try:
            rc = proc.popen.wait(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise Failed(f"one-shot {name} did not finish within {START_TIMEOUT_S} s")
        if rc != 0:
            raise Failed(f"one-shot {name} exited {rc}")
        user, uid = image_user(name, self.services[name], self.dockerfile)
        what = f"one-shot {name} exits 0 as {user}" + (f" (uid {uid})" if self.root_mode else "") + f" ({time.monotonic() - started:.1f} s)"
        if name == "dev-keys":
            keys = [p for p in (self.work / "volumes").glob("*/*.p8")]
            self.check(keys and all(p.stat().st_uid == (uid if self.root_mode else os.getuid()) for p in keys),
                       what + ": the signing key is in its volume, owned by it", f"keys: {keys}")
        elif "rabbitmqadmin" in " ".join(argv_of(self.services[name])):
            self.check(self.policies_match(), what + ": the broker's policies are those of " + str(POLICIES_FILE.relative_to(ROOT)), "they differ")
        else:
            self.check(True, what)

    def policies_match(self):
        mgmt = self.management_port()
        want = json.loads(POLICIES_FILE.read_text())["policies"]

        def probe():
            status, _, body = http_request("GET", "rabbitmq", mgmt, "/api/policies", auth=(self.env["RABBITMQ_USER"], self.env["RABBITMQ_PASSWORD"]))
            have = {(p["vhost"], p["name"]): p for p in json.loads(body)} if status == 200 else {}
            for p in want:
                h = have.get((p["vhost"], p["name"]))
                if not h or (h["pattern"], h["apply-to"], h["priority"], h["definition"]) != (
                        p["pattern"], p.get("apply-to", "all"), p.get("priority", 0), p["definition"]):
                    return False
            return True

        try:
            return wait_until("policies", 5, probe)
        except Failed:
            return False

    def wait_ready(self, name):
        svc = self.services[name]
        proc = self.procs.get(name)
        if proc is None:
            raise Failed(f"{name} is needed before it was started")
        env, _ = self.process_env(name)
        started = time.monotonic()
        if "PUSH_ADMIN_PORT" in env or "PUSH_HTTP_PORT" in env:
            port = int(env.get("PUSH_ADMIN_PORT") or env["PUSH_HTTP_PORT"])
            wait_until(f"{name} ready (GET /readyz on {name}:{port})", START_TIMEOUT_S,
                       lambda: http_request("GET", name, port, "/readyz", timeout=2)[0] == 200, procs=[proc])
            which = "PUSH_ADMIN_PORT" if env.get("PUSH_ADMIN_PORT") else "PUSH_HTTP_PORT"
            self.check(True, f"{name} ready on {which} {port} ({self.addr[name]}), {time.monotonic() - started:.1f} s")
        elif name == "apns-sandbox" or "--admin-port" in argv_of(svc):
            argv = argv_of(svc)
            admin = int(argv[argv.index("--admin-port") + 1])
            ca = Path(self.to_host(argv[argv.index("--ca-out") + 1]))
            wait_until(f"{name} ready (its CA and GET /stats on {name}:{admin})", START_TIMEOUT_S,
                       lambda: ca.exists() and ca.stat().st_size > 0 and http_request("GET", name, admin, "/stats", timeout=2)[0] == 200, procs=[proc])
            self.check(True, f"{name} up (admin {name}:{admin}, CA written to its volume), {time.monotonic() - started:.1f} s")
        elif proc.popen.poll() is not None:
            raise Failed(f"{name} exited with status {proc.popen.returncode}")

    # --- step sandbox_name
    def sandbox_name(self):
        argv = argv_of(self.services["apns-sandbox"])
        port = int(argv[argv.index("--port") + 1])
        ca = self.to_host(argv[argv.index("--ca-out") + 1])
        endpoint = urllib.parse.urlsplit(service_env(self.services[self.emulated_push()[0]])["PUSH_APNS_ENDPOINT"])

        def curl(host):
            return subprocess.run(
                ["curl", "-sS", "--max-time", "5", "--http2", "--cacert", ca, "-o", "/dev/null", "-w", "%{http_code}", f"https://{host}:{port}/"],
                capture_output=True, text=True)

        by_name = curl(endpoint.hostname)
        by_addr = curl(self.addr["apns-sandbox"])
        self.check(by_name.returncode == 0 and by_name.stdout not in ("", "000"),
                   f"https://{endpoint.hostname}:{port} verifies against the sandbox's CA (HTTP {by_name.stdout})", by_name.stderr.strip())
        self.check(by_addr.returncode in (51, 60),
                   f"https://{self.addr['apns-sandbox']}:{port} does not (the certificate names {endpoint.hostname}, not that address)",
                   f"curl exit {by_addr.returncode} {by_addr.stderr.strip()}")

    # --- step users: what the engine would enforce (uids, no capabilities, no_new_privs, a read-only root).
    def users(self):
        if self.root_mode:
            rows, bad = [], []
            for name, proc in self.procs.items():
                if proc.popen.poll() is not None:
                    continue
                status = Path(f"/proc/{proc.popen.pid}/status").read_text()
                uid = int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))
                want = image_user(name, self.services[name], self.dockerfile)[1]
                rows.append(f"{name} {uid}")
                if uid != want or uid == 0:
                    bad.append(f"{name} runs as uid {uid}, not {want}")
            self.check(not bad, "the services run as uids " + ", ".join(rows), "; ".join(bad))
        else:
            self.log(f"not run as root: the services run as the invoking user (uid {self.unprivileged} outside the user namespace), "
                     "not as the images' users")
        rows, bad = [], []
        for name, proc in self.procs.items():
            if proc.popen.poll() is not None:
                continue
            status = Path(f"/proc/{proc.popen.pid}/status").read_text()
            bounding = int(re.search(r"^CapBnd:\s+([0-9a-f]+)", status, re.M).group(1), 16)
            nnp = re.search(r"^NoNewPrivs:\s+(\d)", status, re.M).group(1) == "1"
            mounts = [line.split() for line in Path(f"/proc/{proc.popen.pid}/mountinfo").read_text().splitlines()]
            root_ro = any(m[4] == str(self.fakeroot) and "ro" in m[5].split(",") for m in mounts)
            rows.append(name)
            for missing in hardened(self.services[name]):
                bad.append(f"{name}: the file lacks {missing}")
            if bounding or not nnp or not root_ro:
                bad.append(f"{name}: CapBnd {bounding:x}, NoNewPrivs {int(nnp)}, image paths read-only {root_ro}")
        self.check(rows and not bad, f"{', '.join(rows)} run without capabilities (CapBnd 0), with no_new_privs and the image's paths "
                   "read-only (read_only: true), and still work", "; ".join(bad))
        ingest = self.services.get("push-ingest")
        if ingest:
            port = service_env(ingest)["PUSH_HTTP_PORT"]
            status, _, _ = http_request("GET", "push-ingest", int(port), "/healthz")
            self.check(status == 404, f"push-ingest's PUSH_HTTP_PORT {port} serves the API only (GET /healthz: {status})")

    # --- step deliver: a device registered, a push request published, apns-sandbox has it.
    def deliver(self):
        env = service_env(self.services["push-ingest"])
        apps = json.loads(Path(self.to_host(env["PUSH_APPS_FILE"])).read_text())["apps"]
        app = next((a for a, c in apps.items() if c.get("default")), next(iter(apps)))
        key = apps[app]["ingest"]["api_keys"][0]
        token = secrets.token_hex(32)
        status, _, body = http_request("PUT", "push-ingest", int(env["PUSH_HTTP_PORT"]), f"/v1/apps/{app}/devices/{token}",
                                       {"user": "compose-check", "locale": "en", "environment": "sandbox"},
                                       headers={"Authorization": f"Bearer {key}"})
        if status not in (200, 201):
            raise Failed(f"PUT /v1/apps/{app}/devices/… on push-ingest: {status} {body[:300]!r}")
        self.check(True, f"device registered through http://push-ingest:{env['PUSH_HTTP_PORT']} ({status})")
        url = service_env(self.services["push-render"])["PUSH_AMQP_URL"]
        self.delivered = (app, f"compose-check-{token[:16]}")
        request = {"id": self.delivered[1], "app": app, "to": {"tokens": [token]},
                   "payload": {"aps": {"alert": {"title": "compose", "body": "delivered"}}}}
        params = pika.URLParameters(url)
        params.socket_timeout = 5
        params.connection_attempts = 3
        conn = pika.BlockingConnection(params)
        try:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.basic_publish("push", "request", json.dumps(request).encode(),
                             pika.BasicProperties(content_type="application/json", delivery_mode=2), mandatory=True)
        finally:
            conn.close()
        parts = urllib.parse.urlsplit(url)
        self.check(True, f"push request published with pika to PUSH_AMQP_URL (amqp://{parts.username}:…@{parts.hostname}:{parts.port}), confirmed")
        argv = argv_of(self.services["apns-sandbox"])
        admin = int(argv[argv.index("--admin-port") + 1])
        started = time.monotonic()

        def delivered():
            status, _, body = http_request("GET", "apns-sandbox", admin, f"/deliveries?token={token}")
            return (json.loads(body).get("deliveries", []) if status == 200 else []) or None

        found = wait_until("apns-sandbox received the push", START_TIMEOUT_S, delivered, step=0.2,
                           procs=[self.procs[n] for n in self.emulated_push() + ["apns-sandbox"]])
        d = found[0]
        self.check(d.get("topic", "").startswith(app) and d.get("payload", {}).get("aps", {}).get("alert", {}).get("body") == "delivered",
                   f"apns-sandbox received it over https://apns-sandbox from push-send ({time.monotonic() - started:.1f} s after publishing): "
                   f"topic {d.get('topic')}", f"delivery {d}")

    # --- step console
    def console(self):
        """push-console as ops reach it: http://push-console:8090 (the host's 127.0.0.1:8090), the
        operators file of make_operators_file: login page, redirects and 401 without a session or a
        key, the operator's login, and the request just delivered and the queues through the API."""
        if CONSOLE not in self.services:
            return
        port = int(service_env(self.services[CONSOLE])["PUSH_HTTP_PORT"])
        base = f"http://{CONSOLE}:{port}"

        def call(method, path, body=None, headers=None):
            status, hdrs, data = http_request(method, CONSOLE, port, path, body, headers, timeout=10)
            return status, hdrs, data.decode(errors="replace")

        def cookies_of(headers):
            jar = {}
            for value in headers.get_all("Set-Cookie") or []:
                key, _, rest = value.partition("=")
                jar[key.strip()] = rest.split(";")[0]
            return jar

        bearer = {"Authorization": f"Bearer {self.console_key}"}
        status, headers, page = call("GET", "/login")
        self.check(status == 200 and 'id="login"' in page, f"{base}/login serves the login form (HTTP {status})", page[:200])
        status, headers, _ = call("GET", "/status")
        location = headers.get("Location", "")
        self.check(status == 303 and location.endswith("/login"), f"{base}/status without a session: {status} to {location or '?'}")
        status, _, body = call("GET", "/api/v1/status")
        self.check(status == 401, f"{base}/api/v1/status without a session or a key: {status}", body[:200])

        # The operator logs in with the password whose hash pushctl printed.
        jar = cookies_of(headers)
        status, headers, page = call("GET", "/login")
        jar.update(cookies_of(headers))
        form = {"name": self.console_login[0], "password": self.console_login[1]}
        csrf = re.search(r'name="csrf"\s+value="([^"]*)"|value="([^"]*)"\s+name="csrf"', page)
        if csrf:
            form["csrf"] = csrf.group(1) or csrf.group(2)
        cookie = "; ".join(f"{k}={v}" for k, v in jar.items())
        status, headers, body = call("POST", "/login", urllib.parse.urlencode(form),
                                     {"Content-Type": "application/x-www-form-urlencoded", **({"Cookie": cookie} if cookie else {})})
        jar.update(cookies_of(headers))
        session = jar.get("push_console_session")
        if self.check(status == 303 and session, f"operator {self.console_login[0]} logs in (POST /login: {status}, session cookie set)", body[:300]):
            status, _, page = call("GET", "/status", headers={"Cookie": f"push_console_session={session}"})
            self.check(status == 200 and self.console_login[0] in page and 'id="queues"' in page,
                       f"GET /status with the session: {status}, the operator named, the queues listed")

        # What the services did, through the console: the request delivered above, and the queues.
        app, request_id = self.delivered
        started = time.monotonic()

        def done():
            status, _, body = call("GET", f"/api/v1/requests/{urllib.parse.quote(app)}/{urllib.parse.quote(request_id)}", headers=bearer)
            report = json.loads(body) if status == 200 else {}
            return report if report.get("state") == "done" else None

        try:
            report = wait_until(f"{CONSOLE} reports {request_id} done", START_TIMEOUT_S, done, step=0.2, procs=[self.procs[CONSOLE]])
            self.check(report.get("delivered") == 1 and report.get("targeted") == 1,
                       f"GET /api/v1/requests/{app}/{request_id} with the API key: done, {report.get('delivered')} delivered "
                       f"of {report.get('targeted')} targeted ({time.monotonic() - started:.1f} s)", f"{report}")
        except Failed as e:
            self.check(False, str(e))
        status, _, body = call("GET", "/api/v1/status", headers=bearer)
        state = json.loads(body) if status == 200 else {}
        queues = {q.get("name"): q for q in state.get("queues", [])}
        apps = {a.get("app"): a for a in state.get("apps", [])}
        self.check(status == 200 and (queues.get("push.send", {}).get("consumers") or 0) >= 1,
                   f"GET /api/v1/status with the API key: {len(queues)} queues, push.send with "
                   f"{queues.get('push.send', {}).get('consumers')} consumer(s)", f"HTTP {status} {body[:300]}")
        # No signing keys in its container (only its operators file is mounted): its status page still
        # lists the app and its credential's kind, from the apps file and what push-send writes to
        # Redis (a console that reads only files reports that it cannot read the key).
        # Listed inside its mount namespace (/proc/PID/root would follow the volume's symlink in ours).
        listing = subprocess.run(["nsenter", f"--target={self.procs[CONSOLE].popen.pid}", "--mount", "--", "ls", "-A", f"{self.fakeroot}{KEYS_DIR}/"],
                                 capture_output=True, text=True, timeout=10)
        keys = listing.stdout.split() if listing.returncode == 0 else [f"ls: {listing.stderr.strip()}"]
        entry = apps.get(app, {})
        problems = "; ".join(entry.get("problems") or []) or "no problem"
        self.check(not keys and entry.get("auth"),
                   f"{CONSOLE} sees no signing key ({KEYS_DIR} empty in its mount namespace) and its status lists {app}: "
                   f"{entry.get('auth')}, {problems}", f"keys {keys}, status entry {entry}")

    # --- step stop: every service exits 0 on SIGTERM.
    def stop(self):
        running = [p for p in self.procs.values() if p.popen.poll() is None]
        for p in running:
            p.popen.send_signal(signal.SIGTERM)
        bad = []
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for p in running:
            try:
                rc = p.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                rc = "still running"
            if rc != 0:
                bad.append(f"{p.name}: {rc}")
        self.check(not bad, f"{', '.join(p.name for p in running)} exit 0 on SIGTERM", "; ".join(bad))

    def cleanup(self):
        for p in self.procs.values():
            if p.popen.poll() is None:
                p.popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for p in self.procs.values():
            try:
                p.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.popen.kill()
                p.popen.wait()
        for server in reversed(self.servers_started):
            try:
                self.script(f"{server}.sh", "stop", "--name", "compose")
            except Failed as e:
                print(f"compose: {e}", file=sys.stderr)

    def tail_logs(self):
        for log in sorted(self.logs.glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-25:]
            if lines:
                print(f"--- last lines of {log.name} ---\n" + "\n".join(lines), file=sys.stderr)


def inside(bin_dir, work, unprivileged=None):
    """The program in the namespace: runs the steps named on stdin (each after any earlier one not run
    yet), answering on stdout with JSON lines; at stdin's end (or SIGTERM) stops everything."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever else prints goes to stderr, not into the answers

    def emit(**message):
        answers.write(json.dumps(message) + "\n")

    stack = None
    try:
        stack = Stack(bin_dir, work, emit, None if unprivileged is None else int(unprivileged))
        done = 0
        for line in sys.stdin:
            step = line.strip()
            try:
                while done <= STEPS.index(step):
                    getattr(stack, STEPS[done])()
                    done += 1
                emit(end=step)
            except Exception as e:  # the step cannot go on: a failed check, with everything still stopped at the end
                stack.tail_logs()
                emit(end=step, error=str(e) if isinstance(e, Failed) else f"{type(e).__name__}: {e}")
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if stack is not None:
            stack.cleanup()
    return 0


# --- the stack from pytest ----------------------------------------------------------------------


class Namespace:
    """The program of `inside()` in its namespace, as the tests drive it."""

    def __init__(self, child, work):
        self.child, self.work, self.broken = child, work, None

    def step(self, name, checks):
        if self.broken:
            pytest.skip(f"the stack could not go on after the step {self.broken}")
        failed = checks.failed
        end = None
        try:
            self.child.stdin.write(name + "\n")
            self.child.stdin.flush()
        except BrokenPipeError:
            pass  # it exited: the end of its stdout says so
        for line in self.child.stdout:
            message = json.loads(line)
            if "check" in message:
                checks(*message["check"])
            elif "log" in message:
                checks.log(message["log"])
            else:
                end = message
                break
        if end is None:
            end = {"error": f"the program in the namespace exited ({self.child.wait()})"}
        if end.get("error"):
            self.broken = name
            checks(False, f"step {name}: {end['error']}")
        if checks.failed > failed:
            checks.log(f"the stack's logs: {self.work / 'logs'} (kept)")

    def close(self):
        """Stdin's end: the program stops everything and exits (SIGTERM, then SIGKILL if it hangs)."""
        try:
            self.child.stdin.close()
        except BrokenPipeError:
            pass
        for sig, wait in ((None, 90), (signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            try:
                if sig:
                    os.killpg(self.child.pid, sig)
                return self.child.wait(timeout=wait)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                pass


@pytest.fixture(scope="module")
def stack(bin_dir, work, made):
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        pytest.exit(f"compose: missing {', '.join(missing)} (scripts/install-deps.sh installs what the project needs)", returncode=3)
    ns = ["unshare", "--mount", "--net", "--propagation", "private"]
    unprivileged = []
    if os.geteuid() != 0:
        ns += ["--user", "--map-root-user"]
        unprivileged = [str(os.geteuid())]
    probe = subprocess.run(ns + ["true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.exit(f"compose: cannot make a private network and mount namespace ({' '.join(ns)}): {probe.stderr.strip()}", returncode=3)
    child = subprocess.Popen(ns + [sys.executable, str(Path(__file__).resolve()), str(bin_dir), str(work)] + unprivileged,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    namespace = Namespace(child, work)
    try:
        yield namespace
    finally:
        namespace.close()


@pytest.mark.parametrize("step", STEPS)
def test_stack(stack, step, checks):
    """One step of the stack, in compose's order (Stack.<step> says what it checks)."""
    stack.step(step, checks)


if __name__ == "__main__":
    sys.exit(inside(*sys.argv[1:]))
