"""What the deployment files mean, read as their tools read them, for the checks of
docker-compose*.yml, deploy/Dockerfile and deploy/kubernetes/ (test_compose, test_containers,
test_cluster_deploy): compose's interpolation, a .env file, a service's environment, command,
volumes and order; the Dockerfile's stages, users and copies; the hardening every container runs
with; a redis-server command line and its settings; Kubernetes label selectors and NetworkPolicies."""

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
SCHEMA_FILE = ROOT / "deploy" / "compose-spec" / "compose-spec.json"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"

class Failed(Exception):
    """A file says something that cannot be run as is (and a compose step that cannot go on)."""


# The push image the project builds (deploy/Dockerfile), as docker-compose.yml names it.
PUSH_IMAGE = "push:latest"


# The users of the official images this file runs as (rabbitmq:*, redis:*): uid = gid = 999.
OFFICIAL_IMAGE_USERS = {"rabbitmq": {"rabbitmq": 999}, "redis": {"redis": 999}}


class InterpolationError(Exception):
    pass


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


def dockerfile_instructions(text):
    """A Dockerfile's instructions, one string each: comments and blank lines gone, continuation
    lines joined."""
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
    return lines


def parse_dockerfile(text):
    """The final stage of deploy/Dockerfile: ENV, USER, WORKDIR, COPY (from the context), the uids
    useradd gives, and the owner and mode RUN's chown/chmod give to paths."""
    lines = dockerfile_instructions(text)
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


def redis_options(words):
    """`--name value` options of a redis-server command line, and the config file it names first."""
    options, config = {}, None
    if words and words[0].endswith("redis-server") and len(words) > 1 and not words[1].startswith("--"):
        config = words[1]
    for i, word in enumerate(words):
        if word.startswith("--") and i + 1 < len(words):
            options[word[2:].lower()] = words[i + 1]
    return options, config


def redis_command(argv):
    """The redis-server words of a container's command (`sh -c "exec redis-server …"` unwrapped)."""
    words = [str(w) for w in argv or []]
    if len(words) >= 3 and words[0] in ("sh", "/bin/sh", "bash") and words[1] in ("-c", "-ec"):
        words = shlex.split(words[2])
    words = [w for w in words if w != "exec"]
    start = next((i for i, w in enumerate(words) if w.endswith("redis-server")), None)
    return None if start is None else words[start:]


def memory_bytes(text):
    """A Redis size (1600mb, 1gb, 100000) or a Kubernetes quantity (2Gi, 512Mi) in bytes."""
    m = re.fullmatch(r"(\d+)\s*([kmg]b?|[KMG]i|[KMG])?", str(text).strip())
    if not m:
        return None
    unit = (m.group(2) or "")
    factor = {"": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2, "g": 1000**3, "gb": 1024**3,
              "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "K": 1000, "M": 1000**2, "G": 1000**3}
    return int(m.group(1)) * factor.get(unit if unit in factor else unit.lower(), 1)


def redis_config_problems(settings, cluster_enabled):
    problems = []
    if settings.get("protected-mode", "").lower() != "yes":
        problems.append(f"protected-mode {settings.get('protected-mode', 'unset (the official image turns it off)')}")
    if not settings.get("requirepass") and not settings.get("aclfile"):
        problems.append("no password (requirepass or aclfile)")
    if cluster_enabled and not settings.get("masterauth"):
        problems.append("no masterauth (a replica cannot follow a master that requires a password)")
    if not memory_bytes(settings.get("maxmemory", "0")):
        problems.append("no maxmemory")
    if settings.get("maxmemory-policy") != "noeviction":
        problems.append(f"maxmemory-policy {settings.get('maxmemory-policy', 'unset')} (not noeviction)")
    return problems


def secret_env(container, name):
    """The Secret (name, key) an environment variable of a container comes from, or None."""
    for env in container.get("env") or []:
        if env.get("name") == name:
            ref = (env.get("valueFrom") or {}).get("secretKeyRef")
            return (ref["name"], ref["key"]) if ref else None
    return None


def selector_matches(selector, labels):
    """A LabelSelector (matchLabels, matchExpressions) against labels; {} matches everything."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, op, values = expression["key"], expression["operator"], expression.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def networkpolicy_admits(policies, target, source, port, namespace="push"):
    """Whether NetworkPolicies of `namespace` let a pod with labels `source` = (its namespace's labels,
    its pod labels) connect to a pod labelled `target` on TCP `port`, and whether any selects it:
    (admitted, selected). Not selected: every connection is admitted."""
    selecting = [p for p in policies if selector_matches(p["spec"].get("podSelector", {}), target)
                 and "Ingress" in (p["spec"].get("policyTypes") or ["Ingress"])]
    if not selecting:
        return True, False
    source_namespace, source_pod = source
    for policy in selecting:
        for rule in policy["spec"].get("ingress") or []:
            ports = rule.get("ports")
            if ports and not any(p.get("port") in (None, port) and p.get("protocol", "TCP") == "TCP"
                                 and (p.get("endPort") is None or p["port"] <= port <= p["endPort"]) for p in ports):
                continue
            peers = rule.get("from")
            if not peers:
                return True, True
            for peer in peers:
                if "ipBlock" in peer:
                    return True, True
                same = source_namespace.get("kubernetes.io/metadata.name") == namespace
                in_namespace = selector_matches(peer["namespaceSelector"], source_namespace) if "namespaceSelector" in peer else same
                in_pods = selector_matches(peer["podSelector"], source_pod) if "podSelector" in peer else True
                if in_namespace and in_pods:
                    return True, True
    return False, True
