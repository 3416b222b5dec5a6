public import APNs
import Foundation
public import PushCore

/// A send batch push-send cannot use, naming the field: `tokens[3]: must be 64–200 lowercase hex characters`.
public struct SendBatchError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The JSON field at fault (`""` for the body as a whole).
    public let field: String
    public let reason: String

    init(field: String, _ reason: String) {
        self.field = field
        self.reason = reason
    }

    /// `field: reason`, as it goes into `x-push-error`.
    public var message: String { field.isEmpty ? reason : "\(field): \(reason)" }
    public var description: String { message }
}

/// A decoded and checked send batch, with the APNs values push-send sends it with.
public struct DecodedSendBatch: Sendable {
    public let batch: SendBatch
    public let pushType: PushType
    public let priority: APNsPriority
    /// The payload bytes, shared by every token's request.
    public let payload: [UInt8]

    /// Slots of one mark set (a batch holds a few hundred tokens; 2 bits each, at most 16 KiB of marks).
    static let slotLimit = 65_536
    static let maximumMarkSetLength = SendBatch.maximumMarkSetBytes
    /// The longest channel id taken (Apple gives none; the ids it makes are short base64).
    static let maximumChannelIDLength = 256

    /// Parses a `push.send` body (``PushCore/SendBatch``) and checks what APNs would refuse anyway.
    public init(body: [UInt8]) throws(SendBatchError) {
        let batch: SendBatch
        do {
            batch = try JSONDecoder().decode(SendBatch.self, from: Data(body))
        } catch let error as DecodingError {
            throw Self.describe(error, body: body)
        } catch {
            throw SendBatchError(field: "", "not a send batch: \(error)")
        }
        guard batch.version == 1 else {
            throw SendBatchError(field: "v", "must be 1, got \(batch.version)")
        }
        guard !batch.requestID.isEmpty else { throw SendBatchError(field: "request_id", "must not be empty") }
        // The request id becomes the apns-collapse-id when the batch names none: an HTTP/2 header,
        // where CR, LF or NUL make every try fail (and retry) instead of failing once.
        guard !PushCore.PushRequest.containsControlCharacters(batch.requestID) else {
            throw SendBatchError(field: "request_id", "must not contain control characters")
        }
        guard !batch.app.isEmpty else { throw SendBatchError(field: "app", "must not be empty") }
        guard let pushType = PushType(rawValue: batch.pushType) else {
            throw SendBatchError(field: "push_type", "is not an APNs push type: \"\(batch.pushType)\"")
        }
        guard pushType != .mdm else {
            throw SendBatchError(field: "push_type", "mdm pushes are not sent by push-send (their topic is the MDM certificate's, not the app's)")
        }
        guard let priority = APNsPriority(rawValue: batch.priority) else {
            throw SendBatchError(field: "priority", "must be 10, 5 or 1, got \(batch.priority)")
        }
        let allowedPriorities = pushType.allowedPriorities(broadcast: batch.channel != nil)
        guard allowedPriorities.contains(batch.priority) else {
            throw SendBatchError(
                field: "priority",
                "must be \(allowedPriorities.map(String.init).joined(separator: " or ")) for \(pushType) \(batch.channel != nil ? "broadcasts" : "pushes"), got \(batch.priority)"
            )
        }
        if let channel = batch.channel {
            // A broadcast: one request on the channel, no tokens (Apple: update and end only).
            guard channel.utf8.count <= Self.maximumChannelIDLength, PushCore.PushRequest.isWellFormedChannelID(channel) else {
                throw SendBatchError(field: "channel", "must be a channel id as APNs made it: base64, 1–\(Self.maximumChannelIDLength) bytes")
            }
            guard batch.tokens.isEmpty else { throw SendBatchError(field: "tokens", "must be empty in a broadcast (channel) batch") }
            guard pushType == .liveactivity else {
                throw SendBatchError(field: "push_type", "must be liveactivity for a broadcast, got \"\(batch.pushType)\"")
            }
        } else {
            guard !batch.tokens.isEmpty else { throw SendBatchError(field: "tokens", "must hold at least one token") }
        }
        for (index, token) in batch.tokens.enumerated() {
            let bytes = token.utf8
            guard (64...200).contains(bytes.count), bytes.count % 2 == 0,
                bytes.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) })
            else {
                throw SendBatchError(field: "tokens[\(index)]", "must be 64–200 lowercase hex characters, even length")
            }
        }
        if let markSet = batch.markSet, markSet.isEmpty || markSet.utf8.count > Self.maximumMarkSetLength {
            throw SendBatchError(field: "mark_set", "must be 1–\(Self.maximumMarkSetLength) bytes, got \(markSet.utf8.count)")
        }
        if let slots = batch.slots {
            guard slots.count == batch.tokens.count else {
                throw SendBatchError(field: "slots", "must hold one slot per token (\(batch.tokens.count)), got \(slots.count)")
            }
            // A slot is a bit offset in a Redis string: bounded, so no message can make Redis grow one huge.
            if let index = slots.firstIndex(where: { !(0..<Self.slotLimit).contains($0) }) {
                throw SendBatchError(field: "slots[\(index)]", "must be 0–\(Self.slotLimit - 1), got \(slots[index])")
            }
        }
        guard (0...RetryPolicy.maximumCount).contains(batch.attempt) else {
            throw SendBatchError(field: "attempt", "must be 0–\(RetryPolicy.maximumCount), got \(batch.attempt)")
        }
        if let expiration = batch.expiration, !(0...PushCore.PushRequest.maximumExpiration).contains(expiration) {
            throw SendBatchError(
                field: "expiration", "must be 0 or seconds since 1970 up to \(PushCore.PushRequest.maximumExpiration) (9999-12-31), got \(expiration)"
            )
        }
        if let collapseID = batch.collapseID {
            guard collapseID.utf8.count <= 64 else {
                throw SendBatchError(field: "collapse_id", "must be at most 64 bytes, got \(collapseID.utf8.count)")
            }
            guard !PushCore.PushRequest.containsControlCharacters(collapseID) else {
                throw SendBatchError(field: "collapse_id", "must not contain control characters (it is sent as an HTTP/2 header)")
            }
        }
        let payload = Array(batch.payload.utf8)
        guard !payload.isEmpty else { throw SendBatchError(field: "payload", "must not be empty") }
        self.batch = batch
        self.pushType = pushType
        self.priority = priority
        self.payload = payload
    }

    /// The request for one token; `collapseID` (default: the batch's) folds twins on the device.
    public func notification(token: String, collapseID: String? = nil) -> APNsNotification {
        APNsNotification(
            deviceToken: token,
            topic: pushType.topic(forBundleID: batch.app),
            pushType: pushType,
            priority: priority,
            expiration: batch.expiration,
            collapseID: collapseID ?? batch.collapseID,
            payload: payload
        )
    }

    private static func describe(_ error: DecodingError, body: [UInt8]) -> SendBatchError {
        func path(_ codingPath: [any CodingKey]) -> String {
            var text = ""
            for key in codingPath {
                if let index = key.intValue {
                    text += "[\(index)]"
                } else {
                    text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
                }
            }
            return text
        }
        switch error {
        case .keyNotFound(let key, let context):
            let parent = path(context.codingPath)
            return SendBatchError(field: parent.isEmpty ? key.stringValue : "\(parent).\(key.stringValue)", "is required")
        case .typeMismatch(let type, let context):
            return SendBatchError(field: path(context.codingPath), "has the wrong type (expected \(type))")
        case .valueNotFound(let type, let context):
            return SendBatchError(field: path(context.codingPath), "must not be null (expected \(type))")
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty {
                return diagnoseCorruption(body)
            }
            return SendBatchError(field: path(context.codingPath), context.debugDescription)
        @unknown default:
            return SendBatchError(field: "", "not a send batch: \(error)")
        }
    }

    /// The integer fields of a send batch, for ``diagnoseCorruption(_:)``.
    private static let integerFields = ["v", "priority", "attempt", "expiration", "created_at"]

    /// JSONDecoder reports a number that does not fit its field (`1.5`, `1e400` or `2^63` for an
    /// integer) as corrupt data without naming the field: find the field with the strict parser, or
    /// say why the body is not JSON.
    private static func diagnoseCorruption(_ body: [UInt8]) -> SendBatchError {
        let json: JSONValue
        do {
            json = try JSONValue.parse(body)
        } catch {
            return SendBatchError(field: "", "not valid JSON (\(error))")
        }
        guard case .object(let members) = json else {
            return SendBatchError(field: "", "must be a JSON object (a send batch), got \(json.kindDescription)")
        }
        for member in members where integerFields.contains(member.key) {
            if case .number(let text) = member.value, Int64(text) == nil {
                return SendBatchError(field: member.key, "must be a whole number of at most 64 bits, got \(Self.shortened(text))")
            }
        }
        if case .array(let slots)? = json["slots"] {
            for (index, slot) in slots.enumerated() {
                if case .number(let text) = slot, Int(text) == nil {
                    return SendBatchError(field: "slots[\(index)]", "must be a whole number of at most 64 bits, got \(Self.shortened(text))")
                }
            }
        }
        return SendBatchError(field: "", "not a send batch (JSONDecoder found corrupt data)")
    }

    /// `text` cut to 40 characters for a message (a number can be 10,000 digits long).
    private static func shortened(_ text: String) -> String {
        text.count > 40 ? String(text.prefix(40)) + "…" : text
    }
}
