import Foundation
import PushCore
import TestSupport
import Testing

/// An apps file with one app, for decoding requests without a server.
func renderTestApps(environment: AppConfiguration.Environment = .production) -> AppsFile {
    try! AppsFile(apps: [
        AppConfiguration(
            bundleID: "com.example.game",
            environment: environment,
            apns: .token(AppConfiguration.TokenKey(keyFile: "key.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ"))
        )
    ])
}

/// Decodes a request body; fails the test when it is refused.
func decodeRequest(_ body: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> PushRequest {
    do {
        return try PushRequest(body: Array(body.utf8), apps: renderTestApps())
    } catch {
        Issue.record("refused: \(error.message)", sourceLocation: sourceLocation)
        throw error
    }
}

/// The error a request body is refused with (nil when accepted).
func refusal(_ body: String) -> PushRequestError? {
    do {
        _ = try PushRequest(body: Array(body.utf8), apps: renderTestApps())
        return nil
    } catch {
        return error
    }
}

/// A request around `payload` (JSON text) with the given extra top-level fields. Without a target:
/// a user's devices, or for a Live Activity payload (one with an `event`) the Live Activity target
/// its event takes.
func requestBody(payload: String, extra: String = "", to: String? = nil) -> String {
    let target = to ?? defaultTarget(forPayload: payload)
    return #"{"id": "r-1", "app": "com.example.game", "to": \#(target), "payload": \#(payload)\#(extra.isEmpty ? "" : ", " + extra)}"#
}

private func defaultTarget(forPayload payload: String) -> String {
    let compact = payload.replacingOccurrences(of: " ", with: "")
    guard compact.contains(#""event":"#) else { return #"{"users": ["alice"]}"# }
    return compact.contains(#""event":"start""#) ? #"{"push_to_start": {"all": true}}"# : #"{"activity": "a"}"#
}

/// Renders `payload` for a device with every setting on and returns the payload text.
func rendered(
    _ payload: String, extra: String = "", catalogs: LocalizationCatalogs = .empty, locale: String? = nil,
    settings: NotificationSettings = NotificationSettings(), sourceLocation: SourceLocation = #_sourceLocation
) throws -> RenderedNotification {
    let request = try decodeRequest(requestBody(payload: payload, extra: extra), sourceLocation: sourceLocation)
    let renderer = NotificationRenderer(request: request, catalogs: catalogs)
    switch try renderer.render(locale: locale, settings: settings) {
    case .notification(let notification): return notification
    case .skipped(let reason):
        Issue.record("skipped: \(reason)", sourceLocation: sourceLocation)
        throw TestFailure("skipped")
    }
}

/// Catalogs like the repository's `localization/` directory.
let sampleCatalogs = LocalizationCatalogs(catalogs: [
    "en": StringsCatalog(strings: [
        "GAME_PLAY_REQUEST_FORMAT": "%@ and %@ have invited you to play Monopoly",
        "SHIPPED_TITLE": "Your order has shipped",
        "ORDER_SHIPPED_FORMAT": "Order %1$@ is on its way with %2$@.",
    ]),
    "de": StringsCatalog(strings: [
        "GAME_PLAY_REQUEST_FORMAT": "%@ und %@ haben dich zu Monopoly eingeladen",
        "ORDER_SHIPPED_FORMAT": "%2$@ bringt deine Bestellung %1$@.",
    ]),
    "zh-Hant": StringsCatalog(strings: [
        "GAME_PLAY_REQUEST_FORMAT": "%@ 和 %@ 邀請你玩《地產大亨》"
    ]),
    "zh": StringsCatalog(strings: [
        "SHIPPED_TITLE": "订单已发货"
    ]),
])
