#!/usr/bin/python3
"""The implementation of scripts/checks/compose.sh: what it checks, and how the stack is stood up
without a container engine, is that script's header (`scripts/checks/compose.sh --help`)."""

import argparse
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

import jsonschema
import pika
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
SCHEMA_FILE = ROOT / "deploy" / "compose-spec" / "compose-spec.json"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
POLICIES_FILE = ROOT / "deploy" / "rabbitmq" / "policies.json"
PUSH_IMAGE = "push:latest"
# The users of the official images this file runs as (rabbitmq:*, redis:*): uid = gid = 999.
OFFICIAL_IMAGE_USERS = {"rabbitmq": {"rabbitmq": 999}, "redis": {"redis": 999}}
# Compose services that are the project's own local instances here rather than emulated containers.
SERVERS = ("rabbitmq", "redis")
RABBITMQADMIN_GLOB = "/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/rabbitmq_management-*/priv/www/cli/rabbitmqadmin"
START_TIMEOUT_S = 20
STOP_TIMEOUT_S = 25
# push-console: one port for its pages, its API and /healthz, /readyz, /metrics (no PUSH_ADMIN_PORT);
# its operators file is made by ops (docs/reports-and-console.md), never committed, and bind-mounted read-only.
CONSOLE = "push-console"
CONSOLE_PORT = "8090"
OPERATORS_FILE = ROOT / "config" / "console-operators.json"
# Where the push image's services find the apps' signing keys (the apps file names keys/…).
KEYS_DIR = "/app/config/keys"


class Failed(Exception):
    """A check failed: the rest of the run makes no sense."""


class Interrupted(Exception):
    """SIGINT, SIGTERM or SIGHUP."""


class InterpolationError(Exception):
    pass


class Report:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.started = time.monotonic()

    def ok(self, what):
        self.passed += 1
        print(f"compose | ok   {what}", flush=True)

    def fail(self, what):
        self.failed += 1
        print(f"compose | FAIL {what}", flush=True)

    def check(self, condition, what, why=""):
        if condition:
            self.ok(what)
        else:
            self.fail(f"{what}: {why}" if why else what)
        return bool(condition)


def note(msg):
    print(f"compose | {msg}", flush=True)


# --- compose semantics ------------------------------------------------------------------------

VAR_RE = re.compile(
    r"\$(?:(?P<esc>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<named>[A-Za-z_][A-Za-z0-9_]*)|(?P<bad>\{[^}]*\}?))"
)


def interpolate_str(text, env):
    """Compose's interpolation of one string: $$, $VAR, ${VAR}, ${VAR:-d}, ${VAR-d}, ${VAR:?e},
    ${VAR?e}, ${VAR:+a}, ${VAR+a}; an unset variable without a default becomes ''."""

    def sub(m):
        if m.group("esc"):
            return "$"
        if m.group("named"):
            return env.get(m.group("named"), "")
        name = m.group("braced")
        if name is None:
            raise InterpolationError(f"invalid interpolation format in {text!r}")
        op, arg, value = m.group("op"), m.group("arg") or "", env.get(name)
        if op is None:
            return value or ""
        present = bool(value) if op.startswith(":") else value is not None
        kind = op[-1]
        if kind == "-":
            return value if present else arg
        if kind == "+":
            return arg if present else ""
        if present:
            return value
        raise InterpolationError(f"required variable {name} is missing a value: {arg}")

    return VAR_RE.sub(sub, text)


def interpolate(node, env):
    if isinstance(node, dict):
        return {k: interpolate(v, env) for k, v in node.items()}
    if isinstance(node, list):
        return [interpolate(v, env) for v in node]
    if isinstance(node, str):
        return interpolate_str(node, env)
    return node


def read_env_file(path):
    """A .env as compose reads it (KEY=VALUE lines, # comments, optional quotes)."""
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise Failed(f"{path}: a line without '=': {line!r}")
        key = key.strip()
        key = key[len("export "):].strip() if key.startswith("export ") else key
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[key] = value
    return env


def strings_of(node):
    if isinstance(node, dict):
        for v in node.values():
            yield from strings_of(v)
    elif isinstance(node, list):
        for v in node:
            yield from strings_of(v)
    elif isinstance(node, str):
        yield node


def service_env(svc):
    env = svc.get("environment") or {}
    if isinstance(env, list):
        out = {}
        for item in env:
            key, sep, value = str(item).partition("=")
            if not sep:
                raise Failed(f"environment entry {item!r} takes its value from the shell: not reproducible")
            out[key] = value
        return out
    return {k: "" if v is None else str(v).lower() if isinstance(v, bool) else str(v) for k, v in env.items()}


def argv_of(svc):
    def words(v):
        if v is None:
            return []
        return shlex.split(v) if isinstance(v, str) else [str(x) for x in v]

    return words(svc.get("entrypoint")) + words(svc.get("command"))


def volumes_of(svc):
    """(kind, source, target, read_only) for each volume: kind `volume` (named) or `bind`."""
    out = []
    for v in svc.get("volumes") or []:
        if isinstance(v, dict):
            kind, source, target = v.get("type", "volume"), v.get("source"), v["target"]
            read_only = bool(v.get("read_only"))
        else:
            parts = v.split(":")
            source, target = parts[0], parts[1]
            read_only = len(parts) > 2 and "ro" in parts[2].split(",")
            kind = "bind" if source.startswith((".", "/", "~")) else "volume"
        out.append((kind, source, target, read_only))
    return out


def depends_of(svc):
    deps = svc.get("depends_on") or {}
    if isinstance(deps, list):
        return {d: "service_started" for d in deps}
    return {d: (c or {}).get("condition", "service_started") for d, c in deps.items()}


