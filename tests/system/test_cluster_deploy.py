"""The cluster deployments, checked without a container engine or a Kubernetes cluster
(scripts/checks/cluster-deploy.sh runs this module; no stack, a second or so).

1. docker-compose.cluster.yml over docker-compose.yml (test_compose_*): the merged file (compose's
   merge rules: maps merge, a service's volumes merge by container path, everything else is replaced)
   is valid against the compose schema after interpolation with a .env made by `make .env` (which
   also holds the Erlang cookie). Three RabbitMQ nodes, each with its own volume, the cluster
   configuration (deploy/rabbitmq/cluster.conf naming the three by the names compose gives them) and
   one cookie; six Redis nodes in cluster mode announcing their names, each with its own volume; a
   one-shot that creates the cluster with a replica per master over those six and that every service
   waits for, as for the three RabbitMQ nodes; every service's PUSH_AMQP_URL lists the three nodes
   with the .env user, PUSH_AMQP_QUORUM_SIZE is 3, PUSH_REDIS_URL is redis+cluster://:REDIS_PASSWORD@
   over the six; no container runs as root. Redis: without REDIS_PASSWORD in .env the file does not
   interpolate; every node runs with protected-mode yes, --requirepass and --masterauth of .env's
   REDIS_PASSWORD (through its environment), --maxmemory with noeviction, a read-only root, no
   capabilities and no-new-privileges; redis-cli of the healthchecks and of the creating one-shot
   authenticates (REDISCLI_AUTH).
2. deploy/kubernetes/cluster/ (test_kubernetes_*): the kustomization's resources exist and parse; a
   RabbitmqCluster of 3; a Redis StatefulSet of 6 in cluster mode announcing its pods' names, behind a
   headless Service of that name, and a Job that creates the cluster from those six pods; the patch
   gives every push Deployment PUSH_AMQP_QUORUM_SIZE=3 and matches all five (push-console included);
   the base's NetworkPolicies are among the resources. Redis: protected-mode yes, maxmemory below the
   container's memory limit with noeviction (the ConfigMap), requirepass and masterauth from the
   Secret push-redis (key password) on the command line, REDISCLI_AUTH from it for the probes and the
   Job; a NetworkPolicy selects the nodes and (evaluated) admits the push services and the nodes on
   6379, only the nodes on 16379, and no other pod.

Compose's interpolation, .env and user rules, the NetworkPolicy evaluation and Redis option
parsing are tests/harness/deployment.py's, shared with test_compose and test_containers.
"""

import json
import re
import subprocess
import tempfile
import urllib.parse
from pathlib import Path

import jsonschema
import pytest
import yaml

from harness import deployment

ROOT = deployment.ROOT
CLUSTER_FILE = ROOT / "docker-compose.cluster.yml"
KUBE = ROOT / "deploy" / "kubernetes" / "cluster"
RABBIT_NODES = ["rabbitmq", "rabbitmq-1", "rabbitmq-2"]
REDIS_NODES = ["redis", "redis-1", "redis-2", "redis-3", "redis-4", "redis-5"]
# push-console (--profile console in compose) talks to both clusters like the others.
PUSH_SERVICES = ["push-ingest", "push-render", "push-send", "push-feedback", "push-console"]


