"""The chaos suite (`make chaos`, `make chaos-smoke`): faults in the middle of a broadcast. Each
scenario at each latency is a test (`-k kill-send` selects by name, `--list` names them).

    scripts/chaos.sh [--scenario NAME ...] [--latency 0|150|both] [--tokens N] [--list]
                     [--smoke | --cluster] [--bin-dir DIR] [--drain-timeout S] [--json FILE] [-k TEXT]

Each scenario runs on a private stack on 127.0.0.1: RabbitMQ and Redis (scripts/rabbitmq.sh and
scripts/redis.sh, instance `chaos`, or `chaos-smoke` with --smoke), apns-sandbox and the four
services (the executables of --bin-dir, default .build/release). Ports: 7901 RabbitMQ, 7902 Redis,
7903 apns-sandbox, 7904 its admin API, 7905-7908 push-ingest, push-render, push-send and
push-feedback (PUSH_HTTP_PORT); --smoke uses 7951-7958. RabbitMQ also derives epmd PORT+1000 and
distribution ports PORT+20000, PORT+21000..21010 (scripts/rabbitmq.sh).

Per scenario: queues deleted and Redis flushed (RabbitMQ and Redis themselves are fresh at the start
of the run), a fresh apns-sandbox and fresh services; N tokens (default 100,000, with users and
topics) registered through `push.registrations` with pika; 1% of them (5% for kill-feedback, at
least 10) made dead in the sandbox (410 Unregistered); one `{"all": true}` push request published
with confirms; the scenario's fault injected at ~30% delivered (or mid fan-out: push-render's
`push_render_batches_published_total` at 30% of the expected batches, with PUSH_RENDER_ROUND_TOKENS
= tokens/10 so there are rounds to interrupt; or with dead tokens being reported);
then the run waits until drained (sandbox answers stable, every queue but push.dead empty, bounded by
--drain-timeout) and checks: 0 lost live tokens; duplicates <= the honest bound (the table's
`bound`), which is apns-sandbox's own count, not push-send's: `lost_answers` in its /stats, the
notifications it accepted whose answers push-send may never have had (on connections dropped or
killed, those not acknowledged by a PING written after them, `--confirm-answers`; and streams reset
before their answer), so 0 where no connection died and no answer was late; every dead token gone
from its record, its token set, its user's set and its topic sets, and the live ones filling the
token and topic sets exactly; nothing left in any queue (rabbitmqctl list_queues, unacked included),
push.dead included (no dead letter is intended); the request's report done, with sent = the tokens
registered, delivered = the distinct tokens the sandbox accepted, failed = removed = the dead tokens,
and unchanged when read again 15 s later; every service exits 0 on SIGTERM at the end. The fault is
checked too: a trigger that fires only after every live token was delivered, a kill of a process
that was not running or did not die, a broker close that closed nothing, a service that exited on
its own each fail the row. Duplicates are counted by apns-sandbox (`--track-duplicates`).
Every scenario runs at loopback speed and with the sandbox answering after 150 ms (--latency).

Prints a table of every scenario run after pytest's report (and writes it as JSON with --json);
exits 1 if any scenario failed, 3 when the stack could not be set up. Logs:
.local/chaos[-smoke|-cluster]/<scenario>-<latency>/<service>.log.
"""

import collections
import hashlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pika
import pytest
from harness import registry_keys
from harness.net import http_json, metric
from harness.stack import SCRIPTS, SERVICES, SetupError, Stack, note_for_cleanup

APP = "com.example.chaos"


def log(msg):
    print(f"chaos | {time.strftime('%H:%M:%S')} {msg}", flush=True)


class ChaosStack(Stack):
    """The stack of one chaos run: 127.0.0.1:7901-7908 (7951-7958 with --smoke)."""

    APP = APP

    def __init__(self, bin_dir, smoke, tokens, drain_timeout, name=None):
        super().__init__(bin_dir, name or ("chaos-smoke" if smoke else "chaos"), 7951 if smoke else 7901, tokens=tokens)
        self.drain_timeout = drain_timeout
        self.ingest_key = "chaos-ingest-key"


