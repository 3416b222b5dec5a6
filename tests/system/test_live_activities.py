"""Live Activities end to end, as a product uses them: a device registers its push-to-start and
update tokens through push-ingest's API, push requests start, update and end the activity
(`push_to_start`, `activity`), and a broadcast channel made with `pushctl channel create` updates
and ends it for every listener (`channel`); apns-sandbox must receive each with Apple's topic, push
type, tokens and channel id, and nothing may be dead-lettered."""
import re
import subprocess
import time

from conftest import APP, wait_for

TOPIC = f"{APP}.push-type.liveactivity"


def register_activity_tokens(stack, device, user, **slots):
    """The device, then each slot (`push_to_start` or `activity`) with its token, as an app does."""
    stack.register(device, user)
    records = {}
    for path, (token, body) in slots.items():
        # apns-sandbox checks activity tokens as APNs does: liveactivity pushes on the
        # .push-type.liveactivity topic only, anything else DeviceTokenNotForTopic.
        stack.sandbox_token_state(token, "liveactivity")
        status, record = stack.api("PUT", f"/v1/apps/{APP}/devices/{device}/{path}", {"push_token": token, **body})
        assert status == 201, f"PUT …/{path}: HTTP {status} {record}"
        records[path] = record
    return records


def test_push_to_start_starts_an_activity_for_the_user(stack):
    device, start_token = "de71ce" + "0" * 57 + "1", "57a270" + "0" * 57 + "1"
    records = register_activity_tokens(stack, device, "alice-live", **{"push-to-start/MatchAttributes": (start_token, {})})
    assert records["push-to-start/MatchAttributes"]["user"] == "alice-live", "the token takes the device's user"

    now = int(time.time())
    stack.publish({"id": "kickoff", "app": APP, "to": {"push_to_start": {"users": ["alice-live"]}}, "payload": {"aps": {
        "timestamp": now, "event": "start", "content-state": {"home": 0, "away": 0}, "attributes-type": "MatchAttributes",
        "attributes": {"home": "A", "away": "B"}, "alert": {"title": "Kick-off", "body": "A v B"}}}})
    got = wait_for("the start on the push-to-start token", lambda: stack.deliveries(token=start_token))
    assert [d["payload"]["aps"]["event"] for d in got] == ["start"]
    assert got[0]["headers"]["apns-topic"] == TOPIC and got[0]["headers"]["apns-push-type"] == "liveactivity"
    assert stack.dead_letters() == 0


def test_update_and_end_reach_the_update_token_with_their_priorities(stack):
    device, update_token = "de71ce" + "0" * 57 + "2", "0bda7e" + "0" * 57 + "1"
    now = int(time.time())
    register_activity_tokens(stack, device, "bob-live", **{"activities/match-1234": (
        update_token, {"attributes_type": "MatchAttributes", "expires_at": now + 3600})})
    stack.publish({"id": "goal-1", "app": APP, "to": {"activity": "match-1234"}, "priority": 10, "payload": {"aps": {
        "timestamp": now + 1, "event": "update", "content-state": {"home": 1, "away": 0}, "stale-date": now + 600,
        "relevance-score": 75, "alert": {"title": "Goal!", "body": "1:0"}}}})
    stack.publish({"id": "final", "app": APP, "to": {"activity": "match-1234"}, "priority": 5, "payload": {"aps": {
        "timestamp": now + 2, "event": "end", "content-state": {"home": 1, "away": 0}, "dismissal-date": now + 3600}}})
    got = wait_for("the update and the end", lambda: (lambda d: d if len(d) >= 2 else None)(stack.deliveries(token=update_token)))
    by_event = {d["payload"]["aps"]["event"]: d["headers"] for d in got}
    assert sorted(by_event) == ["end", "update"] and len(got) == 2, got
    assert by_event["update"]["apns-priority"] == "10" and by_event["end"]["apns-priority"] == "5"
    assert all(h["apns-topic"] == TOPIC for h in by_event.values())
    assert stack.dead_letters() == 0


def test_a_broadcast_channel_updates_and_ends_it_once_each(stack):
    result = subprocess.run(
        [str(stack.bin / "pushctl"), "channel", "create", "--endpoint", f"https://127.0.0.1:{stack.port['apns']}",
         "--ca-file", str(stack.ca), "--key-file", str(stack.key), "--key-id", stack.KEY_ID, "--team-id", stack.TEAM_ID,
         "--app", APP, "--storage-policy", "no-message-stored"],
        capture_output=True, text=True, timeout=30)
    found = re.search(r"created channel (\S+)", result.stdout)
    assert result.returncode == 0 and found, f"pushctl channel create exited {result.returncode}: {result.stdout} {result.stderr}"
    channel = found.group(1)
    now = int(time.time())
    stack.publish({"id": "channel-goal", "app": APP, "to": {"channel": channel}, "priority": 5, "payload": {"aps": {
        "timestamp": now + 3, "event": "update", "content-state": {"home": 2, "away": 0}}}})
    stack.publish({"id": "channel-final", "app": APP, "to": {"channel": channel}, "payload": {"aps": {
        "timestamp": now + 4, "event": "end", "content-state": {"home": 2, "away": 0}}}})
    got = wait_for("both broadcasts", lambda: (lambda d: d if len(d) >= 2 else None)(stack.deliveries(channel=channel)))
    assert sorted(d["payload"]["aps"]["event"] for d in got) == ["end", "update"] and len(got) == 2, got
    assert all(d["headers"]["apns-channel-id"] == channel and d["headers"]["apns-push-type"] == "liveactivity" for d in got)
    assert stack.dead_letters() == 0