def topological(services):
    order, seen = [], set()

    def visit(name, path):
        if name in seen:
            return
        if name in path:
            raise Failed(f"depends_on has a cycle through {name}")
        for dep in depends_of(services[name]):
            visit(dep, path | {name})
        seen.add(name)
        order.append(name)

    for name in services:
        visit(name, set())
    return order


def parse_dockerfile(text):
    """The final stage of deploy/Dockerfile: ENV, USER, WORKDIR, COPY (from the context), the uids
    useradd gives, and the owner and mode RUN's chown/chmod give to paths."""
    lines, cur = [], ""
    for raw in text.splitlines():
        s = raw.rstrip()
        if s.lstrip().startswith("#") or (not cur and not s.strip()):
            continue
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        lines.append(cur + s)
        cur = ""
    last_from = max(i for i, l in enumerate(lines) if l.split()[0].upper() == "FROM")
    info = {"env": {}, "user": "root", "workdir": "/", "copies": [], "uids": {"root": 0}, "owner": {}, "mode": {}}
    for line in lines[last_from + 1:]:
        instr, _, rest = line.strip().partition(" ")
        instr = instr.upper()
        if instr == "ENV":
            for tok in shlex.split(rest):
                key, _, value = tok.partition("=")
                info["env"][key] = value
        elif instr == "USER":
            info["user"] = rest.strip().split(":")[0]
            if info["user"].isdigit():
                info["uids"][info["user"]] = int(info["user"])
        elif instr == "WORKDIR":
            info["workdir"] = rest.strip()
        elif instr == "COPY" and not rest.startswith("--"):
            src, dest = shlex.split(rest)
            info["copies"].append((src, dest))
        elif instr == "RUN":
            for m in re.finditer(r"useradd\b([^&;|]*)", rest):
                args = shlex.split(m.group(1))
                if "--uid" in args:
                    info["uids"][args[-1]] = int(args[args.index("--uid") + 1])
            for m in re.finditer(r"chown\s+(?:-\w+\s+)*(\S+)\s+([^&;|]*)", rest):
                for p in shlex.split(m.group(2)):
                    info["owner"][p] = m.group(1).split(":")[0]
            for m in re.finditer(r"chmod\s+(?:-\w+\s+)*([0-7]{3,4})\s+([^&;|]*)", rest):
                for p in shlex.split(m.group(2)):
                    info["mode"][p] = int(m.group(1), 8)
    return info


def image_user(name, svc, dockerfile):
    """(user name, uid) the service's container runs as."""
    image = svc.get("image", "")
    user = svc.get("user")
    if user is None:
        user = dockerfile["user"] if image == PUSH_IMAGE else "root"
    user = str(user).split(":")[0]
    if user.isdigit():
        return user, int(user)
    if image == PUSH_IMAGE:
        return user, dockerfile["uids"].get(user)
    repo = image.split(":")[0].split("/")[-1]
    return user, 0 if user == "root" else OFFICIAL_IMAGE_USERS.get(repo, {}).get(user)


# --- the static checks ----------------------------------------------------------------------


def make_env_file(report, project):
    """`make .env` in an empty directory, twice: the file compose reads."""
    make = ["make", "-s", "--no-print-directory", "-f", str(ROOT / "Makefile"), "-C", str(project), ".env"]
    first = subprocess.run(make, capture_output=True, text=True)
    env_path = project / ".env"
    if first.returncode != 0 or not env_path.exists():
        raise Failed(f"make .env failed (exit {first.returncode}): {first.stderr.strip()}")
    content = env_path.read_text()
    mode = stat.S_IMODE(env_path.stat().st_mode)
    env = read_env_file(env_path)
    second = subprocess.run(make, capture_output=True, text=True)
    report.check(mode == 0o600, "make .env writes .env with mode 600", f"mode {mode:o}")
    report.check(
        env.get("RABBITMQ_USER") == "push" and re.fullmatch(r"[0-9a-f]{48}", env.get("RABBITMQ_PASSWORD", "")),
        "make .env: RABBITMQ_USER=push and a random 48-hex-digit RABBITMQ_PASSWORD",
        f"got keys {sorted(env)}",
    )
    report.check(
        re.fullmatch(r"[0-9a-f]{48}", env.get("REDIS_PASSWORD", "")) and env["REDIS_PASSWORD"] != env.get("RABBITMQ_PASSWORD"),
        "make .env: a random 48-hex-digit REDIS_PASSWORD of its own",
        f"got keys {sorted(env)}",
    )
    report.check(
        second.returncode == 0 and env_path.read_text() == content,
        "a second make .env leaves .env as it is",
        second.stderr.strip(),
    )
    # An .env of an older version (no REDIS_PASSWORD): make .env adds one and changes nothing else.
    older = project / "older"
    older.mkdir()
    old_lines = [l for l in content.splitlines() if not l.startswith("REDIS_PASSWORD=")]
    (older / ".env").write_text("\n".join(old_lines) + "\n")
    (older / ".env").chmod(0o600)
    third = subprocess.run(make[:-3] + ["-C", str(older), ".env"], capture_output=True, text=True)
    added = (older / ".env").read_text()
    added_env = read_env_file(older / ".env")
    report.check(
        third.returncode == 0 and added.startswith("\n".join(old_lines) + "\n")
        and re.fullmatch(r"[0-9a-f]{48}", added_env.get("REDIS_PASSWORD", "")) and stat.S_IMODE((older / ".env").stat().st_mode) == 0o600,
        "make .env on an older .env without REDIS_PASSWORD adds a random one and leaves the rest as it is",
        f"exit {third.returncode} {third.stderr.strip()}; keys {sorted(added_env)}",
    )
    ignored = [l.strip() for l in (ROOT / ".gitignore").read_text().splitlines()]
    report.check(".env" in ignored or "/.env" in ignored, ".env is in .gitignore")
    return env