class ClusterStack(ChaosStack):
    """The stack of --cluster: a 3-node RabbitMQ cluster (scripts/rabbitmq-cluster.sh, nodes on
    127.0.0.1:8300, 8320, 8340; epmd 9300) and a Redis Cluster of 3 masters with a replica each
    (scripts/redis-cluster.sh, 127.0.0.1:8361-8366, node timeout 2 s), apns-sandbox on 8351 (admin
    8352) and the services on 8353-8356, each given every broker in PUSH_AMQP_URL, the cluster's seeds
    in PUSH_REDIS_URL (redis+cluster://) and PUSH_AMQP_QUORUM_SIZE=3. Tools (pika, redis-cli -c,
    rabbitmqctl) talk to whichever node is running."""

    RABBIT_PORT = 8300
    REDIS_PORT = 8361

    def __init__(self, bin_dir, tokens, drain_timeout):
        super().__init__(bin_dir, False, tokens, drain_timeout, name="chaos-cluster")   # its files in .local/chaos-cluster
        base = 8350
        self.port = dict(apns=base + 1, admin=base + 2, **{"push-ingest": base + 3, "push-render": base + 4,
                                                            "push-send": base + 5, "push-feedback": base + 6})
        self.rabbit_nodes = [self.RABBIT_PORT + 20 * i for i in range(3)]
        self.redis_nodes = [self.REDIS_PORT + i for i in range(6)]
        self.rabbit_down = set()
        self.redis_down = set()

    # the clusters
    def cluster_script(self, which, *argv, check=True, timeout=300):
        r = subprocess.run(["bash", str(SCRIPTS / f"{which}-cluster.sh"), *argv, "--name", self.name],
                           env=dict(os.environ, PUSH_QUIET="1"), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise SetupError(f"{which}-cluster.sh {' '.join(argv)} failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-2000:]}")
        return r.stdout

    def start_servers(self):
        self.prepare_out()
        self.servers_up = True
        for which in ("redis", "rabbitmq"):
            note_for_cleanup(f"cluster {which} {self.name}")
            self.cluster_script(which, "stop", check=False)
        for d in self.local.glob(f"rabbitmq-{self.name}*"):
            shutil.rmtree(d, ignore_errors=True)
        for d in self.local.glob(f"redis-{self.name}*"):
            shutil.rmtree(d, ignore_errors=True)
        t = time.time()
        self.cluster_script("redis", "start", "--port", str(self.REDIS_PORT))
        self.cluster_script("rabbitmq", "start", "--port", str(self.RABBIT_PORT))
        log(f"  clusters up in {time.time() - t:.0f}s: RabbitMQ {self.rabbit_nodes}, Redis {self.redis_nodes}")
        self.key_and_apps()

    def stop_servers(self):
        if not self.servers_up:
            return
        for which in ("rabbitmq", "redis"):
            try:
                self.cluster_script(which, "stop", check=False)
            except Exception as e:  # noqa: BLE001
                log(f"could not stop the {which} cluster: {e}")
        self.servers_up = False

    @property
    def amqp_url(self):
        port = next(p for p in self.rabbit_nodes if p not in self.rabbit_down)
        return f"amqp://guest:guest@127.0.0.1:{port}/%2f"

    @amqp_url.setter
    def amqp_url(self, _value):
        pass

    @property
    def redis_url(self):
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.redis_nodes)

    @redis_url.setter
    def redis_url(self, _value):
        pass

    @property
    def services_amqp_url(self):
        first, *rest = self.rabbit_nodes
        return f"amqp://guest:guest@127.0.0.1:{first}/%2f," + ",".join(f"127.0.0.1:{p}" for p in rest)

    def service_env(self, name):
        env = super().service_env(name)
        env["PUSH_AMQP_QUORUM_SIZE"] = "3"
        return env

    def ctl(self, *argv, timeout=60):
        index = next(i for i, p in enumerate(self.rabbit_nodes) if p not in self.rabbit_down) + 1
        r = subprocess.run(["bash", str(SCRIPTS / "rabbitmq.sh"), "ctl", "--name", f"{self.name}-{index}", "--", "-q", *argv],
                           env=dict(os.environ, PUSH_QUIET="1"), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(argv)}: {r.returncode} {r.stderr.strip()[-500:]}")
        return r.stdout

    def redis_cli(self):
        port = next(p for p in self.redis_nodes if p not in self.redis_down)
        return ["redis-cli", "-c", "-h", "127.0.0.1", "-p", str(port)]

    def redis(self, *argv, timeout=30):
        r = subprocess.run([*self.redis_cli(), *argv], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise RuntimeError(f"redis-cli {' '.join(argv)}: {r.stderr.strip()}")
        return r.stdout.strip()

    def redis_pipe(self, commands, timeout=120):
        text = "".join(" ".join(c) + "\n" for c in commands)
        r = subprocess.run(self.redis_cli(), input=text, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"redis-cli: {r.stderr.strip()}")
        return r.stdout.splitlines()

    def reset_data(self):
        names = list(self.queues())
        conn = pika.BlockingConnection(pika.URLParameters(self.amqp_url))
        try:
            ch = conn.channel()
            for q in names:
                ch.queue_delete(q)
            for x in ["push", "push.events"]:
                ch.exchange_delete(x)
        finally:
            conn.close()
        for port in self.redis_nodes:
            if port in self.redis_down:
                continue
            role = subprocess.run(["redis-cli", "-p", str(port), "ROLE"], capture_output=True, text=True, timeout=10).stdout
            if role.startswith("master"):
                subprocess.run(["redis-cli", "-p", str(port), "FLUSHALL"], capture_output=True, text=True, timeout=30)

    def replication_lag(self, port):
        """How far the replicas of the master on `port` were behind it, in bytes of its replication
        stream (what a failover now would lose of the writes it confirmed)."""
        try:
            r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "INFO", "replication"],
                               capture_output=True, text=True, timeout=5, stdin=subprocess.DEVNULL)
            info = dict(line.split(":", 1) for line in r.stdout.splitlines() if ":" in line)
            offset = int(info.get("master_repl_offset", "0"))
            lags = [offset - int(dict(kv.split("=", 1) for kv in v.split(",")).get("offset", "0"))
                    for k, v in info.items() if k.startswith("slave") and k[5:].isdigit()]
            return f"its replicas {', '.join(f'{lag} bytes' for lag in lags) or 'none'} behind"
        except (subprocess.SubprocessError, ValueError) as e:
            return f"replication lag unknown ({e})"

    def keys_of_token(self, token):
        """Every key that names `token`, on every master (its record, its removal note)."""
        found = []
        for i, port, role, _ in self.redis_nodes_table():
            if role != "master":
                continue
            try:
                r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "--scan", "--pattern", f"*{token}*"],
                                   capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
                found += [k for k in r.stdout.split() if k]
            except subprocess.SubprocessError as e:
                found.append(f"(127.0.0.1:{port} not scanned: {e})")
        return found

    def redis_nodes_table(self):
        """[(index, port, role, slot ranges)] from scripts/redis-cluster.sh nodes."""
        rows = []
        for line in self.cluster_script("redis", "nodes").splitlines():
            f = line.split()
            if len(f) >= 3:
                rows.append((int(f[0]), int(f[1]), f[2], f[3:]))
        return rows


# --- scenarios ------------------------------------------------------------------------------------

