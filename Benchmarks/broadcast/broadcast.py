#!/usr/bin/python3
"""The measuring half of `make bench-broadcast` (Benchmarks/broadcast/run.sh starts and stops the processes).

Given a running stack (RabbitMQ, Redis filled with the tokens, apns-sandbox, push-render, push-send):

1. waits until push-render consumes push.requests and push-send consumes push.send;
2. publishes ONE {"all": true} push request with publisher confirms through pika (a real AMQP client
   that is not the project's code), persistent, application/json, to exchange `push`, key `request`;
3. polls apns-sandbox's GET /stats every --poll-ms until `delivered` (200s) grew by --tokens, and
   prints end-to-end seconds, notifications/s, duplicates, peak RSS and CPU of every process, Redis
   CPU and memory per token and the size of the delivery marks;
4. runs `pushctl bench` against the same sandbox and prints the ratio end-to-end / pushctl bench;
5. measures idle RSS and CPU of every process over --idle-s seconds;
6. prints the targets with PASS/MISS.

Exit status: 0 when the run completed (whatever the figures), 1 when it failed (timeout, stall, a
process died, tokens missing), 2 on bad arguments. Only the standard library and pika.
"""

import argparse
import json
import re
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request

import pika

CLK_TCK = os.sysconf("SC_CLK_TCK")
MB = 1024 * 1024


class RunFailed(Exception):
    pass


def say(text=""):
    print(text, flush=True)


# --- /proc ---------------------------------------------------------------------------------------


def proc_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return False


