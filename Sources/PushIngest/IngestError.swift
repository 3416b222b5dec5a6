public import PushCore
import Redis
import TokenRegistry

/// Why push-ingest refused a registration request, with everything an answer needs: the HTTP status,
/// the API's `{"error": "<code>", "message": "<field>: <what>"}` and the legacy forms' `ret` code.
///
/// | code (`error`) | HTTP | legacy `ret` | when |
/// |---|---|---|---|
/// | `invalid_token`, `invalid_field`, `missing_field`, `invalid_json` | 400 | 1 | a field is wrong (``PushCore/RegistrationError``); `message` names it |
/// | `unauthorized` | 401 (+ `WWW-Authenticate: Bearer`) | – | no `Authorization: Bearer <key>` header |
/// | `forbidden` | 403 | – | a bearer key that is not one of this app's `ingest.api_keys` (wrong, or another app's) |
/// | `bad_credential` | 403 | 2 | the legacy `credential` is missing or does not match |
/// | `stale_timestamp` | 403 | 3 | the legacy `timestamp` is outside the app's `timestamp_window_s` |
/// | `unknown_app` | 404 | 4 | the path's app is not in the apps file; legacy: no `app_name` match and no default app |
/// | `not_found` | 404 | 1 | no record for the token (`GET`), or no such route |
/// | `body_too_large` | 413 | 1 | the body is over `PUSH_INGEST_MAX_BODY_BYTES` |
/// | `request_timeout` | 408 | 1 | the request's body did not arrive within `PUSH_INGEST_REQUEST_TIMEOUT_S` (a client that sent less than its `Content-Length`, or stalled) |
/// | `unsupported_media_type` | 415 | 1 | `PUT` without `Content-Type: application/json`; legacy `POST` with a body that is not a form |
/// | `rate_limited` | 429 (+ `Retry-After`) | 5 | the client's or the app's rate limit is spent |
/// | `unavailable` | 503 | 6 | Redis is unreachable or did not answer within its command timeout |
/// | `timeout` | 503 | 6 | the whole request arrived, but answering it took longer than `PUSH_INGEST_REQUEST_TIMEOUT_S` |
/// | `internal` | 500 | 6 | a bug or a corrupt record; logged with the details |
public struct IngestError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Base: Sendable, Hashable {
            case invalidRequest(String)
            case unauthorized
            case forbidden
            case badCredential
            case staleTimestamp
            case unknownApp
            case notFound
            case methodNotAllowed
            case conflict
            case bodyTooLarge
            case unsupportedMediaType
            case rateLimited
            case unavailable
            case timeout
            case requestTimeout
            case `internal`
        }

        fileprivate let base: Base

        /// A field is wrong; the `error` is the ``PushCore/RegistrationError/Code`` (`invalid_token`, …).
        public static func invalidRequest(_ code: RegistrationError.Code) -> Code { Code(base: .invalidRequest(code.description)) }
        public static let unauthorized = Code(base: .unauthorized)
        public static let forbidden = Code(base: .forbidden)
        public static let badCredential = Code(base: .badCredential)
        public static let staleTimestamp = Code(base: .staleTimestamp)
        public static let unknownApp = Code(base: .unknownApp)
        public static let notFound = Code(base: .notFound)
        /// The path exists, with other methods (the answer's `Allow` names them).
        public static let methodNotAllowed = Code(base: .methodNotAllowed)
        /// A newer registration or deletion of the token is already stored (clocks apart): nothing changed.
        public static let conflict = Code(base: .conflict)
        public static let bodyTooLarge = Code(base: .bodyTooLarge)
        public static let unsupportedMediaType = Code(base: .unsupportedMediaType)
        public static let rateLimited = Code(base: .rateLimited)
        public static let unavailable = Code(base: .unavailable)
        public static let timeout = Code(base: .timeout)
        /// The request's body did not arrive in time: the client's doing, so a 4xx.
        public static let requestTimeout = Code(base: .requestTimeout)
        public static let `internal` = Code(base: .internal)

        /// The `error` of the JSON answer, also the `outcome` label of the metrics.
        public var description: String {
            switch base {
            case .invalidRequest(let code): code
            case .unauthorized: "unauthorized"
            case .forbidden: "forbidden"
            case .badCredential: "bad_credential"
            case .staleTimestamp: "stale_timestamp"
            case .unknownApp: "unknown_app"
            case .notFound: "not_found"
            case .methodNotAllowed: "method_not_allowed"
            case .conflict: "conflict"
            case .bodyTooLarge: "body_too_large"
            case .unsupportedMediaType: "unsupported_media_type"
            case .rateLimited: "rate_limited"
            case .unavailable: "unavailable"
            case .timeout: "timeout"
            case .requestTimeout: "request_timeout"
            case .internal: "internal"
            }
        }
    }

    public let code: Code
    /// The field at fault (`token`, `settings.alert`, `device_token`, `credential`), when there is one.
    public let field: String?
    /// What is wrong; with a field, `<field>: <what>`.
    public let message: String
    /// For ``Code/rateLimited``: when the same request would be allowed.
    public let retryAfter: Duration?
    /// What went wrong underneath (a Redis error naming the server), for the log only: answers never
    /// show the infrastructure.
    public let cause: String?

    public init(_ code: Code, field: String? = nil, _ reason: String, retryAfter: Duration? = nil, cause: String? = nil) {
        self.code = code
        self.field = field
        self.message = field.map { "\($0): \(reason)" } ?? reason
        self.retryAfter = retryAfter
        self.cause = cause
    }

    /// A 400 naming the field of `error`.
    public init(_ error: RegistrationError) {
        self.init(.invalidRequest(error.code), field: error.field, error.reason)
    }

    public var description: String { "\(code): \(message)" }

    /// The HTTP status of the answer.
    public var status: Int {
        switch code.base {
        case .invalidRequest: 400
        case .unauthorized: 401
        case .forbidden, .badCredential, .staleTimestamp: 403
        case .unknownApp, .notFound: 404
        case .methodNotAllowed: 405
        case .requestTimeout: 408
        case .conflict: 409
        case .bodyTooLarge: 413
        case .unsupportedMediaType: 415
        case .rateLimited: 429
        case .unavailable, .timeout: 503
        case .internal: 500
        }
    }

    /// The legacy forms' `ret` (see the table above; `0` is success).
    public var legacyReturnCode: Int {
        switch code.base {
        case .invalidRequest, .notFound, .methodNotAllowed, .bodyTooLarge, .unsupportedMediaType, .requestTimeout: 1
        case .badCredential, .unauthorized, .forbidden: 2
        case .staleTimestamp: 3
        case .unknownApp: 4
        case .rateLimited: 5
        case .unavailable, .timeout, .internal, .conflict: 6
        }
    }

    /// `Retry-After` in whole seconds, rounded up and at least 1.
    public var retryAfterSeconds: Int? {
        retryAfter.map { duration in
            let (seconds, attoseconds) = duration.components
            return max(1, Int(seconds) + (attoseconds > 0 ? 1 : 0))
        }
    }

    /// `{"error":"<code>","message":"<message>"}`
    public var jsonBody: String {
        "{\"error\":\(Self.quoted(code.description)),\"message\":\(Self.quoted(message))}"
    }

    /// `{"ret":<n>,"msg":"<message>"}`
    public var legacyJSONBody: String {
        "{\"ret\":\(legacyReturnCode),\"msg\":\(Self.quoted(message))}"
    }

    /// The answer for a registry failure: `503` when Redis is unavailable, `500` otherwise (a corrupt
    /// record or a script error: retrying will not help, and the log has the details).
    static func registry(_ error: RegistryError) -> IngestError {
        if error.isOutOfMemory {
            return IngestError(.unavailable, fullMessage, cause: error.description)
        }
        return error.code == .unavailable
            ? IngestError(.unavailable, unavailableMessage, cause: error.description)
            : IngestError(.internal, "the token registry failed; the error has been logged", cause: error.description)
    }

    /// What a client hears while Redis is unreachable.
    static let unavailableMessage = "registrations are temporarily unavailable; try again later"

    /// Redis is at its `maxmemory`: it refuses writes (rate limits included) until ops make room.
    static let fullMessage = "the registry is full and takes no new registrations now; try again later"

    /// The answer when the rate limiter's Redis fails: `503`, saying "full" when it is out of memory.
    static func rateLimiter(_ error: any Error) -> IngestError {
        let full = (error as? RedisError)?.isOutOfMemory == true
        return IngestError(.unavailable, full ? fullMessage : unavailableMessage, cause: "rate limiter: \(error)")
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped.
    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    /// Why a new Live Activity slot was refused on a device at its cap.
    static func slotCapMessage(_ cap: Int) -> String {
        "holds \(cap) Live Activity slots, the app's cap (ingest.max_activity_slots); delete ended activities' tokens first"
    }
}
