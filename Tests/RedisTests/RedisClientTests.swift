import Foundation
import Redis
import TestSupport
import Testing

/// Against the shared Redis `make test` starts (`TestServers.redisURL`); fails when it is not running.
@Suite("Redis against a real server", .timeLimit(.minutes(1)))
struct RedisClientTests {
    @Test func pipelineOfTenThousandCommands() async throws {
        let client = try await RedisTesting.client()
        let prefix = RedisTesting.prefix("pipeline")
        let count = 10_000

        var sets: [RedisCommand] = []
        sets.reserveCapacity(count)
        for index in 0..<count {
            var command: RedisCommand = ["SET", "\(prefix):\(index)"]
            command.append([UInt8(index & 0xFF), 0, 13, 10] + Array("value-\(index)".utf8))
            command.append(contentsOf: ["EX", "120"])
            sets.append(command)
        }
        let setReplies = try await client.pipeline(sets)
        #expect(setReplies.count == count)
        #expect(setReplies.allSatisfy { $0 == .status("OK") })

        let gets = (0..<count).map { RedisCommand("GET", "\(prefix):\($0)") } + [RedisCommand("GET", "\(prefix):missing")]
        let getReplies = try await client.pipeline(gets)
        #expect(getReplies.count == count + 1)
        for index in 0..<count where getReplies[index] != .bulk([UInt8(index & 0xFF), 0, 13, 10] + Array("value-\(index)".utf8)) {
            Issue.record("reply \(index) is \(getReplies[index])")
            break
        }
        #expect(getReplies[count] == .null)

        // An error in the middle of a pipeline is that command's reply, not a thrown error.
        let mixed = try await client.pipeline([["INCR", "\(prefix):0"], ["PING"]])
        #expect(mixed[0].errorMessage?.hasPrefix("ERR") == true)
        #expect(mixed[1] == .status("PONG"))
        // An empty command is answered locally (Redis would never reply to it) and breaks nothing.
        #expect(try await client.pipeline([RedisCommand(), ["PING"]]) == [.error("ERR empty command (not sent)"), .status("PONG")])

        let unlinks = stride(from: 0, to: count, by: 1000).map { first in
            RedisCommand(["UNLINK"] + (first..<first + 1000).map { "\(prefix):\($0)" })
        }
        #expect(try await client.pipeline(unlinks) == Array(repeating: .integer(1000), count: 10))
        await client.close()
    }