def merge(base, override, path=()):
    """Compose's merge of an override file into a base file, for the keys these files use."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for key, value in override.items():
            if key in out and len(path) == 2 and path[0] == "services" and key == "volumes":
                targets = {compose_target(v): v for v in out[key]}
                for v in value:
                    targets[compose_target(v)] = v
                out[key] = list(targets.values())
            elif key in out and key not in ("command", "entrypoint"):
                out[key] = merge(out[key], value, path + (key,))
            else:
                out[key] = value
        return out
    return override


def compose_target(volume):
    return volume.split(":")[1] if isinstance(volume, str) and ":" in volume else str(volume)


# --- docker-compose.cluster.yml over docker-compose.yml -----------------------------------------


@pytest.fixture(scope="module")
def override():
    return yaml.safe_load(CLUSTER_FILE.read_text())


@pytest.fixture(scope="module")
def raw(override):
    return merge(yaml.safe_load(deployment.COMPOSE_FILE.read_text()), override)


@pytest.fixture(scope="module")
def env():
    """The .env `make .env` writes in an empty directory."""
    with tempfile.TemporaryDirectory() as project:
        make = ["make", "-s", "--no-print-directory", "-f", str(ROOT / "Makefile"), "-C", project, ".env"]
        run = subprocess.run(make, capture_output=True, text=True)
        if run.returncode != 0:
            pytest.fail(f"make .env failed: {run.stderr.strip()}", pytrace=False)
        return deployment.read_env_file(Path(project) / ".env")


@pytest.fixture(scope="module")
def services(raw, env):
    return deployment.interpolate(raw, env)["services"]


def test_compose_env_and_schema(raw, override, env, services, checks):
    checks(re.fullmatch(r"[0-9a-f]{48}", env.get("RABBITMQ_ERLANG_COOKIE", "")), "make .env writes a random RABBITMQ_ERLANG_COOKIE")
    try:
        deployment.interpolate(raw, {k: v for k, v in env.items() if k != "RABBITMQ_ERLANG_COOKIE"})
        checks(False, "without RABBITMQ_ERLANG_COOKIE the cluster file must not interpolate")
    except deployment.InterpolationError as e:
        checks("RABBITMQ_ERLANG_COOKIE" in str(e), "without the cookie compose stops, saying: " + str(e))
    try:
        deployment.interpolate(override, {k: v for k, v in env.items() if k != "REDIS_PASSWORD"})
        checks(False, "without REDIS_PASSWORD the cluster file must not interpolate")
    except deployment.InterpolationError as e:
        checks("REDIS_PASSWORD" in str(e) and "make .env" in str(e), "without REDIS_PASSWORD the cluster file stops compose, saying: " + str(e))
    schema = json.loads(deployment.SCHEMA_FILE.read_text())
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(deployment.interpolate(raw, env)))
    checks(not errors, "docker-compose.yml with docker-compose.cluster.yml is valid against the compose schema",
           "; ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5]))
    dockerfile = deployment.parse_dockerfile(deployment.DOCKERFILE.read_text())
    root = [n for n, s in services.items() if deployment.image_user(n, s, dockerfile)[1] in (0, None)]
    checks(not root, "no container runs as root", ", ".join(root))


def test_compose_rabbitmq(services, env, checks):
    conf = (ROOT / "deploy" / "rabbitmq" / "cluster.conf").read_text()
    peers = re.findall(r"classic_config\.nodes\.\d+\s*=\s*rabbit@(\S+)", conf)
    names = {}
    for name in RABBIT_NODES:
        svc = services.get(name, {})
        aliases = (svc.get("networks") or {}).get("default", {}) or {}
        names[name] = {name, svc.get("hostname")} | set(aliases.get("aliases", []) if isinstance(aliases, dict) else [])
    checks(len(peers) == 3 and all(any(p == services.get(n, {}).get("hostname") for n in RABBIT_NODES) for p in peers)
           and all(any(p in names[n] for p in peers) for n in RABBIT_NODES),
           f"deploy/rabbitmq/cluster.conf names the three nodes by their hostnames ({', '.join(peers)}), each reachable by that name",
           f"peers {peers}, names {names}")
    cookies = {deployment.service_env(services.get(n, {})).get("RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS") for n in RABBIT_NODES}
    checks(cookies == {f"-setcookie {env.get('RABBITMQ_ERLANG_COOKIE')}"}, "the three RabbitMQ nodes share the .env cookie", f"{cookies}")
    mounts = [[str(v) for v in services.get(n, {}).get("volumes", [])] for n in RABBIT_NODES]
    checks(len({m[0] for m in mounts if m}) == 3 and all(any("cluster.conf:/etc/rabbitmq/conf.d/" in v for v in m) for m in mounts),
           "each RabbitMQ node has a volume of its own and mounts cluster.conf", f"{mounts}")


def test_compose_redis(services, env, checks):
    bad = []
    for name in REDIS_NODES:
        argv = " ".join(map(str, deployment.argv_of(services.get(name, {}))))
        if "--cluster-enabled yes" not in argv or "--cluster-announce-hostname" not in argv or "--appendonly yes" not in argv:
            bad.append(f"{name}: {argv!r}")
    checks(not bad, "six Redis nodes in cluster mode (AOF) announcing their names", "; ".join(bad))
    data = [next((str(v) for v in services.get(n, {}).get("volumes", []) if str(v).endswith(":/data")), None) for n in REDIS_NODES]
    checks(None not in data and len(set(data)) == 6, "each Redis node has a volume of its own", f"{data}")
    bad = []
    for name in REDIS_NODES:
        svc = services.get(name, {})
        node_env = deployment.service_env(svc)
        words = deployment.redis_command([w.replace("$$", "$") for w in map(str, deployment.argv_of(svc))]) or []
        options, _ = deployment.redis_options(words)
        # The shell expands "$REDIS_PASSWORD" from the node's environment, interpolated from .env.
        expanded = {k: node_env.get(v[1:], "") if v.startswith("$") else v for k, v in options.items()}
        problems = deployment.redis_config_problems(expanded, True)
        if expanded.get("requirepass") != env.get("REDIS_PASSWORD") or expanded.get("masterauth") != env.get("REDIS_PASSWORD"):
            problems.append("--requirepass/--masterauth are not .env's REDIS_PASSWORD")
        test = [str(w) for w in (svc.get("healthcheck") or {}).get("test") or []]
        if "redis-cli" in test and node_env.get("REDISCLI_AUTH") != env.get("REDIS_PASSWORD"):
            problems.append("its healthcheck's redis-cli has no REDISCLI_AUTH")
        problems += deployment.hardened(svc)
        if problems:
            bad.append(f"{name}: {', '.join(problems)}")
    creator_env = deployment.service_env(services.get("redis-cluster", {}))
    if creator_env.get("REDISCLI_AUTH") != env.get("REDIS_PASSWORD"):
        bad.append("redis-cluster: its redis-cli (--cluster create) has no REDISCLI_AUTH")
    bad += [f"redis-cluster: {m}" for m in deployment.hardened(services.get("redis-cluster", {}))]
    checks(not bad, "every Redis node: protected-mode yes, --requirepass and --masterauth of .env's REDIS_PASSWORD, --maxmemory "
           "with noeviction, redis-cli authenticating (healthchecks, the creating one-shot), read-only, no capabilities, no-new-privileges",
           "; ".join(bad))
    creator = " ".join(map(str, deployment.argv_of(services.get("redis-cluster", {}))))
    hosts = re.search(r"for host in ([^;]*);", creator)
    checks("--cluster create" in creator and "--cluster-replicas 1" in creator
           and sorted(hosts.group(1).split() if hosts else []) == sorted(REDIS_NODES)
           and set(deployment.depends_of(services.get("redis-cluster", {}))) == set(REDIS_NODES),
           "redis-cluster creates the cluster over the six nodes (a replica per master) once they are healthy", creator[:200])


def test_compose_services(services, env, checks):
    bad = []
    for name in PUSH_SERVICES:
        svc_env = deployment.service_env(services.get(name, {}))
        first, *rest = svc_env.get("PUSH_AMQP_URL", "").split(",")
        url = urllib.parse.urlsplit(first)
        hosts = [url.hostname] + [r.split(":")[0] for r in rest]
        if (url.username, url.password) != (env["RABBITMQ_USER"], env["RABBITMQ_PASSWORD"]) or sorted(hosts) != sorted(RABBIT_NODES):
            bad.append(f"{name}: PUSH_AMQP_URL names {hosts} as {url.username}")
        if svc_env.get("PUSH_AMQP_QUORUM_SIZE") != "3":
            bad.append(f"{name}: PUSH_AMQP_QUORUM_SIZE {svc_env.get('PUSH_AMQP_QUORUM_SIZE')!r}")
        redis = svc_env.get("PUSH_REDIS_URL", "")
        credentials, _, seeds = redis.removeprefix("redis+cluster://").split("/")[0].rpartition("@")
        seeds = seeds.split(",")
        if not redis.startswith("redis+cluster://") or sorted(s.split(":")[0] for s in seeds) != sorted(REDIS_NODES):
            bad.append(f"{name}: PUSH_REDIS_URL names {seeds}")
        if credentials != f":{env.get('REDIS_PASSWORD')}":
            bad.append(f"{name}: PUSH_REDIS_URL does not carry .env's REDIS_PASSWORD (redis+cluster://:PASSWORD@…)")
        missing = [d for d in RABBIT_NODES + ["redis-cluster", "rabbitmq-policies"] if d not in deployment.depends_of(services.get(name, {}))]
        if missing:
            bad.append(f"{name} does not wait for {missing}")
    checks(not bad, "every service lists the three brokers (PUSH_AMQP_QUORUM_SIZE 3) and the six Redis nodes with the Redis password, "
           "and waits for both clusters", "; ".join(bad))


# --- deploy/kubernetes/cluster/ ------------------------------------------------------------------


@pytest.fixture(scope="module")
def kube():
    """The kustomization, its resources' documents by kind, and what is missing of them."""
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text())
    documents, missing = [], []
    for resource in kustomization.get("resources", []):
        path = (KUBE / resource).resolve()
        if not path.exists():
            missing.append(resource)
            continue
        documents += [d for d in yaml.safe_load_all(path.read_text()) if d]
    by_kind = {}
    for d in documents:
        by_kind.setdefault(d["kind"], []).append(d)
    sets = [s for s in by_kind.get("StatefulSet", []) if s["metadata"]["name"] == "redis-cluster"]
    return {
        "kustomization": kustomization, "documents": documents, "missing": missing, "by_kind": by_kind,
        "redis": sets[0] if sets else None,
        "config": next((c for c in by_kind.get("ConfigMap", []) if c["metadata"]["name"] == "redis-cluster"), {}),
        "job": next((j for j in by_kind.get("Job", []) if j["metadata"]["name"] == "redis-cluster-create"), None),
    }


