"""A private stack of the real executables on 127.0.0.1: RabbitMQ and Redis (scripts/rabbitmq.sh and
scripts/redis.sh under an instance name of its own), apns-sandbox and the services of a bin dir.

Ports from `base`: RabbitMQ base (it also derives base+1000, base+20000 and base+21000..21010), Redis
base+1, apns-sandbox base+2 and its admin API base+3, push-ingest, push-render, push-send and
push-feedback base+4..base+7 (PUSH_HTTP_PORT). A check changes what it needs by subclassing:
`app_definitions` (the apps file), `extra_env` (per service), `sandbox_args`. Every process it
spawns is written to `<out>/pids`, so a wrapper can stop what a killed Python left behind.
"""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pika

from harness.net import answers, port_free

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
SERVICES = ["push-ingest", "push-render", "push-send", "push-feedback"]
RMQ_BIN = os.environ.get("PUSH_RABBITMQ_BIN_DIR", "/usr/lib/rabbitmq/bin")
KEY_ID = "HARNESS001"
TEAM_ID = "TEAM000001"


def log(msg):
    print(f"stack | {time.strftime('%H:%M:%S')} {msg}", flush=True)


def note_for_cleanup(line):
    """One line for scripts/pytest.sh's cleanup after pytest ends (also when pytest was killed):
    `pid N` (stopped if it still runs), `server rabbitmq|redis NAME PORT` or `cluster rabbitmq|redis
    NAME` (stopped with their scripts)."""
    path = os.environ.get("PUSH_HARNESS_CLEANUP_FILE")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


class SetupError(Exception):
    """The stack could not be set up (not a check's failure)."""


