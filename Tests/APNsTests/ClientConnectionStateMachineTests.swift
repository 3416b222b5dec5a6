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
        machine.goawayReceived(lastStreamID: 3)
        #expect(machine.room == 0)
        #expect(machine.advertisedRoom == 0)
        #expect(!machine.shouldCloseGracefully)
        // A later GOAWAY can only lower the last stream id.
        machine.goawayReceived(lastStreamID: 5)
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
        let closing = machine.closed()
        #expect(closing.requeue.map(\.name) == ["5"])
        #expect(closing.lost.map(\.name) == ["1"])
        #expect(!machine.isConnected)
        #expect(machine.mayConnect(now: 0))
    }

    @Test func closesGracefullyOnceEveryStreamAfterGoawayAnswered() {
        var machine = connected()
        let stream = TestStream("a")
        machine.opened(streamID: 1, stream, deadline: .max, now: 0)
        machine.headersSent(streamID: 1)
        machine.goawayReceived(lastStreamID: 1)
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

    @Test func reconnectBackoffGrowsToTheCapAndResetsOnConnect() {
        var machine = makeMachine()
        var delays: [UInt64] = []
        for _ in 0..<8 { delays.append(machine.connectFailed(now: 0, random: 0)) }
        #expect(delays.map { $0 / 1_000_000 } == [120, 240, 480, 960, 1920, 3840, 6000, 6000])
        #expect(machine.failedConnects == 8)
        machine.connected(now: 0)
        #expect(machine.failedConnects == 0)
        _ = machine.connectionLost(now: 0, random: 1)
        // Jitter takes up to a third off: 80 ms.
        #expect(machine.nextConnectAt == 80_000_000)
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
