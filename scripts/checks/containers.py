#!/usr/bin/env python3
"""Container hygiene checks (run by scripts/checks/containers.sh, which installs the tools).

1. hadolint deploy/Dockerfile: no finding at any level (what is ignored carries its reason in place).
2. The final stage runs as a numeric non-root USER (Kubernetes' runAsNonRoot can only check a
   number) and has a HEALTHCHECK whose script is copied into the image and is valid sh.
3. The HEALTHCHECK script itself: against a running apns-sandbox (its --admin-port) it succeeds,
   against a closed port it fails, for a program it does not know (pushctl) it succeeds; for
   push-console it asks PUSH_HTTP_PORT (the console has no admin port), not PUSH_ADMIN_PORT.
4. The build stage COPYs every top-level directory Package.swift puts a target in (SwiftPM refuses a
   package whose target directory is missing: the image did not build before Benchmarks/ was copied).
   Then the build stage runs, as written, in a scratch copy of the build context (.local/image-build;
   only the apt-get installs are skipped): its Swift tag must be the toolchain the tests ran with,
   every file the runtime stage COPYs --from=build must exist afterwards, every executable product
   whose target is in Sources/ must be among them and start. (A regex read of the RUN line passed
   while SwiftPM built only the last of seven --product options.) And Package.swift's testedVersions,
   which the image builds exactly, must be what the tests resolved (Package.resolved).
5. .dockerignore keeps the build output, local state, the git history, .env, the keys and
   push-console's operators file (config/console-operators.json: COPY config would bake it in) out.
6. docker-compose config -q: docker-compose.yml, and with docker-compose.cluster.yml over it, with a
   .env as `make .env` makes it (in a scratch copy: the repository's own .env is not touched).
7. kubernetes-validate --strict (Kubernetes' own schemas, unknown fields refused) on every manifest
   as it would be applied: deploy/kubernetes/*.yaml, deploy/kubernetes/monitoring/*.yaml, and the
   cluster overlay rendered (its resources with its JSON 6902 patches applied to the targets they
   select). Custom resources (KEDA, the RabbitMQ operator, the Prometheus operator) have no schema
   there: they are listed, not failed.
"""
import argparse
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

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
HEALTHCHECK = ROOT / "deploy" / "healthcheck.sh"
KUBE = ROOT / "deploy" / "kubernetes"


class Report:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"PASS  {what}")
        else:
            self.failed += 1
            print(f"FAIL  {what}" + (f": {detail}" if detail else ""))
        return ok


