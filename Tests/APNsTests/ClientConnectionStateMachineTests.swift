import HTTP2Transport
import Testing

@testable import APNs

/// The client connection's decisions, without a socket: every rule of
/// ``ClientConnectionStateMachine`` driven by events and a clock passed in.
@Suite("Client connection state machine")
struct ClientConnectionStateMachineTests {
    final class TestStream: ClientStream {
        let name: String
        var isAnswered = false
        init(_ name: String) { self.name = name }
    }

    typealias Machine = ClientConnectionStateMachine<TestStream>

    static let second: UInt64 = 1_000_000_000
    static let routine = APNsGoaway(errorCode: HTTP2ErrorCode.noError, reason: nil)

    func makeMachine(idle: UInt64 = 1800 * second) -> Machine {
        Machine(
            configuration: .init(pingTimeout: 10 * Self.second, pingInterval: 60 * Self.second, idleTimeout: idle, shutdownGrace: 10 * Self.second))
    }

    /// A connected machine that received the server's SETTINGS (`limit` streams).
    func connected(limit: Int = 1000, now: UInt64 = 0) -> Machine {
        var machine = makeMachine()
        machine.connected(now: now)
        machine.settingsReceived(maximumConcurrentStreams: limit)
        return machine
    }

    @Test func oneStreamUntilTheServersSettingsThenItsLimitCappedAtTheCeiling() {
        var machine = makeMachine()
        #expect(machine.room == 0)
        machine.connected(now: 0)
        #expect(machine.room == 1)
        // Other threads count on many streams soon, so they wait for this connection.
        #expect(machine.advertisedRoom == 1000)
        machine.settingsReceived(maximumConcurrentStreams: 100)
        #expect(machine.room == 100)
        machine.settingsReceived(maximumConcurrentStreams: 5000)
        #expect(machine.room == 1000)
        machine.opened(streamID: 1, TestStream("a"), deadline: .max, now: 0)
        #expect(machine.room == 999)
        #expect(machine.advertisedRoom == 999)
    }

    @Test func answeredStreamsCompleteAndUnknownOnesAreIgnored() {
        var machine = connected()
        let stream = TestStream("a")
        machine.opened(streamID: 1, stream, deadline: .max, now: 0)
        machine.headersSent(streamID: 1)
        stream.isAnswered = true
        guard case .answered(let answered) = machine.streamClosed(streamID: 1, errorCode: 0) else {
            Issue.record("expected an answer")
            return
        }
        #expect(answered === stream)
        guard case .unknown = machine.streamClosed(streamID: 1, errorCode: 0) else {
            Issue.record("a stream closes once")
            return
        }
    }

    @Test func refusedOrUnsentStreamsAreRequeuedAndSentOnesAreLost() {
        var machine = connected()
        for id in [1, 3, 5] as [Int32] { machine.opened(streamID: id, TestStream("\(id)"), deadline: .max, now: 0) }
        machine.headersSent(streamID: 1)
        machine.headersSent(streamID: 3)
        // REFUSED_STREAM: the server did not process it, even though HEADERS went out.
        guard case .requeue(let refused) = machine.streamClosed(streamID: 1, errorCode: HTTP2ErrorCode.refusedStream) else {
            Issue.record("a refused stream goes again")
            return
        }
        #expect(refused.name == "1")
        // A reset after HEADERS went out: APNs may have accepted it.
        guard case .lost(let lost, let reason) = machine.streamClosed(streamID: 3, errorCode: HTTP2ErrorCode.cancel) else {
            Issue.record("a reset sent stream is lost")
            return
        }
        #expect(lost.name == "3")
        #expect(reason.contains("reset"))
        // Closed before its HEADERS went out.
        guard case .requeue = machine.streamClosed(streamID: 5, errorCode: HTTP2ErrorCode.cancel) else {
            Issue.record("an unsent stream goes again")
            return
        }
    }

