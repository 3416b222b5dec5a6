import Foundation
public import Redis

/// Why a token-registry operation failed, with a message a person can act on.
///
/// A struct around a private code, so cases can be added without breaking callers; compare with the
/// static members (`error.code == .unavailable`) or read ``isRetryable``.
public struct RegistryError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable, Hashable {
            case unavailable
            case corruptRecord
            case serverError
        }

        fileprivate let base: Base
        public var description: String { base.rawValue }

        /// Redis could not be reached or did not answer within the command timeout, or it is
        /// temporarily refusing work (loading, read-only replica, busy script). Retry later; every
        /// registry operation is safe to repeat (HTTP: `503`; queue: retry tier).
        public static let unavailable = Code(base: .unavailable)
        /// A stored value is not what this module writes (a hand-edited hash, a key of the wrong type).
        /// ``RegistryError/key`` and ``RegistryError/field`` say where.
        public static let corruptRecord = Code(base: .corruptRecord)
        /// Redis answered with an error that retrying will not fix (a script error, `NOPERM`, …).
        public static let serverError = Code(base: .serverError)
    }

    public let code: Code
    /// What went wrong, for people; names the key and field for ``Code/corruptRecord``.
    public let message: String
    /// The Redis key at fault, for ``Code/corruptRecord``.
    public let key: String?
    /// The hash field at fault, for ``Code/corruptRecord``.
    public let field: String?
    /// The Redis client's error behind ``Code/unavailable`` and ``Code/serverError``.
    public let underlying: RedisError?

    public init(_ code: Code, _ message: String, key: String? = nil, field: String? = nil, underlying: RedisError? = nil) {
        self.code = code
        self.message = message
        self.key = key
        self.field = field
        self.underlying = underlying
    }

    public var description: String { "token registry \(code): \(message)" }

    /// Whether trying again later may succeed: true for ``Code/unavailable`` only.
    public var isRetryable: Bool { code == .unavailable }
}

extension RegistryError {
    /// Error replies that mean "not now" rather than "never": the server is starting, failing over,
    /// out of memory, or stuck in a long script.
    private static let transientReplyPrefixes = ["LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "READONLY", "CLUSTERDOWN", "OOM", "LAYOUT"]

    /// The single-tag layout refused a write because the registry started moving to shards (the
    /// scripts' `LAYOUT` error): read the layout again and write there.
    var isLayoutRefusal: Bool { underlying?.message.hasPrefix("LAYOUT") == true }

    /// Redis refused a write because it is at its `maxmemory` (`noeviction`): full, not down.
    public var isOutOfMemory: Bool { underlying?.isOutOfMemory == true }

    /// Classifies a Redis client error for `operation` (e.g. `upsert of push:{app}:token:ab12…`).
    static func redis(_ error: RedisError, during operation: String, key: String) -> RegistryError {
        switch error.code {
        case .serverError:
            if error.message.hasPrefix("WRONGTYPE") {
                return RegistryError(
                    .corruptRecord,
                    "\(operation): a key of the registry holds the wrong kind of value (\(error.message))",
                    key: key,
                    underlying: error
                )
            }
            if transientReplyPrefixes.contains(where: { error.message.hasPrefix($0) }) {
                return RegistryError(.unavailable, "\(operation): Redis is not accepting commands right now: \(error.message)", underlying: error)
            }
            return RegistryError(.serverError, "\(operation): Redis answered with an error: \(error.message)", underlying: error)
        case .protocolError:
            return RegistryError(.serverError, "\(operation): \(error.message)", underlying: error)
        default:
            // Unreachable, timed out, connection lost, refused AUTH, or closed by this process: the
            // registry is unusable from here for now.
            return RegistryError(.unavailable, "\(operation): Redis is unavailable: \(error.message)", underlying: error)
        }
    }

    static func corrupt(key: String, field: String, _ problem: String) -> RegistryError {
        RegistryError(.corruptRecord, "\(redacted(key)) field \(field): \(problem)", key: key, field: field)
    }

    /// `key` for messages, which end up in logs: a record key's token is cut to its first 8 digits
    /// (`push:{app}:token:ab12cd34…`), as ``PushCore/DeviceToken/redacted`` does. ``key`` keeps it whole.
    static func redacted(_ key: String) -> String {
        guard let marker = key.range(of: ":token:", options: .backwards) else { return key }
        let hex = key[marker.upperBound...]
        return hex.count > 8 ? key[..<marker.upperBound] + hex.prefix(8) + "…" : key
    }

    static func unexpectedReply(_ reply: RedisReply, during operation: String) -> RegistryError {
        RegistryError(.serverError, "\(operation): unexpected reply \(reply)")
    }
}
