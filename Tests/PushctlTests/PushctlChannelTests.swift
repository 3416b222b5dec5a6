import Foundation
import TestSupport
import Testing

/// `pushctl channel` as an operator runs it, against the built apns-sandbox (management API and
/// broadcasts on its one port).
@Suite("pushctl channel")
struct PushctlChannelTests {
    static let app = "com.example.app"

    /// Runs pushctl; its exit status and output (stdout and stderr).
    func pushctl(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        let child = try ChildProcess([PushctlTests.pushctl] + arguments)
        let status = await child.waitForExit()
        return (status, child.output)
    }

    /// The options that point pushctl at `sandbox` with token auth.
    func target(_ sandbox: SandboxProcess) throws -> [String] {
        [
            "--endpoint", sandbox.endpointURL, "--ca-file", sandbox.caFile, "--key-file", try sandbox.writeSigningKeyFile(),
            "--key-id", "ABC123DEFG", "--team-id", "DEF123GHIJ", "--app", Self.app,
        ]
    }

    func json(_ output: String) throws -> [String: Any] {
        let line = try #require(output.split(whereSeparator: \.isNewline).last, "no output")
        return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(output)")
    }

    /// With the sandbox serving channel management on its own port, as Apple does: `--management-endpoint`
    /// reaches it; management sent to the push port gets Apple's 404 BadPath (exit 1, the reason named).
    @Test func managementGoesToItsOwnEndpoint() async throws {
        let managementPort = TestServers.freePort()
        let sandbox = try await SandboxProcess(arguments: ["--management-port", String(managementPort)])
        let target = try target(sandbox)
        let created = try await pushctl(
            ["channel", "create"] + target + ["--management-endpoint", "https://127.0.0.1:\(managementPort)", "--storage-policy", "0", "--json"])
        #expect(created.status == 0, "\(created.output)")
        let misdirected = try await pushctl(["channel", "list"] + target)
        #expect(misdirected.status == 1, "\(misdirected.output)")
        #expect(misdirected.output.contains("BadPath") && misdirected.output.contains("management"), "\(misdirected.output)")
        let bad = try await pushctl(["channel", "list"] + target + ["--management-endpoint", "http://127.0.0.1:1"])
        #expect(bad.status == 64 && bad.output.contains("--management-endpoint"), "\(bad.output)")
    }

    @Test func createGetListSendDelete() async throws {
        let sandbox = try await SandboxProcess()
        let target = try target(sandbox)

        let created = try await pushctl(["channel", "create"] + target + ["--storage-policy", "most-recent-message-stored", "--json"])
        #expect(created.status == 0, "\(created.output)")
        let channel = try #require(try json(created.output)["channel"] as? String)
        let human = try await pushctl(["channel", "create"] + target + ["--storage-policy", "0"])
        #expect(human.status == 0, "\(human.output)")
        #expect(
            human.output.contains("created channel ") && human.output.contains("for com.example.app (message storage policy 0, no-message-stored)"))

