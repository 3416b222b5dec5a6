extension RedisCommand {
    /// The key whose slot decides which node of a Redis Cluster runs this command, or nil for a
    /// command without keys (`PING`, `INFO`, `SCRIPT …`), which any node may run.
    ///
    /// `EVAL`/`EVALSHA` (and their `_RO` forms, `FCALL`) route by their first key; every other
    /// command by its first argument. A command touching several keys must keep them in one slot
    /// (one hash tag), as the registry's scripts do; the server refuses it with `CROSSSLOT`
    /// otherwise.
    public var routingKey: ArraySlice<UInt8>? {
        if let routingOverride { return routingOverride[...] }
        guard count >= 2 else { return nil }
        let name = self.name
        if Self.keyless.contains(name) { return nil }
        if Self.scripts.contains(name) {
            guard count >= 4, let keys = Int(String(decoding: argument(2), as: UTF8.self)), keys > 0 else { return nil }
            return argument(3)
        }
        return argument(1)
    }

    /// This command, run by a Redis Cluster client on the node serving `key`'s slot: for commands
    /// without keys that are about a key's node, such as `INFO server` for the `run_id` of the node
    /// an `SSCAN` cursor belongs to. A single server ignores it.
    public func routed(byKey key: String) -> RedisCommand {
        var command = self
        command.routingOverride = Array(key.utf8)
        return command
    }

    /// Argument `index`, as a slice of the storage.
    func argument(_ index: Int) -> ArraySlice<UInt8> {
        storage[(index == 0 ? 0 : ends[index - 1])..<ends[index]]
    }

    private static let scripts: Set<String> = ["EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"]
    private static let keyless: Set<String> = [
        "PING", "INFO", "SCRIPT", "CLUSTER", "AUTH", "SELECT", "ECHO", "TIME", "DBSIZE", "FLUSHALL", "FLUSHDB", "CONFIG",
        "CLIENT", "COMMAND", "HELLO", "ASKING", "READONLY", "READWRITE", "LASTSAVE", "ROLE", "MEMORY", "SLOWLOG", "QUIT",
    ]
}
