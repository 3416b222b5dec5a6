import Testing

@testable import AMQP

@Suite struct AMQPConfigurationTests {
    @Test func defaultsFromAPlainURL() throws {
        let configuration = try AMQPConfiguration(url: "amqp://127.0.0.1", connectionName: "t")
        #expect(configuration.host == "127.0.0.1")
        #expect(configuration.port == 5672)
        #expect(configuration.user == "guest")
        #expect(configuration.password == "guest")
        #expect(configuration.virtualHost == "/")
        #expect(configuration.tls == nil)
        #expect(configuration.heartbeat == .seconds(10))
    }

    @Test func contractDefaultURL() throws {
        let configuration = try AMQPConfiguration(url: "amqp://guest:guest@127.0.0.1:5672/%2f", connectionName: "t")
        #expect(configuration.virtualHost == "/")
        #expect(configuration.port == 5672)
    }

    @Test func credentialsVhostAndOptions() throws {
        let configuration = try AMQPConfiguration(
            url: "amqp://push%40svc:p%3Ass@broker.internal:5673/prod?heartbeat=30&connection_timeout=2500",
            connectionName: "t"
        )
        #expect(configuration.user == "push@svc")
        #expect(configuration.password == "p:ss")
        #expect(configuration.host == "broker.internal")
        #expect(configuration.port == 5673)
        #expect(configuration.virtualHost == "prod")
        #expect(configuration.heartbeat == .seconds(30))
        #expect(configuration.connectTimeout == .milliseconds(2500))
    }

    @Test func amqpsDefaultsToPort5671WithVerificationFiles() throws {
        let configuration = try AMQPConfiguration(
            url: "amqps://u:p@mq.example.com/?cacertfile=/ca.pem&certfile=/c.pem&keyfile=/k.pem", connectionName: "t"
        )
        #expect(configuration.port == 5671)
        #expect(configuration.tls == AMQPConfiguration.TLS(caCertificateFile: "/ca.pem", certificateFile: "/c.pem", keyFile: "/k.pem"))
        #expect(configuration.endpointDescription == "amqps://mq.example.com:5671/%2f")
    }

    @Test(arguments: [
        ("http://localhost", "unsupported scheme 'http'"),
        ("amqp://", "no host"),
        ("amqp://localhost:abc/", "invalid port 'abc'"),
        ("amqp://localhost:70000/", "not in 1–65535"),
        ("amqp://localhost/?frame_max=1", "unknown option 'frame_max'"),
        ("amqp://localhost/?heartbeat=x", "heartbeat 'x'"),
        ("amqp://localhost/?cacertfile=/x", "needs an amqps:// URL"),
        ("amqps://localhost/?certfile=/x", "certfile and keyfile must be given together"),
        ("amqp://localhost/a/b", "must be one path segment"),
        ("not a url at all", "not a URL"),
    ])
    func malformedURLsNameTheProblem(url: String, expected: String) {
        #expect {
            try AMQPConfiguration(url: url, connectionName: "t")
        } throws: { error in
            guard let error = error as? AMQPError else { return false }
            return error.code == .invalidURL && error.message.contains(expected)
        }
    }

    @Test func aClusterIsAListOfBrokersSharingTheFirstURLsSettings() throws {
        let configuration = try AMQPConfiguration(
            url:
                "amqps://push:s%2Cecret@rabbit-0:5671/prod?heartbeat=5,rabbit-1, rabbit-2:5681,[::1]:5682,amqps://push:s%2Cecret@rabbit-3/prod?heartbeat=5",
            connectionName: "t")
        #expect(
            configuration.brokers == [
                AMQPBroker(host: "rabbit-0", port: 5671), AMQPBroker(host: "rabbit-1", port: 5671), AMQPBroker(host: "rabbit-2", port: 5681),
                AMQPBroker(host: "::1", port: 5682), AMQPBroker(host: "rabbit-3", port: 5671),
            ])
        #expect(configuration.host == "rabbit-0")
        #expect(configuration.password == "s,ecret")
        #expect(configuration.virtualHost == "prod")
        #expect(configuration.heartbeat == .seconds(5))
        #expect(configuration.endpointDescription(of: configuration.brokers[3]) == "amqps://[::1]:5682/prod")
        #expect(configuration.endpointDescription.hasPrefix("amqps://rabbit-0:5671/prod,amqps://rabbit-1:5671/prod,"))
    }

    @Test(arguments: [
        ("amqp://a/%2f,", "an empty broker"),
        ("amqp://a/%2f,,b", "an empty broker"),
        ("amqp://a/%2f,b:0", "port 0 is not in 1–65535"),
        ("amqp://a/%2f,b/vhost", "neither host[:port] nor an amqp:// URL"),
        ("amqp://a/%2f,[::1", "closing ]"),
        ("amqp://a/%2f,amqp://b/other", "differs from the first broker in more than host and port"),
        ("amqp://a/%2f,amqps://b/%2f", "differs from the first broker"),
        ("amqp://u:p@a/%2f,amqp://u:q@b/%2f", "differs from the first broker"),
        ("amqp://a/%2f,a:5672", "broker a:5672 is listed twice"),
    ])
    func badBrokerListsNameTheEntry(url: String, expected: String) {
        #expect {
            try AMQPConfiguration(url: url, connectionName: "t")
        } throws: { error in
            guard let error = error as? AMQPError else { return false }
            return error.code == .invalidURL && error.message.contains(expected)
        }
    }

    @Test func aListsPasswordsAreRedactedEntryByEntry() {
        #expect(AMQPConfiguration.redacted("amqp://u:one@a/%2f,amqp://u:two@b/%2f") == "amqp://u:***@a/%2f,amqp://u:***@b/%2f")
    }

    @Test func theRotationMovesOnAfterEachFailureAndWrapsAround() {
        var rotation = BrokerRotation(count: 3, start: 1)
        #expect(rotation.current == 1)
        #expect(rotation.following == 2)
        rotation.moveOn()
        #expect(rotation.current == 2)
        rotation.moveOn()
        #expect(rotation.current == 0)
        var single = BrokerRotation(count: 1)
        single.moveOn()
        #expect(single.current == 0)
        let starts = Set((0..<200).map { _ in BrokerRotation(count: 3).current })
        #expect(starts == [0, 1, 2], "a fleet spreads its first connections over every broker")
    }

    @Test func quorumQueuesGetTheInitialGroupSizeAsACreationArgument() {
        let topology = AMQPTopology(queues: [
            .init(name: "q", arguments: ["x-queue-type": "quorum"]), .init(name: "classic"),
        ]).quorumInitialGroupSize(3)
        #expect(topology.queues[0].creationArguments == ["x-quorum-initial-group-size": .int64(3)])
        #expect(topology.queues[0].arguments == ["x-queue-type": "quorum"])
        #expect(topology.queues[1].creationArguments.isEmpty)
        #expect(
            AMQPTopology(queues: [.init(name: "q", arguments: ["x-queue-type": "quorum"])]).quorumInitialGroupSize(nil).queues[0].creationArguments
                .isEmpty)
    }

    @Test func errorsNeverShowThePassword() {
        #expect {
            try AMQPConfiguration(url: "ftp://user:secret@host/", connectionName: "t")
        } throws: { error in
            "\(error)".contains("***") && !"\(error)".contains("secret")
        }
    }
}

