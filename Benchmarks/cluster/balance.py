#!/usr/bin/python3
"""How a broadcast of one app spreads over a Redis Cluster's masters (`make bench-cluster`).

Given a running stack (Benchmarks/cluster/run.sh: a Redis Cluster filled with the app's tokens,
RabbitMQ, apns-sandbox, push-render and push-send on the cluster): reads each master's keys,
memory, commands processed and CPU time; publishes one {"all": true} push request; waits until
apns-sandbox accepted every production and sandbox token once; reads the masters again and prints,
per master: its slots, the app's shards and tokens on it (pushctl registry status), keys, memory,
the commands it processed during the broadcast and its CPU seconds, each with its share; then the
broadcast's time and rate, and `pushctl bench` on the same sandbox for the ratio.
"""

import argparse
import json
import subprocess
import sys
import time
import urllib.request

import pika


def say(text=""):
    print(text, flush=True)


def redis_info(port, section):
    out = subprocess.run(["redis-cli", "-p", str(port), "INFO", section], capture_output=True, text=True, timeout=10).stdout
    return dict(line.split(":", 1) for line in out.replace("\r", "").splitlines() if ":" in line and not line.startswith("#"))


def master_state(port):
    stats, cpu, memory = redis_info(port, "stats"), redis_info(port, "cpu"), redis_info(port, "memory")
    keys = int(subprocess.run(["redis-cli", "-p", str(port), "DBSIZE"], capture_output=True, text=True, timeout=10).stdout.strip() or 0)
    return {
        "commands": int(stats.get("total_commands_processed", 0)),
        "cpu": float(cpu.get("used_cpu_sys", 0)) + float(cpu.get("used_cpu_user", 0)),
        "memory": int(memory.get("used_memory", 0)),
        "keys": keys,
    }


def stats(admin_port):
    with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/stats", timeout=10) as response:
        return json.loads(response.read())


def share(part, whole):
    return f"{part * 100 / whole:.1f}%" if whole else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--amqp-url", required=True)
    ap.add_argument("--redis-url", required=True)
    ap.add_argument("--masters", required=True, help="the masters' ports, comma-separated")
    ap.add_argument("--admin-port", type=int, required=True)
    ap.add_argument("--apns-port", type=int, required=True)
    ap.add_argument("--app", required=True)
    ap.add_argument("--tokens", type=int, required=True)
    ap.add_argument("--timeout-s", type=float, default=900)
    ap.add_argument("--pushctl", required=True)
    ap.add_argument("--ca-file", required=True)
    ap.add_argument("--key-file", required=True)
    ap.add_argument("--key-id", required=True)
    ap.add_argument("--team-id", required=True)
    ap.add_argument("--pushctl-count", type=int, default=300000)
    args = ap.parse_args()
    masters = [int(p) for p in args.masters.split(",")]

    status = subprocess.run([args.pushctl, "registry", "status", "--redis-url", args.redis_url, "--app", args.app, "--json"],
                            capture_output=True, text=True, timeout=60)
    if status.returncode != 0:
        sys.exit(f"balance.py: pushctl registry status failed: {status.stderr.strip()}")
    registry = json.loads(status.stdout)
    slots = {}
    nodes = subprocess.run(["redis-cli", "-p", str(masters[0]), "CLUSTER", "NODES"], capture_output=True, text=True, timeout=10).stdout
    for line in nodes.splitlines():
        fields = line.split()
        port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
        if "master" in fields[2]:
            for part in fields[8:]:
                if not part.startswith("["):
                    low, _, high = part.partition("-")
                    slots[port] = slots.get(port, 0) + int(high or low) - int(low) + 1
    before = {port: master_state(port) for port in masters}

    conn = pika.BlockingConnection(pika.URLParameters(args.amqp_url))
    channel = conn.channel()
    channel.confirm_delivery()
    request_id = f"cluster-bench-{int(time.time())}"
    body = {"id": request_id, "app": args.app, "to": {"all": True},
            "payload": {"aps": {"alert": {"title": "Cluster", "body": "One broadcast over every master"}}}}
    start_delivered = int(stats(args.admin_port).get("delivered", 0))
    started = time.monotonic()
    channel.basic_publish("push", "request", json.dumps(body), pika.BasicProperties(content_type="application/json", delivery_mode=2),
                          mandatory=True)
    conn.close()
    delivered = 0
    while time.monotonic() - started < args.timeout_s:
        delivered = int(stats(args.admin_port).get("delivered", 0)) - start_delivered
        if delivered >= args.tokens:
            break
        time.sleep(0.1)
    elapsed = time.monotonic() - started
    after = {port: master_state(port) for port in masters}
    final = stats(args.admin_port)

    say(f"broadcast of {args.tokens} tokens: {delivered} accepted by apns-sandbox in {elapsed:.1f} s ({delivered / elapsed:,.0f}/s); "
        f"duplicates {final.get('duplicates', '?')}")
    say("")
    say(f"{'master':<18}{'slots':>7}{'shards':>8}{'tokens':>10}{'share':>8}{'keys':>10}{'share':>8}"
        f"{'memory MB':>11}{'commands':>11}{'share':>8}{'CPU s':>8}{'share':>8}")
    per_server = registry.get("per_server", {})
    shards = {}
    for shard in registry.get("per_shard", []):
        shards[shard["server"]] = shards.get(shard["server"], 0) + 1
    total_keys = sum(after[p]["keys"] for p in masters)
    total_commands = sum(after[p]["commands"] - before[p]["commands"] for p in masters)
    total_cpu = sum(after[p]["cpu"] - before[p]["cpu"] for p in masters)
    total_tokens = sum(per_server.values())
    for port in masters:
        server = next((s for s in per_server if s.endswith(f":{port}")), f"127.0.0.1:{port}")
        tokens = per_server.get(server, 0)
        commands = after[port]["commands"] - before[port]["commands"]
        cpu = after[port]["cpu"] - before[port]["cpu"]
        say(f"{server:<18}{slots.get(port, 0):>7}{shards.get(server, 0):>8}{tokens:>10}{share(tokens, total_tokens):>8}"
            f"{after[port]['keys']:>10}{share(after[port]['keys'], total_keys):>8}{after[port]['memory'] / 1048576:>11.1f}"
            f"{commands:>11}{share(commands, total_commands):>8}{cpu:>8.1f}{share(cpu, total_cpu):>8}")
    say("")

    say("pushctl bench on the same sandbox:")
    bench = subprocess.run([args.pushctl, "bench", "--endpoint", f"https://127.0.0.1:{args.apns_port}", "--ca-file", args.ca_file,
                            "--key-file", args.key_file, "--key-id", args.key_id, "--team-id", args.team_id, "--topic", args.app,
                            "--count", str(args.pushctl_count), "--concurrency", "1000", "--connections", "2"],
                           capture_output=True, text=True, timeout=600)
    say("  " + bench.stdout.strip().replace("\n", "\n  "))
    rate = None
    for line in bench.stdout.splitlines():
        if "notifications/s" in line:
            rate = float(line.split()[0].replace(",", ""))
    if rate:
        say(f"broadcast / pushctl bench: {delivered / elapsed / rate:.2f} ({delivered / elapsed:,.0f}/s against {rate:,.0f}/s)")
    return 0 if delivered >= args.tokens else 1


if __name__ == "__main__":
    sys.exit(main())
