import Foundation

extension AppsFile {
    /// Decodes and checks an apps file.
    ///
    /// - Parameters:
    ///   - json: The file's bytes.
    ///   - directory: The apps file's directory; relative credential paths are resolved against it
    ///     (`""` leaves them relative to the working directory).
    /// - Throws: ``AppsFileError`` naming the app and the field.
    public init(json: Data, directory: String = "") throws(AppsFileError) {
        let root: JSONNode
        do {
            root = try JSONDecoder().decode(JSONNode.self, from: json)
        } catch {
            throw AppsFileError(.invalidJSON, field: "", app: nil, reason: "not valid JSON: \(Self.describe(error))")
        }
        guard case .object(let object) = root else {
            throw AppsFileError(.invalidJSON, field: "", app: nil, reason: "the top level must be a JSON object with \"apps\"")
        }
        let top = ObjectReader(path: "", app: nil, object: object)
        try top.rejectUnknownFields(allowed: ["apps"])
        guard let appsObject = try top.object("apps") else {
            throw AppsFileError(.missingField, field: "apps", app: nil, reason: "is required")
        }
        var apps: [AppConfiguration] = []
        for bundleID in appsObject.object.keys.sorted() {
            let pathComponent = "[\(AppsFileError.quoted(bundleID))]"
            guard let app = try appsObject.object(bundleID, pathComponent: pathComponent, app: bundleID) else {
                throw AppsFileError(.wrongType, field: "apps" + pathComponent, app: bundleID, reason: "must be an object, got null")
            }
            apps.append(try Self.decodeApp(bundleID: bundleID, app, directory: directory))
        }
        try self.init(apps: apps)
    }

    private static func decodeApp(bundleID: String, _ app: ObjectReader, directory: String) throws(AppsFileError) -> AppConfiguration {
        try app.rejectUnknownFields(allowed: ["display_names", "default", "environment", "apns", "ingest", "rate_limits", "delivery"])
        if let problem = AppConfiguration.bundleIDProblem(bundleID) {
            throw AppsFileError(.invalidValue, field: app.path, app: bundleID, reason: problem)
        }
        var environment = AppConfiguration.Environment.production
        if let name = try app.string("environment") {
            guard let value = AppConfiguration.Environment(rawValue: name) else {
                throw AppsFileError(
                    .invalidValue,
                    field: app.fieldPath("environment"),
                    app: bundleID,
                    reason: "must be \"production\" or \"sandbox\", got \(AppsFileError.quoted(name))"
                )
            }
            environment = value
        }
        guard let apns = try app.object("apns") else {
            throw AppsFileError(.missingField, field: app.fieldPath("apns"), app: bundleID, reason: "is required")
        }
        return AppConfiguration(
            bundleID: bundleID,
            displayNames: try app.stringArray("display_names") ?? [],
            isDefault: try app.bool("default") ?? false,
            environment: environment,
            apns: try decodeAPNs(apns, directory: directory),
            ingest: try decodeIngest(app.object("ingest"), directory: directory),
            rateLimits: try decodeRateLimits(app.object("rate_limits")),
            delivery: try decodeDelivery(app.object("delivery"), app: bundleID)
        )
    }