def test_kubernetes_workloads(kube, checks):
    resources = kube["kustomization"].get("resources", [])
    checks(not kube["missing"] and kube["documents"], f"the kustomization's {len(resources)} resources exist and parse", f"{kube['missing']}")
    by_kind, redis, config, job = kube["by_kind"], kube["redis"], kube["config"], kube["job"]
    rabbit = by_kind.get("RabbitmqCluster", [])
    checks(len(rabbit) == 1 and rabbit[0]["spec"].get("replicas") == 3, "a RabbitmqCluster of three nodes")
    ok = bool(redis) and redis["spec"]["replicas"] == 6 and redis["spec"]["serviceName"] == "redis-cluster"
    command = " ".join(redis["spec"]["template"]["spec"]["containers"][0]["command"]) if redis else ""
    checks(ok and "cluster-enabled yes" in config.get("data", {}).get("redis.conf", "") and "--cluster-announce-hostname" in command
           and any(s["metadata"]["name"] == "redis-cluster" and s["spec"].get("clusterIP") == "None" for s in by_kind.get("Service", [])),
           "a Redis StatefulSet of six in cluster mode, announcing its pods' names, behind a headless Service")
    script = " ".join(job["spec"]["template"]["spec"]["containers"][0]["command"]) if job else ""
    checks("--cluster create" in script and "--cluster-replicas 1" in script and "for i in 0 1 2 3 4 5" in script,
           "a Job creates the cluster from the six pods, a replica per master")


