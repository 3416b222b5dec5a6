import FuzzSupport
import PushCore

/// A `push.requests` body (CONTRACT.md, "Push request v1") through what push-render does with it:
/// the JSON parser, the request and payload checks, then the renderer for every catalog chain and
/// device setting (server-side localisation, truncation to the size limit).
///
/// Invariants: the parser's output serialises to JSON that parses back to the same value; a rendered
/// payload is JSON and fits its push type's size limit.
@main
enum FuzzPushRequest {
    static func main() { FuzzDriver.run(fuzzPushRequest) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPushRequest(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let body = FuzzFixtures.bytes(start, count)
    if let json = try? JSONValue.parse(body) {
        let again = json.serialized()
        guard let reparsed = try? JSONValue.parse(again), reparsed == json else {
            FuzzFixtures.violated("JSONValue does not survive serialized(): \(String(decoding: again, as: UTF8.self))")
        }
    }
    let request: PushRequest
    do {
        request = try PushRequest(body: body, apps: FuzzFixtures.apps)
    } catch {
        return FuzzFixtures.refused(error)
    }
    let renderer = NotificationRenderer(request: request, catalogs: FuzzFixtures.catalogs)
    do {
        try renderer.preflight()
    } catch {
        return FuzzFixtures.refused(error)
    }
    FuzzFixtures.accepted("push request \(request.id) (\(request.pushType))")
    for locale in [nil, "de-DE", "zh-Hant-TW", "fr"] {
        for settings in [NotificationSettings(), NotificationSettings(alert: false), NotificationSettings(badge: false, sound: false)] {
            guard case .notification(let rendered)? = try? renderer.render(locale: locale, settings: settings) else { continue }
            guard rendered.payload.count <= rendered.pushType.maximumPayloadSize else {
                FuzzFixtures.violated("rendered \(rendered.payload.count) bytes, over \(rendered.pushType)'s limit")
            }
            guard (try? JSONValue.parse(rendered.payload)) != nil else {
                FuzzFixtures.violated("rendered payload is not JSON: \(rendered.payloadString)")
            }
        }
    }
    return 0
}
