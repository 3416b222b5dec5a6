"""Container hygiene without a container engine or a Kubernetes cluster (scripts/checks/containers.sh
runs this module in .local/venv-containers, which holds hadolint and kubernetes-validate). One test
per step, in this order:

- test_hadolint: hadolint deploy/Dockerfile, no finding at any level; every `hadolint ignore=` has
  its reason in the comment above it.
- test_runtime_stage: the final stage runs as a numeric non-root USER (Kubernetes' runAsNonRoot can
  only check a number) and has a HEALTHCHECK whose script is copied into the image and is valid sh.
- test_healthcheck: deploy/healthcheck.sh against the --bin-dir apns-sandbox on free loopback ports:
  healthy against its --admin-port, unhealthy against a closed port, healthy for a program it does
  not know (pushctl); for push-console it asks PUSH_HTTP_PORT (no admin port), not PUSH_ADMIN_PORT.
- test_target_directories_copied: the build stage COPYs every top-level directory Package.swift puts
  a target in (SwiftPM refuses a package whose target directory is missing: the image did not build
  before Benchmarks/ was copied).
- test_build_stage (the long one: a release build of every product, 10-20 min the first time on 2
  cores; `-k "not build_stage"` leaves it out): the build stage runs as written in a scratch copy of
  the build context (.local/image-build; only the apt-get installs are skipped): its Swift tag is the
  toolchain the tests ran with, every file the runtime stage COPYs --from=build exists afterwards,
  every executable product whose target is in Sources/ is among them and starts. (A regex read of
  the RUN line passed while SwiftPM built only the last of seven --product options.)
- test_tested_versions: Package.swift's testedVersions, which the image builds exactly, are what the
  tests resolved (Package.resolved).
- test_dockerignore: the build output, local state, the git history, .env, the keys and
  push-console's operators file (COPY config would bake it in) stay out of the build context.
- test_compose_config: docker-compose config -q on docker-compose.yml, and with
  docker-compose.cluster.yml over it, with a .env as `make .env` makes it (in a scratch copy).
- test_pinned_brokers: every RabbitMQ image names an exact version, every RabbitmqCluster its image.
- test_kubernetes_validate: kubernetes-validate --strict (Kubernetes' own schemas, unknown fields
  refused) on every manifest as it would be applied: deploy/kubernetes/*.yaml,
  deploy/kubernetes/monitoring/*.yaml, and each overlay rendered (its resources with its JSON 6902
  patches applied to the targets they select). Custom resources (KEDA, the RabbitMQ and Prometheus
  operators) have no schema there: they are listed, not failed.
- test_pod_security, test_console_keys, test_redis_configs, test_network_policies: the hardening of
  every shipped manifest set (and the compose files where they apply), as their docstrings say.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from harness.deployment import DOCKERFILE, dockerfile_instructions, redis_options, redis_command, memory_bytes, redis_config_problems, secret_env, networkpolicy_admits
from harness.net import wait_for

ROOT = Path(__file__).resolve().parents[2]
HEALTHCHECK = ROOT / "deploy" / "healthcheck.sh"
KUBE = ROOT / "deploy" / "kubernetes"


def dockerfile_stages(text):
    """Each stage's instructions as (INSTRUCTION, arguments)."""
    stages = []
    for line in dockerfile_instructions(text):
        instr, _, rest = line.strip().partition(" ")
        if instr.upper() == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((instr.upper(), rest.strip()))
    return stages


def tool(name):
    """A tool of the check's virtualenv (hadolint, kubernetes-validate), else of PATH (docker-compose)."""
    path = Path(sys.prefix) / "bin" / name
    found = str(path) if path.exists() else shutil.which(name)
    if not found:
        pytest.exit(f"{name} is missing (scripts/checks/containers.sh installs it)", returncode=3)
    return found


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def dockerfile():
    """deploy/Dockerfile: (its text, the build stage, the final stage)."""
    text = DOCKERFILE.read_text()
    stages = dockerfile_stages(text)
    return text, stages[0], stages[-1]