def test_kubernetes_redis(kube, checks):
    """Redis's password, memory ceiling and network policy."""
    redis, config, job = kube["redis"], kube["config"], kube["job"]
    secret = ("push-redis", "password")
    node = redis["spec"]["template"]["spec"]["containers"][0] if redis else {}
    settings = {}
    for line in config.get("data", {}).get("redis.conf", "").splitlines():
        parts = line.split(None, 1)
        if parts and not parts[0].startswith("#"):
            settings[parts[0].lower()] = parts[1].strip() if len(parts) > 1 else ""
    options, _ = deployment.redis_options(deployment.redis_command(node.get("command") or []) or [])
    settings.update(options)
    problems = deployment.redis_config_problems(settings, True)
    for key in ("requirepass", "masterauth"):
        var = settings.get(key, "").lstrip("$").strip("{}")
        if deployment.secret_env(node, var) != secret:
            problems.append(f"{key} is not the Secret {secret[0]}'s {secret[1]}")
    limit = deployment.memory_bytes(((node.get("resources") or {}).get("limits") or {}).get("memory", "0")) or 0
    if not 0 < (deployment.memory_bytes(settings.get("maxmemory", "0")) or 0) < limit:
        problems.append(f"maxmemory {settings.get('maxmemory')} is not below the memory limit")
    probes = [" ".join(((node.get(p) or {}).get("exec") or {}).get("command") or []) for p in ("readinessProbe", "livenessProbe")]
    if not all("redis-cli" in p for p in probes) or deployment.secret_env(node, "REDISCLI_AUTH") != secret:
        problems.append("the probes' redis-cli does not authenticate (REDISCLI_AUTH from the Secret)")
    if not job or deployment.secret_env(job["spec"]["template"]["spec"]["containers"][0], "REDISCLI_AUTH") != secret:
        problems.append("the Job's redis-cli does not authenticate (REDISCLI_AUTH from the Secret)")
    checks(not problems, f"Redis: protected-mode {settings.get('protected-mode')}, requirepass and masterauth from the Secret "
           f"{secret[0]} (key {secret[1]}), maxmemory {settings.get('maxmemory')} below the {limit >> 20} MiB limit with "
           f"{settings.get('maxmemory-policy')}, redis-cli of the probes and the Job authenticating", "; ".join(problems))
    policies = [d for d in kube["documents"] if d.get("kind") == "NetworkPolicy"]
    labels = redis["spec"]["template"]["metadata"]["labels"] if redis else {}
    ns = {"kubernetes.io/metadata.name": "push"}
    bad = []
    if not deployment.networkpolicy_admits(policies, labels, (ns, {"app.kubernetes.io/name": "other"}), 6379)[1]:
        bad.append("no NetworkPolicy selects the nodes")
    for name in PUSH_SERVICES:
        source = (ns, {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "push"})
        if not deployment.networkpolicy_admits(policies, labels, source, 6379)[0]:
            bad.append(f"{name} refused on 6379")
        if deployment.networkpolicy_admits(policies, labels, source, 16379)[0]:
            bad.append(f"{name} admitted on 16379")
    if not all(deployment.networkpolicy_admits(policies, labels, (ns, labels), port)[0] for port in (6379, 16379)):
        bad.append("the nodes refused on 6379 or 16379 (replication, the cluster bus)")
    job_labels = job["spec"]["template"].get("metadata", {}).get("labels", {}) if job else {}
    if not deployment.networkpolicy_admits(policies, labels, (ns, job_labels), 6379)[0]:
        bad.append("the creation Job refused on 6379")
    for port in (6379, 16379):
        if deployment.networkpolicy_admits(policies, labels, (ns, {"app.kubernetes.io/name": "other"}), port)[0]:
            bad.append(f"another pod admitted on {port}")
    checks(not bad, "a NetworkPolicy admits to the Redis nodes the push services and the creation Job on 6379, the nodes on 6379 and "
           "16379, and no other pod", "; ".join(bad))


def test_kubernetes_base_and_patch(kube, checks):
    kustomization = kube["kustomization"]
    checks("../network-policies.yaml" in kustomization.get("resources", []), "the base's NetworkPolicies (../network-policies.yaml) are among its resources")
    deployments = [d for d in kube["by_kind"].get("Deployment", []) if d["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") == "push"]
    patch = "\n".join(p.get("patch", "") for p in kustomization.get("patches", []))
    checks(sorted(d["metadata"]["name"] for d in deployments) == sorted(PUSH_SERVICES) and "PUSH_AMQP_QUORUM_SIZE" in patch and '"3"' in patch,
           f"the patch gives the {len(PUSH_SERVICES)} push Deployments ({', '.join(PUSH_SERVICES)}) PUSH_AMQP_QUORUM_SIZE=3",
           f"{[d['metadata']['name'] for d in deployments]}")
