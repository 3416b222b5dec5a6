import APNs
import Foundation
import Synchronization
import TestSupport

/// A client for `sandbox`, trusting its CA, with token auth by ``SandboxProcess/signingKey`` unless
/// told otherwise.
func makeClient(
    _ sandbox: SandboxProcess,
    credentials: APNsCredentials = .token(SandboxProcess.signingKey),
    configure: (inout APNsClientConfiguration) -> Void = { _ in }
) throws -> APNsClient {
    var configuration = APNsClientConfiguration(
        endpoint: try APNsEndpoint(url: sandbox.endpointURL), credentials: credentials, caFile: sandbox.caFile
    )
    configuration.requestTimeout = .seconds(20)
    configure(&configuration)
    return try APNsClient(configuration: configuration, logger: TestLogger.make("apns-client-test"))
}

/// An alert notification for `token` to `com.example.app`.
func alert(_ token: String = SandboxProcess.token, payload: String = #"{"aps":{"alert":"hello"}}"#, apnsID: UUID? = nil) -> APNsNotification {
    APNsNotification(deviceToken: token, topic: "com.example.app", apnsID: apnsID, payload: Array(payload.utf8))
}

/// A wall clock tests can move (seconds since 1970).
final class TestClock: Sendable {
    private let offset = Mutex<Int64>(0)

    var now: Int64 { Int64(Date().timeIntervalSince1970) + offset.withLock { $0 } }

    func advance(seconds: Int64) { offset.withLock { $0 += seconds } }

    func set(secondsFromNow: Int64) { offset.withLock { $0 = secondsFromNow } }
}

/// `count` sends at once; their results in order.
func sendAll(_ client: APNsClient, _ notifications: [APNsNotification]) async -> [Result<APNsResponse, APNsClientError>] {
    await withTaskGroup(of: (Int, Result<APNsResponse, APNsClientError>).self) { group in
        for (index, notification) in notifications.enumerated() {
            group.addTask {
                do throws(APNsClientError) {
                    return (index, .success(try await client.send(notification)))
                } catch {
                    return (index, .failure(error))
                }
            }
        }
        var results = [Result<APNsResponse, APNsClientError>?](repeating: nil, count: notifications.count)
        for await (index, result) in group { results[index] = result }
        return results.map { $0! }
    }
}

/// Runs a command line tool (openssl) and returns its exit status and output.
func run(_ arguments: [String]) async throws -> (status: Int32, output: String) {
    let child = try ChildProcess(arguments)
    let status = await child.waitForExit()
    return (status, child.output)
}
