import Foundation
import PushServiceKit
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Admin server over HTTP")
struct AdminServerTests {
    // MARK: Routes

    @Test func healthzAnswersOK() async throws {
        try await withAdminServer { port in
            let response = try await httpGet(port: port, path: "/healthz")
            #expect(response.status == 200)
            #expect(response.contentType == "application/json")
            #expect(response.body == #"{"status":"ok"}"#)
        }
    }

    @Test func readyzFollowsItsChecks() async throws {
        let amqpUp = Flag(true)
        let readiness = [
            ReadinessCheck("amqp") { amqpUp.value ? .ready : .notReady("connection refused (127.0.0.1:5672)") },
            ReadinessCheck("redis") { .ready },
        ]
        try await withAdminServer(readiness: readiness) { port in
            let ready = try await httpGet(port: port, path: "/readyz")
            #expect(ready.status == 200)
            #expect(ready.contentType == "application/json")
            #expect(ready.body == #"{"status":"ready","checks":{"amqp":"ok","redis":"ok"}}"#)

            amqpUp.value = false
            let notReady = try await httpGet(port: port, path: "/readyz")
            #expect(notReady.status == 503)
            #expect(notReady.body == #"{"status":"not_ready","checks":{"amqp":"connection refused (127.0.0.1:5672)","redis":"ok"}}"#)

            amqpUp.value = true
            #expect(try await httpGet(port: port, path: "/readyz").status == 200)
        }
    }

    @Test func readyzWithoutChecksIsReady() async throws {
        try await withAdminServer { port in
            let response = try await httpGet(port: port, path: "/readyz")
            #expect(response.status == 200)
            #expect(response.body == #"{"status":"ready","checks":{}}"#)
        }
    }

    @Test func aCheckThatHangsCountsAsNotReady() async throws {
        let readiness = [
            ReadinessCheck("slow", timeout: .milliseconds(100)) {
                try? await Task.sleep(for: .seconds(30))
                return .ready
            }
        ]
        try await withAdminServer(readiness: readiness) { port in
            let started = ContinuousClock.now
            let response = try await httpGet(port: port, path: "/readyz")
            #expect(ContinuousClock.now - started < .seconds(5))
            #expect(response.status == 503)
            #expect(response.body.hasPrefix(#"{"status":"not_ready","checks":{"slow":"timed out after "#))
        }
    }

    @Test func metricsServesThePrometheusRegistry() async throws {
        PushMetrics.bootstrap()
        let checkName = "test_\(UUID().uuidString.prefix(8).lowercased())"
        let readiness = [ReadinessCheck(checkName) { .notReady("down") }]
        try await withAdminServer(readiness: readiness) { port in
            // Each failed readiness answer increments a swift-metrics counter, exported through the registry.
            #expect(try await httpGet(port: port, path: "/readyz").status == 503)
            #expect(try await httpGet(port: port, path: "/readyz").status == 503)
            let metrics = try await httpGet(port: port, path: "/metrics")
            #expect(metrics.status == 200)
            #expect(metrics.contentType == "text/plain; version=0.0.4")
            #expect(metrics.body.contains("# TYPE push_readiness_failures_total counter"))
            #expect(metrics.body.contains(#"push_readiness_failures_total{check="\#(checkName)"} 2"#))
        }
    }

    @Test func unknownPathsAre404() async throws {
        try await withAdminServer { port in
            let response = try await httpGet(port: port, path: "/nothing")
            #expect(response.status == 404)
        }
    }

    @Test func secondBootstrapsChangeNothing() {
        PushMetrics.bootstrap()
        #expect(PushMetrics.bootstrap() == false)
    }

    // MARK: Lifecycle