def test_hadolint(checks, dockerfile):
    text = dockerfile[0]
    result = subprocess.run([tool("hadolint"), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=120)
    checks(result.returncode == 0 and not result.stdout.strip(), "hadolint deploy/Dockerfile: no finding",
           (result.stdout + result.stderr).strip())
    for match in re.finditer(r"# hadolint ignore=(\S+)", text):
        before = text[:match.start()].rstrip().splitlines()[-1] if text[:match.start()].strip() else ""
        checks(before.lstrip().startswith("#") and len(before.strip()) > 20,
               f"hadolint ignore={match.group(1)} is justified in the comment above it", before)


def test_runtime_stage(checks, dockerfile):
    final = dockerfile[2]
    users = [rest for instr, rest in final if instr == "USER"]
    user = users[-1] if users else "root"
    uid = user.split(":")[0]
    checks(uid.isdigit() and int(uid) != 0, f"the image runs as a numeric non-root user (USER {user})")
    healthchecks = [rest for instr, rest in final if instr == "HEALTHCHECK"]
    checks(bool(healthchecks) and "CMD" in healthchecks[-1], "the image has a HEALTHCHECK", "none")
    copies = [rest for instr, rest in final if instr == "COPY"]
    checks(any("deploy/healthcheck.sh" in c and "/usr/local/bin/push-healthcheck" in c for c in copies)
           and (not healthchecks or "/usr/local/bin/push-healthcheck" in healthchecks[-1]),
           "the HEALTHCHECK's script is copied into the image where it is called")
    result = subprocess.run(["sh", "-n", str(HEALTHCHECK)], capture_output=True, text=True)
    checks(result.returncode == 0 and os.access(HEALTHCHECK, os.X_OK), "deploy/healthcheck.sh is valid sh and executable", result.stderr)


def test_healthcheck(checks, bin_dir, tmp_path):
    sandbox = bin_dir / "apns-sandbox"
    if not checks(sandbox.is_file(), f"apns-sandbox is built in {bin_dir} (for the HEALTHCHECK test)"):
        return
    # Ports nothing else holds now (loopback only), so a stranger cannot answer for the sandbox.
    port, admin = free_port(), free_port()
    while admin == port:
        admin = free_port()
    process = subprocess.Popen([str(sandbox), "--port", str(port), "--admin-port", str(admin), "--ca-out", str(tmp_path / "ca.pem")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def listening():
        # Ready when its admin listener answers (the CA is written before that listener starts).
        if process.poll() is not None:
            return "exited"
        try:
            with socket.create_connection(("127.0.0.1", admin), timeout=1):
                return "ready"
        except OSError:
            return None

    def run(cmdline, env=None):
        path = tmp_path / "cmdline"
        path.write_bytes(b"\0".join(arg.encode() for arg in cmdline) + b"\0")
        full = dict(os.environ, PUSH_HEALTHCHECK_CMDLINE=str(path), **(env or {}))
        return subprocess.run(["sh", str(HEALTHCHECK)], env=full, capture_output=True, text=True, timeout=15)

    try:
        if not checks(wait_for(listening, 20, step=0.1) == "ready", f"apns-sandbox listens on 127.0.0.1:{admin} (admin) for the HEALTHCHECK test",
                      f"exit status {process.poll()}" if process.poll() is not None else "not within 20 s"):
            return
        result = run(["/usr/local/bin/apns-sandbox", "--port", str(port), "--admin-port", str(admin)])
        checks(result.returncode == 0, "HEALTHCHECK: healthy against a running apns-sandbox (its --admin-port)", result.stderr.strip())
        result = run(["/usr/local/bin/apns-sandbox", f"--admin-port={admin}"])
        checks(result.returncode == 0, "HEALTHCHECK: --admin-port=N read too", result.stderr.strip())
        closed = free_port()
        result = run(["/usr/local/bin/push-send"], {"PUSH_ADMIN_PORT": str(closed)})
        checks(result.returncode != 0, "HEALTHCHECK: unhealthy when the service's admin port (PUSH_ADMIN_PORT) does not answer",
               f"exit {result.returncode}")
        result = run(["/usr/local/bin/pushctl", "queues"])
        checks(result.returncode == 0, "HEALTHCHECK: healthy for a program it does not know (pushctl)", result.stderr.strip())
        # push-console: /healthz on PUSH_HTTP_PORT (the sandbox's admin listener stands in for it).
        result = run(["/usr/local/bin/push-console"], {"PUSH_HTTP_PORT": str(admin), "PUSH_ADMIN_PORT": str(closed)})
        checks(result.returncode == 0, "HEALTHCHECK: push-console healthy on its PUSH_HTTP_PORT (PUSH_ADMIN_PORT not asked)", result.stderr.strip())
        result = run(["/usr/local/bin/push-console"], {"PUSH_HTTP_PORT": str(closed), "PUSH_ADMIN_PORT": str(admin)})
        checks(result.returncode != 0, "HEALTHCHECK: push-console unhealthy when its PUSH_HTTP_PORT does not answer", f"exit {result.returncode}")
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def package_target_roots():
    """Top-level directories of Package.swift's targets: Sources/ and Tests/ by convention, plus the
    first component of every custom `path:`."""
    text = (ROOT / "Package.swift").read_text()
    roots = {"Sources"}
    if ".testTarget(" in text:
        roots.add("Tests")
    for match in re.finditer(r'path:\s*"([^"]+)"', text):
        roots.add(match.group(1).split("/")[0])
    return roots


def shipped_products():
    """Package.swift's executable products whose target lives in Sources/ (no custom `path:`): the
    programs the image carries. Benchmarks and test helpers name a path elsewhere."""
    text = (ROOT / "Package.swift").read_text()
    starts = [m.start() for m in re.finditer(r"\.(?:executableTarget|target|testTarget|systemLibrary)\(", text)] + [len(text)]
    paths = {}
    for start, end in zip(starts, starts[1:]):
        block = text[start:end]
        name = re.search(r'name:\s*"([^"]+)"', block)
        if block.startswith(".executableTarget(") and name:
            path = re.search(r'path:\s*"([^"]+)"', block)
            paths[name.group(1)] = path.group(1) if path else f"Sources/{name.group(1)}"
    products = []
    for match in re.finditer(r'\.executable\(\s*name:\s*"([^"]+)",\s*targets:\s*\[([^\]]*)\]', text):
        targets = re.findall(r'"([^"]+)"', match.group(2))
        if targets and all(paths.get(t, "").startswith("Sources/") for t in targets):
            products.append(match.group(1))
    return products


def test_target_directories_copied(checks, dockerfile):
    build = dockerfile[1]
    copied = {rest.split()[0].rstrip("/") for instr, rest in build if instr == "COPY" and not rest.startswith("--")}
    roots = package_target_roots()
    missing = sorted(roots - copied)
    checks(not missing, f"the build stage copies every directory with targets ({', '.join(sorted(roots))})", f"missing {missing}")


IMAGE_BUILD = ROOT / ".local" / "image-build"


def dockerignored():
    return {line.strip().rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()
            if line.strip() and not line.startswith("#")}


def copy_context(source, destination):
    """COPY of the build context's `source` to `destination`, leaving out what .dockerignore names.
    Files keep their times, so a second run of the check rebuilds only what changed."""
    ignored = dockerignored()

    def skip(directory, names):
        relative = Path(directory).relative_to(ROOT)
        return [n for n in names if os.path.normpath(relative / n) in ignored]

    if source.is_dir():
        if destination.exists():
            shutil.rmtree(destination)
        shutil.copytree(source, destination, ignore=skip, symlinks=True)
    else:
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)


def shell_assignments(text):
    """ENV/ARG `KEY=VALUE ...` (values optionally in double quotes) as a dict."""
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
            for m in re.finditer(r'(\w+)=(?:"([^"]*)"|(\S*))', text)}


def test_build_stage(checks, dockerfile):
    """Runs the build stage's instructions as written, in a scratch copy of the build context under
    .local/image-build (the container's / is that folder): COPY copies from the repository, WORKDIR
    moves, ENV and ARG set variables, RUN runs with sh, except the package installs (apt-get), which
    this machine has made already. Then every file the runtime stage copies from this stage must be
    there, and every shipped program must be among them and start (`--help`)."""
    build, final = dockerfile[1], dockerfile[2]
    froms = [rest for instr, rest in build if instr == "FROM"]
    image = froms[0].split()[0] if froms else ""
    version = subprocess.run(["swift", "--version"], capture_output=True, text=True).stdout
    local = re.search(r"Swift version (\d+\.\d+(?:\.\d+)?)", version)
    tag = re.match(r"swift:(\d+\.\d+(?:\.\d+)?)-", image)
    checks(bool(local and tag and tag.group(1) == local.group(1)),
           f"the build stage's toolchain ({image}) is the one the tests ran with (Swift {local.group(1) if local else '?'})",
           "pin the FROM tag to `swift --version`")
    IMAGE_BUILD.mkdir(parents=True, exist_ok=True)
    workdir = Path("/")
    env = dict(os.environ)
    started = time.monotonic()
    for instr, rest in build:
        if instr in ("ENV", "ARG"):
            env.update(shell_assignments(rest))
        elif instr == "WORKDIR":
            workdir = workdir / rest.strip()
            (IMAGE_BUILD / workdir.relative_to("/")).mkdir(parents=True, exist_ok=True)
        elif instr == "COPY":
            if rest.startswith("--"):
                checks(False, f"the build stage's COPY {rest} can be run here", "COPY options are not supported by this check")
                return
            *sources, target = rest.split()
            for source in sources:
                destination = IMAGE_BUILD / (workdir / target).relative_to("/")
                if (ROOT / source).is_file() and (target.endswith("/") or len(sources) > 1):
                    destination = destination / Path(source).name
                copy_context(ROOT / source, destination)
        elif instr == "RUN":
            if "apt-get" in rest:
                checks.log("build stage: skipped the package install (this machine has installed them)")
                continue
            absolute = [w for w in re.findall(r"(?<![\w$])/[\w./-]+", rest)]
            if not checks(not absolute, "the build stage's RUN commands name only paths under WORKDIR (so this check can run them)",
                          f"absolute paths {absolute}"):
                return
            checks.log(f"build stage: RUN {rest[:140]}{'…' if len(rest) > 140 else ''}")
            result = subprocess.run(["sh", "-c", rest], cwd=IMAGE_BUILD / workdir.relative_to("/"), env=env,
                                    capture_output=True, text=True, timeout=3600)
            if not checks(result.returncode == 0, f"build stage: RUN {rest[:80]}… exits 0",
                          (result.stdout + result.stderr).strip()[-2000:]):
                return
    checks.log(f"build stage ran in {time.monotonic() - started:.0f} s")
    shipped = shipped_products()
    copied = [rest.split() for instr, rest in final if instr == "COPY" and rest.startswith("--from=build")]
    programs = set()
    for parts in copied:
        for source in parts[1:-1]:
            path = IMAGE_BUILD / source.lstrip("/")
            if not checks(path.exists(), f"the runtime stage's COPY --from=build {source} exists after the build stage"):
                continue
            if path.is_dir():
                programs |= {f.name for f in path.iterdir() if f.is_file() and os.access(f, os.X_OK)}
    missing = [p for p in shipped if p not in programs]
    checks(shipped and not missing, f"the image gets every executable product in Sources/ ({', '.join(shipped)})",
           f"missing {missing}")
    for parts in copied:
        for source in parts[1:-1]:
            for program in shipped:
                binary = IMAGE_BUILD / source.lstrip("/") / program
                if binary.is_file():
                    result = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
                    checks(result.returncode == 0, f"the image's {program} starts (--help)", (result.stdout + result.stderr)[-400:])


def test_tested_versions(checks):
    """Package.swift's testedVersions (what the image builds, exactly) agree with what `swift build`
    resolved for the tests (Package.resolved, written by swift build/test)."""
    text = (ROOT / "Package.swift").read_text()
    block = text[text.index("let testedVersions"):]
    block = block[:block.index("]\n")]
    table = dict(re.findall(r'\("([^"]+)", "([^"]+)"\)', block))
    resolved_file = ROOT / "Package.resolved"
    if not checks(resolved_file.exists(), "Package.resolved exists (swift build ran) to compare testedVersions with"):
        return
    resolved = {pin["location"]: pin["state"].get("version") for pin in json.loads(resolved_file.read_text())["pins"]}
    differ = sorted(f"{url}: tested {resolved.get(url)}, table {table.get(url)}"
                    for url in set(table) | set(resolved) if table.get(url) != resolved.get(url))
    checks(not differ, f"Package.swift's testedVersions are the {len(resolved)} versions the tests resolved",
           "; ".join(differ) + " (update testedVersions in Package.swift)")


def test_dockerignore(checks):
    needed = {".build", ".local", ".git", ".env", "config/keys", "config/console-operators.json"}
    ignored = dockerignored()
    checks(needed <= ignored, ".dockerignore keeps out " + ", ".join(sorted(needed)), f"missing {sorted(needed - ignored)}")


def test_compose_config(checks, tmp_path):
    for name in ("docker-compose.yml", "docker-compose.cluster.yml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "deploy", tmp_path / "deploy")
    (tmp_path / ".env").write_text(
        "RABBITMQ_USER=push\nRABBITMQ_PASSWORD=" + "0" * 48 + "\nRABBITMQ_ERLANG_COOKIE=" + "A" * 32
        + "\nREDIS_PASSWORD=" + "1" * 48 + "\n")
    for files in (["docker-compose.yml"], ["docker-compose.yml", "docker-compose.cluster.yml"]):
        command = ["docker-compose"] + [arg for f in files for arg in ("-f", f)] + ["config", "-q"]
        result = subprocess.run([tool("docker-compose")] + command[1:], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        checks(result.returncode == 0, " ".join(command), (result.stdout + result.stderr).strip())


def test_pinned_brokers(checks):
    """Every RabbitMQ image in the compose files and the manifests names an exact version
    (rabbitmq:X.Y.Z…), and every RabbitmqCluster names its image: the operator's default moves with
    the operator, and a minor tag moves with RabbitMQ's releases (4.x changed the delivery limit)."""
    files = [ROOT / "docker-compose.yml", ROOT / "docker-compose.cluster.yml"] + sorted(KUBE.rglob("*.yaml"))
    loose, clusters = [], 0
    for path in files:
        for document in yaml.safe_load_all(path.read_text()):
            if not isinstance(document, dict):
                continue
            if document.get("kind") == "RabbitmqCluster":
                clusters += 1
                image = (document.get("spec") or {}).get("image", "")
                if not re.fullmatch(r"rabbitmq:\d+\.\d+\.\d+[\w.-]*", image or ""):
                    loose.append(f"{path.relative_to(ROOT)}: RabbitmqCluster {document['metadata']['name']} image {image or 'unset'}")
        for match in re.finditer(r"image:\s*[\"']?(rabbitmq:[^\s\"']+)", path.read_text()):
            if not re.fullmatch(r"rabbitmq:\d+\.\d+\.\d+[\w.-]*", match.group(1)):
                loose.append(f"{path.relative_to(ROOT)}: {match.group(1)}")
    checks(not loose, f"every RabbitMQ image is pinned to an exact version ({clusters} RabbitmqCluster with its image)", "; ".join(loose))


def render_overlay(directory):
    """The documents `kubectl apply -k directory` would apply, for the kustomization features the
    overlay uses (resources, JSON 6902 patches with a kind/labelSelector target); anything else is
    refused rather than rendered wrongly."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kustomization) - {"apiVersion", "kind", "resources", "patches"}
    if unknown:
        raise ValueError(f"kustomization fields this renderer does not know: {sorted(unknown)}")
    documents = []
    for resource in kustomization.get("resources", []):
        documents += [d for d in yaml.safe_load_all((directory / resource).read_text()) if d]
    for patch in kustomization.get("patches", []):
        target = patch.get("target", {})
        unknown = set(target) - {"kind", "labelSelector", "name"}
        if unknown or "path" in patch:
            raise ValueError(f"patch form this renderer does not know: {patch}")
        selector = dict(part.split("=", 1) for part in target.get("labelSelector", "").split(",") if part)
        operations = yaml.safe_load(patch["patch"])
        matched = 0
        for document in documents:
            labels = document.get("metadata", {}).get("labels", {}) or {}
            if target.get("kind") and document.get("kind") != target["kind"]:
                continue
            if target.get("name") and document.get("metadata", {}).get("name") != target["name"]:
                continue
            if any(labels.get(key) != value for key, value in selector.items()):
                continue
            for operation in operations:
                apply_json_patch(document, operation)
            matched += 1
        if matched == 0:
            raise ValueError(f"a patch selects nothing: {target}")
    return documents


def apply_json_patch(document, operation):
    """RFC 6902 add/replace/remove on a JSON pointer (enough for the overlays here)."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in operation["path"].lstrip("/").split("/")]
    parent = document
    for part in parts[:-1]:
        parent = parent[int(part)] if isinstance(parent, list) else parent[part]
    last = parts[-1]
    op = operation["op"]
    if op == "add":
        if isinstance(parent, list):
            if last == "-":
                parent.append(operation["value"])
            else:
                parent.insert(int(last), operation["value"])
        else:
            parent[last] = operation["value"]
    elif op == "replace":
        if isinstance(parent, list):
            parent[int(last)] = operation["value"]
        else:
            if last not in parent:
                raise ValueError(f"replace of a missing {operation['path']}")
            parent[last] = operation["value"]
    elif op == "remove":
        del parent[int(last) if isinstance(parent, list) else last]
    else:
        raise ValueError(f"JSON patch op {op} is not supported here")


def test_kubernetes_validate(checks, overlays):
    validate = tool("kubernetes-validate")
    sets = [("deploy/kubernetes/*.yaml", sorted(KUBE.glob("*.yaml")), None)]
    monitoring = sorted((KUBE / "monitoring").glob("*.yaml")) if (KUBE / "monitoring").is_dir() else []
    if monitoring:
        sets.append(("deploy/kubernetes/monitoring/*.yaml", monitoring, None))
    for overlay, documents in overlays.items():
        if not isinstance(documents, list):
            checks(False, f"the overlay {overlay.relative_to(ROOT)} renders", str(documents))
            continue
        checks(True, f"the overlay {overlay.relative_to(ROOT)} renders: {len(documents)} resources")
        sets.append((f"{overlay.relative_to(ROOT)} (rendered)", None, documents))
    with tempfile.TemporaryDirectory() as tmp:
        for name, files, documents in sets:
            if documents is not None:
                path = Path(tmp) / (re.sub(r"\W+", "-", name) + ".yaml")
                path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
                files = [path]
            result = subprocess.run([validate, "--strict", "--no-warn", *map(str, files)], capture_output=True, text=True, timeout=300)
            failures = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith(("ERROR", "FAIL"))]
            passed = [line for line in result.stdout.splitlines() if line.startswith("INFO") and " passed " in line]
            checks(result.returncode == 0 and not failures, f"kubernetes-validate --strict {name}: {len(passed)} resources valid",
                   "; ".join(failures) or (result.stdout + result.stderr).strip()[-800:])
            crds = subprocess.run([validate, "--strict", *map(str, files)], capture_output=True, text=True, timeout=300)
            kinds = sorted({m.group(1) for m in re.finditer(r"Couldn't find schema for kind (\w+)", crds.stdout + crds.stderr)})
            if kinds:
                checks.log(f"{name}: custom resources without a schema there, not validated: {', '.join(kinds)}")


# --- Hardening of the shipped deployments (pods, Redis, NetworkPolicies) ------------------------

PUSH_SERVICES = ["push-ingest", "push-render", "push-send", "push-feedback", "push-console"]
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")
KUBE_README = KUBE / "README.md"


@pytest.fixture(scope="module")
def overlays():
    """{overlay directory: the documents `kubectl apply -k` would apply, or why it does not render}."""
    rendered = {}
    for overlay in sorted(p.parent for p in KUBE.glob("*/kustomization.yaml")):
        try:
            rendered[overlay] = render_overlay(overlay)
        except (ValueError, KeyError, IndexError) as error:
            rendered[overlay] = error
    return rendered


@pytest.fixture(scope="module")
def shipped(overlays):
    """(name, documents) for each way the manifests are applied: `kubectl apply -f deploy/kubernetes/`
    and every overlay that renders (test_kubernetes_validate fails on one that does not)."""
    sets = [("deploy/kubernetes/*.yaml", [d for p in sorted(KUBE.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d])]
    return sets + [(f"{o.relative_to(ROOT)} (rendered)", d) for o, d in overlays.items() if isinstance(d, list)]


def pod_spec(workload):
    spec = workload.get("spec", {})
    if workload["kind"] == "CronJob":
        spec = spec.get("jobTemplate", {}).get("spec", {})
    return spec.get("template", {}).get("spec", {}) or {}


def pod_labels(workload):
    spec = workload.get("spec", {})
    if workload["kind"] == "CronJob":
        spec = spec.get("jobTemplate", {}).get("spec", {})
    return (spec.get("template", {}).get("metadata", {}) or {}).get("labels", {}) or {}


def pod_security_problems(workload):
    """What a workload's pod lacks of: runAsNonRoot and the RuntimeDefault seccomp profile (pod), and in
    every container allowPrivilegeEscalation false, readOnlyRootFilesystem true, runAsNonRoot true,
    capabilities drop ALL (none added); a push image container also an emptyDir at /tmp."""
    spec = pod_spec(workload)
    problems = []
    pod = spec.get("securityContext") or {}
    if pod.get("runAsNonRoot") is not True:
        problems.append("pod runAsNonRoot")
    if (pod.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        problems.append("pod seccompProfile RuntimeDefault")
    empty_dirs = {v["name"] for v in spec.get("volumes") or [] if "emptyDir" in v}
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        ctx = container.get("securityContext") or {}
        caps = ctx.get("capabilities") or {}
        name = container.get("name")
        if ctx.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation false")
        if ctx.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{name}: readOnlyRootFilesystem true")
        if ctx.get("runAsNonRoot") is not True:
            problems.append(f"{name}: runAsNonRoot true")
        if "ALL" not in [str(c).upper() for c in caps.get("drop") or []] or caps.get("add"):
            problems.append(f"{name}: capabilities drop [ALL] and add none")
        if str(container.get("image", "")).startswith("push:") and not any(
                m.get("mountPath") == "/tmp" and m.get("name") in empty_dirs for m in container.get("volumeMounts") or []):
            problems.append(f"{name}: an emptyDir at /tmp (the root is read-only)")
    return problems


def test_pod_security(checks, shipped):
    """Every Deployment, StatefulSet and Job shipped (the push services, the policy import, the Redis
    Cluster and its creation Job): the hardened securityContext of pod_security_problems."""
    for name, documents in shipped:
        workloads = [d for d in documents if d.get("kind") in WORKLOAD_KINDS]
        bad = [f"{w['kind']} {w['metadata']['name']}: {', '.join(p)}" for w in workloads for p in [pod_security_problems(w)] if p]
        checks(workloads and not bad,
               f"{name}: every workload ({', '.join(w['metadata']['name'] for w in workloads)}) has runAsNonRoot and seccomp "
               "RuntimeDefault, and containers without privilege escalation or capabilities on a read-only root (push: /tmp an emptyDir)",
               "; ".join(bad) or "no workload")


def test_console_keys(checks, shipped):
    """push-console gets apps.json of the Secret push-apps and not the signing keys beside it, in every
    manifest set and in the compose files (no keys volume)."""
    for name, documents in shipped:
        consoles = [d for d in documents if d.get("kind") == "Deployment" and d["metadata"]["name"] == "push-console"]
        bad = []
        for console in consoles:
            spec = pod_spec(console)
            sources = []
            for volume in spec.get("volumes") or []:
                if "secret" in volume:
                    sources.append((volume["name"], volume["secret"]))
                for projected in (volume.get("projected") or {}).get("sources") or []:
                    if "secret" in projected:
                        sources.append((volume["name"], projected["secret"]))
            for volume, secret in sources:
                if secret.get("secretName", secret.get("name")) == "push-apps" and [
                        (i.get("key"), i.get("path")) for i in secret.get("items") or []] != [("apps.json", "apps.json")]:
                    bad.append(f"volume {volume} mounts push-apps with items {secret.get('items')} (not only apps.json)")
            for container in spec.get("containers") or []:
                for source in container.get("envFrom") or []:
                    if (source.get("secretRef") or {}).get("name") == "push-apps":
                        bad.append(f"{container['name']} takes push-apps as environment")
        checks(consoles and not bad, f"{name}: push-console mounts only apps.json of push-apps (items), not the signing keys",
               "; ".join(bad) or "no push-console Deployment")
    base = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    volumes = (base["services"].get("push-console") or {}).get("volumes") or []
    keys = [v for v in volumes if "/app/config/keys" in (v.get("target", "") if isinstance(v, dict) else str(v))
            or (isinstance(v, str) and v.split(":")[0] == "keys")]
    cluster = yaml.safe_load((ROOT / "docker-compose.cluster.yml").read_text())
    keys += [v for v in (cluster["services"].get("push-console") or {}).get("volumes") or [] if "keys" in str(v)]
    checks("push-console" in base["services"] and not keys, "docker-compose*.yml: push-console mounts no keys volume", f"{keys}")


def test_redis_configs(checks, shipped):
    """Every shipped Redis: protected-mode yes, a password (from .env or a Secret, never in the file),
    maxmemory (below the container's memory limit on Kubernetes) with noeviction, masterauth in
    cluster mode; redis-cli in healthchecks, probes and the cluster's creation authenticates
    (REDISCLI_AUTH)."""
    # Compose: docker-compose.yml, and the cluster file over it (a service's maps merge, the rest is replaced).
    base = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    override = yaml.safe_load((ROOT / "docker-compose.cluster.yml").read_text())["services"]
    merged = dict(base)
    for name, svc in override.items():
        merged[name] = {k: ({**base[name][k], **v} if isinstance(v, dict) and isinstance(base.get(name, {}).get(k), dict) else v)
                        for k, v in {**base.get(name, {}), **svc}.items()}
    checked, bad = [], []
    for file, services in (("docker-compose.yml", base), ("docker-compose.yml + docker-compose.cluster.yml", merged)):
        for name, svc in services.items():
            if not str(svc.get("image", "")).startswith("redis:"):
                continue
            env = svc.get("environment") or {}
            env = dict(str(e).split("=", 1) for e in env) if isinstance(env, list) else env
            argv = [str(w) for key in ("entrypoint", "command") for w in (svc.get(key) if isinstance(svc.get(key), list) else
                                                                           [svc[key]] if svc.get(key) else [])]
            words = redis_command([w.replace("$$", "$") for w in argv])  # $$ is compose's escape of $
            if words is None:
                # A one-shot with redis-cli (the cluster's creation): it must authenticate.
                if "redis-cli" in " ".join(argv) and "${REDIS_PASSWORD" not in str(env.get("REDISCLI_AUTH", "")):
                    bad.append(f"{file}: {name}'s redis-cli without REDISCLI_AUTH from REDIS_PASSWORD")
                continue
            checked.append(f"{name}" + (" (cluster)" if file != "docker-compose.yml" else ""))
            settings, _ = redis_options(words)
            # A password given as "$VAR" is the container's environment, which must be .env's REDIS_PASSWORD.
            for key in ("requirepass", "masterauth"):
                value = settings.get(key, "")
                var = re.fullmatch(r"\$\{?(\w+)\}?", value)
                if value and not (value.startswith("${REDIS_PASSWORD") or (var and str(env.get(var.group(1), "")).startswith("${REDIS_PASSWORD"))):
                    bad.append(f"{file}: {name}'s --{key} is not .env's REDIS_PASSWORD")
            bad += [f"{file}: {name}: {p}" for p in redis_config_problems(settings, settings.get("cluster-enabled") == "yes")]
            test = " ".join(map(str, (svc.get("healthcheck") or {}).get("test") or []))
            if "redis-cli" in test and not str(env.get("REDISCLI_AUTH", "")).startswith("${REDIS_PASSWORD"):
                bad.append(f"{file}: {name}'s healthcheck runs redis-cli without REDISCLI_AUTH from REDIS_PASSWORD")
    checks(checked and not bad, f"compose Redis ({', '.join(checked)}): protected-mode yes, a password from .env, maxmemory with "
           "noeviction, masterauth in cluster mode, redis-cli authenticating (REDISCLI_AUTH)", "; ".join(bad))

    # Kubernetes: every container running redis-server, its config file from a ConfigMap and its command.
    for set_name, documents in shipped:
        configmaps = {d["metadata"]["name"]: d.get("data", {}) for d in documents if d.get("kind") == "ConfigMap"}
        checked, bad = [], []
        for workload in [d for d in documents if d.get("kind") in WORKLOAD_KINDS]:
            spec = pod_spec(workload)
            volumes = {v["name"]: v for v in spec.get("volumes") or []}
            for container in spec.get("containers") or []:
                label = f"{workload['kind']} {workload['metadata']['name']}/{container['name']}"
                words = redis_command((container.get("command") or []) + (container.get("args") or []))
                if words is None:
                    text = " ".join(map(str, (container.get("command") or []) + (container.get("args") or [])))
                    if "redis-cli" in text and not secret_env(container, "REDISCLI_AUTH"):
                        bad.append(f"{label}: redis-cli without REDISCLI_AUTH from a Secret")
                    continue
                checked.append(label)
                options, config = redis_options(words)
                settings = {}
                if config:
                    for mount in container.get("volumeMounts") or []:
                        if config.startswith(mount["mountPath"].rstrip("/") + "/"):
                            source = volumes.get(mount["name"], {}).get("configMap", {}).get("name")
                            text = configmaps.get(source, {}).get(config[len(mount["mountPath"].rstrip("/")) + 1:], "")
                            for line in text.splitlines():
                                parts = line.split(None, 1)
                                if parts and not parts[0].startswith("#"):
                                    settings[parts[0].lower()] = parts[1].strip() if len(parts) > 1 else ""
                    if not settings:
                        bad.append(f"{label}: its config file {config} is not a ConfigMap of this set")
                settings.update(options)
                bad += [f"{label}: {p}" for p in redis_config_problems(settings, settings.get("cluster-enabled") == "yes")]
                for key in ("requirepass", "masterauth"):
                    var = re.fullmatch(r"\$\{?(\w+)\}?|\$\((\w+)\)", settings.get(key, ""))
                    if settings.get(key) and not (var and secret_env(container, var.group(1) or var.group(2))):
                        bad.append(f"{label}: {key} is not an environment variable from a Secret")
                limit = memory_bytes(((container.get("resources") or {}).get("limits") or {}).get("memory", "0"))
                if limit and (memory_bytes(settings.get("maxmemory", "0")) or 0) >= limit:
                    bad.append(f"{label}: maxmemory {settings.get('maxmemory')} is not below the memory limit")
                if not limit:
                    bad.append(f"{label}: no memory limit to keep maxmemory below")
                for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                    command = " ".join(((container.get(probe) or {}).get("exec") or {}).get("command") or [])
                    if "redis-cli" in command and not secret_env(container, "REDISCLI_AUTH"):
                        bad.append(f"{label}: its {probe} runs redis-cli without REDISCLI_AUTH from a Secret")
        if checked or bad:
            checks(not bad, f"{set_name}: Redis ({', '.join(checked)}) with protected-mode yes, requirepass and masterauth from a Secret, "
                   "maxmemory below the memory limit with noeviction, redis-cli authenticating", "; ".join(bad))
        else:
            checks.log(f"{set_name}: no Redis runs here (an external one: deploy/kubernetes/README.md, \"Redis\")")


def readme_redis_policy():
    """The NetworkPolicy template deploy/kubernetes/README.md gives for an in-cluster Redis."""
    for block in re.findall(r"```yaml\n(.*?)```", KUBE_README.read_text(), re.S):
        for document in yaml.safe_load_all(block):
            if isinstance(document, dict) and document.get("kind") == "NetworkPolicy" and \
                    (document["spec"].get("podSelector", {}).get("matchLabels") or {}).get("app.kubernetes.io/name") == "redis":
                return document
    return None


def test_network_policies(checks, shipped):
    """NetworkPolicies, evaluated: every Redis pod shipped (and the README's template for an in-cluster
    Redis labelled app.kubernetes.io/name: redis) is selected by one that admits the five push services
    on 6379 and refuses other pods (another app, Prometheus, a push label from another namespace), and
    on the cluster bus 16379 only its own nodes; push-console admits no pod; push-ingest admits its API
    (8080) from anywhere and its admin port 9090 only from the monitoring namespace or Prometheus."""
    ns = {"kubernetes.io/metadata.name": "push"}
    push = {s: (ns, {"app.kubernetes.io/name": s, "app.kubernetes.io/part-of": "push"}) for s in PUSH_SERVICES}
    strangers = {
        "another app's pod": (ns, {"app.kubernetes.io/name": "billing"}),
        "the policy import Job's pod (part-of push, not a service)": (ns, {"app.kubernetes.io/name": "push-rabbitmq-policies",
                                                                          "app.kubernetes.io/part-of": "push"}),
        "a pod labelled push-ingest in another namespace": ({"kubernetes.io/metadata.name": "dev"}, push["push-ingest"][1]),
        "Prometheus": ({"kubernetes.io/metadata.name": "monitoring"}, {"app.kubernetes.io/name": "prometheus"}),
    }
    for set_name, documents in shipped:
        policies = [d for d in documents if d.get("kind") == "NetworkPolicy"]
        redis_pods = []
        for workload in [d for d in documents if d.get("kind") in WORKLOAD_KINDS]:
            if any(redis_command((c.get("command") or []) + (c.get("args") or [])) for c in pod_spec(workload).get("containers") or []):
                bus = any(p.get("containerPort") == 16379 for c in pod_spec(workload).get("containers") or [] for p in c.get("ports") or [])
                redis_pods.append((f"{workload['kind']} {workload['metadata']['name']}", pod_labels(workload), bus))
        if set_name.startswith("deploy/kubernetes/*"):
            template = readme_redis_policy()
            if not checks(template is not None, "deploy/kubernetes/README.md gives a NetworkPolicy for an in-cluster Redis (app.kubernetes.io/name: redis)"):
                continue
            redis_pods.append(("the README's in-cluster Redis", {"app.kubernetes.io/name": "redis"}, False))
            checked_policies = policies + [template]
        else:
            checked_policies = policies
        for what, labels, bus in redis_pods:
            bad = []
            selected = networkpolicy_admits(checked_policies, labels, strangers["another app's pod"], 6379)[1]
            if not selected:
                bad.append("no NetworkPolicy selects it")
            for service, source in push.items():
                if not networkpolicy_admits(checked_policies, labels, source, 6379)[0]:
                    bad.append(f"{service} refused on 6379")
                if networkpolicy_admits(checked_policies, labels, source, 16379)[0]:
                    bad.append(f"{service} admitted on the cluster bus 16379")
            for stranger, source in strangers.items():
                for port in (6379, 16379):
                    if networkpolicy_admits(checked_policies, labels, source, port)[0]:
                        bad.append(f"{stranger} admitted on {port}")
            if bus and not networkpolicy_admits(checked_policies, labels, (ns, labels), 16379)[0]:
                bad.append("its own nodes refused on the cluster bus 16379")
            checks(not bad, f"{set_name}: {what}'s pods admit the five push services on 6379, no other pod, and nobody else on 16379",
                   "; ".join(bad))
        console = {"app.kubernetes.io/name": "push-console", "app.kubernetes.io/part-of": "push"}
        admitted = [f"{n} on {port}" for n, source in list(push.items()) + list(strangers.items()) for port in (8090, 8080)
                    if networkpolicy_admits(policies, console, source, port)[0]]
        checks(not admitted, f"{set_name}: push-console admits no pod (kubectl port-forward only)", ", ".join(admitted))
        ingest = {"app.kubernetes.io/name": "push-ingest", "app.kubernetes.io/part-of": "push"}
        bad = []
        if not all(networkpolicy_admits(policies, ingest, s, 8080)[0] for s in strangers.values()):
            bad.append("8080 not open to every pod")
        if not networkpolicy_admits(policies, ingest, ({"kubernetes.io/metadata.name": "monitoring"}, {"app": "grafana-agent"}), 9090)[0]:
            bad.append("9090 refused to the monitoring namespace")
        if not networkpolicy_admits(policies, ingest, ({"kubernetes.io/metadata.name": "observability"}, {"app.kubernetes.io/name": "prometheus"}), 9090)[0]:
            bad.append("9090 refused to Prometheus in another namespace")
        for n, source in list(push.items()) + [("another app's pod", strangers["another app's pod"])]:
            if networkpolicy_admits(policies, ingest, source, 9090)[0]:
                bad.append(f"9090 open to {n}")
        checks(not bad, f"{set_name}: push-ingest admits 8080 from anywhere, 9090 only from the monitoring namespace or Prometheus",
               "; ".join(bad))
