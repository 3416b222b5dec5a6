import APNs
import ArgumentParser
import Foundation
import Logging
import PushCore

extension PushctlCommand {
    /// `pushctl send`: one notification to one device, printing APNs' answer — the desktop push
    /// tester's job, with this provider's client.
    struct Send: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send one notification to one device token and print APNs' answer.",
            discussion: """
                The payload is built from --alert/--title/--subtitle/--badge/--sound/--content-available/--mutable-content plus --custom (a JSON object merged at the top level), or read whole from --payload-file (- for stdin).
                Exit status: 0 when APNs accepted the notification, 1 when it refused it, 2 when there was no answer.

                Examples:
                  pushctl send --endpoint https://127.0.0.1:2197 --ca-file .local/apns-sandbox/ca.pem --topic com.example.app --token <hex> --alert 'Hello'
                  pushctl send --environment sandbox --key-file AuthKey_ABC123DEFG.p8 --key-id ABC123DEFG --team-id DEF123GHIJ --topic com.example.app --token <hex> --payload-file push.json
                """
        )

        @OptionGroup var apns: APNsOptions

        @Option(help: "The device token (hex; <, > and spaces are stripped).")
        var token: String

        @Option(help: "The app's bundle id; the push type's suffix (.voip, …) is added when missing.")
        var topic: String

        @Option(help: "Alert body text.")
        var alert: String?

        @Option(help: "Alert title.")
        var title: String?

        @Option(help: "Alert subtitle.")
        var subtitle: String?

        @Option(help: "Badge number (0 clears it).")
        var badge: Int?

        @Option(help: "Sound name, e.g. default.")
        var sound: String?

        @Flag(help: "Set content-available: 1 (a background push when nothing else is shown).")
        var contentAvailable = false

        @Flag(help: "Set mutable-content: 1 (lets a notification service extension change it).")
        var mutableContent = false

        @Option(help: "A JSON object of custom top-level keys, e.g. '{\"order\": 4711}'.")
        var custom: String?

        @Option(help: "A file holding the whole JSON payload (- reads stdin); excludes the payload options above.")
        var payloadFile: String?

        @Option(
            help:
                "apns-push-type: alert, background, location, voip, complication, fileprovider, mdm, liveactivity, pushtotalk, widgets, controls (default: background for a content-available-only payload, else alert)."
        )
        var pushType: String?

        @Option(
            help:
                "apns-priority: 10, 5 or 1; background pushes take only 5, Live Activity updates 10 or 5 (default: 5 for background pushes, else 10)."
        )
        var priority: Int?

        @Option(help: "apns-expiration: seconds since 1970 until which APNs retries; 0 = once.")
        var expiration: Int64?

        @Option(help: "apns-collapse-id (at most 64 bytes).")
        var collapseID: String?

        @Option(help: "apns-id: a UUID for this notification (APNs makes one up otherwise).")
        var apnsID: String?

        @Option(help: "Seconds to wait for the answer.")
        var timeout: Int = 30

        @Flag(help: "Print the answer as JSON.")
        var json = false

        func run() async throws {
            let payload = try buildPayload()
            let pushType = try resolvedPushType(payload: payload)
            let priority = try resolvedPriority(pushType: pushType)
            var uuid: UUID?
            if let apnsID {
                guard let parsed = UUID(uuidString: apnsID) else { throw ValidationError("--apns-id must be a UUID (got '\(apnsID)')") }
                uuid = parsed
            }
            let normalized = token.filter { $0 != "<" && $0 != ">" && $0 != " " }.lowercased()
            let notification = APNsNotification(
                deviceToken: normalized, topic: pushType.topic(forBundleID: topic), pushType: pushType, priority: priority,
                expiration: expiration, collapseID: collapseID, apnsID: uuid, payload: payload
            )
            do {
                try notification.validate()
            } catch {
                throw ValidationError("\(error)")
            }
            var configuration = try apns.clientConfiguration(ephemeralKeyAllowed: false)
            configuration.connections = 1
            configuration.requestTimeout = .seconds(timeout)
            let client = try APNsClient(configuration: configuration, logger: Logger(label: "pushctl", factory: { _ in SwiftLogNoOpLogHandler() }))
            let result: Result<APNsResponse, APNsClientError>
            do {
                result = .success(try await client.send(notification))
            } catch {
                result = .failure(error)
            }
            await client.shutdown()
            try report(result)
        }

        private func report(_ result: Result<APNsResponse, APNsClientError>) throws {
            switch result {
            case .success(let response):
                if json {
                    var object: [String: Any] = ["status": response.status, "outcome": "\(response.outcome)"]
                    object["apns_id"] = response.apnsID
                    object["apns_unique_id"] = response.apnsUniqueID
                    object["reason"] = response.reason?.rawValue
                    object["timestamp"] = response.timestamp
                    let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
                    print(String(decoding: data, as: UTF8.self))
                } else {
                    var line = "\(response.status) \(response.reason?.rawValue ?? "accepted")"
                    if let apnsID = response.apnsID { line += " apns-id=\(apnsID)" }
                    if let uniqueID = response.apnsUniqueID { line += " apns-unique-id=\(uniqueID)" }
                    if let timestamp = response.timestamp { line += " timestamp=\(timestamp)" }
                    line += " (\(response.outcome))"
                    print(line)
                }
                if response.status != 200 { throw ExitCode(1) }
            case .failure(let error):
                if json {
                    let data = try JSONSerialization.data(
                        withJSONObject: ["error": "\(error.code)", "message": error.message], options: [.sortedKeys])
                    print(String(decoding: data, as: UTF8.self))
                } else {
                    FileHandle.standardError.write(Data("pushctl send: no answer from APNs: \(error)\n".utf8))
                }
                throw ExitCode(2)
            }
        }

        private func buildPayload() throws -> [UInt8] {
            if let payloadFile {
                let usesBuilder =
                    alert != nil || title != nil || subtitle != nil || badge != nil || sound != nil || contentAvailable
                    || mutableContent || custom != nil
                guard !usesBuilder else {
                    throw ValidationError(
                        "--payload-file excludes --alert, --title, --subtitle, --badge, --sound, --content-available, --mutable-content and --custom")
                }
                let data: Data
                if payloadFile == "-" {
                    data = FileHandle.standardInput.readDataToEndOfFile()
                } else {
                    guard let read = FileManager.default.contents(atPath: payloadFile) else {
                        throw ValidationError("cannot read --payload-file '\(payloadFile)'")
                    }
                    data = read
                }
                guard (try? JSONSerialization.jsonObject(with: data)) is [String: Any] else {
                    throw ValidationError("--payload-file '\(payloadFile)' is not a JSON object")
                }
                return Array(data)
            }
            var object: [String: Any] = [:]
            if let custom {
                guard let parsed = (try? JSONSerialization.jsonObject(with: Data(custom.utf8))) as? [String: Any] else {
                    throw ValidationError("--custom must be a JSON object (got '\(custom)')")
                }
                guard parsed["aps"] == nil else { throw ValidationError("--custom must not hold 'aps'; use the payload options or --payload-file") }
                object = parsed
            }
            var aps: [String: Any] = [:]
            if title != nil || subtitle != nil {
                var dictionary: [String: Any] = [:]
                dictionary["title"] = title
                dictionary["subtitle"] = subtitle
                dictionary["body"] = alert
                aps["alert"] = dictionary
            } else if let alert {
                aps["alert"] = alert
            }
            aps["badge"] = badge
            aps["sound"] = sound
            if contentAvailable { aps["content-available"] = 1 }
            if mutableContent { aps["mutable-content"] = 1 }
            guard !aps.isEmpty || !object.isEmpty else {
                throw ValidationError("nothing to send: give --alert, --title, --badge, --sound, --content-available, --custom or --payload-file")
            }
            object["aps"] = aps
            return Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
        }

        private func resolvedPushType(payload: [UInt8]) throws -> PushType {
            if let pushType {
                guard let known = PushType(rawValue: pushType) else {
                    throw ValidationError("--push-type '\(pushType)' is not one of \(PushType.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                return known
            }
            let object = (try? JSONSerialization.jsonObject(with: Data(payload))) as? [String: Any]
            let aps = object?["aps"] as? [String: Any] ?? [:]
            let silent = aps.keys.allSatisfy { $0 == "content-available" } && aps["content-available"] != nil
            return silent ? .background : .alert
        }

        private func resolvedPriority(pushType: PushType) throws -> APNsPriority {
            let allowed = pushType.allowedPriorities
            guard let priority else { return APNsPriority(rawValue: pushType.defaultPriority) ?? .immediate }
            guard allowed.contains(priority), let known = APNsPriority(rawValue: priority) else {
                throw ValidationError(
                    "--priority must be \(allowed.map(String.init).joined(separator: " or ")) for push type \(pushType) (got \(priority))")
            }
            return known
        }
    }
}