def dockerfile_stages(text):
    """Each stage's instructions as (INSTRUCTION, arguments), continuation lines joined."""
    stages, cur = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.lstrip().startswith("#") or (not cur and not line.strip()):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        full = (cur + line).strip()
        cur = ""
        instr, _, rest = full.partition(" ")
        if instr.upper() == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((instr.upper(), rest.strip()))
    return stages


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthcheck_runs(report, bin_dir):
    sandbox = Path(bin_dir) / "apns-sandbox"
    if not report.check(sandbox.is_file(), f"apns-sandbox is built in {bin_dir} (for the HEALTHCHECK test)"):
        return
    # Ports nothing else holds now (loopback only), so a stranger cannot answer for the sandbox.
    port, admin = free_port(), free_port()
    while admin == port:
        admin = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        ca = Path(tmp) / "ca.pem"
        process = subprocess.Popen(
            [str(sandbox), "--port", str(port), "--admin-port", str(admin), "--ca-out", str(ca)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # Ready when its admin listener answers (the CA is written before that listener starts).
            deadline = time.monotonic() + 20
            ready = False
            while time.monotonic() < deadline and process.poll() is None and not ready:
                try:
                    with socket.create_connection(("127.0.0.1", admin), timeout=1):
                        ready = True
                except OSError:
                    time.sleep(0.1)
            if not report.check(ready, f"apns-sandbox listens on 127.0.0.1:{admin} (admin) for the HEALTHCHECK test",
                                f"exit status {process.poll()}" if process.poll() is not None else "not within 20 s"):
                return

            def run(cmdline, env=None):
                path = Path(tmp) / "cmdline"
                path.write_bytes(b"\0".join(arg.encode() for arg in cmdline) + b"\0")
                full = dict(os.environ, PUSH_HEALTHCHECK_CMDLINE=str(path), **(env or {}))
                return subprocess.run(["sh", str(HEALTHCHECK)], env=full, capture_output=True, text=True, timeout=15)

            result = run(["/usr/local/bin/apns-sandbox", "--port", str(port), "--admin-port", str(admin)])
            report.check(result.returncode == 0, "HEALTHCHECK: healthy against a running apns-sandbox (its --admin-port)", result.stderr.strip())
            result = run(["/usr/local/bin/apns-sandbox", f"--admin-port={admin}"])
            report.check(result.returncode == 0, "HEALTHCHECK: --admin-port=N read too", result.stderr.strip())
            closed = free_port()
            result = run(["/usr/local/bin/push-send"], {"PUSH_ADMIN_PORT": str(closed)})
            report.check(result.returncode != 0, "HEALTHCHECK: unhealthy when the service's admin port (PUSH_ADMIN_PORT) does not answer",
                         f"exit {result.returncode}")
            result = run(["/usr/local/bin/pushctl", "queues"])
            report.check(result.returncode == 0, "HEALTHCHECK: healthy for a program it does not know (pushctl)", result.stderr.strip())
            # push-console: /healthz on PUSH_HTTP_PORT (the sandbox's admin listener stands in for it).
            result = run(["/usr/local/bin/push-console"], {"PUSH_HTTP_PORT": str(admin), "PUSH_ADMIN_PORT": str(closed)})
            report.check(result.returncode == 0, "HEALTHCHECK: push-console healthy on its PUSH_HTTP_PORT (PUSH_ADMIN_PORT not asked)", result.stderr.strip())
            result = run(["/usr/local/bin/push-console"], {"PUSH_HTTP_PORT": str(closed), "PUSH_ADMIN_PORT": str(admin)})
            report.check(result.returncode != 0, "HEALTHCHECK: push-console unhealthy when its PUSH_HTTP_PORT does not answer", f"exit {result.returncode}")
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


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


def run_build_stage(report, build, final):
    """Runs the build stage's instructions as written, in a scratch copy of the build context under
    .local/image-build (the container's / is that folder): COPY copies from the repository, WORKDIR
    moves, ENV and ARG set variables, RUN runs with sh, except the package installs (apt-get), which
    this machine has made already. Then every file the runtime stage copies from this stage must be
    there, and every shipped program must be among them and start (`--help`)."""
    froms = [rest for instr, rest in build if instr == "FROM"]
    image = froms[0].split()[0] if froms else ""
    version = subprocess.run(["swift", "--version"], capture_output=True, text=True).stdout
    local = re.search(r"Swift version (\d+\.\d+(?:\.\d+)?)", version)
    tag = re.match(r"swift:(\d+\.\d+(?:\.\d+)?)-", image)
    report.check(bool(local and tag and tag.group(1) == local.group(1)),
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
                report.check(False, f"the build stage's COPY {rest} can be run here", "COPY options are not supported by this check")
                return
            *sources, target = rest.split()
            for source in sources:
                destination = IMAGE_BUILD / (workdir / target).relative_to("/")
                if (ROOT / source).is_file() and (target.endswith("/") or len(sources) > 1):
                    destination = destination / Path(source).name
                copy_context(ROOT / source, destination)
        elif instr == "RUN":
            if "apt-get" in rest:
                print("info  build stage: skipped the package install (this machine has installed them)")
                continue
            absolute = [w for w in re.findall(r"(?<![\w$])/[\w./-]+", rest)]
            if not report.check(not absolute, "the build stage's RUN commands name only paths under WORKDIR (so this check can run them)",
                                f"absolute paths {absolute}"):
                return
            print(f"info  build stage: RUN {rest[:140]}{'…' if len(rest) > 140 else ''}", flush=True)
            result = subprocess.run(["sh", "-c", rest], cwd=IMAGE_BUILD / workdir.relative_to("/"), env=env,
                                    capture_output=True, text=True, timeout=3600)
            if not report.check(result.returncode == 0, f"build stage: RUN {rest[:80]}… exits 0",
                                (result.stdout + result.stderr).strip()[-2000:]):
                return
    print(f"info  build stage ran in {time.monotonic() - started:.0f} s")
    shipped = shipped_products()
    copied = [rest.split() for instr, rest in final if instr == "COPY" and rest.startswith("--from=build")]
    programs = set()
    for parts in copied:
        for source in parts[1:-1]:
            path = IMAGE_BUILD / source.lstrip("/")
            if not report.check(path.exists(), f"the runtime stage's COPY --from=build {source} exists after the build stage"):
                continue
            if path.is_dir():
                programs |= {f.name for f in path.iterdir() if f.is_file() and os.access(f, os.X_OK)}
    missing = [p for p in shipped if p not in programs]
    report.check(shipped and not missing, f"the image gets every executable product in Sources/ ({', '.join(shipped)})",
                 f"missing {missing}")
    for parts in copied:
        for source in parts[1:-1]:
            for program in shipped:
                binary = IMAGE_BUILD / source.lstrip("/") / program
                if binary.is_file():
                    result = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
                    report.check(result.returncode == 0, f"the image's {program} starts (--help)", (result.stdout + result.stderr)[-400:])


def tested_versions(report):
    """Package.swift's testedVersions (what the image builds, exactly) agree with what `swift build`
    resolved for the tests (Package.resolved, written by swift build/test)."""
    text = (ROOT / "Package.swift").read_text()
    block = text[text.index("let testedVersions"):]
    block = block[:block.index("]\n")]
    table = dict(re.findall(r'\("([^"]+)", "([^"]+)"\)', block))
    resolved_file = ROOT / "Package.resolved"
    if not report.check(resolved_file.exists(), "Package.resolved exists (swift build ran) to compare testedVersions with"):
        return
    resolved = {pin["location"]: pin["state"].get("version") for pin in json.loads(resolved_file.read_text())["pins"]}
    differ = sorted(f"{url}: tested {resolved.get(url)}, table {table.get(url)}"
                    for url in set(table) | set(resolved) if table.get(url) != resolved.get(url))
    report.check(not differ, f"Package.swift's testedVersions are the {len(resolved)} versions the tests resolved",
                 "; ".join(differ) + " (update testedVersions in Package.swift)")


def pinned_brokers(report):
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
    report.check(not loose, f"every RabbitMQ image is pinned to an exact version ({clusters} RabbitmqCluster with its image)", "; ".join(loose))


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


def kubernetes(report, venv):
    validate = Path(venv) / "bin" / "kubernetes-validate"
    sets = [("deploy/kubernetes/*.yaml", sorted(KUBE.glob("*.yaml")), None)]
    monitoring = sorted((KUBE / "monitoring").glob("*.yaml")) if (KUBE / "monitoring").is_dir() else []
    if monitoring:
        sets.append(("deploy/kubernetes/monitoring/*.yaml", monitoring, None))
    for overlay in sorted(p.parent for p in KUBE.glob("*/kustomization.yaml")):
        try:
            documents = render_overlay(overlay)
        except (ValueError, KeyError, IndexError) as error:
            report.check(False, f"the overlay {overlay.relative_to(ROOT)} renders", str(error))
            continue
        report.check(True, f"the overlay {overlay.relative_to(ROOT)} renders: {len(documents)} resources")
        sets.append((f"{overlay.relative_to(ROOT)} (rendered)", None, documents))
    with tempfile.TemporaryDirectory() as tmp:
        for name, files, documents in sets:
            if documents is not None:
                path = Path(tmp) / (re.sub(r"\W+", "-", name) + ".yaml")
                path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
                files = [path]
            result = subprocess.run([str(validate), "--strict", "--no-warn", *map(str, files)], capture_output=True, text=True, timeout=300)
            failures = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith(("ERROR", "FAIL"))]
            passed = [line for line in result.stdout.splitlines() if line.startswith("INFO") and " passed " in line]
            report.check(result.returncode == 0 and not failures,
                         f"kubernetes-validate --strict {name}: {len(passed)} resources valid",
                         "; ".join(failures) or (result.stdout + result.stderr).strip()[-800:])
            crds = subprocess.run([str(validate), "--strict", *map(str, files)], capture_output=True, text=True, timeout=300)
            kinds = sorted({m.group(1) for m in re.finditer(r"Couldn't find schema for kind (\w+)", crds.stdout + crds.stderr)})
            if kinds:
                print(f"info  {name}: custom resources without a schema there, not validated: {', '.join(kinds)}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--venv", required=True)
    parser.add_argument("--bin-dir", default=str(ROOT / ".build" / "debug"))
    parser.add_argument("--skip-image-build", action="store_true",
                        help="do not run the build stage's commands (a release build: minutes the first time)")
    args = parser.parse_args()
    skip_build = args.skip_image_build
    report = Report()

    hadolint = Path(args.venv) / "bin" / "hadolint"
    result = subprocess.run([str(hadolint), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=120)
    report.check(result.returncode == 0 and not result.stdout.strip(), "hadolint deploy/Dockerfile: no finding",
                 (result.stdout + result.stderr).strip())
    text = DOCKERFILE.read_text()
    for match in re.finditer(r"# hadolint ignore=(\S+)", text):
        before = text[:match.start()].rstrip().splitlines()[-1] if text[:match.start()].strip() else ""
        report.check(before.lstrip().startswith("#") and len(before.strip()) > 20,
                     f"hadolint ignore={match.group(1)} is justified in the comment above it", before)

    stages = dockerfile_stages(text)
    final, build = stages[-1], stages[0]
    users = [rest for instr, rest in final if instr == "USER"]
    user = users[-1] if users else "root"
    uid = user.split(":")[0]
    report.check(uid.isdigit() and int(uid) != 0, f"the image runs as a numeric non-root user (USER {user})")
    checks = [rest for instr, rest in final if instr == "HEALTHCHECK"]
    report.check(bool(checks) and "CMD" in checks[-1], "the image has a HEALTHCHECK", "none")
    copies = [rest for instr, rest in final if instr == "COPY"]
    report.check(any("deploy/healthcheck.sh" in c and "/usr/local/bin/push-healthcheck" in c for c in copies)
                 and (not checks or "/usr/local/bin/push-healthcheck" in checks[-1]),
                 "the HEALTHCHECK's script is copied into the image where it is called")
    result = subprocess.run(["sh", "-n", str(HEALTHCHECK)], capture_output=True, text=True)
    report.check(result.returncode == 0 and os.access(HEALTHCHECK, os.X_OK), "deploy/healthcheck.sh is valid sh and executable", result.stderr)
    healthcheck_runs(report, args.bin_dir)

    copied = {rest.split()[0].rstrip("/") for instr, rest in build if instr == "COPY" and not rest.startswith("--")}
    missing = sorted(package_target_roots() - copied)
    report.check(not missing, f"the build stage copies every directory with targets ({', '.join(sorted(package_target_roots()))})",
                 f"missing {missing}")
    if skip_build:
        print("info  the build stage was not run (--skip-image-build)")
    else:
        run_build_stage(report, build, final)
    tested_versions(report)

    ignored = {line.strip().rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip() and not line.startswith("#")}
    needed = {".build", ".local", ".git", ".env", "config/keys", "config/console-operators.json"}
    report.check(needed <= ignored, ".dockerignore keeps out " + ", ".join(sorted(needed)), f"missing {sorted(needed - ignored)}")

    with tempfile.TemporaryDirectory() as tmp:
        for name in ("docker-compose.yml", "docker-compose.cluster.yml"):
            shutil.copy(ROOT / name, Path(tmp) / name)
        shutil.copytree(ROOT / "deploy", Path(tmp) / "deploy")
        (Path(tmp) / ".env").write_text(
            "RABBITMQ_USER=push\nRABBITMQ_PASSWORD=" + "0" * 48 + "\nRABBITMQ_ERLANG_COOKIE=" + "A" * 32 + "\n")
        for files in (["docker-compose.yml"], ["docker-compose.yml", "docker-compose.cluster.yml"]):
            command = ["docker-compose"] + [arg for f in files for arg in ("-f", f)] + ["config", "-q"]
            result = subprocess.run(command, cwd=tmp, capture_output=True, text=True, timeout=120)
            report.check(result.returncode == 0, " ".join(command), (result.stdout + result.stderr).strip())

    pinned_brokers(report)
    kubernetes(report, args.venv)
    print(f"containers: {report.passed} passed, {report.failed} failed")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