class Run:
    """One scenario at one latency: state shared by its fault actions."""

    def __init__(self, stack, scenario, latency, tokens):
        self.stack = stack
        self.scenario = scenario
        self.latency = latency
        self.tokens = tokens
        self.dead = []
        self.live = []
        self.in_flight_at_kills = []   # push-send's in-flight gauge just before each kill -9
        self.process_died = False
        self.notes = []
        self.injected_at = []          # (label, fraction delivered)
        self.clear_at = None
        self.known_connections = {}
        self.window_at_kills = []      # push-send's push_send_window_size just before each kill -9
        self.failures = []             # what a scenario's own checks found (added to the result's why)
        self.connections_at = None     # the sandbox's accepted connections when the GOAWAY faults began

    def note(self, text):
        self.notes.append(text)
        log(f"  {text}")

    # fault actions -------------------------------------------------------------------------------
    def kill_service(self, name):
        st = self.stack
        if name == "push-send":
            in_flight = metric(st.port["push-send"], "push_send_in_flight")
            window = metric(st.port["push-send"], "push_send_window_size")
            self.in_flight_at_kills.append(int(in_flight or 0))
            self.window_at_kills.append(int(window or 0))
            self.note(f"kill -9 push-send (push_send_in_flight {in_flight}, push_send_window_size {window})")
        else:
            self.note(f"kill -9 {name}")
        process = st.procs.get(name)
        if process is None or process.poll() is not None:
            # Killing what had already gone proves nothing about the kill.
            self.failures.append(f"{name} was not running when the scenario killed it")
        self.process_died = True
        st.kill9(name)
        if process is not None and process.returncode != -signal.SIGKILL:
            self.failures.append(f"kill -9 {name} did not kill it (exit status {process.returncode})")
        time.sleep(1.0)
        st.start_service(name, wait=False)

    def rabbit(self, mode):
        st = self.stack
        if mode == "stop":
            self.note("RabbitMQ stopped (rabbitmqctl stop)")
            st.script("rabbitmq", "stop")
        else:
            pid = st.pidfile(st.rmq_dir / "rabbitmq.pid")
            if pid is None:
                raise RuntimeError("no RabbitMQ pid")
            self.note(f"kill -9 RabbitMQ (beam pid {pid})")
            os.kill(pid, signal.SIGKILL)
            deadline = time.time() + 10
            while time.time() < deadline and Path(f"/proc/{pid}").exists():
                time.sleep(0.05)
            if Path(f"/proc/{pid}").exists():
                self.failures.append(f"kill -9 of RabbitMQ (pid {pid}) left it running")
            st.script("rabbitmq", "stop", check=False)   # leftovers: launcher session, epmd
        time.sleep(2.0)
        a = st.port["amqp"]
        st.wait_ports_free([a, a + 1000, a + 20000], timeout=30)
        t = time.time()
        st.script("rabbitmq", "start")
        self.note(f"RabbitMQ started again ({time.time() - t:.1f}s)")

    def redis(self, mode):
        st = self.stack
        pid = st.pidfile(st.redis_dir / "redis.pid")
        if mode == "shutdown":
            self.note("Redis SHUTDOWN")
            subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(st.port["redis"]), "SHUTDOWN"],
                           capture_output=True, timeout=30)
        else:
            self.note(f"kill -9 Redis (pid {pid})")
            if pid:
                os.kill(pid, signal.SIGKILL)
            else:
                self.failures.append("no Redis pid to kill: the scenario killed nothing")
        deadline = time.time() + 30
        while pid and time.time() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.05)
        if pid and Path(f"/proc/{pid}").exists():
            self.failures.append(f"Redis (pid {pid}) still ran 30 s after its {mode}")
        if st.wait_ports_free([st.port["redis"]], timeout=5):
            self.failures.append(f"Redis still held 127.0.0.1:{st.port['redis']} after its {mode}")
        time.sleep(2.0)
        st.wait_ports_free([st.port["redis"]], timeout=30)
        st.script("redis", "start")
        self.note("Redis started again")

    def cluster_prepare(self):
        """Finds the nodes to kill before the broadcast (rabbitmqctl takes seconds a call): the
        RabbitMQ node push-send's connections use, and the Redis master of the app's registry."""
        st = self.stack
        out = st.ctl("list_connections", "port", "client_properties")
        self.rabbit_listing = out
        # The app's registry is spread over every master: the one holding its first shard.
        slot = int(st.redis("CLUSTER", "KEYSLOT", registry(st).all_token_sets()[0]))

        def serves(ranges):
            for r in ranges:
                a, _, b = r.partition("-")
                if int(a) <= slot <= int(b or a):
                    return True
            return False
        self.redis_slot = slot
        self.redis_serves = serves
        self.redis_victim = next((i, p) for i, p, role, ranges in st.redis_nodes_table() if role == "master" and serves(ranges))

    def cluster_rabbit_kill(self):
        """kill -9 of the RabbitMQ node push-send consumes through (the node its connections use)."""
        st = self.stack
        out = self.rabbit_listing
        ports = [int(line.split("\t", 1)[0]) for line in out.splitlines()
                 if '{"connection_name","push-send@' in line and line.split("\t", 1)[0].isdigit()]
        port = collections.Counter(ports).most_common(1)[0][0] if ports else st.rabbit_nodes[0]
        index = st.rabbit_nodes.index(port) + 1
        users = collections.Counter(int(line.split("\t", 1)[0]) for line in out.splitlines() if line.split("\t", 1)[0].isdigit())
        self.note(f"kill -9 RabbitMQ node {index} (127.0.0.1:{port}, push-send's; {users.get(port, 0)} of "
                  f"{sum(users.values())} client connections on it)")
        st.rabbit_down.add(port)
        st.cluster_script("rabbitmq", "kill-node", str(index))
        self.killed_rabbit = index
        self.process_died = False

    def cluster_rabbit_start(self):
        st = self.stack
        t = time.time()
        st.cluster_script("rabbitmq", "start-node", str(self.killed_rabbit))
        st.rabbit_down.discard(st.rabbit_nodes[self.killed_rabbit - 1])
        self.note(f"RabbitMQ node {self.killed_rabbit} started again and rejoined ({time.time() - t:.1f}s)")

    def cluster_redis_kill(self):
        """kill -9 of the Redis master serving the app's registry (the slot of its token set)."""
        st = self.stack
        slot, serves = self.redis_slot, self.redis_serves
        index, port = self.redis_victim
        self.note(f"kill -9 Redis master {index} (127.0.0.1:{port}, serving slot {slot} of the app's registry); "
                  + st.replication_lag(port))
        st.redis_down.add(port)
        t = time.time()
        st.cluster_script("redis", "kill-node", str(index))
        self.killed_redis = index
        st.cluster_script("redis", "wait")
        promoted = [f"{i} (127.0.0.1:{p})" for i, p, role, ranges in st.redis_nodes_table() if role == "master" and serves(ranges)]
        self.note(f"its replica {', '.join(promoted)} took over {time.time() - t:.1f}s after the kill")

    def cluster_redis_start(self):
        st = self.stack
        st.cluster_script("redis", "start-node", str(self.killed_redis))
        st.redis_down.discard(st.redis_nodes[self.killed_redis - 1])
        st.cluster_script("redis", "wait")
        self.note(f"Redis node {self.killed_redis} started again (a replica now)")

    def faults(self, *faults):
        for f in faults:
            http_json(self.stack.port["admin"], "PUT", "/faults", f)
        self.note("sandbox faults " + " ".join(json.dumps(f, separators=(",", ":")) for f in faults))

    def goaway_faults(self, reason, every=200):
        """GOAWAY after every `every` streams, with `reason` in the frame as APNs writes it."""
        if self.connections_at is None:
            self.connections_at = (int(stats(self.stack).get("connections", 0)), time.monotonic())
        self.faults({"goaway_every": every, "goaway_reason": reason})

    def check_reconnect_rate(self, slots):
        """After GOAWAY faults: push-send opened at most one connection a second per slot (its floor),
        plus the slots themselves, never the connect/disconnect loop Apple treats as an attack."""
        opened_before, since = self.connections_at
        opened = int(stats(self.stack).get("connections", 0)) - opened_before
        seconds = time.monotonic() - since
        ceiling = int(slots * (seconds + 1)) + slots
        self.note(f"connections opened under GOAWAY faults: {opened} in {seconds:.1f} s "
                  f"(ceiling {ceiling}: {slots} slots, one a second each)")
        if opened > ceiling:
            self.failures.append(f"{opened} connections in {seconds:.1f} s under GOAWAY faults > {ceiling}: a reconnect loop")
        self.clear_faults()

    def clear_faults(self):
        http_json(self.stack.port["admin"], "DELETE", "/faults")
        if self.latency:
            http_json(self.stack.port["admin"], "PUT", "/faults", {"delay_ms": self.latency})
        self.note("sandbox faults cleared" + (f" (delay_ms {self.latency} kept)" if self.latency else ""))

    def connection_pids(self, service):
        out = self.stack.ctl("list_connections", "-s", "pid", "client_properties")
        return [line.split("\t", 1)[0] for line in out.splitlines()
                if f'{{"connection_name","{service}@' in line]

    def close_connections(self, service):
        """Closes the service's connections, looked up before the broadcast (rabbitmqctl takes 0.5-3 s
        a call on a busy machine), or now if those are gone."""
        st = self.stack
        pids = self.known_connections.get(service) or self.connection_pids(service)
        closed = 0
        for pid in pids:
            try:
                st.ctl("close_connection", pid, "chaos: closed by the broker")
                closed += 1
            except RuntimeError as e:
                self.note(f"close_connection {pid}: {e}")
        if not closed:
            for pid in self.connection_pids(service):
                st.ctl("close_connection", pid, "chaos: closed by the broker")
                closed += 1
        self.note(f"closed {closed} AMQP connection(s) of {service}")
        if not closed:
            self.failures.append(f"no AMQP connection of {service} was closed: the fault did nothing")


