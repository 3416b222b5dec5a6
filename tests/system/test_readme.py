"""The README's examples, run as printed against `make run`: every ```sh and ```python block of
README.md, in order, from the repository root, in an environment without PUSH_* settings (a
newcomer's shell). Each must exit 0, and every push request a block publishes (an `"id"` in it) must
end delivered in its report. Blocks tagged otherwise (```console, ```text, ```json) are not run."""
import json
import os
import re
import shutil
import signal
import subprocess

import pytest
from conftest import ROOT, wait_for
from harness import net

# make run's ports (scripts/run-local.sh): RabbitMQ (and its derived ports), Redis, apns-sandbox,
# the services and the console.
MAKE_RUN_PORTS = [5672, 6672, 25672, 6379, 2197, 2198, 8080, 9101, 9102, 9103, 8090]
# What answers once make run's stack is up: apns-sandbox's admin API, then each service's readiness.
READY = [(2198, "/healthz"), (8080, "/readyz"), (9101, "/readyz"), (9102, "/readyz"), (9103, "/readyz"), (8090, "/readyz")]
README = ROOT / "README.md"
INSTANCE = "readme"


RUN = {"sh", "python"}
# Blocks shown, not run: commands that do not end (make run), output, other languages.
SHOWN = {"console", "text", "json", "yaml", "mermaid", "swift"}


def fences():
    """(language, code) of every fenced block of the README, in order (indented fences too)."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^ *```([\w+-]*)[^\n]*\n(.*?)^ *```", README.read_text(), re.S | re.M)]


def blocks():
    """(language, code) of every block the README says to run, in order."""
    return [(language, code) for language, code in fences() if language in RUN]


def newcomer_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("PUSH_")}


@pytest.fixture(scope="module")
def make_run(bin_dir):
    """scripts/run-local.sh as `make run` starts it, as instance `readme` with fresh data; stopped
    with Ctrl-C (SIGINT) at the end, which must stop everything and exit 0."""
    busy = [p for p in MAKE_RUN_PORTS if not net.port_free(p)]
    if busy:
        pytest.fail(f"make run's ports {busy} are in use (a `make run` is up?); the README's examples need them")
    local = ROOT / ".local"
    for stale in (local / f"rabbitmq-{INSTANCE}", local / f"redis-{INSTANCE}"):
        shutil.rmtree(stale, ignore_errors=True)
    log_path = local / "system" / "make-run.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "wb")
    env = dict(newcomer_env(), PUSH_RUN_NAME=INSTANCE, PUSH_BIN_DIR=str(bin_dir))
    # A run started in the background (`make test &`, a CI runner) inherits SIGINT ignored, and a
    # shell cannot trap a signal ignored at its start: make run gets Ctrl-C as a terminal gives it.
    process = subprocess.Popen(["bash", "scripts/run-local.sh"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    status = None
    try:
        wait_for("make run saying it runs", lambda: process.poll() is not None or b"press Ctrl-C to stop everything" in log_path.read_bytes(),
                 timeout=180)
        assert process.poll() is None, f"make run exited {process.returncode} (see {log_path})"
        # As a newcomer waits for the services' "listening" lines: every service ready.
        for port, path in READY:
            wait_for(f"make run's 127.0.0.1:{port}{path} answering 200", lambda: process.poll() is not None or net.answers(port, path), timeout=120)
            assert process.poll() is None, f"make run exited {process.returncode} (see {log_path})"
        process.bin_dir = bin_dir
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                status = process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                # The services run in sessions of their own and the servers as daemons: stop them by
                # name, so make run's ports are free for the next run.
                subprocess.run(["pkill", "-KILL", "-f", f"{bin_dir}/(push-|apns-sandbox)"], check=False)
                for server in ("rabbitmq", "redis"):
                    subprocess.run(["bash", f"scripts/{server}.sh", "stop", "--name", INSTANCE], cwd=ROOT, check=False,
                                   capture_output=True, timeout=120)
                pytest.fail(f"make run did not stop within 90 s of Ctrl-C (see {log_path})")
        else:
            status = process.returncode
        log.close()
    assert status in (0, 130), f"make run exited {status} on Ctrl-C (see {log_path})"


def test_readme_has_runnable_examples():
    languages = [language for language, _ in blocks()]
    assert "sh" in languages and "python" in languages, f"README.md's runnable blocks: {languages}"
    # A block tagged otherwise (```bash, ```shell, ```py or none) would be skipped without a word.
    unknown = sorted({language or "(none)" for language, _ in fences()} - RUN - SHOWN)
    assert not unknown, f"README.md has blocks tagged {unknown}: tag runnable ones sh or python, others console or text"


def test_readme_examples_run_as_printed(make_run):
    published = []
    for number, (language, code) in enumerate(blocks(), 1):
        argv = ["bash", "-euo", "pipefail", "-c", code] if language == "sh" else ["/usr/bin/python3", "-c", code]
        result = subprocess.run(argv, cwd=ROOT, env=newcomer_env(), capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"README block {number} ({language}) exited {result.returncode}:\n{code}\n{result.stdout[-1500:]}{result.stderr[-1500:]}"
        if "publish" in code:
            published += re.findall(r'"id"\s*:\s*"([^"]+)"', code)
    assert published, "no README block publishes a push request"
    pushctl = make_run.bin_dir / "pushctl"
    for request_id in published:
        def done():
            r = subprocess.run([str(pushctl), "request", request_id, "--app", "com.example.game", "--json"], cwd=ROOT,
                               env=newcomer_env(), capture_output=True, text=True, timeout=30)
            report = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else None
            return report if report and report["state"] == "done" else None
        report = wait_for(f"the README's request {request_id} being done", done)
        assert report["delivered"] >= 1 and report["failed_total"] == 0, report