def static_checks(report, raw, env, dockerfile):
    # Interpolation without .env stops with a message that says what to do.
    try:
        interpolate(raw, {})
        report.fail("without .env the file must not interpolate (RABBITMQ_PASSWORD unset)")
    except InterpolationError as e:
        report.check("make .env" in str(e), "without .env compose stops, saying: " + str(e), "the message does not name make .env")
    # An .env of an older version, without REDIS_PASSWORD: the same, naming the variable.
    try:
        interpolate(raw, {k: v for k, v in env.items() if k != "REDIS_PASSWORD"})
        report.fail("without REDIS_PASSWORD in .env the file must not interpolate")
    except InterpolationError as e:
        report.check("REDIS_PASSWORD" in str(e) and "make .env" in str(e),
                     "with an .env without REDIS_PASSWORD compose stops, saying: " + str(e), "the message does not name REDIS_PASSWORD and make .env")
    doc = interpolate(raw, env)
    schema = json.loads(SCHEMA_FILE.read_text())
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=lambda e: list(e.absolute_path))
    report.check(
        not errors,
        f"docker-compose.yml is valid against the compose schema ({SCHEMA_FILE.relative_to(ROOT)})",
        "; ".join(f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors[:5]),
    )
    services = doc["services"]

    users, bad = [], []
    for name, svc in services.items():
        user, uid = image_user(name, svc, dockerfile)
        users.append(f"{name} {user}" + (f" ({uid})" if uid is not None else ""))
        if uid is None or uid == 0:
            bad.append(f"{name} runs as {user}" + (" (unknown uid)" if uid is None else ""))
    report.check(not bad, "every container runs as a non-root user: " + ", ".join(users), "; ".join(bad))

    guest = [s for s in strings_of(raw) if "guest" in s.lower()]
    report.check(not guest, "no guest credentials anywhere in the file", f"found {guest}")

    rabbit_env = service_env(raw["services"]["rabbitmq"])
    report.check(
        "${RABBITMQ_USER" in rabbit_env.get("RABBITMQ_DEFAULT_USER", "")
        and "${RABBITMQ_PASSWORD:?" in rabbit_env.get("RABBITMQ_DEFAULT_PASS", ""),
        "RabbitMQ's default user is RABBITMQ_USER/RABBITMQ_PASSWORD of .env (${RABBITMQ_PASSWORD:?...})",
        f"RABBITMQ_DEFAULT_USER/PASS are {rabbit_env.get('RABBITMQ_DEFAULT_USER')!r}/{rabbit_env.get('RABBITMQ_DEFAULT_PASS')!r}",
    )
    amqp_users = [n for n, s in services.items() if "PUSH_AMQP_URL" in service_env(s)]
    bad = []
    for name in amqp_users:
        raw_url = service_env(raw["services"][name]).get("PUSH_AMQP_URL", "")
        url = urllib.parse.urlsplit(service_env(services[name])["PUSH_AMQP_URL"])
        if "${RABBITMQ_PASSWORD:?" not in raw_url or "${RABBITMQ_USER" not in raw_url:
            bad.append(f"{name}: {raw_url!r} does not take ${{RABBITMQ_USER}} and ${{RABBITMQ_PASSWORD:?...}}")
        elif (url.username, url.password) != (env["RABBITMQ_USER"], env["RABBITMQ_PASSWORD"]) or url.hostname not in services:
            bad.append(f"{name}: {url.username}@{url.hostname} is not the .env user at a compose service")
    report.check(
        amqp_users and not bad,
        f"PUSH_AMQP_URL of {', '.join(amqp_users)} is built from RABBITMQ_USER and RABBITMQ_PASSWORD",
        "; ".join(bad) or "no service sets PUSH_AMQP_URL",
    )

    sandbox = argv_of(services.get("apns-sandbox", {}))
    pairs = list(zip(sandbox, sandbox[1:]))
    tls_names = [b for a, b in pairs if a == "--tls-name"]
    report.check(
        ("--host", "0.0.0.0") in pairs and "apns-sandbox" in tls_names,
        "apns-sandbox runs with --host 0.0.0.0 --tls-name apns-sandbox",
        f"its command is {sandbox}",
    )
    endpoints = {n: service_env(s).get("PUSH_APNS_ENDPOINT") for n, s in services.items() if "PUSH_APNS_ENDPOINT" in service_env(s)}
    bad = [f"{n}: {e}" for n, e in endpoints.items() if urllib.parse.urlsplit(e).hostname not in tls_names or urllib.parse.urlsplit(e).hostname not in services]
    report.check(
        endpoints and not bad,
        "the services reach apns-sandbox by a name its certificate holds (" + ", ".join(sorted(set(endpoints.values()))) + ")",
        "; ".join(bad) or "no PUSH_APNS_ENDPOINT",
    )

    importers = []
    for name, svc in services.items():
        for kind, source, target, _ in volumes_of(svc):
            if kind == "bind" and (ROOT / source).resolve() == POLICIES_FILE:
                if any("rabbitmqadmin" in a and re.search(r"\bimport\s+" + re.escape(target) + r"(?=\s|$)", a) for a in argv_of(svc)):
                    importers.append(name)
    ok = len(importers) == 1
    if ok:
        one = importers[0]
        waiting = [n for n in amqp_users if depends_of(services[n]).get(one) != "service_completed_successfully"]
        ok = not waiting and depends_of(services[one]).get("rabbitmq") == "service_healthy"
        why = f"not waited for by {waiting}" if waiting else f"{one} does not wait for rabbitmq to be healthy"
    else:
        why = f"services importing it: {importers}"
    report.check(
        ok,
        f"{POLICIES_FILE.relative_to(ROOT)} is imported by the one-shot {importers[0] if importers else '?'} "
        "(rabbitmqadmin import), which every RabbitMQ user waits for (service_completed_successfully)",
        why,
    )

    bad = [n for n in amqp_users if n != CONSOLE and (not service_env(services[n]).get("PUSH_ADMIN_PORT")
           or service_env(services[n]).get("PUSH_ADMIN_PORT") == service_env(services[n]).get("PUSH_HTTP_PORT"))]
    report.check(not bad, f"every service but {CONSOLE} sets PUSH_ADMIN_PORT apart from PUSH_HTTP_PORT", f"not: {bad}")

    published = {n: [str(p) for p in s.get("ports") or []] for n, s in services.items() if s.get("ports")}
    bad = [f"{n}: {p}" for n, ports in published.items() for p in ports if not p.startswith("127.0.0.1:")]
    report.check(published and not bad, "every published port is on the host's loopback only (" + ", ".join(
        f"{n} {' '.join(p)}" for n, p in published.items()) + ")", "; ".join(bad))
    console_checks(report, raw, services)
    redis_checks(report, raw, services, env)
    hardening_checks(report, services, dockerfile)

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
    report.check(not bad, "deploy/Dockerfile gives the volumes its user writes to (their mount points) to that user", "; ".join(bad))
    return doc


