/// Why a registration was refused, naming the field: what `400 {"error","message"}` carries.
public struct RegistrationError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate let rawValue: String
        public var description: String { rawValue }

        /// The token is not 64–200 even-length hex.
        public static let invalidToken = Code(rawValue: "invalid_token")
        /// A field has the wrong type or value.
        public static let invalidField = Code(rawValue: "invalid_field")
        /// A required field is missing.
        public static let missingField = Code(rawValue: "missing_field")
        /// The body is not JSON (or not an object).
        public static let invalidJSON = Code(rawValue: "invalid_json")
    }

    public let code: Code
    /// The field at fault, e.g. `settings.alert` or `token`.
    public let field: String
    public let reason: String

    public init(_ code: Code, field: String, _ reason: String) {
        self.code = code
        self.field = field
        self.reason = reason
    }

    /// `<field>: <reason>`, the `message` of a 400 answer.
    public var message: String { "\(field): \(reason)" }
    public var description: String { message }
}
