#!/usr/bin/env python3
"""Publish one push request with aio-pika (asyncio): a persistent JSON message to the direct
exchange `push`, routing key `request`, with publisher confirms (aio-pika's default), so the broker
has it before this exits.

    PUSH_AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f python3 publish.py --id hello-aio --user alice

Debian: apt install python3-aio-pika; elsewhere: pip install aio-pika.
"""
import argparse
import asyncio
import json
import os
import sys

import aio_pika


async def publish(url, request):
    connection = await aio_pika.connect_robust(url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.get_exchange("push", ensure=False)
        # Returns once the broker confirmed; mandatory: an unroutable message raises.
        await exchange.publish(
            aio_pika.Message(json.dumps(request).encode(), content_type="application/json",
                             delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
            routing_key="request", mandatory=True,
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--id", required=True, help="the request's id (a repeat within the dedupe window is sent once)")
    parser.add_argument("--app", default="com.example.game", help="the app's bundle id, as in the apps file")
    parser.add_argument("--user", required=True, help="the user whose devices get the push")
    parser.add_argument("--alert", default="Hello from aio-pika")
    args = parser.parse_args()
    request = {
        "id": args.id,
        "app": args.app,
        "to": {"users": [args.user]},
        "payload": {"aps": {"alert": args.alert, "sound": "default"}},
    }
    url = os.environ.get("PUSH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")
    try:
        asyncio.run(publish(url, request))
    except aio_pika.exceptions.DeliveryError as error:
        sys.exit(f"publish.py: the broker did not take request {args.id}: {error}")
    print(f"published {args.id}")


if __name__ == "__main__":
    main()
