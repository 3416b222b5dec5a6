/// Why outside input was refused, naming the field at fault: the one shape of every decoder's error
/// (push requests, registrations, invalid-token reports and legacy feedback streams). `Source` only
/// tells the kinds apart (``PushRequestError``, ``RegistrationError``, ``FeedbackError``), so a caller
/// can catch the one it expects.
///
/// `message` is `<field>: <reason>`: what a dead-lettered message carries in `x-push-error`, what a
/// `400` answer says, what `pushctl` prints.
public struct InputError<Source: InputSource>: Error, Sendable, Equatable, CustomStringConvertible {
    public typealias Code = InputErrorCode

    public let code: Code
    /// The field at fault as a path, e.g. `to.tokens[2]`, `payload.aps.alert.loc-args`, `settings.alert`;
    /// `stream` for a legacy feedback stream.
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

    /// `"text"`, shortened to 64 characters, for messages.
    static func quoted(_ text: String) -> String {
        let shown = text.count > 64 ? String(text.prefix(64)) + "…" : text
        var bytes: [UInt8] = []
        JSONValue.writeString(shown, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// What kind of input an ``InputError`` is about (a marker; no values).
public protocol InputSource: Sendable {}

/// A push request (`push.requests`, push-render).
public enum PushRequestInput: InputSource {}
/// A device registration (HTTP API, legacy forms, `push.registrations`).
public enum RegistrationInput: InputSource {}
/// An invalid-token report (`push.feedback`) or a legacy feedback stream.
public enum FeedbackInput: InputSource {}

/// Why a push request cannot be rendered: the reason a dead-lettered request carries in
/// `x-push-error`, e.g. `payload.aps.badge: must be a whole number ≥ 0, got a string`.
public typealias PushRequestError = InputError<PushRequestInput>
/// Why a registration was refused: what `400 {"error","message"}` carries.
public typealias RegistrationError = InputError<RegistrationInput>
/// Why an invalid-token report or a legacy feedback stream was refused (with the byte offset for a
/// stream): the reason a dead-lettered `push.feedback` message carries, and what
/// `pushctl feedback import` prints.
public typealias FeedbackError = InputError<FeedbackInput>

/// What is wrong with the input, by kind; the raw value is the `error` of a 400 answer.
public struct InputErrorCode: Sendable, Hashable, CustomStringConvertible {
    fileprivate let rawValue: String
    public var description: String { rawValue }

    /// The body is not JSON, or not an object.
    public static let invalidJSON = InputErrorCode(rawValue: "invalid_json")
    /// A required field is missing.
    public static let missingField = InputErrorCode(rawValue: "missing_field")
    /// A field has the wrong type or value, or is not a field of the format.
    public static let invalidField = InputErrorCode(rawValue: "invalid_field")
    /// Push requests: fields that are fine alone but not together (a background push with an alert, …).
    public static let invalidCombination = InputErrorCode(rawValue: "invalid_combination")
    /// Push requests: the rendered payload is over APNs' size limit and cannot be shortened to fit.
    public static let payloadTooLarge = InputErrorCode(rawValue: "payload_too_large")
    /// Registrations: the token is not 64–200 even-length hex.
    public static let invalidToken = InputErrorCode(rawValue: "invalid_token")
    /// Feedback streams: the stream ends in the middle of a record.
    public static let truncatedStream = InputErrorCode(rawValue: "truncated_stream")
    /// Feedback streams: a record holds something no APNs feedback service ever sent.
    public static let corruptStream = InputErrorCode(rawValue: "corrupt_stream")
}
