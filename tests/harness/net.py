"""Plain HTTP/1.1 to the stack on 127.0.0.1, a service's metrics, free ports and polling."""

import http.client
import json
import socket
import time


class Reply:
    """One answer: status, headers with lower-case names, body bytes."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def message(self):
        """The JSON `message` (API) or `msg` (legacy), else the body's start."""
        data = self.json()
        if isinstance(data, dict):
            return str(data.get("message", data.get("msg", data)))
        return self.body[:300].decode(errors="replace")

    def text(self):
        return self.body.decode(errors="replace")

    def __str__(self):
        return f"HTTP {self.status} {self.body[:300].decode(errors='replace')!r}"


def call(port, method, path, body=None, headers=None, timeout=15):
    """One request on a new connection; no redirects followed. A dict or list body goes as JSON, a
    str as is."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        all_headers = dict(headers or {})
        data = body
        if isinstance(body, (dict, list)):
            data = json.dumps(body).encode()
            all_headers.setdefault("Content-Type", "application/json")
        elif isinstance(body, str):
            data = body.encode()
        conn.request(method, path, body=data, headers=all_headers)
        resp = conn.getresponse()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


def hreq(port, method, path, body=None, timeout=5.0):
    """(status, body bytes) of one request, a body as JSON."""
    reply = call(port, method, path, body=None if body is None else json.dumps(body).encode(),
                 headers={} if body is None else {"Content-Type": "application/json"}, timeout=timeout)
    return reply.status, reply.body


def http_json(port, method, path, body=None, timeout=5.0):
    """The JSON answer of a request that must succeed."""
    status, data = hreq(port, method, path, body, timeout)
    if status >= 300:
        raise RuntimeError(f"{method} :{port}{path} -> {status} {data[:200]!r}")
    return json.loads(data) if data else None


def answers(port, path, timeout=2.0):
    """The port answers `path` with 200."""
    try:
        return hreq(port, "GET", path, timeout=timeout)[0] == 200
    except OSError:
        return False


def metric_lines(port, name, timeout=2.0):
    """{labels: value} of metric `name` on a service's /metrics ({} when unreachable)."""
    try:
        status, data = hreq(port, "GET", "/metrics", timeout=timeout)
    except OSError:
        return {}
    if status != 200:
        return {}
    found = {}
    for line in data.decode(errors="replace").splitlines():
        if line.startswith(name) and (line[len(name):len(name) + 1] in (" ", "{")):
            head, _, value = line.rpartition(" ")
            try:
                found[head[len(name):]] = float(value)
            except ValueError:
                pass
    return found


def metric(port, name, timeout=2.0):
    """Sum of the samples of metric `name` on a service's /metrics (None when unreachable or absent)."""
    found = metric_lines(port, name, timeout)
    return sum(found.values()) if found else None


def port_free(port):
    """Nothing but TIME_WAIT leftovers holds 127.0.0.1:port (a listener could bind it)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        sock.close()


def wait_for(probe, timeout, step=0.25):
    """probe() until it returns something true, for at most `timeout` s; its last result."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(step)
    return last
