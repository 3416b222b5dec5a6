extension RedisCommandExecutor {
    /// Deletes each of `keys` whose value is still `value` (a compare-and-delete, for marks a process
    /// set and may since have lost to another), and returns how many it deleted.
    ///
    /// One script call on a single server. On a Redis Cluster a script's keys must share a slot, so
    /// there it is one call a key, all in one pipeline: keys that hash anywhere work on both.
    @discardableResult
    public func deleteKeys(_ keys: [String], ifValueIs value: String) async throws(RedisError) -> Int {
        guard !keys.isEmpty else { return 0 }
        if keys.count == 1 || keysShareOneNode {
            return Int(try await evalScript(deleteIfValueScript, keys: keys, args: [value]).throwingServerError().integer ?? 0)
        }
        let commands = keys.map { key in RedisCommand(["EVALSHA", deleteIfValueScript.sha1, "1", key, value]) }
        var deleted = 0
        for reply in try await pipelineScript(deleteIfValueScript, commands) {
            deleted += Int(try reply.throwingServerError().integer ?? 0)
        }
        return deleted
    }
}

/// `KEYS` to delete; `ARGV[1]` the value each must still hold. Returns how many were deleted.
private let deleteIfValueScript = RedisScript(
    """
    local deleted = 0
    for _, key in ipairs(KEYS) do
      if redis.call('GET', key) == ARGV[1] then deleted = deleted + redis.call('DEL', key) end
    end
    return deleted
    """
)