def cpu_seconds(pid):
    """utime + stime of pid (fields 14 and 15 of /proc/PID/stat), in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return float("nan")


def machine_ticks():
    """(busy, total) clock ticks of all cores since boot (/proc/stat's cpu line; iowait counts as idle)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values[:8])
    return total - idle, total


def status_kb(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return -1


# --- a minimal Redis client (RESP over a socket) ----------------------------------------------------


class Redis:
    def __init__(self, port, host="127.0.0.1"):
        self.sock = socket.create_connection((host, port), timeout=30)
        self.file = self.sock.makefile("rb")

    @staticmethod
    def encode(*args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if not isinstance(a, bytes):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def read(self):
        line = self.file.readline()
        if not line:
            raise RunFailed("Redis closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RunFailed("Redis error: " + rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)[:-2]
            return data.decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RunFailed(f"unexpected Redis reply {line!r}")

    def execute(self, *args):
        self.sock.sendall(self.encode(*args))
        return self.read()

    def pipeline(self, commands):
        self.sock.sendall(b"".join(self.encode(*c) for c in commands))
        return [self.read() for _ in commands]

    def info(self, section):
        text = self.execute("INFO", section)
        out = {}
        for line in text.splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out


# --- what is in Redis ------------------------------------------------------------------------------

# Delivery marks: `sent:<request>:<token>` (a key per token, the original layout) and
# `marks:<mark set>` (a bitmap per send batch).
MARK_KINDS = ("sent", "marks")


def key_kind(key):
    """`push:{app#3.1}:send:rate:device:<hex>` → `push:{app#*}:send:rate:device:*`: a shard's tag
    stands for every shard's, lowercase words are kept, from the first id-like part (digits, long
    hex, anything else) on the rest is `*`; a key that is its own tag (`push:marks:{app:set}`)
    keeps its words before the tag."""
    if key.startswith("push:") and ":{" in key and not key.split(":{", 1)[1].split("}", 1)[1]:
        return key.split(":{", 1)[0] + ":*"
    key = re.sub(r"\{([^}#]*)#[^}]*\}", r"{\1#*}", key)
    head, sep, rest = key.partition("}:")
    if not sep:
        head, rest = "", key
    else:
        head += sep
    kept = []
    parts = rest.split(":")
    for part in parts:
        if part.isalpha() and part.islower() and len(part) < 32:
            kept.append(part)
        else:
            kept.append("*")
            break
    return head + ":".join(kept)


def key_census(redis, sample):
    """Every key by kind: {kind: (keys, estimated bytes, PTTL of one)}, and the seconds it took."""
    started = time.monotonic()
    counts, reservoirs = {}, {}
    cursor = "0"
    while True:
        cursor, keys = redis.execute("SCAN", cursor, "COUNT", 10000)
        for k in keys:
            kind = key_kind(k)
            n = counts.get(kind, 0) + 1
            counts[kind] = n
            r = reservoirs.setdefault(kind, [])
            if len(r) < sample:
                r.append(k)
            else:
                j = random.randrange(n)
                if j < sample:
                    r[j] = k
        if cursor == "0":
            break
        if time.monotonic() - started > 300:
            raise RunFailed("SCAN of Redis took over 300 s")
    out = {}
    for kind, keys in reservoirs.items():
        sizes = [s for s in redis.pipeline([("MEMORY", "USAGE", k, "SAMPLES", "0") for k in keys]) if isinstance(s, int)]
        total = sum(sizes) * counts[kind] / len(sizes) if sizes else 0
        out[kind] = (counts[kind], total, redis.execute("PTTL", keys[0]))
    return out, time.monotonic() - started


# --- apns-sandbox ---------------------------------------------------------------------------------


def sandbox_stats(admin_port):
    with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/stats", timeout=10) as r:
        return json.load(r)


# --- formatting -----------------------------------------------------------------------------------


def verdict(ok):
    return "PASS" if ok else "MISS"


def mb(kb):
    return "?" if kb < 0 else f"{kb / 1024:.1f} MB"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--amqp-url", required=True)
    p.add_argument("--redis-port", type=int, required=True)
    p.add_argument("--admin-port", type=int, required=True)
    p.add_argument("--apns-port", type=int, required=True)
    p.add_argument("--tokens", type=int, required=True)
    p.add_argument("--app", default="com.example.bench")
    p.add_argument("--pid", action="append", default=[], metavar="NAME=PID",
                   help="a process to watch and measure (push-render, push-send, apns-sandbox, RabbitMQ, Redis)")
    p.add_argument("--timeout-s", type=float, default=900)
    p.add_argument("--stall-s", type=float, default=120)
    p.add_argument("--poll-ms", type=float, default=50)
    p.add_argument("--pushctl", required=True)
    p.add_argument("--ca-file", required=True)
    p.add_argument("--key-file", required=True)
    p.add_argument("--key-id", required=True)
    p.add_argument("--team-id", required=True)
    p.add_argument("--connections", type=int, default=2)
    p.add_argument("--pushctl-count", type=int, default=300000)
    p.add_argument("--pushctl-concurrency", type=int, default=1000)
    p.add_argument("--idle-s", type=float, default=30)
    p.add_argument("--mark-sample", type=int, default=2000)
    p.add_argument("--delay-ms", type=int, default=0)
    args = p.parse_args()

    pids = {}
    for item in args.pid:
        name, _, pid = item.partition("=")
        pids[name] = int(pid)
    try:
        return run(args, pids)
    except RunFailed as e:
        say(f"\nFAILED: {e}")
        return 1


def check_alive(pids):
    for name, pid in pids.items():
        if not proc_alive(pid):
            raise RunFailed(f"{name} (pid {pid}) is no longer running")


def wait_for_consumers(conn, pids, timeout=60):
    """Waits until push.requests and push.send have a consumer; returns a usable channel."""
    deadline = time.monotonic() + timeout
    channel = conn.channel()
    while True:
        check_alive(pids)
        counts = {}
        for queue in ("push.requests", "push.send"):
            try:
                counts[queue] = channel.queue_declare(queue=queue, passive=True).method.consumer_count
            except pika.exceptions.ChannelClosedByBroker:
                # Not declared yet (the services declare the topology at start): a passive declare
                # of a missing queue closes the channel.
                counts[queue] = 0
                channel = conn.channel()
        if all(counts.values()):
            return channel
        if time.monotonic() > deadline:
            raise RunFailed(f"no consumers within {timeout} s: {counts}")
        time.sleep(0.1)


def run(args, pids):
    app = args.app
    redis = Redis(args.redis_port)
    service_names = [n for n in ("push-render", "push-send") if n in pids]

    # --- AMQP: a real client that is not the project's ------------------------------------------
    params = pika.URLParameters(args.amqp_url)
    params.heartbeat = 0
    params.blocked_connection_timeout = 60
    conn = pika.BlockingConnection(params)
    channel = wait_for_consumers(conn, pids)
    channel.confirm_delivery()

    request_id = f"broadcast-bench-{int(time.time())}-{random.randrange(1 << 32):08x}"
    request = {
        "id": request_id,
        "app": app,
        "to": {"all": True},
        "localize": "server",
        "payload": {
            "aps": {
                "alert": {"title-loc-key": "SHIPPED_TITLE", "loc-key": "GAME_PLAY_REQUEST_FORMAT", "loc-args": ["Jenna", "Frank"]},
                "badge": 1,
                "sound": "default",
            },
            "gameID": "12345678",
        },
        "push_type": "alert",
        "priority": 10,
    }
    body = json.dumps(request).encode()

    stats0 = sandbox_stats(args.admin_port)
    delivered0 = stats0.get("delivered", 0)
    track = "distinct_delivered" in stats0 and "duplicates" in stats0
    mem0 = int(redis.info("memory")["used_memory"])
    cpu0 = {n: cpu_seconds(pid) for n, pid in pids.items()}
    rss0 = {n: status_kb(pid, "VmRSS") for n, pid in pids.items()}
    busy0, total0 = machine_ticks()

    say(f"publishing one {{\"all\": true}} request ({request_id}) for {args.tokens} tokens; "
        f"sandbox answer delay {args.delay_ms} ms")
    t0 = time.monotonic()
    try:
        channel.basic_publish(
            exchange="push", routing_key="request", body=body, mandatory=True,
            properties=pika.BasicProperties(content_type="application/json", delivery_mode=2, message_id=request_id),
        )
    except (pika.exceptions.UnroutableError, pika.exceptions.NackError) as e:
        raise RunFailed(f"the broker did not confirm the request: {e!r}")
    t_confirm = time.monotonic()
    say(f"  confirmed by RabbitMQ after {(t_confirm - t0) * 1000:.1f} ms")
    conn.close()

    # --- wait for every token -----------------------------------------------------------------------
    progress_key = f"push:{{{app}}}:render:{request_id}"
    poll = args.poll_ms / 1000
    last_print = t0
    last_count, last_change = 0, t0
    render_done_at = None
    peak_sampled = {n: 0 for n in service_names}
    first_at = None
    while True:
        now = time.monotonic()
        check_alive(pids)
        delivered = sandbox_stats(args.admin_port).get("delivered", 0) - delivered0
        if delivered >= args.tokens:
            t_end = time.monotonic()
            break
        if delivered > 0 and first_at is None:
            first_at = now
        if delivered != last_count:
            last_count, last_change = delivered, now
        for n in service_names:
            peak_sampled[n] = max(peak_sampled[n], status_kb(pids[n], "VmRSS"))
        if render_done_at is None:
            if redis.execute("HGET", progress_key, "state") == "done":
                render_done_at = now
        if now - last_print >= 5:
            rss = ", ".join(f"{n} {mb(status_kb(pids[n], 'VmRSS'))}" for n in service_names)
            say(f"  {delivered:>9} delivered after {now - t0:6.1f} s ({delivered / (now - t0):,.0f}/s); RSS {rss}")
            last_print = now
        if now - last_change > args.stall_s:
            raise RunFailed(f"stalled: {delivered} of {args.tokens} delivered, no progress for {args.stall_s:.0f} s")
        if now - t0 > args.timeout_s:
            raise RunFailed(f"timeout: {delivered} of {args.tokens} delivered after {args.timeout_s:.0f} s")
        time.sleep(poll)

    cpu1 = {n: cpu_seconds(pid) for n, pid in pids.items()}
    busy1, total1 = machine_ticks()
    hwm = {n: status_kb(pid, "VmHWM") for n, pid in pids.items()}
    mem1 = int(redis.info("memory")["used_memory"])
    elapsed = t_end - t0
    rate = args.tokens / elapsed
    if render_done_at is None and redis.execute("HGET", progress_key, "state") == "done":
        render_done_at = t_end
    progress = redis.execute("HMGET", progress_key, "sequence", "tokens", "skipped")

    # Late arrivals (redeliveries) after the last token: settle until /stats stops changing (≤ 30 s).
    settle_deadline = time.monotonic() + 30
    prev = sandbox_stats(args.admin_port)
    stable_since = time.monotonic()
    while time.monotonic() < settle_deadline:
        time.sleep(0.5)
        cur = sandbox_stats(args.admin_port)
        if cur.get("requests") != prev.get("requests"):
            prev, stable_since = cur, time.monotonic()
        elif time.monotonic() - stable_since >= 3:
            break
    stats1 = prev
    check_alive(pids)

    delivered_total = stats1.get("delivered", 0) - delivered0
    say("")
    say("== broadcast ==")
    say(f"end to end (publish -> last delivery): {elapsed:.2f} s = {rate:,.0f} notifications/s "
        f"({args.tokens} tokens, polled every {args.poll_ms:.0f} ms)")
    if first_at is not None:
        say(f"  first delivery seen after {first_at - t0:.2f} s")
    if render_done_at is not None:
        say(f"  push-render done (progress record 'done') after <= {render_done_at - t0:.2f} s; "
            f"batches {progress[0]}, tokens {progress[1]}, skipped {progress[2]}")
    else:
        say(f"  push-render progress record: state not 'done' at the end; batches {progress[0]}, tokens {progress[1]}, skipped {progress[2]}")
    other = {k: v for k, v in stats1.items() if k not in ("delivered",)}
    say(f"  sandbox /stats after settling: delivered {delivered_total} (200s since publish); {json.dumps(other, sort_keys=True)}")
    exactly_once = None
    if track:
        distinct = stats1["distinct_delivered"] - stats0["distinct_delivered"]
        dups = stats1["duplicates"] - stats0["duplicates"]
        exactly_once = distinct == args.tokens and dups == 0
        say(f"every token exactly once: distinct_delivered {distinct} of {args.tokens}, duplicates {dups} "
            f"({dups / args.tokens * 100:.3f}%)")
        if distinct < args.tokens:
            raise RunFailed(f"tokens missing: {args.tokens - distinct} of {args.tokens} never delivered")
    else:
        say(f"every token exactly once: duplicates: not counted (apns-sandbox has no --track-duplicates); "
            f"200s beyond the token count: {delivered_total - args.tokens}")

    names = list(pids)
    say("")
    say(f"{'process':<14}{'pid':>8}{'RSS before':>12}{'peak RSS (VmHWM)':>18}{'CPU s (broadcast)':>19}{'% of a core':>13}")
    for n in names:
        d = cpu1[n] - cpu0[n]
        say(f"{n:<14}{pids[n]:>8}{mb(rss0[n]):>12}{mb(hwm[n]):>18}{d:>19.2f}{d / elapsed * 100:>12.0f}%")
    for n in service_names:
        say(f"  {n}: RSS sampled during the run peaked at {mb(peak_sampled[n])}")
    total = sum(cpu1[n] - cpu0[n] for n in names)
    say(f"  all of them: {total:.2f} CPU s over {elapsed:.2f} s ({total / elapsed * 100:.0f}% of one core, {os.cpu_count()} cores); "
        f"{total / args.tokens * 1e6:.1f} CPU µs a notification")
    machine_busy = (busy1 - busy0) / CLK_TCK
    say(f"  the whole machine: {machine_busy:.2f} CPU s busy of {(total1 - total0) / CLK_TCK:.2f} "
        f"({machine_busy / elapsed * 100:.0f}% of one core); everything else (other work, this script): "
        f"{max(0.0, machine_busy - total):.2f} s ({max(0.0, machine_busy - total) / elapsed * 100:.0f}% of one core); "
        f"load average now {open('/proc/loadavg').read().split()[0]}")

    # --- Redis work and memory per token --------------------------------------------------------------
    say("")
    say("== Redis ==")
    redis_cpu_us = None
    if "redis" in pids:
        redis_cpu_us = (cpu1["redis"] - cpu0["redis"]) * 1e6 / args.tokens
        say(f"Redis CPU per token: {redis_cpu_us:.2f} µs ({cpu1['redis'] - cpu0['redis']:.2f} s for {args.tokens} tokens)")
    say(f"Redis used_memory: {mem0 / MB:.1f} MB before, {mem1 / MB:.1f} MB at the last delivery: "
        f"{(mem1 - mem0) / args.tokens:+.1f} bytes a token")
    census, census_seconds = key_census(redis, args.mark_sample)
    say(f"Redis keys after the broadcast, by kind (SCAN of all keys in {census_seconds:.1f} s; "
        f"MEMORY USAGE … SAMPLES 0 over at most {args.mark_sample} sampled keys a kind, scaled to the count):")
    say(f"  {'kind':<48}{'keys':>10}{'MB':>9}{'bytes/key':>11}{'bytes/token':>13}  TTL of a sample")
    marks_bytes = None
    for kind, (count, total_bytes, ttl) in sorted(census.items(), key=lambda kv: -kv[1][1]):
        ttl_text = "none" if ttl == -1 else (f"{ttl / 1000:.0f} s" if isinstance(ttl, int) and ttl >= 0 else "?")
        say(f"  {kind:<48}{count:>10}{total_bytes / MB:>9.1f}{total_bytes / count:>11.0f}{total_bytes / args.tokens:>13.1f}  {ttl_text}")
        if kind == "push:marks:*" or any(kind.startswith(f"push:{{{app}}}:{m}:") for m in MARK_KINDS):
            marks_bytes = (marks_bytes or 0) + total_bytes
    marks_patterns = ", ".join(["push:marks:{<app>:<mark set>}"] + [f"push:{{{app}}}:{m}:*" for m in MARK_KINDS])
    marks_bytes_per_token = None if marks_bytes is None else marks_bytes / args.tokens
    if marks_bytes is None:
        say(f"delivery marks ({marks_patterns}): no keys")
    else:
        say(f"delivery marks ({marks_patterns}): {marks_bytes / MB:.2f} MB = {marks_bytes_per_token:.1f} bytes a token")

    # --- pushctl bench against the same sandbox ---------------------------------------------------------
    say("")
    say("== pushctl bench (same sandbox) ==")
    before = sandbox_stats(args.admin_port).get("delivered", 0)
    cmd = [args.pushctl, "bench", "--endpoint", f"https://127.0.0.1:{args.apns_port}", "--ca-file", args.ca_file,
           "--key-file", args.key_file, "--key-id", args.key_id, "--team-id", args.team_id, "--topic", app,
           "--count", str(args.pushctl_count), "--concurrency", str(args.pushctl_concurrency),
           "--connections", str(args.connections), "--json"]
    say("  " + " ".join(cmd))
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=max(120, args.timeout_s))
    except subprocess.TimeoutExpired:
        raise RunFailed("pushctl bench did not finish in time")
    if out.returncode != 0:
        raise RunFailed(f"pushctl bench exited {out.returncode}: {out.stdout}{out.stderr}")
    bench = json.loads(out.stdout.strip().splitlines()[-1])
    after = sandbox_stats(args.admin_port).get("delivered", 0)
    check_alive(pids)
    bench_rate = bench["notifications_per_second"]
    ratio = rate / bench_rate if bench_rate else 0
    say(f"pushctl bench: {bench_rate:,.0f} notifications/s ({bench['count']} in {bench['seconds']:.2f} s, "
        f"{bench['connections']} connections, {bench['concurrency']} in flight; accepted {bench['accepted']}, "
        f"sandbox counted {after - before}; p50 {bench['p50_ms']:.2f} ms, p99 {bench['p99_ms']:.2f} ms; errors {bench['errors'] or 'none'}; "
        f"peak RSS {bench['peak_rss_mb']} MB)")
    say(f"ratio end-to-end / pushctl bench: {rate:,.0f} / {bench_rate:,.0f} = {ratio:.2f}")

    # --- idle ----------------------------------------------------------------------------------------------
    say("")
    say(f"== idle ({args.idle_s:.0f} s) ==")
    c0 = {n: cpu_seconds(pid) for n, pid in pids.items()}
    i0 = time.monotonic()
    deadline = i0 + args.idle_s
    while time.monotonic() < deadline:
        check_alive(pids)
        time.sleep(min(1, max(0, deadline - time.monotonic())))
    idle_elapsed = time.monotonic() - i0
    c1 = {n: cpu_seconds(pid) for n, pid in pids.items()}
    idle_rss = {n: status_kb(pid, "VmRSS") for n, pid in pids.items()}
    idle_cpu = {n: (c1[n] - c0[n]) / idle_elapsed * 100 for n in pids}
    for n in names:
        say(f"{n:<14} RSS {mb(idle_rss[n]):>10}   CPU {idle_cpu[n]:5.2f}% of a core ({c1[n] - c0[n]:.2f} s)")

    # --- targets -----------------------------------------------------------------------------------------
    say("")
    say("== targets (DESIGN.md) ==")
    say(f"{verdict(elapsed <= 40)}  end to end <= 40 s (quiet machine): {elapsed:.2f} s")
    say(f"{verdict(ratio >= 0.5)}  end-to-end / pushctl bench >= 0.5: {ratio:.2f}")
    for n in service_names:
        say(f"{verdict(0 <= hwm[n] < 200 * 1024)}  {n} peak RSS < 200 MB: {mb(hwm[n])}")
    for n in service_names:
        say(f"{verdict(0 <= idle_rss[n] < 50 * 1024)}  {n} idle RSS < 50 MB: {mb(idle_rss[n])}")
        say(f"{verdict(idle_cpu[n] < 1)}  {n} idle CPU < 1%: {idle_cpu[n]:.2f}%")
    if marks_bytes_per_token is None:
        say("PASS  delivery marks <= 16 bytes a token: no mark keys found")
    else:
        say(f"{verdict(marks_bytes_per_token <= 16)}  delivery marks <= 16 bytes a token: {marks_bytes_per_token:.1f}")
    if exactly_once is None:
        say("----  every token exactly once: duplicates: not counted")
    else:
        say(f"{verdict(exactly_once)}  every token exactly once")
    for n in ("apns-sandbox", "rabbitmq", "redis"):
        if n in pids:
            say(f"info  {n} (not a service): peak RSS {mb(hwm[n])}, idle RSS {mb(idle_rss[n])}, idle CPU {idle_cpu[n]:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