    @Test func concurrentCallersArePipelinedOnOneConnection() async throws {
        let connection = try await RedisConnection.connect(configuration: TestServers.redisConfiguration(), logger: RedisTesting.logger)
        let key = RedisTesting.prefix("concurrent") + ":counter"
        let results = try await withThrowingTaskGroup(of: Int64.self) { group in
            for _ in 0..<2000 {
                group.addTask { try #require(try await connection.send("INCR", key).integer) }
            }
            var results: [Int64] = []
            for try await value in group { results.append(value) }
            return results
        }
        #expect(Set(results) == Set(1...2000))
        #expect(try await connection.send("GET", key).integer == 2000)
        try await connection.execute("DEL", key)
        await connection.close()
    }

    @Test func repliesOfEveryShape() async throws {
        let client = try await RedisTesting.client()
        let prefix = RedisTesting.prefix("shapes")
        #expect(try await client.send("PING") == .status("PONG"))
        #expect(try await client.send("SET", "\(prefix):a", "1", "EX", "60") == .status("OK"))
        #expect(try await client.send("INCRBY", "\(prefix):a", "41") == .integer(42))
        #expect(try await client.send("MGET", "\(prefix):a", "\(prefix):nope") == .array([.bulk(Array("42".utf8)), .null]))
        #expect(try await client.send("LRANGE", "\(prefix):nope", "0", "-1") == .array([]))
        let nested = try await client.send("EVAL", "return {1, {2, 'x', {}}, false, 'y'}", "0")
        #expect(nested == .array([.integer(1), .array([.integer(2), .bulk(Array("x".utf8)), .array([])]), .null, .bulk(Array("y".utf8))]))
        let wrongType = try await client.send("HGET", "\(prefix):a", "f")
        #expect(wrongType.errorMessage?.hasPrefix("WRONGTYPE") == true)
        let thrown = await #expect(throws: RedisError.self) { try await client.execute("HGET", "\(prefix):a", "f") }
        #expect(thrown?.code == .serverError)
        #expect(thrown?.message.hasPrefix("WRONGTYPE") == true)

        let binary: [UInt8] = Array(0...255)
        #expect(try await client.send(RedisCommand([Array("SET".utf8), [0xFF, 0x00, 0x0A], binary])) == .status("OK"))
        #expect(try await client.send(RedisCommand([Array("GET".utf8), [0xFF, 0x00, 0x0A]])) == .bulk(binary))
        _ = try await client.send(RedisCommand([Array("DEL".utf8), Array("\(prefix):a".utf8), [0xFF, 0x00, 0x0A]]))
        await client.close()
    }

    @Test func deleteKeysIfValueIsDeletesOnlyWhatStillHoldsTheValue() async throws {
        let client = try await RedisTesting.client()
        #expect(client.keysShareOneNode, "a single server")
        // Keys without a common hash tag, as the crash guard's marks are.
        let keys = (0..<20).map { "\(TestServers.uniqueName("compare-and-delete")):\($0)" }
        for reply in try await client.pipeline(keys.map { ["SET", $0, "mine", "EX", "60"] }) { _ = try reply.throwingServerError() }
        try await client.execute("SET", keys[3], "theirs", "EX", "60")
        #expect(try await client.deleteKeys(keys + ["\(keys[0]):never-set"], ifValueIs: "mine") == 19)
        #expect(try await client.execute("GET", keys[3]).string == "theirs")
        #expect(try await client.execute("EXISTS", keys[0]).integer == 0)
        #expect(try await client.deleteKeys([], ifValueIs: "mine") == 0)
        try await client.execute("DEL", keys[3])
        await client.close()
    }

    @Test func evalshaAfterScriptFlushLoadsTheScriptAgain() async throws {
        let client = try await RedisTesting.client("pool_size=1")
        let key = RedisTesting.prefix("script") + ":n"
        let script = RedisScript("return redis.call('INCRBY', KEYS[1], ARGV[1]) -- \(key)")
        // Our SHA-1 is the name Redis gives the script.
        #expect(try await client.execute("SCRIPT", "LOAD", script.source) == .bulk(Array(script.sha1.utf8)))

        #expect(try await client.evalScript(script, keys: [key], args: ["5"]) == .integer(5))
        try await client.execute("SCRIPT", "FLUSH")
        #expect(try await client.send("SCRIPT", "EXISTS", script.sha1) == .array([.integer(0)]))
        #expect(try await client.evalScript(script, keys: [key], args: ["2"]) == .integer(7))
        #expect(try await client.send("SCRIPT", "EXISTS", script.sha1) == .array([.integer(1)]))
        #expect(try await client.evalScript(script, keys: [key], args: ["3"]) == .integer(10))

        let failing = RedisScript("return redis.error_reply('NOPE script says no')")
        let error = await #expect(throws: RedisError.self) { try await client.evalScript(failing) }
        #expect(error?.code == .serverError)
        #expect(error?.message.contains("script says no") == true)
        try await client.execute("DEL", key)
        await client.close()
    }

    @Test func aclUserWithRightAndWrongPassword() async throws {
        let admin = try await RedisTesting.client("pool_size=1")
        let user = TestServers.uniqueName("pushtest")
        let password = "p@ss:w/rd%"
        try await admin.execute("ACL", "SETUSER", user, "on", ">\(password)", "~*", "&*", "+@all")
        // Remove the user however the checks below end.
        let outcome = await Result { () async throws -> Void in
            let base = try TestServers.redisConfiguration("pool_size=1")
            // The password percent-encoded in the URL, as an operator would write it.
            let good = try RedisConfiguration(url: "redis://\(user):p%40ss%3Aw%2Frd%25@\(base.endpoint)/\(base.database)?pool_size=1")
            #expect(good.password == password)
            let client = try await RedisClient.connect(configuration: good, logger: RedisTesting.logger)
            #expect(try await client.send("ACL", "WHOAMI") == .bulk(Array(user.utf8)))
            await client.close()

            var bad = base
            (bad.username, bad.password) = (user, "wrong-password")
            let started = ContinuousClock.now
            let error = await #expect(throws: RedisError.self) {
                try await RedisClient.connect(configuration: bad, logger: RedisTesting.logger)
            }
            #expect(ContinuousClock.now - started < .seconds(3))
            #expect(error?.code == .authenticationFailed)
            #expect(error?.isRetryable == false)
            #expect(error?.message.contains("WRONGPASS") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains(user) == true)
            #expect(error?.message.contains("wrong-password") == false)

            // A lazily connected client fails its commands with the same error, at once.
            let lazy = RedisClient(configuration: bad, logger: RedisTesting.logger)
            let lazyStarted = ContinuousClock.now
            let lazyError = await #expect(throws: RedisError.self) { try await lazy.send("PING") }
            #expect(lazyError?.code == .authenticationFailed)
            // "At once": a refused login is not retried until a timeout, even on a machine running
            // every suite.
            #expect(ContinuousClock.now - lazyStarted < .seconds(6))
            #expect(!lazy.isConnected)
            await lazy.close()
        }
        try await admin.execute("ACL", "DELUSER", user)
        await admin.close()
        try outcome.get()
    }

