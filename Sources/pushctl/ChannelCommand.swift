import APNs
import ArgumentParser
import Foundation
import Logging

import struct PushCore.PushType

extension PushctlCommand {
    /// `pushctl channel create|get|delete|list|send`: iOS 18 broadcast channels through APNs'
    /// channel-management API, and one broadcast on a channel — for setting up and checking a Live
    /// Activity event by hand.
    struct Channel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create, read, delete and list broadcast channels (iOS 18 Live Activities); send a broadcast on one.",
            discussion: """
                Channel management (create, get, delete, list) goes to APNs' management endpoint: --environment production is api-manage-broadcast.push.apple.com:2196, sandbox api-manage-broadcast.sandbox.push.apple.com:2195. `channel send` goes to the push endpoint (api.push.apple.com, api.sandbox.push.apple.com). --endpoint overrides both, e.g. https://127.0.0.1:2197 for apns-sandbox, which serves both on one port.
                Exit status: 0 done, 1 APNs refused (its reason is printed), 2 no answer.

                Examples:
                  pushctl channel create --endpoint https://127.0.0.1:2197 --ca-file .local/apns-sandbox-ca-dev.pem --key-file AuthKey.p8 --key-id ABC123DEFG --team-id DEF123GHIJ --app com.example.app --storage-policy no-message-stored
                  pushctl channel list --environment sandbox --key-file AuthKey.p8 --key-id ABC123DEFG --team-id DEF123GHIJ --app com.example.app
                  pushctl channel send … --app com.example.app --channel dHN0LXNyY2gtY2hubA== --payload-file update.json --priority 5
                """,
            subcommands: [Create.self, Get.self, Delete.self, List.self, Send.self]
        )

        /// What every channel command names.
        struct Common: ParsableArguments {
            @Option(help: "The app's bundle id (bare: no .push-type.liveactivity suffix).")
            var app: String

            @Option(help: "apns-request-id: a UUID naming the request in APNs' answer (APNs makes one up otherwise).")
            var requestID: String?

            @Option(help: "Seconds to wait for the answer.")
            var timeout: Int = 30

            @Flag(help: "Print the result (or APNs' refusal) as JSON.")
            var json = false

            @Option(
                help:
                    "Channel-management endpoint URL, e.g. https://127.0.0.1:2195 for apns-sandbox --management-port 2195 (default: --endpoint, else Apple's api-manage-broadcast host for --environment). Broadcasts (channel send) go to --endpoint."
            )
            var managementEndpoint: String?

            func uuid() throws -> UUID? {
                guard let requestID else { return nil }
                guard let uuid = UUID(uuidString: requestID) else { throw ValidationError("--request-id must be a UUID (got '\(requestID)')") }
                return uuid
            }
        }

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Create a channel and print its id (the storage policy cannot change later).")

            @OptionGroup var apns: APNsOptions
            @OptionGroup var common: Common

            @Option(
                help:
                    "message-storage-policy: no-message-stored (0: offline devices miss updates; a higher budget, e.g. scores) or most-recent-message-stored (1: the latest is kept for up to 8 hours)."
            )
            var storagePolicy: String

            func run() async throws {
                guard let policy = APNsChannelStoragePolicy(name: storagePolicy) else {
                    throw ValidationError("--storage-policy must be no-message-stored (0) or most-recent-message-stored (1), got '\(storagePolicy)'")
                }
                let requestID = try common.uuid()
                let channelID = try await withChannelClient(apns, common, "create") {
                    (client: APNsChannelClient) async throws(APNsChannelError) -> String in
                    try await client.create(bundleID: common.app, storagePolicy: policy, requestID: requestID, timeout: .seconds(common.timeout))
                }
                if common.json {
                    try printJSON(["app": common.app, "channel": channelID, "message_storage_policy": policy.rawValue])
                } else {
                    print("created channel \(channelID) for \(common.app) (message storage policy \(policy.rawValue), \(policy.name))")
                }
            }
        }

        struct Get: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Print a channel's configuration (its message storage policy).")

            @OptionGroup var apns: APNsOptions
            @OptionGroup var common: Common

            @Option(help: "The channel id (base64, as create printed it).")
            var channel: String

            func run() async throws {
                let requestID = try common.uuid()
                let settings = try await withChannelClient(apns, common, "get") {
                    (client: APNsChannelClient) async throws(APNsChannelError) -> APNsChannelConfiguration in
                    try await client.read(channelID: channel, bundleID: common.app, requestID: requestID, timeout: .seconds(common.timeout))
                }
                if common.json {
                    try printJSON([
                        "app": common.app, "channel": channel, "message_storage_policy": settings.storagePolicy.rawValue,
                        "push_type": settings.pushType,
                    ])
                } else {
                    print(
                        "channel \(channel) of \(common.app): message storage policy \(settings.storagePolicy.rawValue) (\(settings.storagePolicy.name)), push type \(settings.pushType)"
                    )
                }
            }
        }

        struct Delete: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Delete a channel (irreversible; its id is never given out again).")

            @OptionGroup var apns: APNsOptions
            @OptionGroup var common: Common

            @Option(help: "The channel id (base64).")
            var channel: String

            func run() async throws {
                let requestID = try common.uuid()
                try await withChannelClient(apns, common, "delete") { (client: APNsChannelClient) async throws(APNsChannelError) -> Void in
                    try await client.delete(channelID: channel, bundleID: common.app, requestID: requestID, timeout: .seconds(common.timeout))
                }
                if common.json {
                    try printJSON(["app": common.app, "channel": channel, "deleted": true])
                } else {
                    print("deleted channel \(channel) of \(common.app)")
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List the ids of every channel the app has in the environment.")

            @OptionGroup var apns: APNsOptions
            @OptionGroup var common: Common

            func run() async throws {
                let requestID = try common.uuid()
                let channels = try await withChannelClient(apns, common, "list") {
                    (client: APNsChannelClient) async throws(APNsChannelError) -> [String] in
                    try await client.list(bundleID: common.app, requestID: requestID, timeout: .seconds(common.timeout))
                }
                if common.json {
                    try printJSON(["app": common.app, "channels": channels])
                } else {
                    print("\(channels.count) channel\(channels.count == 1 ? "" : "s") for \(common.app)\(channels.isEmpty ? "" : ":")")
                    for channel in channels { print(channel) }
                }
            }
        }

        struct Send: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Send one broadcast (a Live Activity update or end) on a channel and print APNs' answer.",
                discussion: "One request, however many devices listen on the channel. It goes to the push endpoint, not the management one."
            )

            @OptionGroup var apns: APNsOptions
            @OptionGroup var common: Common

            @Option(help: "The channel id (base64).")
            var channel: String

            @Option(
                help: "A file holding the JSON payload (- reads stdin), e.g. {\"aps\":{\"timestamp\":…,\"event\":\"update\",\"content-state\":{…}}}.")
            var payloadFile: String

            @Option(help: "apns-priority: 10, 5 or 1.")
            var priority: Int = 10

            @Option(help: "apns-expiration: seconds since 1970 until which APNs keeps the update (Most Recent Message Stored channels); 0 = once.")
            var expiration: Int64 = 0

            func run() async throws {
                let requestID = try common.uuid()
                guard PushType.broadcastPriorities.contains(priority), let priority = APNsPriority(rawValue: priority) else {
                    throw ValidationError("--priority must be 10, 5 or 1 (got \(priority))")
                }
                let payload: Data
                if payloadFile == "-" {
                    payload = FileHandle.standardInput.readDataToEndOfFile()
                } else {
                    guard let read = FileManager.default.contents(atPath: payloadFile) else {
                        throw ValidationError("cannot read --payload-file '\(payloadFile)'")
                    }
                    payload = read
                }
                guard (try? JSONSerialization.jsonObject(with: payload)) is [String: Any] else {
                    throw ValidationError("--payload-file '\(payloadFile)' is not a JSON object")
                }
                let broadcast = APNsBroadcast(
                    bundleID: common.app, channelID: channel, priority: priority, expiration: expiration, requestID: requestID,
                    payload: Array(payload))
                do {
                    try broadcast.validate()
                } catch {
                    throw ValidationError("\(error)")
                }
                var configuration = try apns.clientConfiguration(ephemeralKeyAllowed: false)
                configuration.connections = 1
                configuration.requestTimeout = .seconds(common.timeout)
                let client = try APNsClient(
                    configuration: configuration, logger: Logger(label: "pushctl", factory: { _ in SwiftLogNoOpLogHandler() }))
                let result: Result<APNsBroadcastResponse, APNsClientError>
                do {
                    result = .success(try await client.send(broadcast))
                } catch {
                    result = .failure(error)
                }
                await client.shutdown()
                switch result {
                case .success(let response):
                    if common.json {
                        var object: [String: Any] = ["status": response.status, "outcome": "\(response.outcome)", "channel": channel]
                        object["request_id"] = response.requestID
                        object["reason"] = response.reason?.rawValue
                        try printJSON(object)
                    } else {
                        var line = "\(response.status) \(response.reason?.rawValue ?? "accepted")"
                        if let requestID = response.requestID { line += " apns-request-id=\(requestID)" }
                        line += " (\(response.outcome))"
                        print(line)
                    }
                    if response.status != 200 { throw ExitCode(1) }
                case .failure(let error):
                    if common.json {
                        try printJSON(["error": "\(error.code)", "message": error.message])
                    } else {
                        FileHandle.standardError.write(Data("pushctl channel send: no answer from APNs: \(error)\n".utf8))
                    }
                    throw ExitCode(2)
                }
            }
        }
    }
}

