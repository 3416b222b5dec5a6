"""Each producer example in examples/producers/ publishes a push request as printed in its header;
the push must reach apns-sandbox on the user's device and the request's report must say delivered."""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import APP, ROOT, wait_for

EXAMPLES = ROOT / "examples" / "producers"
DEBIAN_GOPATH = "/usr/share/gocode"


def go_command():
    """`go run .` the Debian way (GOPATH mode with golang-github-rabbitmq-amqp091-go-dev), so no
    module download is needed here; with network access `go mod tidy && go run .` does the same."""
    if shutil.which("go") is None or not Path(DEBIAN_GOPATH, "src/github.com/rabbitmq/amqp091-go").is_dir():
        pytest.fail("go or Debian's amqp091-go is missing (scripts/checks/system.sh installs golang-go golang-github-rabbitmq-amqp091-go-dev)")
    cache = Path(os.environ.get("PUSH_LOCAL_DIR", ROOT / ".local")) / "go-cache"
    env = {"GO111MODULE": "off", "GOPATH": DEBIAN_GOPATH, "GOCACHE": str(cache), "GOFLAGS": ""}
    return ["go", "run", "."], env


PRODUCERS = {
    "python-pika": lambda: ([sys.executable, "publish.py"], {}),
    "python-aio-pika": lambda: ([sys.executable, "publish.py"], {}),
    "go": go_command,
}


@pytest.mark.parametrize("producer", sorted(PRODUCERS))
def test_producer_example_delivers(stack, producer):
    token = hashlib.sha256(producer.encode()).hexdigest()
    user = f"user-{producer}"
    request_id = f"example-{producer}"
    alert = f"Hello from the {producer} example"
    stack.register(token, user)

    argv, extra_env = PRODUCERS[producer]()
    dash = "-" if producer == "go" else "--"
    arguments = [f"{dash}id", request_id, f"{dash}app", APP, f"{dash}user", user, f"{dash}alert", alert]
    result = subprocess.run(argv + arguments, cwd=EXAMPLES / producer, env=dict(stack.producer_env(), **extra_env),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{producer} exited {result.returncode}: {result.stderr[-2000:]}"
    assert result.stdout.strip() == f"published {request_id}"

    got = wait_for(f"apns-sandbox receiving {request_id}", lambda: stack.deliveries(token))
    assert len(got) == 1, got
    assert got[0]["payload"]["aps"]["alert"] == alert
    report = wait_for(f"{request_id}'s report being done", lambda: (r := stack.report(request_id)) and r["state"] == "done" and r)
    assert report["delivered"] == 1 and report["sent"] == 1 and report["failed_total"] == 0, report


def test_unroutable_publish_fails_the_producer(stack):
    """A producer that publishes to a missing exchange says so and exits non-zero (the examples
    check their confirms; nothing is silently lost)."""
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch, "publish.py")
        script.write_text((EXAMPLES / "python-pika" / "publish.py").read_text().replace('"push", "request"', '"push", "no-such-route"'))
        result = subprocess.run([sys.executable, str(script), "--id", "unroutable", "--app", APP, "--user", "nobody"],
                                env=stack.producer_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "did not take request unroutable" in result.stderr, result