    @Test func unreachablePortFailsWithinTheConnectTimeout() async throws {
        let configuration = try RedisConfiguration(url: "redis://127.0.0.1:1/0?connect_timeout_ms=500&command_timeout_ms=400")
        let started = ContinuousClock.now
        let error = await #expect(throws: RedisError.self) {
            try await RedisClient.connect(configuration: configuration, logger: RedisTesting.logger)
        }
        // A refused connection fails at once; the bound leaves room for a 2-core machine running
        // every suite at once (6 s seen there), and is still far below "hanging".
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(error?.code == .connectionFailed)
        #expect(error?.isRetryable == true)
        #expect(error?.message.contains("127.0.0.1:1") == true)
        #expect(error?.message.lowercased().contains("connection refused") == true, "\(error?.message ?? "")")

        // A command on a lazily connecting client waits for a connection up to its timeout, then fails
        // with the cause.
        let client = RedisClient(configuration: configuration, logger: RedisTesting.logger)
        let commandStarted = ContinuousClock.now
        let commandError = await #expect(throws: RedisError.self) { try await client.send("PING") }
        let waited = ContinuousClock.now - commandStarted
        // Bounded (a busy machine running every suite stretches it; the code below shows the cause).
        #expect(waited >= .milliseconds(350) && waited < .seconds(10), "\(waited)")
        #expect(commandError?.code == .connectionFailed)
        #expect(commandError?.message.lowercased().contains("connection refused") == true)
        #expect(!client.isConnected)
        await client.close()
    }

    @Test func databaseOutOfRangeIsAClearError() async throws {
        var configuration = try TestServers.redisConfiguration("pool_size=1")
        configuration.database = 100_000
        let error = await #expect(throws: RedisError.self) {
            try await RedisClient.connect(configuration: configuration, logger: RedisTesting.logger)
        }
        #expect(error?.code == .connectionFailed)
        #expect(error?.message.contains("SELECT failed: ERR DB index is out of range") == true, "\(error?.message ?? "")")
    }

    @Test func commandTimeoutFailsTheCommandAndTheConnectionRecovers() async throws {
        let connection = try await RedisConnection.connect(
            configuration: TestServers.redisConfiguration("command_timeout_ms=300"), logger: RedisTesting.logger)
        let key = RedisTesting.prefix("timeout") + ":list"
        let started = ContinuousClock.now
        let error = await #expect(throws: RedisError.self) { try await connection.send("BLPOP", key, "5") }
        let waited = ContinuousClock.now - started
        #expect(error?.code == .timeout)
        #expect(error?.isRetryable == true)
        #expect(error?.message.contains("300 ms") == true)
        // Well before BLPOP's own 5 s (then it would answer nil, not time out); a busy machine
        // running every suite may take seconds to schedule the timeout.
        #expect(waited >= .milliseconds(250) && waited < .seconds(5), "\(waited)")
        // The broken connection is replaced; the next command works.
        #expect(try await connection.send("PING") == .status("PONG"))
        #expect(connection.isConnected)
        await connection.close()
    }

    @Test func closeFailsLaterCommandsAndJoinsTheThread() async throws {
        let client = try await RedisTesting.client()
        #expect(client.isConnected)
        let inFlight = Task { try await client.send("PING") }
        await client.close()
        // A command queued before close is still answered (or, if it arrived after, refused).
        switch await inFlight.result {
        case .success(let reply): #expect(reply == .status("PONG"))
        case .failure(let error): #expect((error as? RedisError)?.code == .closed)
        }
        #expect(!client.isConnected)
        let error = await #expect(throws: RedisError.self) { try await client.send("PING") }
        #expect(error?.code == .closed)
        await client.close()
    }

    @Test func serviceRunClosesOnGracefulShutdown() async throws {
        let client = try await RedisTesting.client()
        try await withRunningServices([client], logger: RedisTesting.logger) { _ async throws in
            #expect(try await client.send("PING") == .status("PONG"))
        }
        let error = await #expect(throws: RedisError.self) { try await client.send("PING") }
        #expect(error?.code == .closed)
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
