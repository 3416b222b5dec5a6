#!/usr/bin/env python3
"""Writes the committed seed corpus, Fuzz/Corpus/<target>/: real messages of each kind.

    /usr/bin/python3 Fuzz/seeds.py      # needs python3-pika (Debian's; `make test` installs it)

The seeds are what the system really sees: CONTRACT.md's and the docs' examples, the
repository's config/apps.json and localization/*.strings, the shapes push-render, push-send and
push-ingest's tests use, AMQP content-header properties as a real client (pika) encodes them with
the headers RabbitMQ and the services set (x-death, x-push-retries, x-push-error, ...), and legacy
feedback streams in the retired service's record format. Deterministic: running it again rewrites
the same files. Crash inputs that became regression tests are added by hand beside them
(`crash-*` files), so every fuzz run replays them first.
"""

import decimal
import hashlib
import hmac
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "Fuzz", "Corpus")

TOKEN = "a1b2c3d4" * 8  # 64 hex digits, the usual 32-byte token
TOKEN2 = "0f" * 32
LONG_TOKEN = "ab" * 100  # 200 hex digits, the longest accepted


def write(target, name, data):
    directory = os.path.join(CORPUS, target)
    os.makedirs(directory, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def compact(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def push_requests():
    contract = {
        "id": "order-4711-shipped",
        "app": "com.example.shop",
        "to": {"users": ["alice"]},
        "payload": {
            "aps": {
                "alert": {"title-loc-key": "SHIPPED_TITLE", "loc-key": "GAME_PLAY_REQUEST_FORMAT", "loc-args": ["Jenna", "Frank"]},
                "badge": 5,
                "sound": "bingbong.aiff",
            },
            "myCustomData": ["bang", "bang"],
        },
        "localize": "device",
        "push_type": "alert",
        "priority": 10,
        "expiration": 1767225600,
        "collapse_id": "order-4711",
    }
    write("fuzz-push-request", "contract-example.json", json.dumps(contract, indent=2, ensure_ascii=False))
    readme = {
        "id": "order-4711-shipped",
        "app": "com.example.game",
        "to": {"users": ["alice"]},
        "payload": {"aps": {"alert": {"loc-key": "GAME_PLAY_REQUEST_FORMAT", "loc-args": ["Jenna", "Frank"]}, "sound": "bingbong.aiff"}},
        "localize": "device",
    }
    write("fuzz-push-request", "readme-example.json", json.dumps(readme, indent=2))
    server = {
        "id": "ship-1",
        "app": "com.example.game",
        "to": {"tokens": [TOKEN, TOKEN2]},
        "payload": {
            "aps": {
                "alert": {
                    "title-loc-key": "SHIPPED_TITLE",
                    "loc-key": "ORDER_SHIPPED_FORMAT",
                    "loc-args": ["4711", "DHL"],
                    "subtitle-loc-key": "NEW_MESSAGES_FORMAT",
                    "subtitle-loc-args": ["3"],
                },
                "badge": 1,
                "sound": {"critical": 1, "name": "default", "volume": 0.5},
                "thread-id": "orders",
            }
        },
        "localize": "server",
    }
    write("fuzz-push-request", "localize-server.json", compact(server))
    background = {"id": "sync-7", "app": "com.example.game", "to": {"topic": "news"}, "payload": {"aps": {"content-available": 1}, "acme1": "bar", "acme2": 42}}
    write("fuzz-push-request", "background.json", compact(background))
    every_key = {
        "id": "all-keys",
        "app": "com.example.game",
        "to": {"all": True},
        "payload": {
            "aps": {
                "alert": {
                    "title": "T", "subtitle": "S", "body": "B", "launch-image": "launch.png", "action-loc-key": "PLAY",
                    "summary-arg": "Bob", "summary-arg-count": 2,
                },
                "badge": 0, "sound": "default", "thread-id": "chat-42", "category": "MESSAGE", "content-available": 1,
                "mutable-content": 1, "target-content-id": "window-1", "interruption-level": "time-sensitive",
                "relevance-score": 0.75, "filter-criteria": "work",
            }
        },
        "collapse_id": "chat-42",
    }
    write("fuzz-push-request", "every-aps-key.json", compact(every_key))
    live = {
        "id": "panda-1",
        "app": "com.example.game",
        "to": {"users": ["alice", "bob"]},
        "payload": {
            "aps": {
                "timestamp": 1685952000, "event": "update",
                "content-state": {"currentHealthLevel": 0.941, "eventDescription": "Power Panda found a sword!"},
                "stale-date": 1685959200, "relevance-score": 75,
                "alert": {
                    "title": {"loc-key": "%@ is on an adventure!", "loc-args": ["Power Panda"]},
                    "body": {"loc-key": "GAME_PLAY_REQUEST_FORMAT", "loc-args": ["Power Panda", "Frank"]},
                    "sound": "chime.aiff",
                },
            }
        },
        "localize": "server",
    }
    write("fuzz-push-request", "liveactivity.json", compact(live))
    voip = {"id": "call-1", "app": "com.example.game", "to": {"users": ["carol"]}, "payload": {"callID": "c-1", "caller": "Bob"}, "push_type": "voip", "priority": 5}
    write("fuzz-push-request", "voip.json", compact(voip))
    long_body = {
        "id": "long",
        "app": "com.example.game",
        "to": {"users": ["dave"]},
        "payload": {"aps": {"alert": {"title": "Zürich 東京", "body": "é" * 2100 + " \u2028 \\ \" \U0001F600"}}},
        "expiration": 0,
    }
    write("fuzz-push-request", "over-size-limit.json", json.dumps(long_body, ensure_ascii=False))


def send_batches():
    batch = {
        "v": 1, "request_id": "order-4711-shipped", "batch_id": "order-4711-shipped/3", "app": "com.example.shop",
        "environment": "production", "push_type": "alert", "priority": 10, "expiration": 1767225600,
        "collapse_id": "order-4711",
        "payload": compact({"aps": {"alert": {"title": "Your order has shipped", "body": "Order 4711 is on its way with DHL."}, "badge": 5}}),
        "tokens": [TOKEN, TOKEN2], "attempt": 0, "created_at": 1767225000123,
    }
    write("fuzz-send-batch", "fresh-batch.json", compact(batch))
    retry = dict(batch, batch_id="order-4711-shipped/3#a1d0", tokens=[TOKEN2], attempt=2, mark_set="order-4711-shipped/3#0123456789abcdef", slots=[1])
    write("fuzz-send-batch", "retry-batch.json", compact(retry))
    voip = {
        "app": "com.example.app", "attempt": 0, "batch_id": "r1/0", "collapse_id": "c1", "created_at": 1767225000123,
        "environment": "sandbox", "expiration": 1767225600, "payload": "{\"aps\":{}}", "priority": 10, "push_type": "voip",
        "request_id": "r1", "tokens": [LONG_TOKEN], "v": 1,
    }
    write("fuzz-send-batch", "voip-batch.json", json.dumps(voip, sort_keys=True))
    background = {
        "v": 1, "request_id": "sync-7", "batch_id": "sync-7/0", "app": "com.example.game", "environment": "sandbox",
        "push_type": "background", "priority": 5, "payload": "{\"aps\":{\"content-available\":1}}", "tokens": [TOKEN],
        "attempt": 0, "created_at": 1767225000123,
    }
    write("fuzz-send-batch", "background-batch.json", compact(background))


def registrations():
    contract = {
        "user": "alice", "locale": "zh-Hant-TW", "environment": "production", "topics": ["news"],
        "device": {"uuid": "6F9619FF-8B86-D011-B42D-00C04FC964FF", "name": "Alice's iPhone", "model": "iPhone15,2", "os_version": "17.5", "app_version": "4.2.0"},
        "settings": {"alert": True, "badge": True, "sound": False},
    }
    write("fuzz-registration", "contract-put-body.json", json.dumps(contract, ensure_ascii=False))
    write("fuzz-registration", "readme-put-body.json", '{"user":"alice","locale":"zh-Hant-TW","environment":"sandbox","topics":["news"],\n       "settings":{"alert":true,"badge":true,"sound":false}}')
    write("fuzz-registration", "empty-body.json", "{}")
    write("fuzz-registration", "nulls.json", '{"user": null, "locale": null, "topics": null, "device": null, "settings": {"alert": null}}')
    message = dict(contract, app="com.example.game", token=TOKEN, registered_at=1767225600000)
    write("fuzz-registration", "queue-message.json", compact(message))
    write("fuzz-registration", "queue-delete.json", compact({"app": "com.example.shop", "token": LONG_TOKEN.upper(), "op": "delete", "registered_at": 1767225599000}))
    write("fuzz-registration", "queue-escapes.json", '{"app":"com.example.game","token":"<a1b2c3d4 a1b2c3d4 a1b2c3d4 a1b2c3d4 a1b2c3d4 a1b2c3d4 a1b2c3d4 a1b2c3d4>","user":"\\u00e9l\\u00e8ve \\ud83d\\ude00","topics":["a","a","b/c"]}')


def invalid_token_reports():
    write("fuzz-invalid-token-report", "gone.json", compact({"app": "com.example.shop", "token": TOKEN, "reason": "Unregistered", "timestamp": 1767225000123, "reported_at": 1767225000456}))
    write("fuzz-invalid-token-report", "bad-token.json", compact({"app": "com.example.game", "token": LONG_TOKEN, "reason": "BadDeviceToken", "reported_at": 1767225000456}))
    write("fuzz-invalid-token-report", "spaced.json", '{ "reason" : "DeviceTokenNotForTopic", "app" : "com.example.game", "token" : "<%s>", "timestamp" : null, "reported_at" : 0, "extra" : [1, {"x": 2.5e3}] }' % TOKEN)


def legacy_forms():
    timestamp = "1767225600000"
    uuid = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
    md5 = hashlib.md5((TOKEN + uuid + timestamp).encode()).hexdigest()
    query = f"device_token={TOKEN}&device_uuid={uuid}&device_name=Alice%27s+iPhone&device_version=17.5&app_name=Example+Game&timestamp={timestamp}&push_badge=enabled&push_alert=enabled&push_sound=disabled&credential={md5}"
    write("fuzz-legacy-forms", "register-query-md5", query)
    nsdata = "<" + " ".join(TOKEN[i:i + 8] for i in range(0, 64, 8)) + ">"
    mac = hmac.new(b"fuzz-secret", (nsdata + timestamp).encode(), hashlib.sha256).hexdigest()
    body = f"device_token={nsdata.replace('<', '%3C').replace('>', '%3E').replace(' ', '+')}&app_name=com.example.shop&timestamp={timestamp}&credential={mac.upper()}"
    write("fuzz-legacy-forms", "register-body-hmac", "app_name=ignored\n" + body)
    write("fuzz-legacy-forms", "push-token-body", f"\nusername=alice&token={TOKEN2}")
    write("fuzz-legacy-forms", "register-minimal", f"device_token={LONG_TOKEN}&device_uuid=&push_badge=")


def legacy_feedback():
    def record(time, token_hex):
        token = bytes.fromhex(token_hex)
        return struct.pack(">IH", time, len(token)) + token

    write("fuzz-legacy-feedback", "one-record", record(1767225600, TOKEN))
    write("fuzz-legacy-feedback", "three-records", record(1767225600, TOKEN) + record(1, TOKEN2) + record(0xFFFFFFFF, LONG_TOKEN))


def apps_files():
    with open(os.path.join(ROOT, "config", "apps.json"), "rb") as f:
        write("fuzz-apps-file", "config-apps.json", f.read())
    contract = {
        "apps": {
            "com.example.game": {
                "display_names": ["Monopoly Party"], "default": True, "environment": "production",
                "apns": {"key_file": "keys/AuthKey_ABC123DEFG.p8", "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ"},
                "ingest": {"api_keys": ["…"], "credential": "md5", "secret": "…", "timestamp_window_s": 300},
                "rate_limits": {"per_device_per_hour": 60, "per_app_per_second": 5000},
            }
        }
    }
    write("fuzz-apps-file", "contract-example.json", json.dumps(contract, indent=2, ensure_ascii=False))
    several = {
        "apps": {
            "com.example.p12": {"apns": {"certificate_file": "/etc/push/cert.p12", "certificate_password": "secret"}, "ingest": {"credential": "none", "push_token": True}},
            "com.example.pem": {
                "display_names": ["PEM App", "Pem"], "environment": "sandbox",
                "apns": {"certificate_file": "cert.pem", "private_key_file": "key.pem"},
                "ingest": {"credential": "hmac-sha256", "secret": "s3cret", "timestamp_window_s": 86400},
                "rate_limits": {"per_device_per_hour": 1, "per_app_per_second": 1, "drop_low_priority": True},
                "delivery": {"guarantee": "at-most-once", "collapse_id_from_request": False},
            },
        }
    }
    write("fuzz-apps-file", "certificates.json", json.dumps(several, indent=1))


def strings_catalogs():
    directory = os.path.join(ROOT, "localization")
    for name in sorted(os.listdir(directory)):
        if name.endswith(".strings"):
            with open(os.path.join(directory, name), "rb") as f:
                write("fuzz-strings-catalog", name, f.read())
    syntax = (
        '/* A comment */\n"GAME_PLAY_REQUEST_FORMAT" = "%@ and %@ have invited you to play Monopoly";\n'
        '// Another comment\nSHIPPED_TITLE = "Your order has shipped";\n"KEY_ONLY";\n'
        '"ESCAPES" = "tab\\there \\"quoted\\" \\\\ \\n \\U00e9 \\u00E9 \\ud83d\\ude00 \\101 \\r";\n'
        'unquoted.key-1:/$ = unquoted_value;\n"ORDER" = "%2$@ then %1$@, %d%% done, %lld items";\n'
    )
    write("fuzz-strings-catalog", "syntax.strings", syntax)
    with open(os.path.join(directory, "en.strings"), "r", encoding="utf-8") as f:
        english = f.read()
    write("fuzz-strings-catalog", "en-utf16le-bom.strings", b"\xff\xfe" + english.encode("utf-16-le"))
    write("fuzz-strings-catalog", "en-utf16be.strings", english.encode("utf-16-be"))
    write("fuzz-strings-catalog", "utf8-bom.strings", b"\xef\xbb\xbf" + '"A" = "Ä";\n'.encode())


def amqp_headers():
    try:
        from pika.spec import BasicProperties
    except ImportError:
        sys.exit("seeds.py: needs pika (Debian's python3-pika): run it with /usr/bin/python3")

    def properties(name, **kwargs):
        write("fuzz-amqp-headers", name, b"".join(BasicProperties(**kwargs).encode()))

    properties("published-request", content_type="application/json", delivery_mode=2)
    properties("retry-tier", content_type="application/json", delivery_mode=2, headers={"x-push-retries": 3})
    properties("deferred-batch", content_type="application/json", delivery_mode=2, headers={"x-push-deferrals": 2, "x-push-retry-reason": "TooManyRequests", "x-push-retries": 1})
    properties(
        "dead-letter",
        content_type="application/json",
        delivery_mode=2,
        headers={
            "x-push-error": "payload.aps.badge: must be a whole number ≥ 0, got a string",
            "x-first-death-exchange": "push",
            "x-first-death-queue": "push.requests",
            "x-first-death-reason": "rejected",
            "x-death": [
                {"count": 1, "exchange": "push", "queue": "push.requests", "reason": "rejected", "routing-keys": ["request"], "time": 1767225600},
                {"count": 2, "exchange": "", "queue": "push.send.retry.5s", "reason": "expired", "routing-keys": ["push.send.retry.5s"], "original-expiration": "5000"},
            ],
        },
    )
    properties(
        "every-property",
        content_type="application/json", content_encoding="utf-8", headers={"x-push-retries": -1, "flag": True, "ratio": decimal.Decimal("0.50")},
        delivery_mode=1, priority=9, correlation_id="c-1", reply_to="amq.rabbitmq.reply-to", expiration="60000",
        message_id="order-4711-shipped", timestamp=1767225600, type="push.request", user_id="guest", app_id="pushctl", cluster_id="",
    )
    properties("retries-not-a-number", headers={"x-push-retries": "3"})
    properties("retries-huge", headers={"x-push-retries": 2**62})


def apns_responses():
    # One byte choosing the status (0: 200, 5: 410, 7: 429, 8: 500, 9: 503, ...), then the body as APNs sends it.
    write("fuzz-apns-response", "delivered", b"\x00")
    write("fuzz-apns-response", "unregistered-410", b"\x05" + b'{"reason":"Unregistered","timestamp":1767225000123}')
    write("fuzz-apns-response", "bad-device-token-400", b"\x01" + b'{"reason":"BadDeviceToken"}')
    write("fuzz-apns-response", "expired-provider-token-403", b"\x02" + b'{"reason":"ExpiredProviderToken"}')
    write("fuzz-apns-response", "too-many-requests-429", b"\x07" + b'{"reason":"TooManyRequests"}')
    write("fuzz-apns-response", "not-json-503", b"\x09" + b"<html><body>Service Unavailable</body></html>")


def main():
    push_requests()
    send_batches()
    registrations()
    invalid_token_reports()
    legacy_forms()
    legacy_feedback()
    apps_files()
    strings_catalogs()
    amqp_headers()
    apns_responses()
    count = sum(len(files) for _, _, files in os.walk(CORPUS))
    print(f"seeds.py: {count} files under {os.path.relpath(CORPUS, ROOT)}")


if __name__ == "__main__":
    main()