    @Test func gracefulShutdownStopsTheGroupWithinABound() async throws {
        let ports = PortReporter()
        let adminServer = buildAdminServer(
            configuration: PushConfiguration(httpPort: 0, httpHost: "127.0.0.1"),
            logger: TestLogger.make("admin-test"),
            onServerRunning: { await ports.report($0) }
        )
        let drained = Flag(false)
        let worker = DrainingService(drained: drained)
        let group = makeServiceGroup(services: [worker], adminServer: adminServer, gracefulShutdownSignals: [], logger: TestLogger.make("admin-test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let port = try await ports.port()
            #expect(try await httpGet(port: port, path: "/healthz").status == 200)

            let started = ContinuousClock.now
            await group.triggerGracefulShutdown()
            try await tasks.next()
            #expect(ContinuousClock.now - started < .seconds(5))
            #expect(drained.value)
            await #expect(throws: (any Error).self) { try await httpGet(port: port, path: "/healthz") }
        }
    }

    @Test func serviceThatIgnoresShutdownIsCancelledAfterTheTimeout() async throws {
        let ports = PortReporter()
        let adminServer = buildAdminServer(
            configuration: PushConfiguration(httpPort: 0, httpHost: "127.0.0.1"),
            logger: TestLogger.make("admin-test"),
            onServerRunning: { await ports.report($0) }
        )
        let cancelled = Flag(false)
        let group = makeServiceGroup(
            services: [StubbornService(cancelled: cancelled)],
            adminServer: adminServer,
            shutdownTimeout: .milliseconds(300),
            gracefulShutdownSignals: [],
            logger: TestLogger.make("admin-test")
        )
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try? await group.run() }
            _ = try await ports.port()
            let started = ContinuousClock.now
            await group.triggerGracefulShutdown()
            try await tasks.next()
            let elapsed = ContinuousClock.now - started
            #expect(elapsed >= .milliseconds(250))
            #expect(elapsed < .seconds(5))
            #expect(cancelled.value)
        }
    }
}

// MARK: - Test helpers

/// Runs an admin server on a free loopback port for `body`, then shuts it down.
func withAdminServer(readiness: [ReadinessCheck] = [], _ body: (Int) async throws -> Void) async throws {
    let ports = PortReporter()
    let server = buildAdminServer(
        configuration: PushConfiguration(httpPort: 0, httpHost: "127.0.0.1"),
        readiness: readiness,
        logger: TestLogger.make("admin-test"),
        onServerRunning: { await ports.report($0) }
    )
    try await withRunningServices([server], logger: TestLogger.make("admin-test")) { _ in
        try await body(try await ports.port())
    }
}

/// Hands the port `onServerRunning` reported to whoever waits for it (at most 10 s).
actor PortReporter {
    private var reported: Int?
    private var waiters: [CheckedContinuation<Int, Never>] = []

    func report(_ port: Int) {
        reported = port
        for waiter in waiters { waiter.resume(returning: port) }
        waiters = []
    }

    func port() async throws -> Int {
        if let reported { return reported }
        return try await withThrowingTaskGroup(of: Int.self) { group in
            group.addTask { await self.waitForPort() }
            group.addTask {
                try await Task.sleep(for: .seconds(10))
                throw AdminServerTestError.serverDidNotStart
            }
            let port = try await group.next()!
            group.cancelAll()
            return port
        }
    }

    private func waitForPort() async -> Int {
        if let reported { return reported }
        return await withCheckedContinuation { waiters.append($0) }
    }
}

enum AdminServerTestError: Error {
    case serverDidNotStart
    case notHTTP
}

/// A boolean shared between a test and the services it runs.
final class Flag: Sendable {
    private let state: Mutex<Bool>

    init(_ value: Bool) {
        state = Mutex(value)
    }

    var value: Bool {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
}

/// Works until graceful shutdown, then finishes its "in-flight work" and returns.
struct DrainingService: Service {
    let drained: Flag

    func run() async throws {
        try? await gracefulShutdown()
        try await Task.sleep(for: .milliseconds(50))
        drained.value = true
    }
}

/// Ignores graceful shutdown; only cancellation stops it.
struct StubbornService: Service {
    let cancelled: Flag

    func run() async throws {
        do {
            try await Task.sleep(for: .seconds(60))
        } catch {
            cancelled.value = true
        }
    }
}

struct HTTPResponseSummary {
    var status: Int
    var contentType: String?
    var body: String
}

/// `GET http://127.0.0.1:<port><path>` with a 5 s timeout.
func httpGet(port: Int, path: String) async throws -> HTTPResponseSummary {
    var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
    request.timeoutInterval = 5
    let configuration = URLSessionConfiguration.ephemeral
    configuration.timeoutIntervalForRequest = 5
    let session = URLSession(configuration: configuration)
    defer { session.finishTasksAndInvalidate() }
    let (data, response) = try await session.data(for: request)
    guard let http = response as? HTTPURLResponse else {
        throw AdminServerTestError.notHTTP
    }
    return HTTPResponseSummary(
        status: http.statusCode,
        contentType: http.value(forHTTPHeaderField: "Content-Type"),
        body: String(decoding: data, as: UTF8.self)
    )
}
