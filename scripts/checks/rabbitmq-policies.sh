#!/usr/bin/env bash
# One source for the work queues' RabbitMQ policy: deploy/rabbitmq/policies.json.
#
#   scripts/checks/rabbitmq-policies.sh [--bin-dir DIR] [--write]
#
# scripts/rabbitmq.sh sets it with rabbitmqctl and docker-compose.yml's rabbitmq-policies imports
# the file itself (scripts/checks/compose.sh checks both on a running broker); Kubernetes cannot
# mount a file from the repository, so deploy/kubernetes/rabbitmq-policies.yaml carries a copy in
# its ConfigMap. Checks that the file is a definitions file of policies (vhost, name, pattern,
# definition each), that the ConfigMap's copy equals it byte for byte, and that the Job imports the
# mounted copy (rabbitmqadmin import). --write rewrites the ConfigMap's copy from the file instead.
# --bin-dir is accepted (scripts/run-tests.sh passes it to every check) and not used.
# Prints what it checked; exits 1 when a check failed, 2 on a usage error.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WRITE=""
while (($#)); do
    case $1 in
        --bin-dir) shift; (($#)) && shift ;;
        --bin-dir=*) shift ;;
        --write) WRITE=1; shift ;;
        -h | --help) sed -n '2,15s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "rabbitmq-policies.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)
"$PY" -c 'import yaml' 2>/dev/null || { echo "rabbitmq-policies.sh: python3-yaml is not installed (run scripts/install-deps.sh)" >&2; exit 3; }

exec "$PY" - "$ROOT" "$WRITE" <<'PYEOF'
import json, re, sys
from pathlib import Path
import yaml

root, write = Path(sys.argv[1]), sys.argv[2] == "1"
source = root / "deploy/rabbitmq/policies.json"
manifest = root / "deploy/kubernetes/rabbitmq-policies.yaml"
failed = 0

def check(ok, what, why=""):
    global failed
    print(f"rabbitmq-policies | {'ok  ' if ok else 'FAIL'} {what}" + ("" if ok or not why else f": {why}"))
    failed += not ok

text = source.read_text()
try:
    policies = json.loads(text)["policies"]
    bad = [p.get("name", "?") for p in policies if not all(isinstance(p.get(k), t) for k, t in
           (("vhost", str), ("name", str), ("pattern", str), ("definition", dict)))]
    check(policies and not bad, f"{source.relative_to(root)} holds {len(policies)} policies, each with vhost, name, pattern and definition", f"incomplete: {bad}")
except (ValueError, KeyError, TypeError) as e:
    check(False, f"{source.relative_to(root)} is a definitions file with policies", str(e))

if write:
    body = "".join("    " + line + "\n" if line else "\n" for line in text.splitlines())
    old = manifest.read_text()
    new, n = re.subn(r"(?ms)^(  policies\.json: \|\n)(.*?)(?=^---$)", lambda m: m.group(1) + body, old)
    if n != 1:
        sys.exit(f"rabbitmq-policies.sh: no `policies.json: |` block followed by --- in {manifest}")
    manifest.write_text(new)
    print(f"rabbitmq-policies | wrote the copy in {manifest.relative_to(root)}")

docs = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
maps = [d for d in docs if d.get("kind") == "ConfigMap"]
jobs = [d for d in docs if d.get("kind") == "Job"]
copy = maps[0].get("data", {}).get("policies.json") if len(maps) == 1 else None
check(copy == text, f"the ConfigMap in {manifest.relative_to(root)} carries {source.relative_to(root)} byte for byte",
      "it differs: run scripts/checks/rabbitmq-policies.sh --write")
ok = False
if len(jobs) == 1 and copy is not None:
    pod = jobs[0]["spec"]["template"]["spec"]
    mounts = {v["name"]: v for v in pod.get("volumes", []) if v.get("configMap", {}).get("name") == maps[0]["metadata"]["name"]}
    for c in pod["containers"]:
        args = c.get("command", []) + c.get("args", [])
        paths = [m["mountPath"].rstrip("/") + "/policies.json" for m in c.get("volumeMounts", []) if m["name"] in mounts]
        ok = ok or ("rabbitmqadmin" in args and "import" in args and args[args.index("import") + 1] in paths)
check(ok, "the Job imports the mounted copy (rabbitmqadmin import)")
sys.exit(1 if failed else 0)
PYEOF