    @Test func headersNotSentGiveTheStreamBackOnce() {
        var machine = connected()
        machine.opened(streamID: 1, TestStream("a"), deadline: .max, now: 0)
        machine.opened(streamID: 3, TestStream("b"), deadline: .max, now: 0)
        machine.headersSent(streamID: 3)
        #expect(machine.headersNotSent(streamID: 1)?.name == "a")
        #expect(machine.headersNotSent(streamID: 1) == nil)
        // Sent HEADERS cannot be "not sent".
        #expect(machine.headersNotSent(streamID: 3) == nil)
        #expect(machine.openStreams == 1)
    }

    @Test func goawayRequeuesStreamsAboveItsLastStreamAndClosesWhenDrained() {
        var machine = connected()
        for id in [1, 3, 5, 7] as [Int32] {
            machine.opened(streamID: id, TestStream("\(id)"), deadline: .max, now: 0)
            machine.headersSent(streamID: id)
        }
        machine.goawayReceived(lastStreamID: 3, Self.routine)
        #expect(machine.room == 0)
        #expect(machine.advertisedRoom == 0)
        #expect(!machine.shouldCloseGracefully)
        // A later GOAWAY can only lower the last stream id.
        machine.goawayReceived(lastStreamID: 5, Self.routine)
        #expect(machine.goawayLastStreamID == 3)
        // Streams above the last id were not processed, even though they were sent.
        guard case .requeue = machine.streamClosed(streamID: 7, errorCode: 0) else {
            Issue.record("above GOAWAY's last stream: requeue")
            return
        }
        guard case .lost = machine.streamClosed(streamID: 3, errorCode: HTTP2ErrorCode.cancel) else {
            Issue.record("at or below the last stream: lost")
            return
        }
        let closing = machine.closed(now: 0, random: 0)
        #expect(closing.requeue.map(\.name) == ["5"])
        #expect(closing.lost.map(\.name) == ["1"])
        #expect(!machine.isConnected)
        // A routine GOAWAY: the next connection waits only for the floor since this one opened.
        #expect(!machine.mayConnect(now: Self.second - 1))
        #expect(machine.mayConnect(now: Self.second))
    }

    @Test func closesGracefullyOnceEveryStreamAfterGoawayAnswered() {
        var machine = connected()
        let stream = TestStream("a")
        machine.opened(streamID: 1, stream, deadline: .max, now: 0)
        machine.headersSent(streamID: 1)
        machine.goawayReceived(lastStreamID: 1, Self.routine)
        #expect(!machine.shouldCloseGracefully)
        stream.isAnswered = true
        _ = machine.streamClosed(streamID: 1, errorCode: 0)
        #expect(machine.shouldCloseGracefully)
    }

    @Test func exhaustedStreamIDsFinishWhatIsOpenThenClose() {
        var machine = connected()
        let stream = TestStream("a")
        machine.opened(streamID: 1, stream, deadline: .max, now: 0)
        machine.streamsExhausted()
        #expect(machine.room == 0)
        #expect(!machine.shouldCloseGracefully)
        stream.isAnswered = true
        _ = machine.streamClosed(streamID: 1, errorCode: 0)
        #expect(machine.shouldCloseGracefully)
    }

    @Test func aLostConnectionSplitsItsStreamsInStreamOrderAndBacksOff() {
        var machine = connected()
        for id in [9, 1, 5, 3] as [Int32] { machine.opened(streamID: id, TestStream("\(id)"), deadline: .max, now: 0) }
        machine.headersSent(streamID: 1)
        machine.headersSent(streamID: 9)
        let closing = machine.connectionLost(now: 100 * Self.second, random: 0)
        #expect(closing.requeue.map(\.name) == ["3", "5"])
        #expect(closing.lost.map(\.name) == ["1", "9"])
        #expect(machine.openStreams == 0)
        // Backoff.apns: 120 ms first (random 0 = the ceiling).
        #expect(machine.nextConnectAt == 100 * Self.second + 120_000_000)
        #expect(!machine.mayConnect(now: 100 * Self.second + 119_000_000))
        #expect(machine.mayConnect(now: 100 * Self.second + 120_000_000))
    }

