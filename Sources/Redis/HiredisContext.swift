import CHiredis
import Glibc

/// The one owner of a hiredis `redisContext`: a blocking connection to one server.
///
/// Used only by the connection thread that created it; never shared, never handed out. A broken
/// context is not repaired (hiredis leaves it unusable after any error): the owner drops it, which frees
/// it, and connects a fresh one.
final class HiredisContext {
    private let context: UnsafeMutablePointer<redisContext>
    let endpoint: RedisEndpoint
    private let commandTimeout: Duration
    /// Pointer and length arrays for `redisAppendCommandArgv`, reused for every command.
    private var argv = ArgvBuffer()

    /// Connects within `connectTimeout` and bounds every later send and receive by `commandTimeout`.
    init(endpoint: RedisEndpoint, connectTimeout: Duration, commandTimeout: Duration) throws(RedisError) {
        self.endpoint = endpoint
        self.commandTimeout = commandTimeout
        guard let context = redisConnectWithTimeout(endpoint.host, Int32(endpoint.port), timeval(connectTimeout)) else {
            throw RedisError.connectionFailed(endpoint, cause: "out of memory allocating the hiredis context")
        }
        self.context = context
        if context.pointee.err != 0 {
            // deinit frees the context.
            throw failure(during: .connect, errno: errno)
        }
        guard redisSetTimeout(context, timeval(commandTimeout)) == REDIS_OK else {
            throw failure(during: .connect, errno: errno)
        }
    }

    deinit {
        redisFree(context)
    }

    /// Adds a command to the output buffer; nothing is sent until ``readReply()``.
    func append(_ command: RedisCommand) throws(RedisError) {
        let status: Int32
        if command.storage.isEmpty {
            // Only empty arguments (or none): hiredis copies zero bytes, but wants a valid pointer.
            var nothing: UInt8 = 0
            status = withUnsafePointer(to: &nothing) { base in
                argv.withArguments(of: command, at: UnsafeRawPointer(base)) { count, pointers, lengths in
                    redisAppendCommandArgv(context, Int32(count), pointers, lengths)
                }
            }
        } else {
            status = command.storage.withUnsafeBufferPointer { bytes in
                argv.withArguments(of: command, at: UnsafeRawPointer(bytes.baseAddress!)) { count, pointers, lengths in
                    redisAppendCommandArgv(context, Int32(count), pointers, lengths)
                }
            }
        }
        guard status == REDIS_OK else { throw failure(during: .send, errno: errno) }
    }

    /// Sends whatever is buffered, then blocks for the next reply (at most the command timeout per
    /// receive). Any error leaves the context unusable.
    func readReply() throws(RedisError) -> RedisReply {
        var raw: UnsafeMutableRawPointer?
        guard redisGetReply(context, &raw) == REDIS_OK, let raw else {
            throw failure(during: .receive, errno: errno)
        }
        let reply = raw.assumingMemoryBound(to: redisReply.self)
        defer { freeReplyObject(raw) }
        return RedisReply(reply)
    }

    /// One command, one reply (the handshake's `AUTH`, `SELECT`, `PING`).
    func roundTrip(_ command: RedisCommand) throws(RedisError) -> RedisReply {
        try append(command)
        return try readReply()
    }

    enum Phase {
        case connect, send, receive
    }

    /// The one place hiredis error codes become ``RedisError``s.
    ///
    /// `errno` must be captured right after the failing call: hiredis reports a receive timeout
    /// (`SO_RCVTIMEO` expiring) only as an I/O error whose errno is `EAGAIN`.
    private func failure(during phase: Phase, errno code: Int32) -> RedisError {
        let cause = withUnsafeBytes(of: context.pointee.errstr) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        let kind = context.pointee.err
        switch phase {
        case .connect:
            return .connectionFailed(endpoint, cause: cause.isEmpty ? "error \(kind)" : cause)
        case .send, .receive:
            if kind == REDIS_ERR_IO && (code == EAGAIN || code == EWOULDBLOCK) {
                return RedisError(
                    .timeout,
                    "no \(phase == .send ? "progress sending to" : "reply from") Redis at \(endpoint) within \(commandTimeout.milliseconds) ms (command_timeout_ms)"
                )
            }
            let detail =
                switch kind {
                case REDIS_ERR_EOF: "the server closed the connection"
                case REDIS_ERR_PROTOCOL: "protocol error: \(cause)"
                case REDIS_ERR_OOM: "out of memory"
                default: cause
                }
            return RedisError(.connectionLost, "connection to Redis at \(endpoint) lost: \(detail)")
        }
    }
}

/// Reusable `const char *argv[]` and `size_t argvlen[]` arrays for `redisAppendCommandArgv`, so sending
/// a command allocates nothing on the Swift side.
private struct ArgvBuffer {
    private var pointers: [UnsafePointer<CChar>?] = []
    private var lengths: [Int] = []

    /// Calls `body` with argv arrays pointing into `base`, the command's storage.
    mutating func withArguments<Result>(
        of command: RedisCommand,
        at base: UnsafeRawPointer,
        _ body: (Int, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> Result
    ) -> Result {
        let count = command.count
        if pointers.count < count {
            pointers = Array(repeating: nil, count: max(count, 2 * pointers.count, 8))
            lengths = Array(repeating: 0, count: pointers.count)
        }
        var start = 0
        for (index, end) in command.ends.enumerated() {
            pointers[index] = (base + start).assumingMemoryBound(to: CChar.self)
            lengths[index] = end - start
            start = end
        }
        return pointers.withUnsafeMutableBufferPointer { argv in
            lengths.withUnsafeBufferPointer { argvlen in
                body(count, argv.baseAddress!, argvlen.baseAddress!)
            }
        }
    }
}

extension timeval {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self.init(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
    }
}

extension Duration {
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
