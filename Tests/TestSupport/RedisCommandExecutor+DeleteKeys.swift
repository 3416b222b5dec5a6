import Redis

extension RedisCommandExecutor {
    /// Deletes (`UNLINK`) every key matching the glob `pattern`, page by page with `SCAN MATCH`, and
    /// returns how many it deleted. Tests write under a prefix of their own and call this at the end,
    /// so the shared test Redis does not fill up and no test sees another's keys. Never `KEYS`: the
    /// shared Redis serves the other suites meanwhile.
    @discardableResult
    public func deleteKeys(matching pattern: String) async throws -> Int {
        var cursor = "0"
        var deleted = 0
        repeat {
            let reply = try await execute("SCAN", cursor, "MATCH", pattern, "COUNT", "1000")
            guard let page = reply.array, page.count == 2, let next = page[0].string else {
                throw TestFailure("SCAN MATCH \(pattern): unexpected reply \(reply)")
            }
            let keys = (page[1].array ?? []).compactMap(\.string)
            if !keys.isEmpty { deleted += Int(try await execute(RedisCommand(["UNLINK"] + keys)).integer ?? 0) }
            cursor = next
        } while cursor != "0"
        return deleted
    }
}