    @Test func reconnectBackoffGrowsToTheCapAndResetsOnceAConnectionProvesItself() {
        var machine = makeMachine()
        var delays: [UInt64] = []
        for _ in 0..<8 { delays.append(machine.connectFailed(now: 0, random: 0)) }
        #expect(delays.map { $0 / 1_000_000 } == [120, 240, 480, 960, 1920, 3840, 6000, 6000])
        #expect(machine.failedConnects == 8)
        // Connecting is not enough: a server may take the handshake and close at once.
        machine.connected(now: 0)
        #expect(machine.failedConnects == 8)
        // Answers of a broken credential, throttling or an unwell server prove nothing.
        for status in [403, 429, 500, 503] { machine.answered(status: status) }
        #expect(machine.failedConnects == 8)
        // Nor do answers on a connection APNs is closing for an error.
        machine.goawayReceived(lastStreamID: 9, APNsGoaway(errorCode: 0, reason: .invalidProviderToken))
        machine.answered(status: 200)
        #expect(machine.failedConnects == 8)
        _ = machine.closed(now: 0, random: 0)
        machine.connected(now: 0)
        machine.answered(status: 410)
        #expect(machine.failedConnects == 0)
        _ = machine.connectionLost(now: 10 * Self.second, random: 1)
        // Jitter takes up to a third off: 80 ms.
        #expect(machine.nextConnectAt == 10 * Self.second + 80_000_000)
    }

    @Test func aConnectionUpLongEnoughProvesItselfWithoutAnswers() {
        var machine = makeMachine()
        for _ in 0..<3 { _ = machine.connectFailed(now: 0, random: 0) }
        machine.connected(now: 0)
        _ = machine.runTimers(now: 59 * Self.second, queueIsEmpty: true)
        #expect(machine.failedConnects == 3)
        machine.received(now: 60 * Self.second)
        _ = machine.runTimers(now: 60 * Self.second, queueIsEmpty: true)
        #expect(machine.failedConnects == 0)
    }

    /// Each GOAWAY as APNs may send it: routine ones reconnect after the floor, the rest after the
    /// backoff, growing with each one until a connection works.
    @Test(
        arguments: [
            ("Shutdown", false), ("IdleTimeout", false), (nil, false), ("ExpiredProviderToken", true), ("InvalidProviderToken", true),
            ("MissingProviderToken", true), ("BadCertificate", true), ("BadCertificateEnvironment", true), ("BadEnvironmentKeyInToken", true),
            ("BadEnvironmentKeyIdInToken", true), ("UnrelatedKeyIdInToken", true), ("TooManyProviderTokenUpdates", true), ("Forbidden", true),
            ("TopicDisallowed", true),
        ] as [(String?, Bool)])
    func eachGoawayReasonDecidesTheNextConnect(reason: String?, backsOff: Bool) {
        var machine = connected(now: 0)
        machine.goawayReceived(lastStreamID: 0, APNsGoaway(errorCode: HTTP2ErrorCode.noError, reason: reason.map(APNsReason.init)))
        #expect(machine.shouldCloseGracefully)
        _ = machine.closed(now: 10 * Self.second, random: 0)
        if backsOff {
            #expect(machine.failedConnects == 1)
            #expect(machine.nextConnectAt == 10 * Self.second + 120_000_000)
        } else {
            #expect(machine.failedConnects == 0)
            #expect(machine.nextConnectAt == Self.second, "only the floor since the connection opened")
        }
    }

