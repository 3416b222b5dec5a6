public import PushCore

/// One `push.registrations` message, decoded and checked (CONTRACT.md, "Registration HTTP API"; issue
/// "push-ingest", queue ingestion).
///
/// The body is the `PUT /v1/apps/{app}/devices/{token}` body plus the two path parts and an optional
/// operation:
///
/// ```json
/// {"app": "com.example.game", "token": "740f4707…", "user": "alice", "topics": ["news"], …}
/// {"app": "com.example.game", "token": "740f4707…", "op": "delete"}
/// ```
///
/// - `app` (required): a bundle id of the apps file, exactly;
/// - `token` (required): normalised like the HTTP path's token (`<`, `>` and spaces stripped, any case);
/// - `op`: `"upsert"` (the default) or `"delete"`; a delete ignores the registration fields;
/// - the rest: the registration fields, checked by ``PushCore/DeviceRegistration/init(json:)``.
///
/// Pure: the consumer does the I/O.
public enum RegistrationMessage: Sendable, Equatable {
    case upsert(app: AppConfiguration, token: DeviceToken, registration: DeviceRegistration)
    case delete(app: AppConfiguration, token: DeviceToken)

    /// The fields a message adds to the registration body.
    public static let envelopeFields: Set<String> = ["app", "token", "op"]

    /// Decodes `body`.
    ///
    /// - Throws: ``PushCore/RegistrationError`` naming the field (`body`, `app`, `token`, `op`,
    ///   `settings.alert`, …): the reason a dead-lettered message carries.
    public init(body: [UInt8], apps: AppsFile) throws(RegistrationError) {
        var object = try DeviceRegistration.decode(body: body)
        guard let appValue = object.removeValue(forKey: "app") else {
            throw RegistrationError(.missingField, field: "app", "is required (the app's bundle id)")
        }
        guard let bundleID = appValue as? String else {
            throw RegistrationError(.invalidField, field: "app", "must be a string (the app's bundle id)")
        }
        guard let app = apps.app(bundleID: bundleID) else {
            throw RegistrationError(.invalidField, field: "app", "names no configured app: \(Self.quoted(bundleID))")
        }
        guard let tokenValue = object.removeValue(forKey: "token") else {
            throw RegistrationError(.missingField, field: "token", "is required")
        }
        guard let tokenText = tokenValue as? String else {
            throw RegistrationError(.invalidField, field: "token", "must be a string of hex digits")
        }
        let token = try DeviceToken(normalizing: tokenText)
        let operation: String
        switch object.removeValue(forKey: "op") {
        case nil: operation = "upsert"
        case let value as String: operation = value
        default: throw RegistrationError(.invalidField, field: "op", "must be \"upsert\" or \"delete\"")
        }
        switch operation {
        case "upsert":
            self = .upsert(app: app, token: token, registration: try DeviceRegistration(json: object))
        case "delete":
            self = .delete(app: app, token: token)
        default:
            throw RegistrationError(.invalidField, field: "op", "must be \"upsert\" or \"delete\", got \(Self.quoted(operation))")
        }
    }

    public var app: AppConfiguration {
        switch self {
        case .upsert(let app, _, _), .delete(let app, _): app
        }
    }

    public var token: DeviceToken {
        switch self {
        case .upsert(_, let token, _), .delete(_, let token): token
        }
    }

    /// `upsert` or `delete`, for logs.
    public var operationName: String {
        switch self {
        case .upsert: "upsert"
        case .delete: "delete"
        }
    }

    private static func quoted(_ text: String) -> String {
        let shown = text.count > 64 ? String(text.prefix(64)) + "…" : text
        return "\"\(shown.unicodeScalars.map { $0.escaped(asASCII: false) }.joined())\""
    }
}