def redis_options(argv):
    """`--name value` pairs of a redis-server command line (after the program or a config file)."""
    options = {}
    for i, word in enumerate(argv):
        if word.startswith("--") and i + 1 < len(argv):
            options[word[2:]] = argv[i + 1]
    return options


def redis_checks(report, raw, services, env):
    """Redis requires .env's REDIS_PASSWORD with protected-mode on and a memory ceiling without
    eviction; its healthcheck authenticates; every PUSH_REDIS_URL carries the password."""
    redis = services.get("redis", {})
    argv = argv_of(redis)
    options = redis_options(argv)
    raw_argv = argv_of(raw["services"].get("redis", {}))
    raw_options = redis_options(raw_argv)
    report.check(
        argv[:1] == ["redis-server"] and options.get("protected-mode") == "yes"
        and options.get("requirepass") == env.get("REDIS_PASSWORD") and "${REDIS_PASSWORD:?" in raw_options.get("requirepass", "")
        and re.fullmatch(r"\d+[kmg]b?", options.get("maxmemory", "0").lower()) is not None and options.get("maxmemory-policy") == "noeviction",
        f"redis: --protected-mode yes, --requirepass from ${{REDIS_PASSWORD:?...}}, --maxmemory {options.get('maxmemory')} "
        f"with --maxmemory-policy {options.get('maxmemory-policy')}",
        f"its command is {raw_argv}")
    test = [str(w) for w in (redis.get("healthcheck") or {}).get("test") or []]
    report.check(
        "redis-cli" in test and service_env(redis).get("REDISCLI_AUTH") == env.get("REDIS_PASSWORD")
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
    report.check(users and not bad, f"PUSH_REDIS_URL of {', '.join(users)} is redis://:${{REDIS_PASSWORD}}@redis:…",
                 "; ".join(bad) or "no service sets PUSH_REDIS_URL")


# What every container of the push image (and Redis, and the policy import) runs with.
HARDENED = ("read_only: true", "cap_drop: [ALL]", "security_opt: [no-new-privileges:true]")


def hardened(svc):
    """What of HARDENED a service lacks (and, for the push image, a tmpfs /tmp)."""
    missing = []
    if svc.get("read_only") is not True:
        missing.append("read_only: true")
    if "ALL" not in [str(c).upper() for c in svc.get("cap_drop") or []]:
        missing.append("cap_drop: [ALL]")
    if not any(re.fullmatch(r"no-new-privileges(:true)?", str(o)) for o in svc.get("security_opt") or []):
        missing.append("security_opt: [no-new-privileges:true]")
    tmpfs = svc.get("tmpfs") or []
    tmpfs = [tmpfs] if isinstance(tmpfs, str) else tmpfs
    if svc.get("image") == PUSH_IMAGE and not any(str(t).split(":")[0] == "/tmp" for t in tmpfs):
        missing.append("tmpfs: [/tmp]")
    return missing


def hardening_checks(report, services, dockerfile):
    """Every container of the push image, Redis and the policy import: a read-only root filesystem,
    no capabilities, no-new-privileges; the push image's with a tmpfs /tmp. What they write is a
    volume (checked below: the image gives its mount point to the user)."""
    names = [n for n, s in services.items() if s.get("image") == PUSH_IMAGE or n == "redis"
             or any("rabbitmqadmin" in a for a in argv_of(s))]
    bad = [f"{n} lacks {', '.join(hardened(services[n]))}" for n in names if hardened(services[n])]
    report.check(names and not bad, f"{', '.join(names)}: {', '.join(HARDENED)} (the push image's with tmpfs /tmp)", "; ".join(bad))


def console_checks(report, raw, services):
    """push-console: its port on loopback, no admin port, the operators file bind-mounted read-only
    from config/console-operators.json, which is neither in git nor in the image, and no default."""
    console = services.get(CONSOLE)
    if not report.check(console is not None and argv_of(console)[:1] == [CONSOLE], f"a {CONSOLE} service runs {CONSOLE}"):
        return
    env = service_env(console)
    report.check(
        env.get("PUSH_HTTP_PORT") == CONSOLE_PORT and "PUSH_ADMIN_PORT" not in env
        and [str(p) for p in console.get("ports") or []] == [f"127.0.0.1:{CONSOLE_PORT}:{CONSOLE_PORT}"],
        f"{CONSOLE}: PUSH_HTTP_PORT {CONSOLE_PORT} (pages, API, /healthz, /readyz, /metrics; no PUSH_ADMIN_PORT), "
        f"published as 127.0.0.1:{CONSOLE_PORT}:{CONSOLE_PORT} only",
        f"PUSH_HTTP_PORT {env.get('PUSH_HTTP_PORT')!r}, PUSH_ADMIN_PORT {env.get('PUSH_ADMIN_PORT')!r}, ports {console.get('ports')}")
    target = env.get("PUSH_CONSOLE_OPERATORS_FILE", "")
    mounts = [v for v in console.get("volumes") or [] if isinstance(v, dict) and v.get("target") == target]
    mount = mounts[0] if mounts else {}
    report.check(
        target and mount.get("type") == "bind" and mount.get("read_only") is True
        and (ROOT / str(mount.get("source", ""))).resolve() == OPERATORS_FILE
        and not (mount.get("bind") or {}).get("create_host_path"),
        f"{CONSOLE}: PUSH_CONSOLE_OPERATORS_FILE {target} is {OPERATORS_FILE.relative_to(ROOT)}, bind-mounted read-only in "
        "the long form (a missing file is an error, not an empty directory made in its place)",
        f"PUSH_CONSOLE_OPERATORS_FILE {target!r}, its mounts {mounts or console.get('volumes')}")
    rel = str(OPERATORS_FILE.relative_to(ROOT))
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--error-unmatch", rel], capture_output=True, text=True)
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "--no-index", rel], capture_output=True, text=True)
    docker_ignored = rel in {l.strip().rstrip("/") for l in (ROOT / ".dockerignore").read_text().splitlines()}
    report.check(
        tracked.returncode != 0 and ignored.returncode == 0 and docker_ignored,
        f"{rel} (operators' password hashes) is not in git, and .gitignore and .dockerignore keep it out",
        f"tracked: {tracked.returncode == 0}, git-ignored: {ignored.returncode == 0}, docker-ignored: {docker_ignored}")
    # No operator, password or key in the compose file: the console reads them from that file only.
    raw_env = service_env(raw["services"][CONSOLE])
    bad = [k for k in raw_env if re.search(r"PASSWORD|OPERATOR(?!S_FILE)|API_KEY|SECRET", k)]
    report.check(not bad, f"{CONSOLE} has no default operator, password or key in the file", f"{bad}")
    # No signing keys: the console shows the credential summaries push-send writes to Redis.
    keys = {(k, s) for n, svc in services.items() if n != CONSOLE for k, s, target, _ in volumes_of(svc) if target == KEYS_DIR}
    mounted = [f"{s}:{target}" for k, s, target, _ in volumes_of(console)
               if target == KEYS_DIR or target.startswith(KEYS_DIR + "/") or (k, s) in keys]
    report.check(keys and not mounted, f"{CONSOLE} mounts no signing keys (not the volume others mount at {KEYS_DIR}): only its operators file",
                 f"it mounts {mounted}" if mounted else f"no service mounts keys at {KEYS_DIR}")
    report.check(
        "console" in (console.get("profiles") or []) and not any(
            CONSOLE in depends_of(s) for n, s in services.items() if n != CONSOLE),
        f"{CONSOLE} is in the profile console (`docker compose up` runs the rest without the operators file) and nothing waits for it",
        f"profiles {console.get('profiles')}")