    /// APNs sends GOAWAY and closes the socket before this side closed: a routine GOAWAY still makes
    /// the loss routine, an error one counts as a failure.
    @Test func aConnectionClosedAfterAGoawayFollowsTheGoaway() {
        var routine = connected(now: 0)
        routine.goawayReceived(lastStreamID: 0, APNsGoaway(errorCode: 0, reason: .shutdown))
        _ = routine.connectionLost(now: 5 * Self.second, random: 0)
        #expect(routine.failedConnects == 0)
        #expect(routine.mayConnect(now: 5 * Self.second))

        var failing = connected(now: 0)
        failing.goawayReceived(lastStreamID: 0, APNsGoaway(errorCode: 0, reason: .invalidProviderToken))
        // A later routine GOAWAY does not hide the error.
        failing.goawayReceived(lastStreamID: 0, APNsGoaway(errorCode: 0, reason: .shutdown))
        _ = failing.connectionLost(now: 5 * Self.second, random: 0)
        #expect(failing.failedConnects == 1)
        #expect(!failing.mayConnect(now: 5 * Self.second + 100_000_000))
    }

    /// A server that takes every handshake and sends an error GOAWAY at once: simulated for ten
    /// minutes, the client connects less and less often, never more than once a second, and ends at
    /// one attempt per backoff cap (6 s) — not the connect/disconnect loop Apple treats as an attack.
    @Test func aServerThatRefusesEveryConnectionIsNotHammered() {
        var machine = makeMachine()
        var now: UInt64 = 0
        var connects: [UInt64] = []
        while now < 600 * Self.second {
            guard machine.mayConnect(now: now) else {
                now += 10_000_000
                continue
            }
            machine.connected(now: now)
            connects.append(now)
            machine.goawayReceived(lastStreamID: 0, APNsGoaway(errorCode: 0, reason: .invalidProviderToken))
            now += 5_000_000
            _ = machine.closed(now: now, random: 0.5)
        }
        let gaps = zip(connects.dropFirst(), connects).map { $0 - $1 }
        #expect(gaps.allSatisfy { $0 >= Self.second }, "never faster than the floor")
        #expect(gaps.suffix(10).allSatisfy { $0 >= 5 * Self.second }, "at the backoff cap: \(gaps.suffix(10))")
        let firstMinute = connects.filter { $0 < 60 * Self.second }.count
        #expect(firstMinute <= 20, "\(firstMinute) connections in the first minute")
        let lastFiveMinutes = connects.filter { $0 >= 300 * Self.second }.count
        #expect(lastFiveMinutes <= 61, "\(lastFiveMinutes) connections in the last five minutes (one per 5 s at most)")
    }

    /// Even routine closes (a server that says Shutdown at once) cannot make a connection open more
    /// than once per floor.
    @Test func routineGoawaysRightAfterConnectingWaitForTheFloor() {
        var machine = makeMachine()
        var now: UInt64 = 0
        var connects = 0
        while now < 60 * Self.second {
            if machine.mayConnect(now: now) {
                machine.connected(now: now)
                connects += 1
                machine.goawayReceived(lastStreamID: 0, APNsGoaway(errorCode: 0, reason: .shutdown))
                _ = machine.closed(now: now + 1_000_000, random: 0)
            }
            now += 10_000_000
        }
        #expect(connects == 60, "one a second: \(connects)")
        #expect(machine.failedConnects == 0)
    }

    @Test func timersResetExpiredStreamsInOrder() {
        var machine = connected()
        machine.opened(streamID: 3, TestStream("late"), deadline: 5 * Self.second, now: 0)
        machine.opened(streamID: 1, TestStream("early"), deadline: 2 * Self.second, now: 0)
        machine.opened(streamID: 5, TestStream("fine"), deadline: 30 * Self.second, now: 0)
        #expect(!machine.timersDue(now: 50_000_000))
        #expect(machine.timersDue(now: 100_000_000))
        let actions = machine.runTimers(now: 6 * Self.second, queueIsEmpty: false)
        let reset = actions.compactMap { action -> Int32? in
            if case .reset(let id, _) = action { return id }
            return nil
        }
        #expect(reset == [1, 3])
        #expect(machine.openStreams == 1)
        // A reset stream's close event is then ignored.
        guard case .unknown = machine.streamClosed(streamID: 1, errorCode: HTTP2ErrorCode.cancel) else {
            Issue.record("a timed-out stream was already settled")
            return
        }
    }