# Each scenario: events (trigger, action). Triggers: ("delivered", f) = sandbox accepted >= f of the live
# tokens; ("batches", f) = push-render published >= f of the expected batches; ("refused", f) = the
# sandbox answered 410 to >= f of the dead tokens; ("after", s) = s seconds after the previous event.
SCENARIOS = collections.OrderedDict([
    ("kill-send", dict(doc="kill -9 push-send at 30% and 60% delivered, restarted", events=[
        (("delivered", 0.3), lambda r: r.kill_service("push-send")),
        (("delivered", 0.6), lambda r: r.kill_service("push-send"))])),
    ("kill-render", dict(doc="kill -9 push-render mid fan-out (30% of its batches), restarted", render_rounds=True, events=[
        (("batches", 0.3), lambda r: r.kill_service("push-render"))])),
    ("kill-feedback", dict(doc="kill -9 push-feedback while dead tokens are reported, restarted", dead_share=0.05, events=[
        (("refused", 0.3), lambda r: r.kill_service("push-feedback"))])),
    ("rabbit-stop", dict(doc="RabbitMQ stopped and started at 30% delivered", events=[
        (("delivered", 0.3), lambda r: r.rabbit("stop"))])),
    ("rabbit-kill", dict(doc="RabbitMQ kill -9 and started at 30% delivered", events=[
        (("delivered", 0.3), lambda r: r.rabbit("kill"))])),
    ("redis-shutdown", dict(doc="Redis SHUTDOWN and started at 30% delivered", events=[
        (("delivered", 0.3), lambda r: r.redis("shutdown"))])),
    ("redis-kill", dict(doc="Redis kill -9 (AOF everysec) and started at 30% delivered", events=[
        (("delivered", 0.3), lambda r: r.redis("kill"))])),
    ("redis-fanout", dict(doc="Redis SHUTDOWN and started mid fan-out (30% of push-render's batches)", render_rounds=True, events=[
        (("batches", 0.3), lambda r: r.redis("shutdown"))])),
    ("apns-faults", dict(doc="sandbox: 5% 503 Shutdown + 5% 500 + 5% 429 + GOAWAY every 10,000 streams from 30% delivered for 10 s "
                         "(the 500s wait 30 s, not Apple's 15 min, so the row ends in minutes)",
                         env={"push-send": {"PUSH_SEND_SERVER_ERROR_RETRY_S": "30"}}, events=[
        (("delivered", 0.3), lambda r: r.faults({"status": 503, "rate": 0.05, "reason": "Shutdown"}, {"status": 500, "rate": 0.05},
                                                {"status": 429, "rate": 0.05}, {"goaway_every": 10000})),
        (("after", 10), lambda r: r.clear_faults())])),
    ("apns-goaway-reasons", dict(doc="sandbox: GOAWAY every 200 streams saying InvalidProviderToken, then Shutdown, then IdleTimeout "
                                 "(5 s each) from 30% delivered; push-send opens at most one connection a second per slot",
                                 env={"push-send": {"PUSH_SEND_CONNECTIONS": "4"}}, events=[
        (("delivered", 0.3), lambda r: r.goaway_faults("InvalidProviderToken")),
        (("after", 5), lambda r: r.goaway_faults("Shutdown")),
        (("after", 5), lambda r: r.goaway_faults("IdleTimeout")),
        (("after", 5), lambda r: r.check_reconnect_rate(4))])),
    ("apns-drop", dict(doc="sandbox: connections dropped every 2,000 requests from 30% delivered for 10 s", events=[
        (("delivered", 0.3), lambda r: r.faults({"drop_every": 2000})),
        (("after", 10), lambda r: r.clear_faults())])),
    ("apns-timeout", dict(doc="sandbox answers after 2.5 s (push-send timeout 1 s) from 30% delivered for 5 s",
                          env={"push-send": {"PUSH_SEND_REQUEST_TIMEOUT_S": "1"}}, events=[
        (("delivered", 0.3), lambda r: r.faults({"delay_ms": 2500})),
        (("after", 5), lambda r: r.clear_faults())])),
    ("close-send", dict(doc="push-send's AMQP connection closed by the broker at 30% delivered", connections=["push-send"], events=[
        (("delivered", 0.3), lambda r: r.close_connections("push-send"))])),
    ("close-render", dict(doc="push-render's AMQP connection closed by the broker mid fan-out", render_rounds=True,
                          connections=["push-render"], events=[
        (("batches", 0.3), lambda r: r.close_connections("push-render"))])),
])
SMOKE = ["kill-send-once", "rabbit-stop"]
# --cluster: the stores of the issue "past one machine", on their own stack (ClusterStack).
CLUSTER_SCENARIOS = collections.OrderedDict([
    ("cluster-rabbit-node", dict(doc="kill -9 of the RabbitMQ node push-send uses at 30% delivered; started again 10 s later", events=[
        (("delivered", 0.3), lambda r: r.cluster_rabbit_kill()),
        (("after", 10), lambda r: r.cluster_rabbit_start())])),
    ("cluster-redis-master", dict(doc="kill -9 of a Redis master holding part of the app's registry at 30% delivered (its replica takes over); "
                                  "started again once it has", events=[
        (("delivered", 0.3), lambda r: r.cluster_redis_kill()),
        (("after", 2), lambda r: r.cluster_redis_start())])),
])
SCENARIOS["kill-send-once"] = dict(doc="kill -9 push-send once at 30% delivered, restarted (smoke)", smoke_only=True, events=[
    (("delivered", 0.3), lambda r: r.kill_service("push-send"))])


def make_tokens(n, salt):
    return [hashlib.sha256(f"chaos:{salt}:{i}".encode()).hexdigest() for i in range(n)]


