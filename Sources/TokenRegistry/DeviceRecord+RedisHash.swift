import Foundation
import PushCore
import Redis

/// How a record is laid out in its Redis hash (field table in ``RegistryKeys``). Pure: no I/O, so the
/// mapping is tested without Redis, and the scripts only move strings around.
enum RecordHash {
    /// The hash fields written for `registration`, except `topics`, `registered_at` and `updated_at`,
    /// which the upsert script sets itself. Fields of unset optionals are absent, not empty.
    static func fields(for registration: DeviceRegistration, environment: AppConfiguration.Environment) -> [(String, String)] {
        var fields: [(String, String)] = []
        if let user = registration.user { fields.append(("user", user)) }
        if let locale = registration.locale { fields.append(("locale", locale)) }
        fields.append(("environment", environment.rawValue))
        let device = registration.device
        if let uuid = device.uuid { fields.append(("uuid", uuid)) }
        if let name = device.name { fields.append(("name", name)) }
        if let model = device.model { fields.append(("model", model)) }
        if let osVersion = device.osVersion { fields.append(("os_version", osVersion)) }
        if let appVersion = device.appVersion { fields.append(("app_version", appVersion)) }
        let settings = registration.settings
        fields.append(("alert", settings.alert ? "1" : "0"))
        fields.append(("badge", settings.badge ? "1" : "0"))
        fields.append(("sound", settings.sound ? "1" : "0"))
        return fields
    }

    /// `topics` as a JSON array of strings, the form the `topics` field holds and the scripts decode
    /// with `cjson`.
    static func topicsJSON(_ topics: [String]) -> String {
        var json = "["
        for (index, topic) in topics.enumerated() {
            if index > 0 { json += "," }
            json += "\""
            for scalar in topic.unicodeScalars {
                switch scalar {
                case "\"": json += "\\\""
                case "\\": json += "\\\\"
                case _ where scalar.value < 0x20:
                    json += "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count) + String(scalar.value, radix: 16)
                default: json.unicodeScalars.append(scalar)
                }
            }
            json += "\""
        }
        return json + "]"
    }

    /// Reads a record from `HGETALL`'s field/value pairs; nil when there are none (no such key).
    ///
    /// - Throws: ``RegistryError/Code/corruptRecord`` naming `key` and the field that is missing or
    ///   malformed.
    static func record(app: String, token: DeviceToken, key: String, reply: RedisReply) throws(RegistryError) -> DeviceRecord? {
        guard let elements = reply.array else {
            throw RegistryError(.corruptRecord, "\(RegistryError.redacted(key)): expected the hash's fields, got \(reply)", key: key)
        }
        if elements.isEmpty { return nil }
        var hash: [String: String] = [:]
        var index = 0
        while index + 1 < elements.count {
            if let field = elements[index].string, let value = elements[index + 1].string {
                hash[field] = value
            }
            index += 2
        }
        return try record(app: app, token: token, key: key, hash: hash)
    }

    static func record(app: String, token: DeviceToken, key: String, hash: [String: String]) throws(RegistryError) -> DeviceRecord {
        func required(_ field: String) throws(RegistryError) -> String {
            guard let value = hash[field] else { throw RegistryError.corrupt(key: key, field: field, "is missing") }
            return value
        }
        func milliseconds(_ field: String) throws(RegistryError) -> Int64 {
            let text = try required(field)
            guard let value = Int64(text), value >= 0 else {
                throw RegistryError.corrupt(key: key, field: field, "must be ms since 1970, got \(quoted(text))")
            }
            return value
        }
        func flag(_ field: String) throws(RegistryError) -> Bool {
            switch try required(field) {
            case "1": return true
            case "0": return false
            case let text: throw RegistryError.corrupt(key: key, field: field, "must be \"1\" or \"0\", got \(quoted(text))")
            }
        }
        let environmentName = try required("environment")
        guard let environment = AppConfiguration.Environment(rawValue: environmentName) else {
            throw RegistryError.corrupt(key: key, field: "environment", "must be \"production\" or \"sandbox\", got \(quoted(environmentName))")
        }
        let topicsText = try required("topics")
        guard let topics = try? JSONDecoder().decode([String].self, from: Data(topicsText.utf8)) else {
            throw RegistryError.corrupt(key: key, field: "topics", "must be a JSON array of strings, got \(quoted(topicsText))")
        }
        return DeviceRecord(
            app: app,
            token: token,
            user: hash["user"],
            locale: hash["locale"],
            environment: environment,
            topics: topics,
            device: DeviceInfo(
                uuid: hash["uuid"],
                name: hash["name"],
                model: hash["model"],
                osVersion: hash["os_version"],
                appVersion: hash["app_version"]
            ),
            settings: NotificationSettings(alert: try flag("alert"), badge: try flag("badge"), sound: try flag("sound")),
            registeredAt: try milliseconds("registered_at"),
            updatedAt: try milliseconds("updated_at")
        )
    }

    private static func quoted(_ text: String) -> String {
        "\"\(text.count > 64 ? String(text.prefix(64)) + "…" : text)\""
    }
}