    @Test func pingAfterSilenceAndDropWhenItGoesUnanswered() {
        var machine = connected(now: 0)
        #expect(machine.runTimers(now: 59 * Self.second, queueIsEmpty: false).isEmpty)
        let first = machine.runTimers(now: 61 * Self.second, queueIsEmpty: false)
        guard case .ping? = first.first, first.count == 1 else {
            Issue.record("a PING after 60 s of silence, got \(first)")
            return
        }
        // One PING at a time.
        #expect(machine.runTimers(now: 65 * Self.second, queueIsEmpty: false).isEmpty)
        let timedOut = machine.runTimers(now: 72 * Self.second, queueIsEmpty: false)
        guard case .drop(let reason)? = timedOut.first else {
            Issue.record("no PING answer within the timeout drops the connection, got \(timedOut)")
            return
        }
        #expect(reason.contains("PING"))
    }

    @Test func anAnsweredPingOrAnyInputKeepsTheConnection() {
        var machine = connected(now: 0)
        _ = machine.runTimers(now: 61 * Self.second, queueIsEmpty: false)
        // The answer arrives as input, then as the PING ACK frame.
        machine.received(now: 62 * Self.second)
        machine.pingAcknowledged()
        #expect(machine.runTimers(now: 75 * Self.second, queueIsEmpty: false).isEmpty)
        machine.received(now: 100 * Self.second)
        #expect(machine.runTimers(now: 150 * Self.second, queueIsEmpty: false).isEmpty)
        // Silence again: the next PING.
        guard case .ping? = machine.runTimers(now: 161 * Self.second, queueIsEmpty: false).first else {
            Issue.record("a PING after another 60 s of silence")
            return
        }
    }

    @Test func idleConnectionClosesOnlyWithNothingInFlightOrQueued() {
        var machine = makeMachine(idle: 30 * Self.second)
        machine.connected(now: 0)
        machine.settingsReceived(maximumConcurrentStreams: 1000)
        machine.received(now: 40 * Self.second)
        _ = machine.runTimers(now: 40 * Self.second, queueIsEmpty: false)
        #expect(!machine.shouldCloseGracefully)
        _ = machine.runTimers(now: 41 * Self.second, queueIsEmpty: true)
        #expect(machine.shouldCloseGracefully)
        #expect(machine.room == 0)
    }

    @Test func activityPostponesTheIdleClose() {
        var machine = makeMachine(idle: 30 * Self.second)
        machine.connected(now: 0)
        machine.opened(streamID: 1, TestStream("a"), deadline: .max, now: 20 * Self.second)
        let stream = machine.stream(1)!
        stream.isAnswered = true
        _ = machine.streamClosed(streamID: 1, errorCode: 0)
        machine.received(now: 45 * Self.second)
        _ = machine.runTimers(now: 45 * Self.second, queueIsEmpty: true)
        #expect(!machine.shouldCloseGracefully)
        _ = machine.runTimers(now: 51 * Self.second, queueIsEmpty: true)
        #expect(machine.shouldCloseGracefully)
    }

    @Test func shutdownDrainsUntilEmptyOrTheDeadline() {
        var idle = makeMachine()
        #expect(idle.shutdown(now: 0) == .exit)
        #expect(!idle.mayConnect(now: .max))

        var machine = connected()
        machine.opened(streamID: 1, TestStream("a"), deadline: .max, now: 0)
        #expect(machine.shutdown(now: 0) == .drain)
        #expect(machine.room == 0)
        #expect(machine.shutdown(now: 9 * Self.second) == .drain)
        // The deadline is fixed by the first call.
        #expect(machine.shutdown(now: 10 * Self.second) == .closeAndExit)

        var drained = connected()
        drained.opened(streamID: 1, TestStream("a"), deadline: .max, now: 0)
        #expect(drained.shutdown(now: 0) == .drain)
        drained.stream(1)!.isAnswered = true
        _ = drained.streamClosed(streamID: 1, errorCode: 0)
        #expect(drained.shutdown(now: 1) == .closeAndExit)
    }
}