    private static func decodeAPNs(_ apns: ObjectReader, directory: String) throws(AppsFileError) -> AppConfiguration.APNsCredentials {
        let tokenFields = ["key_file", "key_id", "team_id"]
        let certificateFields = ["certificate_file", "certificate_password", "private_key_file"]
        try apns.rejectUnknownFields(allowed: tokenFields + certificateFields)
        let present = Set(apns.object.keys)
        let usesToken = !present.isDisjoint(with: tokenFields)
        let usesCertificate = !present.isDisjoint(with: certificateFields)
        if usesToken && usesCertificate {
            throw AppsFileError(
                .invalidValue,
                field: apns.path,
                app: apns.app,
                reason: "use either token auth (key_file, key_id, team_id) or a certificate (certificate_file, …), not both"
            )
        }
        if usesToken {
            return .token(
                AppConfiguration.TokenKey(
                    keyFile: resolve(try apns.requiredString("key_file", requirement: "is required for token auth"), in: directory),
                    keyID: try apns.requiredString("key_id", requirement: "is required for token auth"),
                    teamID: try apns.requiredString("team_id", requirement: "is required for token auth")
                )
            )
        }
        if !usesCertificate {
            throw AppsFileError(
                .missingField,
                field: apns.path,
                app: apns.app,
                reason: "needs token auth (key_file, key_id, team_id) or a certificate (certificate_file)"
            )
        }
        let certificateFile = try apns.requiredString("certificate_file", requirement: "is required for certificate auth")
        let password = try apns.string("certificate_password")
        if let privateKeyFile = try apns.string("private_key_file") {
            if password != nil {
                throw AppsFileError(
                    .invalidValue,
                    field: apns.fieldPath("certificate_password"),
                    app: apns.app,
                    reason: "belongs to a PKCS#12 certificate_file; a PEM certificate with private_key_file takes no password"
                )
            }
            return .pem(certificateFile: resolve(certificateFile, in: directory), privateKeyFile: resolve(privateKeyFile, in: directory))
        }
        let lowercased = certificateFile.lowercased()
        if password == nil, lowercased.hasSuffix(".pem") || lowercased.hasSuffix(".crt") {
            throw AppsFileError(
                .missingField,
                field: apns.fieldPath("private_key_file"),
                app: apns.app,
                reason: "is required with a PEM certificate_file (\(AppsFileError.quoted(certificateFile)))"
            )
        }
        return .pkcs12(certificateFile: resolve(certificateFile, in: directory), password: password ?? "")
    }

    private static func decodeIngest(_ ingest: ObjectReader?, directory: String) throws(AppsFileError) -> AppConfiguration.Ingest {
        guard let ingest else {
            return AppConfiguration.Ingest()
        }
        try ingest.rejectUnknownFields(
            allowed: [
                "api_keys", "credential", "secret", "secret_file", "timestamp_window_s", "push_token", "max_activity_slots",
                "new_tokens_per_minute",
            ])
        var credential = AppConfiguration.Credential.hmacSHA256
        let named = try ingest.string("credential")
        if let name = named {
            guard let value = AppConfiguration.Credential(rawValue: name) else {
                throw AppsFileError(
                    .invalidValue,
                    field: ingest.fieldPath("credential"),
                    app: ingest.app,
                    reason: "must be \"md5\", \"hmac-sha256\" or \"none\", got \(AppsFileError.quoted(name))"
                )
            }
            credential = value
        }
        var window = AppConfiguration.Ingest.defaultTimestampWindow
        if let seconds = try ingest.int("timestamp_window_s") {
            if seconds < 1 || seconds > AppConfiguration.Ingest.maximumTimestampWindowSeconds {
                throw AppsFileError(
                    .invalidValue,
                    field: ingest.fieldPath("timestamp_window_s"),
                    app: ingest.app,
                    reason: "must be 1–\(AppConfiguration.Ingest.maximumTimestampWindowSeconds) (seconds), got \(seconds)"
                )
            }
            window = .seconds(seconds)
        }
        let secret = try ingest.string("secret")
        let secretFile = try ingest.string("secret_file")
        if secret != nil, secretFile != nil {
            throw AppsFileError(
                .invalidValue, field: ingest.fieldPath("secret_file"), app: ingest.app,
                reason: "use either secret or secret_file, not both")
        }
        if named != nil, credential == .hmacSHA256, (secret ?? "").isEmpty, (secretFile ?? "").isEmpty {
            throw AppsFileError(
                .missingField,
                field: ingest.fieldPath("secret"),
                app: ingest.app,
                reason: "is required when credential is \"hmac-sha256\" (or secret_file: a file holding it)"
            )
        }
        return AppConfiguration.Ingest(
            apiKeys: try ingest.stringArray("api_keys") ?? [],
            credential: credential,
            secret: secret,
            secretFile: secretFile.map { resolve($0, in: directory) },
            timestampWindow: window,
            pushToken: try ingest.bool("push_token") ?? false,
            maxActivitySlots: try maxActivitySlots(ingest),
            newTokensPerMinute: try newTokensPerMinute(ingest)
        )
    }