@Suite struct ConfirmTrackerTests {
    @Test func singleAndMultipleAcksSettleInOrder() {
        var tracker = ConfirmTracker<String>()
        for name in ["a", "b", "c", "d"] { _ = tracker.register(name) }
        #expect(tracker.nextSequence == 5)
        let third = tracker.settle(tag: 3, multiple: false, nack: false)
        #expect(third.map(\.0) == ["c"])
        let upToFour = tracker.settle(tag: 4, multiple: true, nack: false)
        #expect(upToFour.map(\.0) == ["a", "b", "d"])
        #expect(tracker.isEmpty)
        #expect(tracker.nextSequence == 5)
    }

    @Test func publishesNotConfirmedByTheirDeadlineExpireAndALateConfirmIsIgnored() {
        struct Timed: Expiring, Equatable {
            let name: String
            let deadline: ContinuousClock.Instant
        }
        let start = ContinuousClock.now
        var tracker = ConfirmTracker<Timed>()
        for (index, name) in ["a", "b", "c", "d"].enumerated() {
            _ = tracker.register(Timed(name: name, deadline: start + .seconds(index + 1)))
        }
        #expect(tracker.expire(now: start).isEmpty)
        #expect(tracker.settle(tag: 2, multiple: false, nack: false).map(\.0.name) == ["b"])
        #expect(tracker.expire(now: start + .seconds(3)).map(\.name) == ["a", "c"])
        #expect(tracker.count == 1)
        #expect(tracker.settle(tag: 3, multiple: true, nack: false).isEmpty, "the expired ones' confirms are ignored")
        #expect(tracker.settle(tag: 4, multiple: false, nack: false).map(\.0.name) == ["d"])
        #expect(tracker.isEmpty)
        #expect(tracker.nextSequence == 5)
    }

    @Test func nackFailsEveryCoveredPublish() {
        var tracker = ConfirmTracker<Int>()
        for value in 1...3 { _ = tracker.register(value) }
        let settled = tracker.settle(tag: 2, multiple: true, nack: true)
        #expect(settled.map(\.0) == [1, 2])
        #expect(settled.allSatisfy { if case .failure(let error) = $0.1 { error.code == .nacked } else { false } })
        #expect(tracker.count == 1)
    }

    @Test func aReturnedPublishFailsWhenItsAckArrives() {
        var tracker = ConfirmTracker<Int>()
        for value in 1...3 { _ = tracker.register(value) }
        tracker.markReturned(sequence: 2, error: AMQPError(.unroutable, "no route"))
        let settled = tracker.settle(tag: 3, multiple: true, nack: false)
        #expect(settled.count == 3)
        #expect((try? settled[0].1.get()) != nil)
        #expect(throws: AMQPError.self) { try settled[1].1.get() }
        #expect((try? settled[2].1.get()) != nil)
    }

    @Test func unknownAndRepeatedTagsAreIgnored() {
        var tracker = ConfirmTracker<Int>()
        _ = tracker.register(1)
        #expect(tracker.settle(tag: 9, multiple: false, nack: false).isEmpty)
        #expect(tracker.settle(tag: 1, multiple: false, nack: false).count == 1)
        #expect(tracker.settle(tag: 1, multiple: false, nack: false).isEmpty)
    }

    @Test func removeAllReturnsTheUnsettledAndRestartsNumbering() {
        var tracker = ConfirmTracker<Int>()
        for value in 1...5 { _ = tracker.register(value) }
        _ = tracker.settle(tag: 2, multiple: true, nack: false)
        #expect(tracker.removeAll() == [3, 4, 5])
        #expect(tracker.register(6) == 1)
    }

    @Test func manyPublishesStayCompact() {
        var tracker = ConfirmTracker<Int>()
        for round in 0..<100 {
            for value in 0..<100 { _ = tracker.register(round * 100 + value) }
            let settled = tracker.settle(tag: UInt64((round + 1) * 100), multiple: true, nack: false)
            #expect(settled.count == 100)
        }
        #expect(tracker.isEmpty)
        #expect(tracker.nextSequence == 10_001)
    }
}
