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

/// Every answer the callback form gives, counted per request: a request answered twice is seen even
/// when another is never answered (an overall count would see both as right), and one never
/// answered is named instead of hanging the test.
final class AnswerLedger: Sendable {
    private let answers: Mutex<[[Result<APNsResponse, APNsClientError>]]>

    init(requests: Int) {
        answers = Mutex(Array(repeating: [], count: requests))
    }

    /// The completion for request `index`.
    func completion(_ index: Int) -> @Sendable (Result<APNsResponse, APNsClientError>) -> Void {
        { result in self.answers.withLock { $0[index].append(result) } }
    }

    /// Requests not answered yet.
    var unanswered: [Int] { answers.withLock { answers in answers.indices.filter { answers[$0].isEmpty } } }

    /// Requests answered more than once, with how often.
    var answeredMoreThanOnce: [Int: Int] {
        answers.withLock { answers in
            var counts: [Int: Int] = [:]
            for (index, results) in answers.enumerated() where results.count > 1 { counts[index] = results.count }
            return counts
        }
    }

    /// Each request's first answer (nil: none yet).
    var firstAnswers: [Result<APNsResponse, APNsClientError>?] { answers.withLock { $0.map(\.first) } }

    /// Waits until every request has an answer (at most `timeout`; the client's own timeouts answer
    /// every request well before), naming the ones that have none.
    func waitUntilAllAnswered(timeout: Duration = .seconds(60)) async throws {
        do {
            try await eventually("every request answered", timeout: timeout, poll: .milliseconds(20)) { unanswered.isEmpty }
        } catch {
            let missing = unanswered
            throw TestFailure("\(missing.count) requests never answered (first: \(missing.prefix(10)))")
        }
    }

    /// How many requests were answered with a failure of `code`.
    func count(_ code: APNsClientError.Code) -> Int {
        firstAnswers.count(where: { if case .failure(let error)? = $0 { error.code == code } else { false } })
    }

    /// How many requests were answered with a response of `status`.
    func count(status: Int) -> Int {
        firstAnswers.count(where: { (try? $0?.get().status) == status })
    }
}

/// Runs a command line tool (openssl) and returns its exit status and output.
func run(_ arguments: [String]) async throws -> (status: Int32, output: String) {
    let child = try ChildProcess(arguments)
    let status = await child.waitForExit()
    return (status, child.output)
}
