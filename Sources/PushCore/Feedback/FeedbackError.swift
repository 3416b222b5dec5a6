/// Why an invalid-token report or a legacy feedback stream was refused, naming the field or the byte
/// offset: the reason a dead-lettered `push.feedback` message carries in `x-push-error`, and what
/// `pushctl feedback import` prints.
public struct FeedbackError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate let rawValue: String
        public var description: String { rawValue }

        /// The body is not JSON, or not a JSON object.
        public static let invalidJSON = Code(rawValue: "invalid_json")
        /// A required field is missing.
        public static let missingField = Code(rawValue: "missing_field")
        /// A field has the wrong type or value.
        public static let invalidField = Code(rawValue: "invalid_field")
        /// A legacy feedback stream ends in the middle of a record.
        public static let truncatedStream = Code(rawValue: "truncated_stream")
        /// A legacy feedback record holds something no APNs feedback service ever sent.
        public static let corruptStream = Code(rawValue: "corrupt_stream")
    }

    public let code: Code
    /// The field at fault (`token`, `reason`, …), or `stream` for a legacy feedback stream.
    public let field: String
    public let reason: String
    /// For stream errors: the offset of the first byte of the record at fault.
    public let offset: Int?

    public init(_ code: Code, field: String, _ reason: String, offset: Int? = nil) {
        self.code = code
        self.field = field
        self.reason = reason
        self.offset = offset
    }

    /// `<field>: <reason>`.
    public var message: String { "\(field): \(reason)" }
    public var description: String { message }
}
