/// A stored record as the registration API returns it (`GET`, and the body of `PUT`'s `200`/`201`):
///
/// ```json
/// {"app": "com.example.game", "token": "ab12…", "user": "alice", "locale": "zh-Hant-TW",
///  "environment": "production", "topics": ["news"],
///  "device": {"uuid": "…", "name": "…", "model": "…", "os_version": "…", "app_version": "…"},
///  "settings": {"alert": true, "badge": true, "sound": false},
///  "registered_at": 1767225600000, "updated_at": 1767225600000}
/// ```
///
/// Optional fields that are not set (`user`, `locale`, each `device` field) are left out rather than
/// written as `null`; `device` is `{}` when nothing is known. Times are ms since 1970.
extension DeviceRecord {
    /// The record as a JSON object (Swift values: `String`, `Bool`, `Int64`, arrays, dictionaries).
    public var jsonObject: [String: Any] {
        var device: [String: Any] = [:]
        if let uuid = self.device.uuid { device["uuid"] = uuid }
        if let name = self.device.name { device["name"] = name }
        if let model = self.device.model { device["model"] = model }
        if let osVersion = self.device.osVersion { device["os_version"] = osVersion }
        if let appVersion = self.device.appVersion { device["app_version"] = appVersion }
        var object: [String: Any] = [
            "app": app,
            "token": token.hex,
            "environment": environment.rawValue,
            "topics": topics,
            "device": device,
            "settings": ["alert": settings.alert, "badge": settings.badge, "sound": settings.sound],
            "registered_at": registeredAt,
            "updated_at": updatedAt,
        ]
        if let user { object["user"] = user }
        if let locale { object["locale"] = locale }
        return object
    }

    /// ``jsonObject`` as compact UTF-8 JSON with keys sorted, so equal records give equal bytes
    /// (stable responses, simple test comparisons).
    ///
    /// Written by hand rather than with `JSONSerialization`: the shape is fixed, the output must not
    /// depend on Foundation's number bridging, and this cannot fail.
    public func jsonData() -> [UInt8] {
        var writer = RecordJSONWriter()
        writer.object { writer in
            // Keys in sorted order.
            writer.member("app") { $0.string(app) }
            writer.member("device") { writer in
                writer.object { writer in
                    if let appVersion = device.appVersion { writer.member("app_version") { $0.string(appVersion) } }
                    if let model = device.model { writer.member("model") { $0.string(model) } }
                    if let name = device.name { writer.member("name") { $0.string(name) } }
                    if let osVersion = device.osVersion { writer.member("os_version") { $0.string(osVersion) } }
                    if let uuid = device.uuid { writer.member("uuid") { $0.string(uuid) } }
                }
            }
            writer.member("environment") { $0.string(environment.rawValue) }
            if let locale { writer.member("locale") { $0.string(locale) } }
            writer.member("registered_at") { $0.raw(String(registeredAt)) }
            writer.member("settings") { writer in
                writer.object { writer in
                    writer.member("alert") { $0.raw(settings.alert ? "true" : "false") }
                    writer.member("badge") { $0.raw(settings.badge ? "true" : "false") }
                    writer.member("sound") { $0.raw(settings.sound ? "true" : "false") }
                }
            }
            writer.member("token") { $0.string(token.hex) }
            writer.member("topics") { writer in
                writer.raw("[")
                for (index, topic) in topics.enumerated() {
                    if index > 0 { writer.raw(",") }
                    writer.string(topic)
                }
                writer.raw("]")
            }
            writer.member("updated_at") { $0.raw(String(updatedAt)) }
            if let user { writer.member("user") { $0.string(user) } }
        }
        return writer.bytes
    }
}

/// Just enough of a JSON writer for ``DeviceRecord/jsonData()``: objects, strings, raw literals.
struct RecordJSONWriter {
    var bytes: [UInt8] = []
    /// Whether the current object already has a member (so the next one needs a comma).
    private var needsComma: [Bool] = []

    mutating func raw(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    mutating func object(_ body: (inout RecordJSONWriter) -> Void) {
        raw("{")
        needsComma.append(false)
        body(&self)
        needsComma.removeLast()
        raw("}")
    }

    mutating func member(_ key: String, _ value: (inout RecordJSONWriter) -> Void) {
        if needsComma[needsComma.count - 1] { raw(",") }
        needsComma[needsComma.count - 1] = true
        string(key)
        raw(":")
        value(&self)
    }

    /// A JSON string: `"` and `\` escaped, control characters as `\n`, `\t`, … or `\u00XX`; all other
    /// characters as UTF-8 (including `/`, which JSON does not require escaping).
    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): raw("\\\"")
            case UInt8(ascii: "\\"): raw("\\\\")
            case 0x0A: raw("\\n")
            case 0x0D: raw("\\r")
            case 0x09: raw("\\t")
            case 0x08: raw("\\b")
            case 0x0C: raw("\\f")
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
