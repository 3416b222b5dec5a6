/// An error from the Redis client, with a message a person can act on.
///
/// A struct around a private code, so new cases can be added without breaking callers; compare with
/// the static members (`error.code == .timeout`) or read ``isRetryable``. Messages name the server as
/// `host:port` and never contain a password.
public struct RedisError: Error, Sendable, CustomStringConvertible, Equatable {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable, Hashable {
            case invalidURL
            case connectionFailed
            case authenticationFailed
            case timeout
            case connectionLost
            case serverError
            case protocolError
            case closed
        }

        fileprivate let base: Base
        public var description: String { base.rawValue }

        /// The URL could not be parsed or names an unsupported option; ``RedisError/field`` says which part.
        public static let invalidURL = Code(base: .invalidURL)
        /// No connection could be opened (refused, unreachable, timed out, DNS) or `SELECT` failed.
        public static let connectionFailed = Code(base: .connectionFailed)
        /// The server refused `AUTH`, or needs a password and none was given (`NOAUTH`).
        public static let authenticationFailed = Code(base: .authenticationFailed)
        /// No reply within the command timeout. The command may still have run on the server.
        public static let timeout = Code(base: .timeout)
        /// The connection broke with the command in flight. The command may or may not have run.
        public static let connectionLost = Code(base: .connectionLost)
        /// Redis answered with an error reply (`-ERR …`), raised by the throwing conveniences only.
        public static let serverError = Code(base: .serverError)
        /// Bytes that are not RESP, from the reply parser.
        public static let protocolError = Code(base: .protocolError)
        /// The connection or client was closed by this process.
        public static let closed = Code(base: .closed)
    }

    public let code: Code
    /// What went wrong, for people.
    public let message: String
    /// The part of the input that was wrong (`"port"`, `"password"`, `"command_timeout_ms"`), when there is one.
    public let field: String?

    public init(_ code: Code, _ message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }

    public var description: String { "Redis \(code): \(message)" }

    /// Whether trying again later (after a reconnect) may succeed.
    ///
    /// `timeout` and `connectionLost` are retryable but not idempotent: the command may have run, so
    /// retry only commands whose repetition is harmless (reads, `SET`, scripts written to be replayed).
    public var isRetryable: Bool {
        switch code.base {
        case .connectionFailed, .timeout, .connectionLost: true
        case .invalidURL, .authenticationFailed, .serverError, .protocolError, .closed: false
        }
    }

    /// Redis refused a write because it is at its `maxmemory` with `noeviction`: full, not down.
    public var isOutOfMemory: Bool { code == .serverError && message.hasPrefix("OOM") }
}

extension RedisError {
    static func invalidURL(_ message: String, field: String) -> RedisError {
        RedisError(.invalidURL, message, field: field)
    }

    static func connectionFailed(_ endpoint: RedisEndpoint, cause: String) -> RedisError {
        RedisError(.connectionFailed, "could not connect to Redis at \(endpoint): \(cause)")
    }

    static func authenticationFailed(_ endpoint: RedisEndpoint, _ detail: String) -> RedisError {
        RedisError(.authenticationFailed, "Redis at \(endpoint) refused authentication: \(detail)")
    }

    static func closed(_ endpoint: RedisEndpoint) -> RedisError {
        RedisError(.closed, "the connection to Redis at \(endpoint) was closed by this process")
    }
}