    private static func newTokensPerMinute(_ ingest: ObjectReader) throws(AppsFileError) -> Int {
        guard let budget = try ingest.int("new_tokens_per_minute") else { return AppConfiguration.Ingest.defaultNewTokensPerMinute }
        guard (0...100_000_000).contains(budget) else {
            throw AppsFileError(
                .invalidValue, field: ingest.fieldPath("new_tokens_per_minute"), app: ingest.app,
                reason: "must be 0–100000000 (0 = no budget), got \(budget)")
        }
        return budget
    }

    private static func maxActivitySlots(_ ingest: ObjectReader) throws(AppsFileError) -> Int {
        guard let slots = try ingest.int("max_activity_slots") else { return AppConfiguration.Ingest.defaultMaxActivitySlots }
        guard (1...AppConfiguration.Ingest.maximumActivitySlots).contains(slots) else {
            throw AppsFileError(
                .invalidValue, field: ingest.fieldPath("max_activity_slots"), app: ingest.app,
                reason: "must be 1–\(AppConfiguration.Ingest.maximumActivitySlots), got \(slots)")
        }
        return slots
    }

    private static func decodeRateLimits(_ limits: ObjectReader?) throws(AppsFileError) -> AppConfiguration.RateLimits {
        guard let limits else {
            return AppConfiguration.RateLimits()
        }
        try limits.rejectUnknownFields(allowed: ["per_device_per_hour", "per_app_per_second", "drop_low_priority"])
        return AppConfiguration.RateLimits(
            perDevicePerHour: try limits.int("per_device_per_hour") ?? AppConfiguration.RateLimits.defaultPerDevicePerHour,
            perAppPerSecond: try limits.int("per_app_per_second") ?? AppConfiguration.RateLimits.defaultPerAppPerSecond,
            dropLowPriority: try limits.bool("drop_low_priority") ?? false
        )
    }

    private static func decodeDelivery(_ delivery: ObjectReader?, app bundleID: String) throws(AppsFileError) -> AppConfiguration.Delivery {
        guard let delivery else { return AppConfiguration.Delivery() }
        try delivery.rejectUnknownFields(allowed: ["guarantee", "collapse_id_from_request"])
        var guarantee = AppConfiguration.Delivery.Guarantee.atLeastOnce
        if let name = try delivery.string("guarantee") {
            guard let value = AppConfiguration.Delivery.Guarantee(rawValue: name) else {
                throw AppsFileError(
                    .invalidValue,
                    field: delivery.fieldPath("guarantee"),
                    app: bundleID,
                    reason: "must be \"at-least-once\" or \"at-most-once\", got \(AppsFileError.quoted(name))"
                )
            }
            guarantee = value
        }
        return AppConfiguration.Delivery(guarantee: guarantee, collapseIDFromRequest: try delivery.bool("collapse_id_from_request") ?? true)
    }

    /// `path` as is when absolute or when `directory` is empty, otherwise `directory/path`.
    static func resolve(_ path: String, in directory: String) -> String {
        if path.hasPrefix("/") || directory.isEmpty || directory == "." {
            return path
        }
        return directory.hasSuffix("/") ? directory + path : directory + "/" + path
    }

    private static func describe(_ error: any Error) -> String {
        if case DecodingError.dataCorrupted(let context) = error {
            if let underlying = context.underlyingError {
                return "\(underlying)"
            }
            return context.debugDescription
        }
        return "\(error)"
    }
}

// MARK: - JSON walking

extension AppsFile {
    /// A JSON value as the file has it, so type mismatches and unknown fields can be named.
    fileprivate enum JSONNode: Decodable {
        case null
        case bool(Bool)
        case int(Int)
        case double(Double)
        case string(String)
        case array([JSONNode])
        case object([String: JSONNode])

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let value = try? container.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? container.decode(Int.self) {
                self = .int(value)
            } else if let value = try? container.decode(Double.self) {
                self = .double(value)
            } else if let value = try? container.decode(String.self) {
                self = .string(value)
            } else if let value = try? container.decode([JSONNode].self) {
                self = .array(value)
            } else {
                self = .object(try container.decode([String: JSONNode].self))
            }
        }