class Stack:
    APP = "com.example.harness"
    # False for a stack of apns-sandbox alone (clients of its own talk to it): no RabbitMQ, Redis or apps file.
    WITH_SERVERS = True
    # False for services that never reach APNs (push-ingest alone): no apns-sandbox.
    WITH_SANDBOX = True
    # True: the previous run's logs and files go at start (after what it left running is killed).
    CLEAN_OUT = False
    KEY_ID = KEY_ID
    TEAM_ID = TEAM_ID

    def __init__(self, bin_dir, name, base, tokens=1000, log_level="info"):
        self.name = name
        self.tokens = tokens
        self.log_level = log_level
        self.port = dict(amqp=base, redis=base + 1, apns=base + 2, admin=base + 3,
                         **{"push-ingest": base + 4, "push-render": base + 5,
                            "push-send": base + 6, "push-feedback": base + 7})
        self.bin = Path(bin_dir).resolve()
        self.local = Path(os.environ.get("PUSH_LOCAL_DIR", ROOT / ".local")).resolve()
        self.out = self.local / self.name
        self.rmq_dir = self.local / f"rabbitmq-{self.name}"
        self.redis_dir = self.local / f"redis-{self.name}"
        self.amqp_url = f"amqp://guest:guest@127.0.0.1:{self.port['amqp']}/%2f"
        self.redis_url = f"redis://127.0.0.1:{self.port['redis']}/0"
        self.procs = {}          # name -> Popen (services and the sandbox)
        self.logdir = self.out
        self.servers_up = False
        self.ca = self.out / "apns-sandbox-ca.pem"
        self.apps = self.out / "apps.json"
        self.key = self.out / f"AuthKey_{KEY_ID}.p8"
        self.extra_env = {}      # name -> {variable: value} on top of service_env's
        self.services = list(SERVICES)
        self.ingest_key = f"{name}-ingest-key"

    def start(self):
        """Servers, sandbox and `services`, each waited for; a SetupError stops what started."""
        try:
            if self.WITH_SERVERS:
                self.start_servers()
            else:
                self.prepare_out()
            if self.WITH_SANDBOX:
                self.start_sandbox()
            for name in self.services:
                self.start_service(name)
        except BaseException:
            self.stop()
            raise

    def stop(self):
        """Every process (services first, in reverse order of start), then the servers: {name: exit
        status}. A second Ctrl-C or SIGTERM while stopping waits: nothing is left half-stopped."""
        masked = {number: signal.signal(number, signal.SIG_IGN) for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            try:
                statuses = self.stop_all()
            finally:
                self.stop_servers()
            if self.out.exists():
                (self.out / "pids").write_text("")   # all stopped: nothing for the next run to kill
            return statuses
        finally:
            for number, handler in masked.items():
                signal.signal(number, handler)

    def exited(self):
        """{name: exit status} of the processes that ended on their own."""
        return {name: p.returncode for name, p in self.procs.items() if p.poll() is not None}

    def prepare_out(self):
        """The run's directory: what a killed earlier run left running stopped, its files gone with CLEAN_OUT."""
        self.out.mkdir(parents=True, exist_ok=True)
        self.stop_leftovers()
        if self.CLEAN_OUT:
            shutil.rmtree(self.out, ignore_errors=True)
            self.out.mkdir(parents=True)
            (self.out / "pids").write_text("")

    def stop_leftovers(self):
        """Kills what a previous run of this stack started and never stopped (its Python was killed):
        each PID of its pids file that still runs an executable of the bin dir."""
        pids = self.out / "pids"
        for word in (pids.read_text().split() if pids.exists() else []):
            try:
                if Path(f"/proc/{word}/exe").resolve().parent == self.bin:
                    os.kill(int(word), signal.SIGKILL)
                    log(f"killed {word}, left running by an earlier run of {self.name}")
            except (OSError, ValueError):
                pass
        pids.write_text("")

    # servers
    def script(self, which, verb, check=True):
        port = self.port["amqp" if which == "rabbitmq" else "redis"]
        env = dict(os.environ, PUSH_QUIET="1")
        for attempt in range(4):
            r = subprocess.run(["bash", str(SCRIPTS / f"{which}.sh"), verb, "--name", self.name, "--port", str(port)],
                               env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
            # A TIME_WAIT socket of the previous instance may hold the port for a moment.
            if r.returncode == 0 or verb != "start" or "in use" not in r.stderr or attempt == 3:
                break
            log(f"{which}.sh start: a port is in use; retrying in 3 s")
            time.sleep(3)
        if check and r.returncode != 0:
            raise SetupError(f"{which}.sh {verb} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
        return r

    def start_servers(self):
        self.prepare_out()
        self.servers_up = True
        # Every port of a stack (and each one RabbitMQ derives) lies below Linux's ephemeral range
        # (32768-60999), so no client socket the kernel numbers can hold one: CI once lost a run
        # when the node's own connection to its epmd took push-ingest's port (38704) three
        # restarts in a row, since the kernel numbers connections to one peer alike. What can still
        # hold a port is a TIME_WAIT socket of the previous run, for up to 60 s: wait for them.
        for which, data in (("redis", self.redis_dir / "data"), ("rabbitmq", self.rmq_dir / "mnesia")):
            self.script(which, "stop", check=False)
            shutil.rmtree(data, ignore_errors=True)
        a = self.port["amqp"]
        self.wait_ports_free([self.port["redis"], a, a + 1000, a + 20000])
        for which in ("redis", "rabbitmq"):
            note_for_cleanup(f"server {which} {self.name} {self.port['amqp' if which == 'rabbitmq' else 'redis']}")
            self.script(which, "start")
        busy = self.wait_ports_free([p for k, p in self.port.items() if k not in ("amqp", "redis")], timeout=65)
        if busy:
            raise SetupError(f"ports {busy} are still held by other sockets after 65 s (`ss -tanp` shows which)")
        self.key_and_apps()

    def stop_servers(self):
        if not self.servers_up:
            return
        for which, data in (("rabbitmq", self.rmq_dir / "mnesia"), ("redis", self.redis_dir / "data")):
            try:
                self.script(which, "stop", check=False)
            except Exception as e:  # noqa: BLE001
                log(f"could not stop {which}: {e}")
            shutil.rmtree(data, ignore_errors=True)
        self.servers_up = False

    def key_and_apps(self):
        """A fresh P-256 signing key and the apps file of `app_definitions`."""
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(self.key)],
                       check=True, capture_output=True)
        apns = {"key_file": str(self.key), "key_id": KEY_ID, "team_id": TEAM_ID}
        self.apps.write_text(json.dumps({"apps": self.app_definitions(apns)}, indent=2))

    def app_definitions(self, apns):
        """The apps file's apps, given the `apns` credentials every app may use."""
        return {self.APP: {
            "default": True, "environment": "production", "apns": apns,
            "ingest": {"api_keys": [self.ingest_key]},
            "rate_limits": {"per_device_per_hour": 1000, "per_app_per_second": 10000000},
        }}

    def ctl_env(self):
        """The environment RabbitMQ's command-line tools need to reach this stack's node."""
        p = self.port["amqp"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_EPMD_"))}
        env.update(HOME=str(self.rmq_dir), RABBITMQ_NODENAME=f"push-{self.name}@localhost", RABBITMQ_USE_LONGNAME="false",
                   ERL_EPMD_PORT=str(p + 1000), RABBITMQ_CTL_DIST_PORT_MIN=str(p + 21000),
                   RABBITMQ_CTL_DIST_PORT_MAX=str(p + 21010),
                   RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
                   ERL_CRASH_DUMP=str(self.rmq_dir / "erl_crash.dump"))
        return env

    def ctl(self, *argv, timeout=60):
        r = subprocess.run([f"{RMQ_BIN}/rabbitmqctl", "-q", *argv], env=self.ctl_env(), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(argv)}: {r.returncode} {r.stderr.strip()[-500:]}")
        return r.stdout

    def queues(self):
        """{name: (messages, ready, unacked)} of every queue (rabbitmqctl)."""
        out = self.ctl("list_queues", "name", "messages", "messages_ready", "messages_unacknowledged", "--formatter", "json")
        return {q["name"]: (q["messages"], q["messages_ready"], q["messages_unacknowledged"]) for q in json.loads(out or "[]")}

    def redis(self, *argv, timeout=30):
        r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(self.port["redis"]), *argv],
                           capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise RuntimeError(f"redis-cli {' '.join(argv)}: {r.stderr.strip()}")
        return r.stdout.strip()

    def redis_pipe(self, commands, timeout=120):
        """Runs many commands (lists of words without spaces) through one redis-cli; returns replies."""
        text = "".join(" ".join(c) + "\n" for c in commands)
        r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(self.port["redis"])], input=text,
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"redis-cli: {r.stderr.strip()}")
        return r.stdout.splitlines()

    def reset_data(self):
        """Every queue and exchange deleted, Redis flushed: the next services declare a fresh topology."""
        names = list(self.queues())
        exchanges = ["push", "push.events"]
        conn = pika.BlockingConnection(pika.URLParameters(self.amqp_url))
        try:
            ch = conn.channel()
            for q in names:
                ch.queue_delete(q)
            for x in exchanges:
                ch.exchange_delete(x)
        finally:
            conn.close()
        self.redis("FLUSHALL")

    def wait_ports_free(self, ports, timeout=75):
        deadline = time.time() + timeout
        said = False
        while True:
            busy = [p for p in ports if not port_free(p)]
            if not busy or time.time() > deadline:
                return busy
            if not said:
                log(f"waiting for ports {busy} (other sockets, e.g. TIME_WAIT, hold them)")
                said = True
            time.sleep(1)

    # processes
    def spawn(self, name, argv, env=None):
        logf = open(self.logdir / f"{name}.log", "ab")
        logf.write(f"=== harness: starting {name} at {time.strftime('%H:%M:%S')}\n".encode())
        logf.flush()
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                             env=env, start_new_session=True, cwd=str(ROOT))
        logf.close()
        self.procs[name] = p
        with open(self.out / "pids", "a") as pids:
            pids.write(f"{p.pid}\n")
        note_for_cleanup(f"pid {p.pid}")
        return p

    def sandbox_args(self):
        """apns-sandbox's options beyond its ports: exact duplicates, and `lost_answers` counting the
        answers a killed client was written but never acknowledged."""
        return ["--record-limit", str(max(1000, self.tokens * 4)), "--track-duplicates", "--confirm-answers"]

    def start_sandbox(self):
        self.ca.unlink(missing_ok=True)
        argv = [str(self.bin / "apns-sandbox"), "--port", str(self.port["apns"]), "--admin-port", str(self.port["admin"]),
                "--ca-out", str(self.ca), *self.sandbox_args()]
        self.spawn("apns-sandbox", argv, env=dict(os.environ, PUSH_LOG_LEVEL="warning"))
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.procs["apns-sandbox"].poll() is not None:
                raise SetupError("apns-sandbox exited at start (see its log)")
            if answers(self.port["admin"], "/healthz") and self.ca.exists() and self.ca.stat().st_size:
                return
            time.sleep(0.1)
        raise SetupError("apns-sandbox did not come up")

    @property
    def services_amqp_url(self):
        """The PUSH_AMQP_URL the services get (the cluster's stack lists every node)."""
        return self.amqp_url

    @property
    def services_redis_url(self):
        return self.redis_url

    def service_env(self, name):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PUSH_")}
        env.update(
            PUSH_AMQP_URL=self.services_amqp_url, PUSH_REDIS_URL=self.services_redis_url, PUSH_APPS_FILE=str(self.apps),
            PUSH_APNS_ENDPOINT=f"https://127.0.0.1:{self.port['apns']}", PUSH_APNS_CA_FILE=str(self.ca),
            PUSH_HTTP_HOST="127.0.0.1", PUSH_HTTP_PORT=str(self.port[name]), PUSH_LOG_LEVEL=self.log_level,
            PUSH_LOCALIZATION_DIR=str(ROOT / "localization"),
        )
        env.update(self.extra_env.get(name, {}))
        return env

    def start_service(self, name, wait=True):
        self.spawn(name, [str(self.bin / name)], env=self.service_env(name))
        if wait:
            self.wait_ready(name)

    def wait_ready(self, name, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            p = self.procs[name]
            if p.poll() is not None:
                raise SetupError(f"{name} exited with {p.returncode} at start (see {self.logdir / (name + '.log')})")
            if answers(self.port[name], "/readyz"):
                return
            time.sleep(0.1)
        raise SetupError(f"{name} not ready within {timeout}s")

    def kill9(self, name):
        p = self.procs[name]
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)

    def stop_proc(self, name, timeout=15):
        p = self.procs.pop(name, None)
        if p is None or p.poll() is not None:
            return None
        try:
            p.terminate()
            return p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            log(f"{name} did not exit within {timeout}s of SIGTERM; killing it")
            p.kill()
            p.wait(timeout=10)
            return "killed"

    def stop_all(self):
        """Services first (they drain; the last started first), then the sandbox: {name: exit status}."""
        order = [name for name in self.procs if name != "apns-sandbox"][::-1] + ["apns-sandbox"]
        return {name: self.stop_proc(name) for name in order if name in self.procs}

    # what an operator and a check read
    def pushctl(self, *argv, stdin="", env=None, timeout=120):
        """pushctl with none of this shell's PUSH_ variables but `env`'s."""
        clean = {k: v for k, v in os.environ.items() if not k.startswith("PUSH_")}
        return subprocess.run([str(self.bin / "pushctl"), *argv], input=stdin, capture_output=True, text=True,
                              timeout=timeout, env=dict(clean, **(env or {})), cwd=str(ROOT))

    def console_hash(self, subcommand, secret):
        """What `pushctl console hash-password|hash-key` prints for `secret` on stdin (its last line)."""
        r = self.pushctl("console", subcommand, stdin=secret)
        lines = [line.strip() for line in r.stdout.splitlines() if line.strip()]
        if r.returncode != 0 or not lines:
            raise SetupError(f"`pushctl console {subcommand}` failed (exit {r.returncode}): "
                             f"{(r.stderr or r.stdout).strip()[-600:] or 'no output'}")
        return lines[-1]

    def log_text(self, name):
        path = self.logdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def log_records(self, name):
        """The JSON lines of a process's log."""
        records = []
        for line in self.log_text(name).splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
        return records

    def pidfile(self, path):
        try:
            return int(Path(path).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