def publish_confirmed(amqp_url, exchange, routing_key, bodies, props, window=2000, timeout=300):
    """Publishes `bodies` with publisher confirms, up to `window` unconfirmed at a time, and returns
    once the broker has confirmed every one (a nacked message is published again).

    An unconfirmed burst is not enough: seen under load, a quorum queue dropped 10 and 118 of 100,000
    registrations that were never confirmed to anyone, and the run blamed the services for them.
    """
    state = {"next": 0, "confirmed": 0, "nacked": 0, "error": None, "tag": 0, "pending": {}}
    total = len(bodies)
    if total == 0:
        return 0
    connection = None

    def close():
        if connection.is_open:
            connection.close()

    def publish_more(channel):
        while state["next"] < total and len(state["pending"]) < window:
            index = state["next"]
            state["next"] += 1
            send(channel, index)

    def send(channel, index):
        # Mandatory: an unroutable message comes back (on_return) instead of being confirmed as if stored.
        channel.basic_publish(exchange, routing_key, bodies[index], props, mandatory=True)
        state["tag"] += 1
        state["pending"][state["tag"]] = index

    def on_confirm(frame):
        method = frame.method
        tags = [t for t in state["pending"] if t <= method.delivery_tag] if method.multiple else [method.delivery_tag]
        for tag in tags:
            index = state["pending"].pop(tag, None)
            if index is None:
                continue
            if isinstance(method, pika.spec.Basic.Nack):
                state["nacked"] += 1
                send(state["channel"], index)
            else:
                state["confirmed"] += 1
        if state["confirmed"] == total:
            close()
        elif state["error"] is None:
            publish_more(state["channel"])

    def on_return(_channel, method, _properties, _body):
        state["error"] = f"the broker returned a publish as unroutable ({method.reply_text}): is the topology declared?"
        close()

    def on_channel_closed(_channel, reason):
        if state["confirmed"] < total and state["error"] is None:
            state["error"] = f"the broker closed the channel after {state['confirmed']} of {total} confirms: {reason}"
        close()

    def on_channel(channel):
        state["channel"] = channel
        channel.add_on_close_callback(on_channel_closed)
        channel.add_on_return_callback(on_return)
        channel.confirm_delivery(on_confirm)
        publish_more(channel)

    def on_timeout():
        state["error"] = f"only {state['confirmed']} of {total} publishes confirmed within {timeout}s"
        close()

    def on_open_error(_connection, error):
        state["error"] = f"could not connect: {error}"
        connection.ioloop.stop()

    def on_closed(_connection, reason):
        if state["confirmed"] < total and state["error"] is None:
            state["error"] = f"connection closed after {state['confirmed']} of {total} confirms: {reason}"
        connection.ioloop.stop()

    connection = pika.SelectConnection(
        pika.URLParameters(amqp_url), on_open_callback=lambda c: c.channel(on_open_callback=on_channel),
        on_open_error_callback=on_open_error, on_close_callback=on_closed)
    connection.ioloop.call_later(timeout, on_timeout)
    connection.ioloop.start()
    if state["error"]:
        raise SetupError(state["error"])
    return state["nacked"]


def user_of(index):
    """The user of the index-th token: two tokens a user."""
    return f"user{index // 2}"


def topics_of(index):
    """The topics of the index-th token: every token `chaos`, and one of ten others."""
    return ["chaos", f"t{index % 10}"]


def register(stack, tokens):
    """Publishes one push.registrations message per token (users of 2 tokens, topics), each confirmed
    by the broker, and waits until Redis holds them all."""
    t0 = time.time()
    props = pika.BasicProperties(content_type="application/json", delivery_mode=2)
    bodies = [json.dumps({"app": APP, "token": tok, "user": user_of(i), "locale": "en",
                          "environment": "production", "topics": topics_of(i)}, separators=(",", ":"))
              for i, tok in enumerate(tokens)]
    nacked = publish_confirmed(stack.amqp_url, "push", "registration", bodies, props)
    if nacked:
        log(f"  the broker refused {nacked} registration publishes at first (published again)")
    deadline = time.time() + 60 + len(tokens) / 1000
    count = 0
    while time.time() < deadline:
        count = count_tokens(stack)
        if count >= len(tokens):
            log(f"  {len(tokens)} tokens registered in {time.time() - t0:.1f}s")
            return
        if stack.procs["push-ingest"].poll() is not None:
            raise SetupError("push-ingest exited while registering")
        time.sleep(0.2)
    raise SetupError(f"only {count} of {len(tokens)} tokens in Redis after registering")


def publish_request(stack, request_id):
    conn = pika.BlockingConnection(pika.URLParameters(stack.amqp_url))
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        body = {"id": request_id, "app": APP, "to": {"all": True},
                "payload": {"aps": {"alert": {"title": "Chaos", "body": "Every token once"}, "badge": 1},
                            "chaos": request_id}}
        ch.basic_publish("push", "request", json.dumps(body), pika.BasicProperties(
            content_type="application/json", delivery_mode=2), mandatory=True)
    finally:
        conn.close()


def stats(stack):
    return http_json(stack.port["admin"], "GET", "/stats", timeout=5)


def answered(st):
    return int(st.get("requests", 0))


