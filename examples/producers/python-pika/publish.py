#!/usr/bin/env python3
"""Publish one push request with pika (blocking): a persistent JSON message to the direct exchange
`push`, routing key `request`, with publisher confirms, so the broker has it before this exits.

    PUSH_AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f python3 publish.py --id hello-pika --user alice

Debian: apt install python3-pika; elsewhere: pip install pika.
"""
import argparse
import json
import os
import sys

import pika


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--id", required=True, help="the request's id (a repeat within the dedupe window is sent once)")
    parser.add_argument("--app", default="com.example.game", help="the app's bundle id, as in the apps file")
    parser.add_argument("--user", required=True, help="the user whose devices get the push")
    parser.add_argument("--alert", default="Hello from pika")
    args = parser.parse_args()

    request = {
        "id": args.id,
        "app": args.app,
        "to": {"users": [args.user]},
        "payload": {"aps": {"alert": args.alert, "sound": "default"}},
    }
    url = os.environ.get("PUSH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        # mandatory: an unroutable message (no push.requests queue yet) raises instead of vanishing.
        channel.basic_publish(
            "push", "request", json.dumps(request).encode(),
            pika.BasicProperties(content_type="application/json", delivery_mode=2), mandatory=True,
        )
    except (pika.exceptions.UnroutableError, pika.exceptions.NackError) as error:
        sys.exit(f"publish.py: the broker did not take request {args.id}: {error}")
    finally:
        connection.close()
    print(f"published {args.id}")


if __name__ == "__main__":
    main()
