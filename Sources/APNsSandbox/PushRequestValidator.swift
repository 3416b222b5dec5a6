import APNs

import struct PushCore.PushType

/// Judges a request as APNs does, without I/O: headers + body (+ how the connection authenticated)
/// → accepted, or APNs' status and reason.
///
/// Checks, in this order (the first failure answers):
/// 1. `:method` POST, else 405 `MethodNotAllowed`.
/// 2. `:path` `/3/device/<token>`, else 404 `BadPath`; an empty token is 400 `MissingDeviceToken`.
/// 3. No header twice, else 400 `DuplicateHeaders`.
/// 4. Authentication: a connection with a verified client certificate needs nothing more; an
///    untrusted client certificate is 403 `BadCertificate`; otherwise `authorization: bearer <JWT>`
///    (missing: 403 `MissingProviderToken`; see ``ProviderTokenVerifier`` for the rest).
/// 5. The token: hex, even length, 64–200 characters, else 400 `BadDeviceToken`.
/// 6. `apns-push-type` one of the 11 types (absent means `alert`), else 400 `InvalidPushType`.
/// 7. `apns-topic` present (certificate connections fall back to the certificate's UID), else 400
///    `MissingTopic`; it must end with the push type's suffix (`.voip`, `.complication`, …), else 400
///    `BadTopic`.
/// 8. `apns-priority` 10, 5 or 1, else 400 `BadPriority`; with `strictPriorities`, also one the push
///    type allows (``PushCore/PushType/allowedPriorities``: a background push takes only 5).
/// 9. `apns-expiration` a non-negative integer, else 400 `BadExpirationDate`.
/// 10. `apns-collapse-id` at most 64 bytes, else 400 `BadCollapseId`.
/// 11. `apns-id` a UUID, else 400 `BadMessageId`.
/// 12. The payload: empty is 400 `PayloadEmpty`; over 4096 bytes (5120 for voip) 413
///     `PayloadTooLarge`; not a JSON object 400 `PayloadEmpty` (APNs documents no reason for a
///     malformed payload; `PayloadEmpty` is the documented one that says "no usable payload", and a
///     client classifies it like any other permanent 400).
public enum PushRequestValidator {
    static let devicePathPrefix = "/3/device/"

    /// - Parameters:
    ///   - request: The request.
    ///   - authentication: How its connection authenticated.
    ///   - providerTokens: Checks `authorization` (ignored on certificate connections).
    ///   - now: Seconds since 1970, for the token's age.
    ///   - strictPriorities: Whether a priority the push type does not allow is refused.
    public static func validate(
        _ request: PushRequest,
        authentication: ConnectionAuthentication,
        providerTokens: ProviderTokenVerifier,
        now: Int64,
        strictPriorities: Bool = false
    ) -> PushValidation {
        guard request.method == "POST" else { return .rejected(PushRejection(405, .methodNotAllowed)) }
        guard request.path.hasPrefix(devicePathPrefix) || request.path == "/3/device" else {
            return .rejected(PushRejection(404, .badPath))
        }
        let token = request.path.dropFirst(devicePathPrefix.count)
        guard !token.isEmpty else { return .rejected(PushRejection(400, .missingDeviceToken)) }

        var headers = KnownHeaders()
        guard headers.read(request.headers) else { return .rejected(PushRejection(400, .duplicateHeaders)) }

        var certificateTopic: String?
        switch authentication {
        case .certificate(let topic):
            certificateTopic = topic
        case .untrustedCertificate:
            return .rejected(PushRejection(403, .badCertificate))
        case .none:
            guard let authorization = headers.authorization else {
                return .rejected(PushRejection(403, .missingProviderToken))
            }
            if let reason = providerTokens.rejection(authorization: authorization, now: now) {
                return .rejected(PushRejection(403, reason))
            }
        }

        guard isDeviceToken(token) else { return .rejected(PushRejection(400, .badDeviceToken)) }

        var pushType = PushType.alert
        if let value = headers.pushType {
            guard let known = PushType(rawValue: value) else { return .rejected(PushRejection(400, .invalidPushType)) }
            pushType = known
        }
        guard let topic = headers.topic ?? certificateTopic, !topic.isEmpty else {
            return .rejected(PushRejection(400, .missingTopic))
        }
        if !pushType.topicSuffix.isEmpty, !topic.hasSuffix(pushType.topicSuffix) {
            return .rejected(PushRejection(400, .badTopic))
        }
        if let priority = headers.priority, !["10", "5", "1"].contains(priority) {
            return .rejected(PushRejection(400, .badPriority))
        }
        if strictPriorities, !pushType.allowedPriorities.contains(headers.priority.flatMap { Int($0) } ?? 10) {
            return .rejected(PushRejection(400, .badPriority))
        }
        if let expiration = headers.expiration, !isNonNegativeInteger(expiration) {
            return .rejected(PushRejection(400, .badExpirationDate))
        }
        if let collapseID = headers.collapseID, collapseID.utf8.count > 64 {
            return .rejected(PushRejection(400, .badCollapseId))
        }
        if let apnsID = headers.apnsID, !isUUID(apnsID) {
            return .rejected(PushRejection(400, .badMessageId))
        }

        guard request.bodyLength > 0 else { return .rejected(PushRejection(400, .payloadEmpty)) }
        guard request.bodyLength <= pushType.maximumPayloadSize else {
            return .rejected(PushRejection(413, .payloadTooLarge))
        }
        guard JSONObjectSyntax.isObject(request.body) else { return .rejected(PushRejection(400, .payloadEmpty)) }

        return .accepted(AcceptedPush(deviceToken: token.lowercased(), topic: topic, pushType: pushType))
    }

    /// Hex, even length, 64–200 characters (either case).
    public static func isDeviceToken(_ text: Substring) -> Bool {
        let count = text.utf8.count
        guard (64...200).contains(count), count % 2 == 0 else { return false }
        return text.utf8.allSatisfy(isHexDigit)
    }

    /// `8-4-4-4-12` hex digits, either case.
    public static func isUUID(_ text: String) -> Bool {
        let utf8 = text.utf8
        guard utf8.count == 36 else { return false }
        for (offset, byte) in utf8.enumerated() {
            if offset == 8 || offset == 13 || offset == 18 || offset == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else if !isHexDigit(byte) {
                return false
            }
        }
        return true
    }

    static func isNonNegativeInteger(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 18 && text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
    }

    /// The headers APNs reads, found in one pass that also spots repeats.
    private struct KnownHeaders {
        var authorization: String?
        var pushType: String?
        var topic: String?
        var priority: String?
        var expiration: String?
        var collapseID: String?
        var apnsID: String?

        /// false when any header name occurs twice.
        mutating func read(_ fields: [PushRequest.Field]) -> Bool {
            for (index, field) in fields.enumerated() {
                for earlier in fields[..<index] where earlier.name == field.name {
                    return false
                }
                switch field.name {
                case "authorization": authorization = field.value
                case "apns-push-type": pushType = field.value
                case "apns-topic": topic = field.value
                case "apns-priority": priority = field.value
                case "apns-expiration": expiration = field.value
                case "apns-collapse-id": collapseID = field.value
                case "apns-id": apnsID = field.value
                default: break
                }
            }
            return true
        }
    }
}
