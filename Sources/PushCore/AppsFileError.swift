/// Why an apps file was rejected, naming the app and the field:
/// `apps["com.example.game"].apns.key_id: must be 10 characters (letters and digits), got "ABC"`.
///
/// Messages never contain secrets (API keys, HMAC secrets, certificate passwords).
public struct AppsFileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of problem; compare with the static members, e.g. `error.code == .unknownField`.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: Sendable, Hashable {
            case invalidJSON
            case missingField
            case wrongType
            case invalidValue
            case unknownField
            case conflict
        }

        private let kind: Kind

        private init(_ kind: Kind) {
            self.kind = kind
        }

        /// The file is not JSON, or its top level is not an object.
        public static let invalidJSON = Code(.invalidJSON)
        /// A required field is absent.
        public static let missingField = Code(.missingField)
        /// A field has the wrong JSON type (e.g. a number where a string belongs).
        public static let wrongType = Code(.wrongType)
        /// A field's value breaks a rule (length, range, allowed values).
        public static let invalidValue = Code(.invalidValue)
        /// A field the apps file does not define (typos are rejected, not ignored).
        public static let unknownField = Code(.unknownField)
        /// Two apps clash: two defaults, or a name used by two apps.
        public static let conflict = Code(.conflict)

        public var description: String {
            switch kind {
            case .invalidJSON: "invalidJSON"
            case .missingField: "missingField"
            case .wrongType: "wrongType"
            case .invalidValue: "invalidValue"
            case .unknownField: "unknownField"
            case .conflict: "conflict"
            }
        }
    }

    /// The kind of problem.
    public let code: Code
    /// The field that was wrong, e.g. `apps["com.example.game"].apns.key_id`; empty for the whole file.
    public let field: String
    /// The bundle id of the app the field belongs to, if any.
    public let app: String?
    /// What is wrong with the field, e.g. `must be 10 characters (letters and digits), got "ABC"`.
    public let reason: String
    /// The apps file's path, when the error came from reading a file (see ``withFile(_:)``).
    public private(set) var file: String?

    init(_ code: Code, field: String, app: String?, reason: String) {
        self.code = code
        self.field = field
        self.app = app
        self.reason = reason
        self.file = nil
    }

    /// The same error, naming the file it came from.
    public func withFile(_ path: String) -> AppsFileError {
        var copy = self
        copy.file = path
        return copy
    }

    /// `<file>: <field>: <reason>`, leaving out what is unknown.
    public var description: String {
        var text = file.map { "\($0): " } ?? ""
        if !field.isEmpty {
            text += "\(field): "
        }
        return text + reason
    }

    /// `apps["com.example.game"]`: how messages name an app.
    static func appPath(_ bundleID: String) -> String {
        "apps[\(quoted(bundleID))]"
    }

    /// A JSON-style quoted string, for names and values in messages.
    static func quoted(_ text: String) -> String {
        var result = "\""
        for character in text {
            switch character {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            default: result.append(character)
            }
        }
        return result + "\""
    }
}