        /// "a string", "a number", … for messages.
        var kind: String {
            switch self {
            case .null: "null"
            case .bool: "a boolean"
            case .int, .double: "a number"
            case .string: "a string"
            case .array: "an array"
            case .object: "an object"
            }
        }
    }

    /// Reads the fields of one JSON object, naming each field by its full path in errors.
    fileprivate struct ObjectReader {
        /// `apps["com.example.game"].apns`, or `""` at the top level.
        let path: String
        /// The app the object belongs to.
        let app: String?
        let object: [String: JSONNode]

        func fieldPath(_ key: String) -> String {
            path.isEmpty ? key : "\(path).\(key)"
        }

        func rejectUnknownFields(allowed: [String]) throws(AppsFileError) {
            if let unknown = object.keys.filter({ !allowed.contains($0) }).sorted().first {
                throw AppsFileError(
                    .unknownField,
                    field: fieldPath(unknown),
                    app: app,
                    reason: "unknown field (allowed here: \(allowed.joined(separator: ", ")))"
                )
            }
        }

        /// The value of `key`; `null` counts as absent (the field takes its default).
        private func node(_ key: String) -> JSONNode? {
            switch object[key] {
            case .none, .null: nil
            case .some(let node): node
            }
        }

        private func wrongType(_ key: String, expected: String, got node: JSONNode) -> AppsFileError {
            AppsFileError(.wrongType, field: fieldPath(key), app: app, reason: "must be \(expected), got \(node.kind)")
        }

        func string(_ key: String) throws(AppsFileError) -> String? {
            guard let node = node(key) else { return nil }
            guard case .string(let value) = node else {
                throw wrongType(key, expected: "a string", got: node)
            }
            return value
        }

        /// A string that must be present and not empty.
        func requiredString(_ key: String, requirement: String = "is required") throws(AppsFileError) -> String {
            guard let value = try string(key) else {
                throw AppsFileError(.missingField, field: fieldPath(key), app: app, reason: requirement)
            }
            if value.allSatisfy(\.isWhitespace) {
                throw AppsFileError(.invalidValue, field: fieldPath(key), app: app, reason: "must not be empty")
            }
            return value
        }

        func bool(_ key: String) throws(AppsFileError) -> Bool? {
            guard let node = node(key) else { return nil }
            guard case .bool(let value) = node else {
                throw wrongType(key, expected: "true or false", got: node)
            }
            return value
        }

        func int(_ key: String) throws(AppsFileError) -> Int? {
            guard let node = node(key) else { return nil }
            switch node {
            case .int(let value):
                return value
            case .double(let value):
                throw AppsFileError(.invalidValue, field: fieldPath(key), app: app, reason: "must be a whole number, got \(value)")
            default:
                throw wrongType(key, expected: "a whole number", got: node)
            }
        }

        func stringArray(_ key: String) throws(AppsFileError) -> [String]? {
            guard let node = node(key) else { return nil }
            guard case .array(let elements) = node else {
                throw wrongType(key, expected: "an array of strings", got: node)
            }
            var strings: [String] = []
            for (index, element) in elements.enumerated() {
                guard case .string(let value) = element else {
                    throw AppsFileError(
                        .wrongType,
                        field: "\(fieldPath(key))[\(index)]",
                        app: app,
                        reason: "must be a string, got \(element.kind)"
                    )
                }
                strings.append(value)
            }
            return strings
        }

        func object(_ key: String) throws(AppsFileError) -> ObjectReader? {
            try object(key, pathComponent: path.isEmpty ? key : ".\(key)", app: app)
        }

        /// A nested object; `pathComponent` is appended to ``path`` as is (`.apns`, `["com.example.game"]`).
        func object(_ key: String, pathComponent: String, app: String?) throws(AppsFileError) -> ObjectReader? {
            let childPath = path + pathComponent
            guard let node = node(key) else {
                return nil
            }
            guard case .object(let child) = node else {
                throw AppsFileError(.wrongType, field: childPath, app: app, reason: "must be an object, got \(node.kind)")
            }
            return ObjectReader(path: childPath, app: app, object: child)
        }
    }
}