# --- the stack --------------------------------------------------------------------------------


def loopback_up():
    """`ip link set lo up` without iproute2: SIOCGIFFLAGS, then SIOCSIFFLAGS with IFF_UP."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))
    finally:
        s.close()


def http_request(method, host, port, path, body=None, headers=None, auth=None, timeout=5):
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
        return resp.status, resp.read()
    finally:
        conn.close()


def wait_until(what, timeout, probe, interval=0.1, procs=()):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        for p in procs:
            if p.popen.poll() is not None:
                raise Failed(f"{what}: {p.name} exited with status {p.popen.returncode}")
        try:
            result = probe()
            if result:
                return result
        except (OSError, http.client.HTTPException, ValueError) as e:
            last = e
        time.sleep(interval)
    raise Failed(f"{what}: not within {timeout} s" + (f" (last error: {last})" if last else ""))


class Proc:
    def __init__(self, name, popen, log):
        self.name, self.popen, self.log = name, popen, log


class Stack:
    def __init__(self, args, report, work, doc, env, dockerfile, root_mode):
        self.args, self.report, self.work, self.doc, self.env = args, report, work, doc, env
        self.dockerfile, self.root_mode = dockerfile, root_mode
        self.services = doc["services"]
        self.procs = {}
        self.servers_started = []
        self.fakeroot = work / "root"
        self.logs = work / "logs"
        self.logs.mkdir()
        self.local = work / "local"
        self.bin_dir = Path(args.bin_dir).resolve()
        self.tool = {t: shutil.which(t) for t in ("setpriv", "unshare", "mount")}
        self.addr = {}
        n = 2
        for name in self.services:
            if name in SERVERS:
                self.addr[name] = "127.0.0.1"
            else:
                self.addr[name] = f"127.0.0.{n}"
                n += 1

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
        note("names: " + ", ".join(f"{n} {a}" for n, a in resolved.items()))

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
        self.report.check(
            re.fullmatch(r"pbkdf2-sha256\$\d+\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+", password) and re.fullmatch(r"[0-9a-f]{64}", digest)
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
                note(f"uid {uid} cannot run programs in {self.bin_dir}: using copies in {self.push_bin}")
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

    # RabbitMQ and Redis as the official images would be: the .env user, no guest, compose's ports.
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
            status, text = http_request(method, "rabbitmq", mgmt, path, body, auth=auth)
            if status not in (200, 201, 204):
                raise Failed(f"RabbitMQ management {method} {path}: {status} {text[:200]!r}")
        status, _ = http_request("GET", "rabbitmq", mgmt, "/api/whoami", auth=guest)
        if status != 401:
            raise Failed(f"guest still logs in ({status})")
        for policy in json.loads(POLICIES_FILE.read_text())["policies"]:
            vhost = urllib.parse.quote(policy["vhost"], safe="")
            status, text = http_request("DELETE", "rabbitmq", mgmt, f"/api/policies/{vhost}/{policy['name']}", auth=(user, password))
            if status not in (204, 404):
                raise Failed(f"clearing policy {policy['name']}: {status} {text[:200]!r}")
        note(
            f"RabbitMQ (rabbitmq:{amqp.port}, management {mgmt}) with user {user} of .env and no guest, "
            f"Redis (redis:{redis.port}) in {time.monotonic() - started:.1f} s"
        )

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
        options = redis_options(argv_of(svc))
        password = options.get("requirepass")
        for key in [k for k in options if k != "requirepass"] + (["requirepass"] if password else []):
            out = self.redis_cli(port, "CONFIG", "SET", key, options[key])
            if out != "OK":
                raise Failed(f"redis: CONFIG SET {key} (from the compose command): {out}")
        got = dict(zip(*[iter(self.redis_cli(port, "CONFIG", "GET", "*", auth=password).splitlines())] * 2))
        bad = [f"{k} {got.get(k)!r}" for k in ("protected-mode", "maxmemory-policy") if k in options and got.get(k) != options[k]]
        self.report.check(
            not bad and int(got.get("maxmemory", "0")) > 0 and got.get("requirepass") == password,
            f"redis runs with the file's options: protected-mode {got.get('protected-mode')}, maxmemory {int(got.get('maxmemory', '0')) >> 20} MB, "
            f"maxmemory-policy {got.get('maxmemory-policy')}, a password", "; ".join(bad))
        out = self.redis_cli(port, "PING")
        self.report.check("NOAUTH" in out, f"redis refuses a client without the password (PING: {out[:60]})")
        test = [str(w) for w in (svc.get("healthcheck") or {}).get("test") or []]
        test = test[1:] if test[:1] == ["CMD"] else ["sh", "-c", " ".join(test[1:])] if test[:1] == ["CMD-SHELL"] else test
        out = self.redis_cli(port, auth=service_env(svc).get("REDISCLI_AUTH"), argv=test) if test else ""
        self.report.check(out == "PONG", f"redis's healthcheck ({' '.join(test)}, with its REDISCLI_AUTH) answers {out[:60]!r}")

    def emulated_push(self):
        return [n for n in self.emulated() if "PUSH_AMQP_URL" in service_env(self.services[n])]

    def management_port(self):
        for p in self.services["rabbitmq"].get("ports") or []:
            if isinstance(p, dict):
                return int(p["target"])
            return int(str(p).rsplit(":", 1)[-1].split("/")[0])
        return 15672

    def one_shots(self):
        return {d for s in self.services.values() for d, c in depends_of(s).items() if c == "service_completed_successfully"}

    def run(self):
        report = self.report
        self.network()
        self.filesystem()
        self.programs()
        self.servers()
        one_shots = self.one_shots()
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
        self.check_sandbox_name()
        self.check_users()
        self.deliver()
        if CONSOLE in self.services:
            self.check_console()
        self.stop_services()

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
            self.report.check(keys and all(p.stat().st_uid == (uid if self.root_mode else os.getuid()) for p in keys), what + ": the signing key is in its volume, owned by it", f"keys: {keys}")
        elif "rabbitmqadmin" in " ".join(argv_of(self.services[name])):
            self.report.check(self.policies_match(), what + ": the broker's policies are those of " + str(POLICIES_FILE.relative_to(ROOT)), "they differ")
        else:
            self.report.ok(what)

    def policies_match(self):
        mgmt = self.management_port()
        want = json.loads(POLICIES_FILE.read_text())["policies"]

        def probe():
            status, body = http_request("GET", "rabbitmq", mgmt, "/api/policies", auth=(self.env["RABBITMQ_USER"], self.env["RABBITMQ_PASSWORD"]))
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
            self.report.ok(f"{name} ready on {which} {port} ({self.addr[name]}), {time.monotonic() - started:.1f} s")
        elif name == "apns-sandbox" or "--admin-port" in argv_of(svc):
            argv = argv_of(svc)
            admin = int(argv[argv.index("--admin-port") + 1])
            ca = Path(self.to_host(argv[argv.index("--ca-out") + 1]))
            wait_until(f"{name} ready (its CA and GET /stats on {name}:{admin})", START_TIMEOUT_S,
                       lambda: ca.exists() and ca.stat().st_size > 0 and http_request("GET", name, admin, "/stats", timeout=2)[0] == 200, procs=[proc])
            self.report.ok(f"{name} up (admin {name}:{admin}, CA written to its volume), {time.monotonic() - started:.1f} s")
        elif proc.popen.poll() is not None:
            raise Failed(f"{name} exited with status {proc.popen.returncode}")

    def check_sandbox_name(self):
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
        self.report.check(
            by_name.returncode == 0 and by_name.stdout not in ("", "000"),
            f"https://{endpoint.hostname}:{port} verifies against the sandbox's CA (HTTP {by_name.stdout})",
            by_name.stderr.strip(),
        )
        self.report.check(
            by_addr.returncode in (51, 60),
            f"https://{self.addr['apns-sandbox']}:{port} does not (the certificate names {endpoint.hostname}, not that address)",
            f"curl exit {by_addr.returncode} {by_addr.stderr.strip()}",
        )

    def check_users(self):
        rows, bad = [], []
        for name, proc in self.procs.items():
            if not self.root_mode:
                note(f"not run as root: the services run as the invoking user (uid {self.args.unprivileged} outside the user namespace), not as the images' users")
                break
            if proc.popen.poll() is not None:
                continue
            status = Path(f"/proc/{proc.popen.pid}/status").read_text()
            uid = int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))
            want = image_user(name, self.services[name], self.dockerfile)[1]
            rows.append(f"{name} {uid}")
            if uid != want or (uid == 0 and self.root_mode):
                bad.append(f"{name} runs as uid {uid}, not {want}")
        if self.root_mode:
            self.report.check(not bad, "the services run as uids " + ", ".join(rows), "; ".join(bad))
        # What the engine would enforce: no capabilities, no_new_privs, a read-only root.
        rows, bad = [], []
        for name, proc in self.procs.items():
            if proc.popen.poll() is not None:
                continue
            svc = self.services[name]
            status = Path(f"/proc/{proc.popen.pid}/status").read_text()
            bounding = int(re.search(r"^CapBnd:\s+([0-9a-f]+)", status, re.M).group(1), 16)
            nnp = re.search(r"^NoNewPrivs:\s+(\d)", status, re.M).group(1) == "1"
            mounts = [line.split() for line in Path(f"/proc/{proc.popen.pid}/mountinfo").read_text().splitlines()]
            root_ro = any(m[4] == str(self.fakeroot) and "ro" in m[5].split(",") for m in mounts)
            rows.append(name)
            for missing in hardened(svc):
                bad.append(f"{name}: the file lacks {missing}")
            if bounding or not nnp or not root_ro:
                bad.append(f"{name}: CapBnd {bounding:x}, NoNewPrivs {int(nnp)}, image paths read-only {root_ro}")
        self.report.check(rows and not bad, f"{', '.join(rows)} run without capabilities (CapBnd 0), with no_new_privs and the image's paths "
                          "read-only (read_only: true), and still work", "; ".join(bad))
        ingest = self.services.get("push-ingest")
        if ingest:
            env = service_env(ingest)
            status, _ = http_request("GET", "push-ingest", int(env["PUSH_HTTP_PORT"]), "/healthz")
            self.report.check(status == 404, f"push-ingest's PUSH_HTTP_PORT {env['PUSH_HTTP_PORT']} serves the API only (GET /healthz: {status})")

    def deliver(self):
        env = service_env(self.services["push-ingest"])
        apps = json.loads(Path(self.to_host(env["PUSH_APPS_FILE"])).read_text())["apps"]
        app = next((a for a, c in apps.items() if c.get("default")), next(iter(apps)))
        key = apps[app]["ingest"]["api_keys"][0]
        token = secrets.token_hex(32)
        status, body = http_request(
            "PUT", "push-ingest", int(env["PUSH_HTTP_PORT"]), f"/v1/apps/{app}/devices/{token}",
            {"user": "compose-check", "locale": "en", "environment": "sandbox"}, headers={"Authorization": f"Bearer {key}"})
        if status not in (200, 201):
            raise Failed(f"PUT /v1/apps/{app}/devices/… on push-ingest: {status} {body[:300]!r}")
        self.report.ok(f"device registered through http://push-ingest:{env['PUSH_HTTP_PORT']} ({status})")
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
            ch.basic_publish("push", "request", json.dumps(request).encode(), pika.BasicProperties(content_type="application/json", delivery_mode=2), mandatory=True)
        finally:
            conn.close()
        parts = urllib.parse.urlsplit(url)
        self.report.ok(f"push request published with pika to PUSH_AMQP_URL (amqp://{parts.username}:…@{parts.hostname}:{parts.port}), confirmed")
        argv = argv_of(self.services["apns-sandbox"])
        admin = int(argv[argv.index("--admin-port") + 1])
        started = time.monotonic()

        def delivered():
            status, body = http_request("GET", "apns-sandbox", admin, f"/deliveries?token={token}")
            found = json.loads(body).get("deliveries", []) if status == 200 else []
            return found or None

        found = wait_until("apns-sandbox received the push", START_TIMEOUT_S, delivered, interval=0.2, procs=list(self.procs[n] for n in self.emulated_push() + ["apns-sandbox"]))
        d = found[0]
        self.report.check(
            d.get("topic", "").startswith(app) and d.get("payload", {}).get("aps", {}).get("alert", {}).get("body") == "delivered",
            f"apns-sandbox received it over https://apns-sandbox from push-send ({time.monotonic() - started:.1f} s after publishing): topic {d.get('topic')}",
            f"delivery {d}",
        )

    def check_console(self):
        """push-console as ops reach it: http://push-console:8090 (the host's 127.0.0.1:8090), the
        operators file of make_operators_file: login page, redirects and 401 without a session or a
        key, the operator's login, and the request just delivered and the queues through the API."""
        port = int(service_env(self.services[CONSOLE])["PUSH_HTTP_PORT"])
        base = f"http://{CONSOLE}:{port}"

        def call(method, path, body=None, headers=None):
            conn = http.client.HTTPConnection(CONSOLE, port, timeout=10)
            try:
                conn.request(method, path, body=body, headers=headers or {})
                resp = conn.getresponse()
                return resp.status, resp.getheaders(), resp.read().decode(errors="replace")
            finally:
                conn.close()

        def cookies_of(headers):
            jar = {}
            for name, value in headers:
                if name.lower() == "set-cookie":
                    key, _, rest = value.partition("=")
                    jar[key.strip()] = rest.split(";")[0]
            return jar

        bearer = {"Authorization": f"Bearer {self.console_key}"}
        status, headers, page = call("GET", "/login")
        self.report.check(status == 200 and 'id="login"' in page, f"{base}/login serves the login form (HTTP {status})", page[:200])
        status, headers, _ = call("GET", "/status")
        location = dict((k.lower(), v) for k, v in headers).get("location", "")
        self.report.check(status == 303 and location.endswith("/login"), f"{base}/status without a session: {status} to {location or '?'}")
        status, _, body = call("GET", "/api/v1/status")
        self.report.check(status == 401, f"{base}/api/v1/status without a session or a key: {status}", body[:200])

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
        if self.report.check(status == 303 and session, f"operator {self.console_login[0]} logs in (POST /login: {status}, session cookie set)", body[:300]):
            status, _, page = call("GET", "/status", headers={"Cookie": f"push_console_session={session}"})
            self.report.check(status == 200 and self.console_login[0] in page and 'id="queues"' in page,
                              f"GET /status with the session: {status}, the operator named, the queues listed")

        # What the services did, through the console: the request delivered above, and the queues.
        app, request_id = self.delivered
        started = time.monotonic()

        def done():
            status, _, body = call("GET", f"/api/v1/requests/{urllib.parse.quote(app)}/{urllib.parse.quote(request_id)}", headers=bearer)
            report = json.loads(body) if status == 200 else {}
            return report if report.get("state") == "done" else None

        try:
            report = wait_until(f"{CONSOLE} reports {request_id} done", START_TIMEOUT_S, done, interval=0.2, procs=[self.procs[CONSOLE]])
            self.report.check(report.get("delivered") == 1 and report.get("targeted") == 1,
                              f"GET /api/v1/requests/{app}/{request_id} with the API key: done, {report.get('delivered')} delivered "
                              f"of {report.get('targeted')} targeted ({time.monotonic() - started:.1f} s)", f"{report}")
        except Failed as e:
            self.report.fail(str(e))
        status, _, body = call("GET", "/api/v1/status", headers=bearer)
        state = json.loads(body) if status == 200 else {}
        queues = {q.get("name"): q for q in state.get("queues", [])}
        apps = {a.get("app"): a for a in state.get("apps", [])}
        self.report.check(status == 200 and (queues.get("push.send", {}).get("consumers") or 0) >= 1,
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
        self.report.check(not keys and entry.get("auth"),
                          f"{CONSOLE} sees no signing key ({KEYS_DIR} empty in its mount namespace) and its status lists {app}: "
                          f"{entry.get('auth')}, {problems}", f"keys {keys}, status entry {entry}")

    def stop_services(self):
        running = [p for n, p in self.procs.items() if p.popen.poll() is None]
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
        self.report.check(not bad, f"{', '.join(p.name for p in running)} exit 0 on SIGTERM", "; ".join(bad))

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
                print(f"--- last lines of {log.name} ---", file=sys.stderr)
                print("\n".join(lines), file=sys.stderr)


def on_signal(signum, _frame):
    raise Interrupted(signal.Signals(signum).name)


def inside(args):
    report = Report()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    work = Path(tempfile.mkdtemp(prefix="push-compose-check."))
    stack = None
    status = 0
    try:
        dockerfile = parse_dockerfile(DOCKERFILE.read_text())
        project = work / "project"
        project.mkdir()
        env = make_env_file(report, project)
        raw = yaml.safe_load(COMPOSE_FILE.read_text())
        doc = static_checks(report, raw, env, dockerfile)
        if report.failed:
            raise Failed("the file's checks failed; not starting the stack")
        stack = Stack(args, report, work, doc, env, dockerfile, root_mode=args.unprivileged is None)
        stack.run()
    except Failed as e:
        report.fail(str(e))
    except Interrupted as e:
        report.fail(f"interrupted ({e})")
        status = 130
    except Exception as e:  # an unexpected error is a failed check, with everything still stopped
        report.fail(f"{type(e).__name__}: {e}")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if stack is not None:
            if report.failed:
                stack.tail_logs()
            stack.cleanup()
        if args.keep:
            note(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"compose: {report.passed} passed, {report.failed} failed ({time.monotonic() - report.started:.0f} s)", flush=True)
    return status or (1 if report.failed else 0)


def main():
    ap = argparse.ArgumentParser(prog="scripts/checks/compose.sh", add_help=False)
    ap.add_argument("--bin-dir", default=str(ROOT / ".build" / "debug"))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--unprivileged", type=int, help=argparse.SUPPRESS)  # the invoking uid
    args, extra = ap.parse_known_args()
    if extra:
        print(f"compose.sh: unknown arguments {extra} (see --help)", file=sys.stderr)
        return 2
    if args.inside:
        return inside(args)
    missing = [t for t in ("unshare", "setpriv", "mount", "curl", "make", "openssl", "redis-server") if not shutil.which(t)]
    if missing:
        print(f"compose.sh: missing {', '.join(missing)} (scripts/install-deps.sh installs what the project needs)", file=sys.stderr)
        return 3
    ns = ["unshare", "--mount", "--net", "--propagation", "private"]
    flags = []
    if os.geteuid() != 0:
        ns += ["--user", "--map-root-user"]
        flags += ["--unprivileged", str(os.geteuid())]
    probe = subprocess.run(ns + ["true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"compose.sh: cannot make a private network and mount namespace ({' '.join(ns)}): {probe.stderr.strip()}", file=sys.stderr)
        return 3
    argv = ns + [sys.executable, str(Path(__file__).resolve()), "--inside", "--bin-dir", args.bin_dir] + (["--keep"] if args.keep else []) + flags
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    sys.exit(main())