def run_scenario(stack, name, latency, n_tokens):
    spec = SCENARIOS.get(name) or CLUSTER_SCENARIOS[name]
    r = Run(stack, name, latency, n_tokens)
    stack.logdir = stack.out / f"{name}-{latency}"
    shutil.rmtree(stack.logdir, ignore_errors=True)
    stack.logdir.mkdir(parents=True)
    stack.extra_env = {k: dict(v) for k, v in spec.get("env", {}).items()}
    if spec.get("render_rounds"):
        # Ten rounds of fan-out whatever the token count, so there is a "mid fan-out" to hit.
        stack.extra_env.setdefault("push-render", {})["PUSH_RENDER_ROUND_TOKENS"] = str(max(500, n_tokens // 10))
    log(f"scenario {name} at {latency} ms: {spec['doc']}")
    result = dict(scenario=name, latency=latency, targeted=0, delivered=0, lost=0, duplicates=0, bound=0,
                  drain=None, dead_letters=0, status="FAIL", why=[], notes=r.notes, at=[])

    # fresh data, sandbox and services
    if not stack.servers_up:
        stack.start_servers()
    if isinstance(stack, ClusterStack):
        for which in ("rabbitmq", "redis"):
            stack.cluster_script(which, "start")   # nodes an interrupted scenario left down
        stack.rabbit_down.clear()
        stack.redis_down.clear()
    else:
        try:
            stack.queues()
        except Exception:  # the broker may have been left down by an interrupted scenario
            stack.script("rabbitmq", "start")
        if stack.redis("PING") != "PONG":
            stack.script("redis", "start")
    stack.reset_data()
    stack.wait_ports_free([p for k, p in stack.port.items() if k not in ("amqp", "redis")])
    stack.start_sandbox()
    for s in SERVICES:
        stack.start_service(s, wait=False)
    for s in SERVICES:
        stack.wait_ready(s)

    tokens = make_tokens(n_tokens, f"{name}-{latency}")
    register(stack, tokens)
    dead_n = max(10, int(n_tokens * spec.get("dead_share", 0.01)))
    r.dead = tokens[::max(1, n_tokens // dead_n)][:dead_n]
    dead_set = set(r.dead)
    r.live = [t for t in tokens if t not in dead_set]
    now_ms = int(time.time() * 1000)
    conn = http.client.HTTPConnection("127.0.0.1", stack.port["admin"], timeout=5)
    for t in r.dead:
        conn.request("PUT", f"/tokens/{t}", body=json.dumps({"state": "unregistered", "timestamp": now_ms + 1}),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        if resp.status >= 300:
            raise SetupError(f"PUT /tokens -> {resp.status}")
    conn.close()
    if latency:
        http_json(stack.port["admin"], "PUT", "/faults", {"delay_ms": latency})
    live_n = len(r.live)
    for service in spec.get("connections", []):
        r.known_connections[service] = r.connection_pids(service)
    if isinstance(stack, ClusterStack):
        r.cluster_prepare()
    expected_batches = max(1, n_tokens // 500)

    # the broadcast, the faults
    request_id = f"chaos-{name}-{latency}-{int(time.time())}"
    t_pub = time.time()
    publish_request(stack, request_id)
    events = list(spec["events"])
    last_event_t = t_pub
    event_deadline = t_pub + 120
    while events and time.time() < event_deadline:
        (kind, value), action = events[0]
        try:
            t_call = time.time()
            st = stats(stack)
            if time.time() - t_call > 2:
                r.note(f"apns-sandbox's GET /stats took {time.time() - t_call:.1f}s")
        except OSError:
            time.sleep(0.05)
            continue
        delivered = int(st.get("delivered", 0))
        if kind == "delivered":
            due = delivered >= value * live_n
        elif kind == "refused":
            due = int(st.get("by_status", {}).get("410", 0)) >= value * len(r.dead)
        elif kind == "batches":
            b = metric(stack.port["push-render"], "push_render_batches_published_total", timeout=1)
            due = b is not None and b >= value * expected_batches
        else:  # after
            due = time.time() - last_event_t >= value
        # Everything delivered before the trigger: the fault can no longer test anything, so the row
        # fails (it still fires, for the logs).
        if not due and kind != "after" and delivered >= live_n:
            r.note(f"trigger {kind} {value} not reached before the end of the broadcast; firing late")
            r.failures.append(f"trigger {kind} {value} fired only after every live token was delivered")
            due = True
        if due:
            frac = delivered / max(1, live_n)
            gauge = metric(stack.port["push-send"], "push_send_in_flight", timeout=1)
            r.note(f"trigger {kind} {value}: {delivered} delivered, {time.time() - t_pub:.2f}s after the request, "
                   f"push_send_in_flight {gauge}")
            r.injected_at.append(f"{frac * 100:.0f}%")
            try:
                action(r)
            except Exception as e:  # noqa: BLE001
                result["why"].append(f"fault action failed: {e}")
                r.note(f"fault action failed: {e}")
            last_event_t = time.time()
            events.pop(0)
            continue
        time.sleep(0.02 if kind != "after" else 0.2)
    if events:
        result["why"].append("faults not all injected within 120 s")
    result["at"] = r.injected_at

    # drain
    drain_s, drained, qs = wait_drained(stack, r, t_pub, live_n)
    result["drain"] = drain_s
    if not drained:
        result["why"].append(f"not drained within {stack.drain_timeout}s")

    # check
    accepted = check(stack, r, result, qs, tokens)
    result["why"].extend(r.failures)
    check_report(stack, result, request_id, accepted, r.dead, len(tokens))
    # A service or the sandbox that exited on its own (not one the scenario killed: those were
    # started again) fails the row; stop_all would report it only as "not running".
    for svc, process in stack.procs.items():
        if process.poll() is not None:
            result["why"].append(f"{svc} exited on its own (status {process.returncode}) during the scenario")
    statuses = stack.stop_all()
    for svc, code in statuses.items():
        if code not in (0, None):
            result["why"].append(f"{svc} exited {code} on SIGTERM")
    result["status"] = "PASS" if not result["why"] else "FAIL"
    return result


WORK_QUEUES = ("push.requests", "push.registrations", "push.send", "push.feedback")


def wait_drained(stack, r, t_pub, live_n):
    """Until the sandbox's answers stand still and every queue but push.dead is empty."""
    quiet = 5.0
    deadline = t_pub + stack.drain_timeout
    last, last_change, qs = None, time.time(), {}
    removed_target = len(r.dead)
    while time.time() < deadline:
        try:
            st = stats(stack)
        except OSError:
            time.sleep(0.5)
            continue
        key = (answered(st), int(st.get("delivered", 0)))
        now = time.time()
        if key != last:
            last, last_change = key, now
        if now - last_change >= quiet:
            try:
                qs = stack.queues()
            except Exception as e:  # noqa: BLE001
                log(f"  list_queues: {e}")
                time.sleep(1)
                continue
            busy = {q: v for q, v in qs.items() if q != "push.dead" and v[0] > 0}
            if not busy:
                removed = count_removed(stack, r.dead)
                if removed >= removed_target or now - last_change >= quiet + 10:
                    return last_change - t_pub, True, qs
            time.sleep(1.0)
            continue
        time.sleep(0.25)
    try:
        qs = stack.queues()
    except Exception:  # noqa: BLE001
        pass
    return last_change - t_pub, False, qs


def registry(stack):
    """The app's registry keys (its layout read from Redis)."""
    return registry_keys.Registry(lambda *argv: stack.redis(*argv), APP)


def count_tokens(stack):
    """The app's tokens in every shard."""
    replies = stack.redis_pipe([["SCARD", key] for key in registry(stack).all_token_sets()])
    # redis-cli -c may print "-> Redirected to slot …" lines among the replies: count the numbers only.
    return sum(int(x.strip()) for x in replies if x.strip().isdigit())


def count_removed(stack, dead):
    keys = registry(stack)
    replies = stack.redis_pipe([["SISMEMBER", keys.tokens_set(t), t] for t in dead])
    return sum(1 for x in replies if x.strip() == "0")


def registry_leftovers(stack, tokens, dead):
    """Where the registry disagrees with the scenario: each dead token must be gone from its record,
    its shard's token set, its user's set and both topic sets; the live ones must fill the token
    sets and every topic set exactly (counted per shard). Returns a list of findings."""
    keys = registry(stack)
    dead_set = set(dead)
    commands, owners = [], []
    for i, t in enumerate(tokens):
        if t not in dead_set:
            continue
        places = [("record", ["EXISTS", keys.record(t)]), ("tokens set", ["SISMEMBER", keys.tokens_set(t), t]),
                  ("user set", ["SISMEMBER", keys.user_set(t, user_of(i)), t])]
        places += [(f"topic {topic} set", ["SISMEMBER", keys.topic_set(t, topic), t]) for topic in topics_of(i)]
        for place, command in places:
            commands.append(command)
            owners.append(place)
    replies = [x.strip() for x in stack.redis_pipe(commands) if not x.startswith("-> Redirected")]
    left = collections.Counter(place for place, reply in zip(owners, replies) if reply != "0")
    findings = [f"{n} dead tokens still in the {place}" for place, n in sorted(left.items())]
    live_n = len(tokens) - len(dead_set)
    expected = {"chaos": live_n}
    for i, t in enumerate(tokens):
        if t not in dead_set:
            topic = topics_of(i)[1]
            expected[topic] = expected.get(topic, 0) + 1
    for topic, want in sorted(expected.items()):
        sets = keys.all_topic_sets(topic)
        have = sum(int(x.strip()) for x in stack.redis_pipe([["SCARD", k] for k in sets]) if x.strip().isdigit())
        if have != want:
            findings.append(f"topic {topic}: {have} tokens in its sets, {want} live tokens subscribed")
    return findings


def deliveries(stack):
    """Accepted deliveries by token (from GET /deliveries), and how many carried an apns-collapse-id."""
    data = http_json(stack.port["admin"], "GET", f"/deliveries?limit={stack.tokens * 4 + 1000}", timeout=120)
    items = data.get("deliveries", [])
    collapsed = sum(1 for d in items if "apns-collapse-id" in (d.get("headers") or {}))
    return collections.Counter(d["token"] for d in items), collapsed


def check(stack, r, result, qs, tokens):
    st = stats(stack)
    counts, collapsed = deliveries(stack)
    total = int(st.get("delivered", 0))
    recorded = sum(counts.values())
    live = set(r.live)
    delivered = sum(1 for t in live if counts.get(t, 0) > 0)
    lost = [t for t in r.live if counts.get(t, 0) == 0]
    # Exact from the sandbox (--track-duplicates); /deliveries, kept in full, must agree.
    dups = int(st["duplicates"])
    if recorded == total and total - len(counts) != dups:
        r.note(f"duplicates: /deliveries says {total - len(counts)}, /stats says {dups}")
        dups = total - len(counts)
    stray = [t for t in counts if t not in live]
    if dups:
        r.note(f"{collapsed} of {recorded} recorded deliveries carry apns-collapse-id; sandbox "
               f"goaways {st.get('goaways')}, dropped connections {st.get('dropped_connections')}, "
               f"by status {st.get('by_status')}")
    result.update(targeted=len(tokens), delivered=delivered, lost=len(lost), duplicates=dups,
                  dead_letters=qs.get("push.dead", (0, 0, 0))[0])
    # The honest duplicates are the sandbox's own count, not push-send's: notifications it accepted
    # whose answers push-send may never have had (on connections dropped or killed, answers not
    # acknowledged by a PING sent after them; streams reset before their answer). 0 where nothing
    # was lost.
    bound = int(st["lost_answers"])
    if r.window_at_kills:
        r.note(f"duplicates {dups}, lost answers {bound}; push_send_window_size at the kills {r.window_at_kills}")
    result["bound"] = bound
    if lost:
        result["lost_sample"] = [t for t in lost[:5]]
        result["why"].append(f"{len(lost)} live tokens never accepted (e.g. {lost[0][:16]}…)")
    if dups > bound:
        worst = counts.most_common(3)
        result["dup_sample"] = [f"{t} x{c}" for t, c in counts.most_common(5) if c > 1]
        result["why"].append(f"{dups} duplicates > bound {bound} (most repeated: "
                             + ", ".join(f"{t[:12]}…×{c}" for t, c in worst) + ")")
    if stray:
        result["why"].append(f"{len(stray)} accepted deliveries to dead tokens")
    removed = count_removed(stack, r.dead)
    result["dead_removed"] = f"{removed}/{len(r.dead)}"
    if removed != len(r.dead):
        result["why"].append(f"only {removed} of {len(r.dead)} dead tokens removed from Redis")
    result["why"] += registry_leftovers(stack, tokens, r.dead)
    left = count_tokens(stack)
    if left != len(r.live):
        result["why"].append(f"{left} tokens left in Redis, expected the {len(r.live)} live ones")
    busy = {q: v[0] for q, v in qs.items() if q != "push.dead" and v[0] > 0}
    if busy:
        result["why"].append("messages left in " + ", ".join(f"{q} ({n})" for q, n in sorted(busy.items())))
    if result["dead_letters"]:
        result["why"].append(f"{result['dead_letters']} dead letters in push.dead (none intended)")
        result["dead_letter_sample"] = peek_dead(stack)
    result["stats"] = {k: st.get(k) for k in ("requests", "delivered", "by_status", "by_reason", "goaways",
                                              "dropped_connections", "distinct_delivered", "duplicates") if k in st}
    return int(st["distinct_delivered"])


REPORT_FIELDS = ("state", "sent", "delivered", "failed_total", "retried", "removed")
# A report that agreed must still say the same this long after: no late update may change it.
REPORT_SETTLE_S = 15


def check_report(stack, result, request_id, accepted, dead_tokens, targeted):
    """The request's delivery report (`pushctl request --json`) against the harness's own counts and
    what the sandbox received: done, sent = the tokens the harness registered, delivered = the
    distinct tokens the sandbox accepted, failed_total = removed = the dead tokens, and every token
    sent with one final outcome. A report may take up to push-send's echo of its updates (12 s) to
    recover what a failed-over or killed Redis lost, so it is read again until it agrees or 30 s pass;
    then once more REPORT_SETTLE_S later, and it must not have changed."""
    dead = len(dead_tokens)
    argv = [str(stack.bin / "pushctl"), "request", request_id, "--app", APP, "--json", "--redis-url", stack.services_redis_url]

    def read():
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            return json.loads(done.stdout) if done.returncode == 0 else None
        except (subprocess.TimeoutExpired, ValueError):
            return None

    deadline = time.time() + 30
    t0 = time.time()
    while True:
        report = read()
        why = []
        if report is None:
            why.append(f"no delivery report of {request_id}")
        else:
            if report.get("state") != "done":
                why.append(f"report state {report.get('state')}, not done")
            if report.get("delivered") != accepted:
                why.append(f"report says {report.get('delivered')} delivered, the sandbox accepted {accepted} distinct tokens")
            if report.get("removed") != dead:
                why.append(f"report says {report.get('removed')} removed, {dead} dead tokens")
            if report.get("sent") != targeted:
                why.append(f"report says {report.get('sent')} sent, the harness registered {targeted} tokens")
            if report.get("failed_total") != dead:
                why.append(f"report says {report.get('failed_total')} failed, {dead} dead tokens")
            final = (report.get("delivered") or 0) + (report.get("failed_total") or 0)
            if final != report.get("sent"):
                why.append(f"report: {final} final outcomes for {report.get('sent')} tokens sent")
        if (not why and report is not None and report.get("removed") == dead) or time.time() >= deadline:
            break
        time.sleep(1)
    agreed_after = time.time() - t0
    if not why and report is not None:
        time.sleep(REPORT_SETTLE_S)
        again = read()
        changed = [k for k in REPORT_FIELDS if again is None or again.get(k) != report.get(k)]
        if changed:
            why.append(f"report changed {REPORT_SETTLE_S} s after it agreed: "
                       + ", ".join(f"{k} {report.get(k)} -> {None if again is None else again.get(k)}" for k in changed))
    if report is not None:
        result["report"] = {k: report.get(k) for k in REPORT_FIELDS}
        log("  report: " + ", ".join(f"{k} {v}" for k, v in result["report"].items())
            + f"; the sandbox accepted {accepted} distinct tokens (read {agreed_after:.1f} s after the drain, "
            f"again {REPORT_SETTLE_S} s later)")
    if report is not None and report.get("removed") != dead:
        removed_key = f"push:{{{APP}}}:report:{request_id}:removed"
        members = {x.strip() for x in stack.redis_pipe([["SMEMBERS", removed_key]]) if len(x.strip()) >= 64}
        missing = [t for t in dead_tokens if t not in members]
        log(f"  report says {report.get('removed')} removed of {dead} dead tokens; the removed set holds {len(members)}; "
            f"dead tokens not in it: {len(missing)} (e.g. {missing[:2]})")
        if isinstance(stack, ClusterStack):
            for token in missing[:5]:
                keys = stack.keys_of_token(token)
                log(f"  {token[:16]}…: keys naming it now: {', '.join(keys) or 'none (no record, no removal note)'}")
    result["why"] += why


def peek_dead(stack, n=3):
    out = []
    conn = pika.BlockingConnection(pika.URLParameters(stack.amqp_url))
    try:
        ch = conn.channel()
        for _ in range(n):
            m, props, body = ch.basic_get("push.dead", auto_ack=False)
            if m is None:
                break
            out.append(f"x-push-error={(props.headers or {}).get('x-push-error')!r} body={body[:160]!r}")
        ch.close()   # unacked messages return to the queue
    finally:
        conn.close()
    return out


def print_table(results, write):
    head = ["scenario", "latency", "targeted", "delivered", "lost", "duplicates", "bound", "drain s", "dead letters",
            "dead removed", "fault at", "result"]
    rows = [[r["scenario"], f"{r['latency']} ms", str(r["targeted"]), str(r["delivered"]), str(r["lost"]),
             str(r["duplicates"]), str(r["bound"]), "-" if r["drain"] is None else f"{r['drain']:.1f}",
             str(r["dead_letters"]), r.get("dead_removed", "-"), ",".join(r.get("at", [])) or "-", r["status"]]
            for r in results]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(head)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    write("")
    for row in [head, ["-" * w for w in widths], *rows]:
        write(line(row))


# --- the suite as pytest runs it: what chaos.sh asks for, one test per scenario and latency --------

def chaos_options(config):
    """(cluster, smoke, scenario names, latencies, tokens, drain timeout) from the command line."""
    option = config.getoption
    cluster, smoke = option("--cluster"), option("--smoke")
    catalogue = CLUSTER_SCENARIOS if cluster else SCENARIOS
    names = option("--scenario") or (SMOKE if smoke else [n for n, spec in catalogue.items() if not spec.get("smoke_only")])
    unknown = [n for n in names if n not in catalogue]
    if unknown:
        raise pytest.UsageError(f"{unknown[0]!r} is not a{' cluster' if cluster else ''} scenario (see --list)")
    latency = option("--latency") or ("0" if smoke else "both")
    latencies = {"0": [0], "150": [150], "both": [0, 150]}[latency]
    tokens = option("--tokens") or (3000 if smoke or cluster else 100_000)
    if tokens < 100:
        raise pytest.UsageError("--tokens must be at least 100")
    drain = option("--drain-timeout") or (120 if smoke else 180 if cluster else 300)
    return cluster, smoke, names, latencies, tokens, drain


def pytest_generate_tests(metafunc):
    if "scenario" in metafunc.fixturenames:
        _, _, names, latencies, _, _ = chaos_options(metafunc.config)
        runs = [(name, latency) for latency in latencies for name in names]
        metafunc.parametrize("scenario", runs, ids=[f"{name}-{latency}ms" for name, latency in runs])


@pytest.fixture(scope="module")
def chaos(request, bin_dir):
    """RabbitMQ and Redis (or the clusters) for the whole run; each scenario starts its own sandbox and
    services. At the end: the table of every scenario run, and --json's file."""
    cluster, smoke, _, _, tokens, drain = chaos_options(request.config)
    stack = ClusterStack(bin_dir, tokens, drain) if cluster else ChaosStack(bin_dir, smoke, tokens, drain)
    stack.results = []
    started = time.time()
    try:
        stack.start_servers()
    except SetupError as error:
        stack.stop()
        pytest.exit(f"the chaos stack did not start: {error}", returncode=3)
    except BaseException:   # Ctrl-C, SIGTERM or a hung script while the servers start
        stack.stop()
        raise
    try:
        yield stack
    finally:
        stack.stop()
        print_table(stack.results, request.config.summary_lines.append)
        if request.config.getoption("--json"):
            Path(request.config.getoption("--json")).write_text(json.dumps(stack.results, indent=2, default=str))
        request.config.summary_lines.append(f"logs in {stack.out}; {time.time() - started:.0f}s in all")


def test_scenario(chaos, scenario):
    name, latency = scenario
    try:
        result = run_scenario(chaos, name, latency, chaos.tokens)
    except Exception as e:  # noqa: BLE001  (any error fails the row; the next one starts clean)
        chaos.stop_all()
        result = dict(scenario=name, latency=latency, targeted=chaos.tokens, delivered=0, lost=0, duplicates=0,
                      bound=0, drain=None, dead_letters=0, status="FAIL", why=[f"could not run: {e}"], at=[])
    chaos.results.append(result)
    details = [*result["why"], *(f"lost: {t}" for t in result.get("lost_sample", [])),
               *(f"repeated: {t}" for t in result.get("dup_sample", [])),
               *(f"dead letter: {s}" for s in result.get("dead_letter_sample", []))]
    assert result["status"] == "PASS", f"{name} at {latency} ms:\n  " + "\n  ".join(details)
