#!/usr/bin/env python3
"""aioapns against an APNs-compatible server: notifications/s, p50/p99 latency, errors by reason,
peak RSS -- the figures `pushctl bench` prints, with the same JSON keys.

aioapns (https://github.com/Fatal1ty/aioapns) connects to api.push.apple.com or
api.development.push.apple.com on port 443: the host and port are class attributes of its
protocol classes (APNS_SERVER, APNS_PORT), not constructor arguments. To reach apns-sandbox this
script subclasses APNsDevelopmentClientProtocol with APNS_SERVER = the sandbox's host and
APNS_PORT = its port and sets it as the pool's protocol_class; everything else -- connection pool,
HTTP/2 framing (h2), JWT cache, JSON encoding, response matching -- is aioapns' own code. The
sandbox's CA is trusted through aioapns' documented `ssl_context` argument; that context also
offers ALPN "h2", which aioapns' default context does not and apns-sandbox requires.

A throw-away P-256 key (written to a key file, as a user's .p8 would be) signs the provider token.
Only point it at servers you own: it sends as fast as it can.

  aioapns_bench.py --host 127.0.0.1 --port 2197 --ca-file ca.pem --count 100000 --concurrency 1000
"""
import argparse
import asyncio
import json
import os
import resource
import secrets
import ssl
import sys
import tempfile
import time

from aioapns import APNs, NotificationRequest, PushType
from aioapns.connection import APNsDevelopmentClientProtocol
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

# The payload pushctl bench and ahc-bench send (aioapns json.dumps it for every request).
MESSAGE = {"aps": {"alert": {"title": "Benchmark", "body": "Hello from pushctl bench"}, "sound": "default"}}


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="server address (loopback only)")
    parser.add_argument("--port", type=int, required=True, help="server's HTTP/2 (TLS) port")
    parser.add_argument("--ca-file", required=True, help="CA certificate (PEM) to trust, e.g. apns-sandbox's --ca-out")
    parser.add_argument("--count", type=int, default=100_000, help="notifications to send")
    parser.add_argument("--concurrency", type=int, default=1000, help="notifications in flight at once")
    parser.add_argument("--connections", type=int, default=1, help="aioapns max_connections")
    parser.add_argument("--topic", default="com.example.bench", help="apns-topic (a bundle id)")
    parser.add_argument("--tokens", type=int, default=1000, help="distinct random device tokens to cycle through")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    arguments = parser.parse_args()
    if arguments.host not in ("127.0.0.1", "localhost", "::1"):
        parser.error(f"--host must be a loopback address (got {arguments.host!r})")
    if not 1 <= arguments.port <= 65535:
        parser.error(f"--port {arguments.port} is not a port number (1-65535)")
    if not os.access(arguments.ca_file, os.R_OK):
        parser.error(f"--ca-file {arguments.ca_file!r} cannot be read")
    for name, low, high in (("count", 1, 100_000_000), ("concurrency", 1, 100_000), ("connections", 1, 64), ("tokens", 1, 1_000_000)):
        if not low <= getattr(arguments, name) <= high:
            parser.error(f"--{name} must be {low}-{high}")
    return arguments


def write_signing_key(directory):
    """A new P-256 key in a PKCS#8 PEM file, like the .p8 file Apple hands out; returns its text."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path = os.path.join(directory, "AuthKey_BENCHKEY01.p8")
    with open(path, "wb") as file:
        file.write(pem)
    with open(path) as file:
        return file.read()


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, int(-(-len(sorted_values) * p // 1)) - 1))
    return sorted_values[index]


async def run(arguments):
    class SandboxProtocol(APNsDevelopmentClientProtocol):
        APNS_SERVER = arguments.host
        APNS_PORT = arguments.port

    context = ssl.create_default_context(cafile=arguments.ca_file)
    context.set_alpn_protocols(["h2"])
    with tempfile.TemporaryDirectory(prefix="aioapns-bench-") as directory:
        key = write_signing_key(directory)
    client = APNs(
        key=key,
        key_id="BENCHKEY01",
        team_id="BENCHTEAM1",
        topic=arguments.topic,
        max_connections=arguments.connections,
        use_sandbox=True,
        ssl_context=context,
    )
    client.pool.protocol_class = SandboxProtocol
    tokens = [secrets.token_hex(32) for _ in range(arguments.tokens)]

    def request(index):
        return NotificationRequest(
            device_token=tokens[index % len(tokens)], message=MESSAGE, priority=10, push_type=PushType.ALERT
        )

    # Warm-up: open the first connection and mint the token outside the measurement.
    warm_up = await client.send_notification(request(0))
    if not warm_up.is_successful:
        raise SystemExit(f"aioapns_bench: warm-up answered {warm_up.status} {warm_up.description}")

    count = arguments.count
    next_index = 0
    latencies = []
    errors = {}
    accepted = 0

    async def worker():
        nonlocal next_index, accepted
        while next_index < count:
            index = next_index
            next_index += 1
            sent_at = time.perf_counter_ns()
            try:
                result = await client.send_notification(request(index))
            except Exception as error:  # counted by type, as pushctl counts client errors by code
                errors[type(error).__name__] = errors.get(type(error).__name__, 0) + 1
                continue
            latencies.append((time.perf_counter_ns() - sent_at) / 1e6)
            if result.is_successful:
                accepted += 1
            else:
                reason = f"{result.status} {result.description or ''}"
                errors[reason] = errors.get(reason, 0) + 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(arguments.concurrency, count))))
    seconds = time.perf_counter() - started
    connections_used = len(client.pool.connections)
    client.pool.close()

    latencies.sort()
    figures = {
        "count": count,
        "accepted": accepted,
        "seconds": seconds,
        "notifications_per_second": round(count / max(seconds, 1e-9)),
        "p50_ms": percentile(latencies, 0.5),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": latencies[-1] if latencies else 0,
        "errors": errors,
        "connections": arguments.connections,
        "connections_used": connections_used,
        "concurrency": arguments.concurrency,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }
    if arguments.json:
        print(json.dumps(figures, sort_keys=True))
    else:
        print(f"{figures['notifications_per_second']} notifications/s")
        print(f"p50 {figures['p50_ms']:.2f} ms, p99 {figures['p99_ms']:.2f} ms, max {figures['max_ms']:.2f} ms")
        print(f"sent {count} in {seconds:.2f} s over {connections_used} connection(s) (max {arguments.connections}), "
              f"{arguments.concurrency} in flight; accepted {accepted}")
        print(f"peak RSS {figures['peak_rss_mb']} MB")
        print("errors: " + (", ".join(f"{reason}: {number}" for reason, number in errors.items()) or "none"))
    return 0 if accepted else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(run(parse_arguments())))
