/// Why a push request cannot be rendered, naming the field: the reason a dead-lettered request
/// carries in `x-push-error` (`<field>: <reason>`, e.g. `payload.aps.badge: must be a whole number ≥ 0, got a string`).
public struct PushRequestError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate let rawValue: String
        public var description: String { rawValue }

        /// The body is not JSON, or not an object.
        public static let invalidJSON = Code(rawValue: "invalid_json")
        /// A required field is missing.
        public static let missingField = Code(rawValue: "missing_field")
        /// A field has the wrong type or value, or is not a field of the format.
        public static let invalidField = Code(rawValue: "invalid_field")
        /// Fields that are fine alone but not together (a background push with an alert, …).
        public static let invalidCombination = Code(rawValue: "invalid_combination")
        /// The rendered payload is over APNs' size limit and cannot be shortened to fit.
        public static let payloadTooLarge = Code(rawValue: "payload_too_large")
    }

    public let code: Code
    /// The field at fault as a path, e.g. `to.tokens[2]`, `payload.aps.alert.loc-args`, `push_type`.
    public let field: String
    public let reason: String

    public init(_ code: Code, field: String, _ reason: String) {
        self.code = code
        self.field = field
        self.reason = reason
    }

    /// `<field>: <reason>`.
    public var message: String { "\(field): \(reason)" }
    public var description: String { message }

    /// `"text"`, shortened to 64 characters, for messages.
    static func quoted(_ text: String) -> String {
        let shown = text.count > 64 ? String(text.prefix(64)) + "…" : text
        var bytes: [UInt8] = []
        JSONValue.writeString(shown, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}
