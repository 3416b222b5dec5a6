import Foundation
import TestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The built executables, run as ops run them: `--help`, configuration errors, readiness against
/// the real test servers, and SIGTERM.
@Suite struct ServiceExecutableTests {
    static let executables = ["push-ingest", "push-render", "push-send", "push-feedback", "apns-sandbox", "pushctl"]

    private func path(_ executable: String) throws -> String {
        let path = TestServers.productsDirectory.appendingPathComponent(executable).path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw ChildProcessError("\(path) is not built (swift test builds every product)")
        }
        return path
    }

    @Test(arguments: executables)
    func answersHelp(_ executable: String) async throws {
        let child = try ChildProcess([try path(executable), "--help"])
        let status = await child.waitForExit(timeout: .seconds(20))
        #expect(status == 0, "\(child.output)")
        #expect(child.output.contains("OVERVIEW:"))
        #expect(child.output.contains("USAGE: \(executable)"))
    }

    @Test func aBadSettingStopsTheServiceNamingTheKey() async throws {
        let child = try ChildProcess([try path("push-send")], environment: ["PUSH_HTTP_PORT": "80a"])
        let status = await child.waitForExit(timeout: .seconds(20))
        #expect(status != nil && status != 0)
        #expect(child.output.contains("PUSH_HTTP_PORT"), "\(child.output)")
        #expect(child.output.contains("80a"))
    }

    @Test func aServiceBecomesReadyAndStopsCleanlyOnSIGTERM() async throws {
        let port = TestServers.freePort()
        let child = try ChildProcess(
            [try path("push-feedback")],
            environment: [
                "PUSH_AMQP_URL": TestServers.amqpURL, "PUSH_REDIS_URL": TestServers.redisURL,
                "PUSH_HTTP_PORT": String(port), "PUSH_HTTP_HOST": "127.0.0.1", "PUSH_LOG_FORMAT": "json",
            ]
        )
        let ready = try await poll("http://127.0.0.1:\(port)/readyz", until: { status, _ in status == 200 })
        #expect(ready.body.contains(#""amqp":"ok""#), "\(ready.body)")
        #expect(ready.body.contains(#""redis":"ok""#), "\(ready.body)")
        let health = try await get("http://127.0.0.1:\(port)/healthz")
        #expect(health.status == 200)
        let metrics = try await get("http://127.0.0.1:\(port)/metrics")
        #expect(metrics.status == 200)

        child.signal(SIGTERM)
        let status = await child.waitForExit(timeout: .seconds(15))
        #expect(status == 0, "\(child.output)")
        // JSON logs: every line is one object.
        #expect(!child.output.isEmpty, "the service logged something")
        for line in child.output.split(separator: "\n") {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) is [String: Any], "\(line)")
        }
    }

    @Test func readinessNamesAnUnreachableBroker() async throws {
        let port = TestServers.freePort()
        let child = try ChildProcess(
            [try path("push-render")],
            environment: [
                "PUSH_AMQP_URL": "amqp://guest:guest@127.0.0.1:1/%2f", "PUSH_REDIS_URL": TestServers.redisURL,
                "PUSH_HTTP_PORT": String(port), "PUSH_HTTP_HOST": "127.0.0.1",
            ]
        )
        let answer = try await poll(
            "http://127.0.0.1:\(port)/readyz",
            until: { status, body in
                status == 503 && body.contains("127.0.0.1:1")
            })
        #expect(answer.body.contains(#""status":"not_ready""#), "\(answer.body)")
        #expect(answer.body.contains(#""redis":"ok""#), "\(answer.body)")
        // Liveness is separate from readiness: the process is healthy while it waits for the broker.
        #expect(try await get("http://127.0.0.1:\(port)/healthz").status == 200)
        child.signal(SIGTERM)
        #expect(await child.waitForExit(timeout: .seconds(15)) == 0, "\(child.output)")
    }

    // MARK: HTTP

    private func get(_ url: String) async throws -> (status: Int, body: String) {
        var request = URLRequest(url: URL(string: url)!)
        request.timeoutInterval = 3
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    /// Polls `url` every 100 ms for up to 20 s until `condition` holds.
    private func poll(_ url: String, until condition: (Int, String) -> Bool) async throws -> (status: Int, body: String) {
        let deadline = ContinuousClock.now + .seconds(20)
        var last: (status: Int, body: String) = (0, "")
        while ContinuousClock.now < deadline {
            if let answer = try? await get(url) {
                last = answer
                if condition(answer.status, answer.body) { return answer }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ChildProcessError("\(url) never satisfied the condition; last answer \(last.status) \(last.body)")
    }
}
