import Foundation
import Glibc
import Logging
import Redis
import TestSupport

/// Shared helpers for the tests that talk to a real Redis.
enum RedisTesting {
    static let logger: Logger = {
        var logger = Logger(label: "redis-tests")
        logger.logLevel = .warning
        return logger
    }()

    /// The shared test Redis (`TestServers.redisURL`) with extra query options.
    static func configuration(_ options: String = "") throws -> RedisConfiguration {
        var url = TestServers.redisURL
        if !options.isEmpty { url += (url.contains("?") ? "&" : "?") + options }
        return try RedisConfiguration(url: url, source: "PUSH_TEST_REDIS_URL")
    }

    /// A client of the shared Redis, connected (throws, so the test fails, when Redis is not there).
    static func client(_ options: String = "") async throws -> RedisClient {
        try await RedisClient.connect(configuration: configuration(options), logger: logger)
    }

    /// A key prefix this test alone uses, with a hash tag as the service keys have.
    static func prefix(_ name: String) -> String {
        "{\(TestServers.uniqueName("redis-tests.\(name)"))}"
    }
}

extension LocalServer {
    /// Runs a `LocalServer` verb on a fresh thread with no blocked signals, without blocking the
    /// cooperative pool.
    ///
    /// Foundation's `Process` on Linux passes the calling thread's signal mask to the child, and the
    /// threads async tests run on block nearly every signal, SIGTERM included. A Redis started from such
    /// a thread ignores the SIGTERM `scripts/redis.sh stop` sends and the script waits for it forever.
    func run(_ verb: @escaping @Sendable (LocalServer) throws -> Void) async throws {
        let server = self
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let thread = Thread {
                var none = sigset_t()
                sigemptyset(&none)
                pthread_sigmask(SIG_SETMASK, &none, nil)
                continuation.resume(with: Result { try verb(server) })
            }
            thread.start()
        }
    }
}
