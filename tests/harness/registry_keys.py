"""The token registry's Redis keys as the services lay them out (Sources/TokenRegistry/RegistryLayout.swift
and Sources/Redis/Cluster/RedisHashTagSpread.swift), for the harnesses that check Redis directly.

An app's registry is spread over `shards` hash tags: `<app>` for one shard (registries made before
issue 14), else `<app>#<i>` or `<app>#<i>.<k>` (the first that puts its slot in the i-th of `shards`
equal ranges of Redis Cluster's 16,384 slots). A device's shard is FNV-1a (32 bits) of its hex token
modulo `shards`. The layout's shard count is in the hash `<prefix>:{<app>}:layout`.
"""

SLOTS = 16384


def crc16(data):
    """CRC16-CCITT (XMODEM), as Redis Cluster hashes keys."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def slot(key):
    """The Redis Cluster slot of `key` (its hash tag's, when it has one)."""
    data = key.encode()
    start = data.find(b"{")
    if start >= 0:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            data = data[start + 1:end]
    return crc16(data) % SLOTS


def tags(app, shards):
    """The hash tags of an app's `shards` shards, in shard order."""
    if shards == 1:
        return [app]
    out = []
    for index in range(shards):
        low, high = index * SLOTS // shards, (index + 1) * SLOTS // shards
        candidate, attempt = f"{app}#{index}", 0
        while not low <= crc16(candidate.encode()) % SLOTS < high:
            attempt += 1
            candidate = f"{app}#{index}.{attempt}"
        out.append(candidate)
    return out


def shard_of(token_hex, shards):
    """The shard holding a device: FNV-1a (32 bits) of its hex, modulo `shards`."""
    if shards == 1:
        return 0
    value = 0x811C9DC5
    for byte in token_hex.encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value % shards


class Registry:
    """One app's keys, with its shard count read from Redis through `redis` (a function running one
    redis-cli command and returning its output)."""

    def __init__(self, redis, app, prefix="push"):
        self.app = app
        self.prefix = prefix
        shards = (redis("HGET", f"{prefix}:{{{app}}}:layout", "shards") or "").strip()
        self.shards = int(shards) if shards.isdigit() and int(shards) > 0 else 1
        self.tags = tags(app, self.shards)

    def base(self, token_hex):
        return f"{self.prefix}:{{{self.tags[shard_of(token_hex, self.shards)]}}}:"

    def record(self, token_hex):
        return self.base(token_hex) + "token:" + token_hex

    def tokens_set(self, token_hex):
        return self.base(token_hex) + "tokens"

    def user_set(self, token_hex, user):
        return self.base(token_hex) + "user:" + user

    def topic_set(self, token_hex, topic):
        return self.base(token_hex) + "topic:" + topic

    def all_token_sets(self):
        return [f"{self.prefix}:{{{tag}}}:tokens" for tag in self.tags]

    def all_topic_sets(self, topic):
        return [f"{self.prefix}:{{{tag}}}:topic:{topic}" for tag in self.tags]