        let read = try await pushctl(["channel", "get"] + target + ["--channel", channel])
        #expect(read.status == 0, "\(read.output)")
        #expect(
            read.output.contains(
                "channel \(channel) of com.example.app: message storage policy 1 (most-recent-message-stored), push type LiveActivity"))
        let readJSON = try json(try await pushctl(["channel", "get"] + target + ["--channel", channel, "--json"]).output)
        #expect(number(readJSON["message_storage_policy"]) == 1)

        let listed = try await pushctl(["channel", "list"] + target)
        #expect(listed.status == 0, "\(listed.output)")
        #expect(listed.output.hasPrefix("2 channels for com.example.app:"), "\(listed.output)")
        #expect(listed.output.contains(channel))
        let listedJSON = try json(try await pushctl(["channel", "list"] + target + ["--json"]).output)
        #expect((listedJSON["channels"] as? [String])?.first == channel)

        // One broadcast on the channel, recorded by the sandbox with its channel id.
        let payloadFile = sandbox.directory.appendingPathComponent("update.json").path
        try Data(#"{"aps":{"timestamp":1685952000,"event":"update","content-state":{"score":"1-0"}}}"#.utf8).write(
            to: URL(fileURLWithPath: payloadFile))
        let requestID = "2288cf3f-70d8-46a6-97d7-dd5d00867127"
        let sent = try await pushctl(
            ["channel", "send"] + target + ["--channel", channel, "--payload-file", payloadFile, "--priority", "5", "--request-id", requestID])
        #expect(sent.status == 0, "\(sent.output)")
        #expect(sent.output.contains("200 accepted apns-request-id=\(requestID) (delivered)"), "\(sent.output)")
        let escaped = channel.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let recorded = try #require(try await sandbox.admin("GET", "/deliveries?channel=\(escaped)").json?["deliveries"] as? [[String: Any]])
        #expect(recorded.count == 1)
        #expect((recorded.first?["headers"] as? [String: String])?["apns-priority"] == "5")

        let deleted = try await pushctl(["channel", "delete"] + target + ["--channel", channel])
        #expect(deleted.status == 0, "\(deleted.output)")
        #expect(deleted.output.contains("deleted channel \(channel) of com.example.app"))

        // APNs' refusal: exit 1, the reason and what it means printed.
        let gone = try await pushctl(["channel", "get"] + target + ["--channel", channel, "--request-id", requestID])
        #expect(gone.status == 1, "\(gone.output)")
        #expect(
            gone.output.contains("ChannelNotRegistered (400): no channel '\(channel)' for com.example.app (apns-request-id \(requestID))"),
            "\(gone.output)")
        let goneJSON = try await pushctl(["channel", "delete"] + target + ["--channel", channel, "--json"])
        #expect(goneJSON.status == 1)
        let refusal = try json(goneJSON.output)
        #expect(refusal["reason"] as? String == "ChannelNotRegistered")
        #expect(number(refusal["status"]) == 400)
        let sentGone = try await pushctl(["channel", "send"] + target + ["--channel", channel, "--payload-file", payloadFile])
        #expect(sentGone.status == 1, "\(sentGone.output)")
        #expect(sentGone.output.contains("400 ChannelNotRegistered"), "\(sentGone.output)")
    }

    @Test func badInputAndNoAnswer() async throws {
        let sandbox = try await SandboxProcess()
        let target = try target(sandbox)
        // Usage errors name the option (ArgumentParser's exit 64), nothing is sent.
        let policy = try await pushctl(["channel", "create"] + target + ["--storage-policy", "2"])
        #expect(policy.status == 64, "\(policy.output)")
        #expect(policy.output.contains("--storage-policy"))
        let channelID = try await pushctl(["channel", "get"] + target + ["--channel", "not base64"])
        #expect(channelID.status == 64, "\(channelID.output)")
        #expect(channelID.output.contains("apns-channel-id"))
        let payloadFile = sandbox.directory.appendingPathComponent("update.json").path
        try Data(#"{"aps":{"event":"update"}}"#.utf8).write(to: URL(fileURLWithPath: payloadFile))
        let priority = try await pushctl(
            ["channel", "send"] + target + ["--channel", "AAAAAAAAAAAAAAAAAAAAAA==", "--payload-file", payloadFile, "--priority", "7"])
        #expect(priority.status == 64, "\(priority.output)")
        #expect(priority.output.contains("--priority must be 10, 5 or 1"), "\(priority.output)")
        // A background push at priority 10 ("Using priority 10 is an error"): refused before sending.
        let background = try await pushctl(
            ["send"] + target.filter { $0 != "--app" && $0 != Self.app }
                + ["--token", String(repeating: "ab", count: 32), "--topic", Self.app, "--content-available", "--priority", "10"])
        #expect(background.status == 64, "\(background.output)")
        #expect(background.output.contains("--priority must be 5 for push type background"), "\(background.output)")
        #expect(sandbox.process.status == nil)
        let stats = try #require(try await sandbox.admin("GET", "/stats").json)
        #expect(stats["channel_requests"] == nil)
        #expect(number(stats["requests"]) == 0)

        // Nothing listening: exit 2.
        let closed = TestServers.freePort()
        let unanswered = try await pushctl(
            [
                "channel", "list", "--endpoint", "https://127.0.0.1:\(closed)", "--ca-file", sandbox.caFile, "--key-file",
                try sandbox.writeSigningKeyFile(),
                "--key-id", "ABC123DEFG", "--team-id", "DEF123GHIJ", "--app", Self.app, "--timeout", "5",
            ])
        #expect(unanswered.status == 2, "\(unanswered.output)")
        #expect(unanswered.output.contains("no answer to list the channels"), "\(unanswered.output)")
    }
}
