/// Something that runs Redis commands: a ``RedisConnection`` or a ``RedisClient`` (a pool of them).
///
/// The two primitives return raw replies — an `-ERR` reply is ``RedisReply/error(_:)``, not a thrown
/// error, so a pipeline reports each command's outcome. The conveniences built on them (``execute(_:)``,
/// ``evalScript(_:keys:args:)``) throw ``RedisError/Code/serverError`` instead.
///
/// Every call is bounded: by the command timeout while connected, and by the command timeout plus at
/// most one connect timeout while Redis is unreachable. A call is not cancellable once queued (the
/// command may already be on the wire); its timeout bounds it instead.
public protocol RedisCommandExecutor: Sendable {
    /// Sends one command and returns its reply; `-ERR` replies come back as ``RedisReply/error(_:)``.
    func send(_ command: RedisCommand) async throws(RedisError) -> RedisReply

    /// Sends all commands in one write and returns their replies in order. Cheaper than concurrent
    /// ``send(_:)`` calls: one continuation for the batch, and no command from another caller in between.
    func pipeline(_ commands: [RedisCommand]) async throws(RedisError) -> [RedisReply]

    /// Whether every key lives on one server, so one script may take keys of different hash slots
    /// (false for a Redis Cluster, where a script's keys must share a slot).
    var keysShareOneNode: Bool { get }
}

extension RedisCommandExecutor {
    /// Not assumed: an executor that knows it talks to one server says so.
    public var keysShareOneNode: Bool { false }

    /// `send(["GET", key])` without building a ``RedisCommand`` first.
    public func send(_ arguments: String...) async throws(RedisError) -> RedisReply {
        try await send(RedisCommand(arguments))
    }

    /// Like ``send(_:)``, but an error reply is thrown as ``RedisError/Code/serverError``.
    @discardableResult
    public func execute(_ command: RedisCommand) async throws(RedisError) -> RedisReply {
        try await send(command).throwingServerError()
    }

    /// Like ``send(_:)``, but an error reply is thrown as ``RedisError/Code/serverError``.
    @discardableResult
    public func execute(_ arguments: String...) async throws(RedisError) -> RedisReply {
        try await send(RedisCommand(arguments)).throwingServerError()
    }

    /// Runs `script` with `EVALSHA`; if Redis does not know it (`NOSCRIPT`, after a restart or
    /// `SCRIPT FLUSH`), sends the source once with `EVAL`, which runs it and caches it for the next
    /// `EVALSHA`. An error raised by the script is thrown as ``RedisError/Code/serverError``.
    public func evalScript(_ script: RedisScript, keys: [String] = [], args: [String] = []) async throws(RedisError) -> RedisReply {
        try await evalScript(script, keys: keys.map { Array($0.utf8) }, args: args.map { Array($0.utf8) })
    }

    /// Sends `commands` — each `EVALSHA <script's sha1> numkeys keys… args…` — in one pipeline. Those
    /// Redis refused with `NOSCRIPT` (a server that restarted or ran `SCRIPT FLUSH`, or a Redis
    /// Cluster node that never ran the script) did not run; they are sent again as `EVAL` with the
    /// source, which runs them and caches the script on whichever node they reach.
    public func pipelineScript(_ script: RedisScript, _ commands: [RedisCommand]) async throws(RedisError) -> [RedisReply] {
        var replies = try await pipeline(commands)
        let refused = replies.indices.filter { replies[$0].errorMessage?.hasPrefix("NOSCRIPT") == true }
        guard !refused.isEmpty else { return replies }
        let again = refused.map { index -> RedisCommand in
            var command: RedisCommand = ["EVAL", script.source]
            command.append(contentsOf: Array(commands[index].arguments.dropFirst(2)))
            return command
        }
        for (index, reply) in zip(refused, try await pipeline(again)) { replies[index] = reply }
        return replies
    }

    /// ``evalScript(_:keys:args:)`` with binary keys and arguments.
    public func evalScript(_ script: RedisScript, keys: [[UInt8]], args: [[UInt8]]) async throws(RedisError) -> RedisReply {
        func command(_ name: String, _ body: String) -> RedisCommand {
            var command: RedisCommand = [name, body]
            command.append(keys.count)
            command.append(contentsOf: keys)
            command.append(contentsOf: args)
            return command
        }
        let reply = try await send(command("EVALSHA", script.sha1))
        if case .error(let message) = reply, message.hasPrefix("NOSCRIPT") {
            return try await send(command("EVAL", script.source)).throwingServerError()
        }
        return try reply.throwingServerError()
    }
}
