/// One reply from Redis, as RESP2 defines it.
///
/// Bulk strings stay bytes (``bulk(_:)``) because Redis values are binary; ``string`` decodes them when
/// the caller knows they are text. The raw API (``RedisCommandExecutor/send(_:)``) returns `-ERR`
/// replies as ``error(_:)`` so one failed command in a pipeline does not hide the others' replies.
public enum RedisReply: Sendable, Hashable {
    /// A simple string such as `OK` or `PONG`.
    case status(String)
    /// An error reply, e.g. `WRONGTYPE Operation against a key holding the wrong kind of value`.
    case error(String)
    case integer(Int64)
    /// A bulk string, binary-safe.
    case bulk([UInt8])
    /// An array, possibly nested, possibly holding ``null`` elements.
    case array([RedisReply])
    /// A nil bulk string or nil array (`GET` of a missing key, a timed-out `BLPOP`).
    case null
}

extension RedisReply {
    /// The text of a bulk string (decoded as UTF-8, with replacement characters for invalid bytes)
    /// or of a status; nil for other replies.
    public var string: String? {
        switch self {
        case .bulk(let bytes): String(decoding: bytes, as: UTF8.self)
        case .status(let text): text
        default: nil
        }
    }

    /// The bytes of a bulk string or a status; nil for other replies.
    public var bytes: [UInt8]? {
        switch self {
        case .bulk(let bytes): bytes
        case .status(let text): Array(text.utf8)
        default: nil
        }
    }

    /// An integer reply, or a bulk string holding a decimal integer (`GET` of a counter).
    public var integer: Int64? {
        switch self {
        case .integer(let value): value
        case .bulk(let bytes): Int64(String(decoding: bytes, as: UTF8.self))
        default: nil
        }
    }

    /// The elements of an array reply; nil for other replies (including ``null``).
    public var array: [RedisReply]? {
        if case .array(let elements) = self { elements } else { nil }
    }

    public var isNull: Bool {
        if case .null = self { true } else { false }
    }

    /// The message of an error reply; nil for other replies.
    public var errorMessage: String? {
        if case .error(let message) = self { message } else { nil }
    }

    /// `self`, or ``RedisError/Code/serverError`` when Redis answered with an error reply.
    @discardableResult
    public func throwingServerError() throws(RedisError) -> RedisReply {
        if case .error(let message) = self {
            throw RedisError(.serverError, message)
        }
        return self
    }
}

extension RedisReply: CustomStringConvertible {
    /// A short rendering for logs and test failures; long bulk strings are truncated.
    public var description: String {
        switch self {
        case .status(let text): "+\(text)"
        case .error(let message): "-\(message)"
        case .integer(let value): ":\(value)"
        case .bulk(let bytes):
            bytes.count <= 64
                ? "\"\(String(decoding: bytes, as: UTF8.self))\""
                : "\"\(String(decoding: bytes.prefix(64), as: UTF8.self))…\" (\(bytes.count) bytes)"
        case .array(let elements): "[\(elements.map(\.description).joined(separator: ", "))]"
        case .null: "nil"
        }
    }
}