/// The management endpoint the options name: `--management-endpoint`, else `--endpoint` (an
/// apns-sandbox serving every API on one port), else the environment's management host.
private func managementEndpoint(_ options: APNsOptions, _ common: PushctlCommand.Channel.Common) throws -> APNsEndpoint {
    if let endpoint = common.managementEndpoint {
        do {
            return try APNsEndpoint(url: endpoint)
        } catch {
            throw ValidationError("--management-endpoint: \(error.message)")
        }
    }
    if let endpoint = options.endpoint { return try APNsEndpoint(url: endpoint) }
    switch options.environment {
    case "production": return .managementProduction
    case "sandbox", "development": return .managementDevelopment
    default: throw ValidationError("--environment must be production or sandbox (got '\(options.environment)')")
    }
}

/// Runs `body` with a channel client on the management endpoint, shuts it down, and turns a failure
/// into pushctl's exit status: APNs' refusal 1 (with its reason), no answer 2, a request refused
/// before sending a usage error.
private func withChannelClient<T: Sendable>(
    _ options: APNsOptions, _ common: PushctlCommand.Channel.Common, _ command: String,
    _ body: (APNsChannelClient) async throws(APNsChannelError) -> T
) async throws -> T {
    var configuration = try options.clientConfiguration(ephemeralKeyAllowed: false)
    configuration.endpoint = try managementEndpoint(options, common)
    configuration.connections = 1
    configuration.requestTimeout = .seconds(common.timeout)
    let client = try APNsChannelClient(configuration: configuration, logger: Logger(label: "pushctl", factory: { _ in SwiftLogNoOpLogHandler() }))
    let result: Result<T, APNsChannelError>
    do {
        result = .success(try await body(client))
    } catch {
        result = .failure(error)
    }
    await client.shutdown()
    switch result {
    case .success(let value):
        return value
    case .failure(let error):
        if let clientError = error.clientError, clientError.code == .invalidRequest {
            throw ValidationError(error.message)
        }
        if common.json {
            var object: [String: Any] = ["message": error.message]
            object["status"] = error.status
            object["reason"] = error.reason?.rawValue
            object["error"] = error.clientError.map { "\($0.code)" }
            object["request_id"] = error.requestID
            object["retryable"] = error.isRetryable
            try printJSON(object)
        } else {
            FileHandle.standardError.write(Data("pushctl channel \(command): \(error)\n".utf8))
        }
        throw ExitCode(error.status == nil ? 2 : 1)
    }
}

private func printJSON(_ object: [String: Any]) throws {
    let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    print(String(decoding: data, as: UTF8.self))
}
