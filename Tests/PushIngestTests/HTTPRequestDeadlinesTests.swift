import Testing

@testable import PushIngest

/// The per-connection request-timeout bookkeeping, without a connection: instants are plain integers.
@Suite struct HTTPRequestDeadlinesTests {
    typealias Deadlines = HTTPRequestDeadlines<Int>

    @Test func theFirstRequestArmsTheTimerAndAnAnsweredRequestLetsItLapse() {
        var deadlines = Deadlines()
        #expect(deadlines.requestStarted(deadline: 10) == .schedule(10))
        deadlines.answerBegan()
        #expect(deadlines.answerEnded() == .none)  // the timer stays armed; nothing to re-arm
        #expect(deadlines.timerFired(now: 10) == .none)  // no open request: the timer stops
        #expect(deadlines.requestStarted(deadline: 30) == .schedule(30))
        #expect(!deadlines.hasTimedOut)
    }

    @Test func anEarlyFiringReArmsForTheOldestOpenRequest() {
        var deadlines = Deadlines()
        #expect(deadlines.requestStarted(deadline: 10) == .schedule(10))
        _ = deadlines.answerEnded()
        #expect(deadlines.requestStarted(deadline: 18) == .none)  // the timer for 10 is still armed
        #expect(deadlines.timerFired(now: 10) == .schedule(18))
        #expect(deadlines.timerFired(now: 18) == .timeOut(bodyArrived: false))
        #expect(deadlines.hasTimedOut)
        #expect(deadlines.requestStarted(deadline: 40) == .none)
    }

    @Test func aRequestWithoutAnAnswerTimesOut() {
        var deadlines = Deadlines()
        _ = deadlines.requestStarted(deadline: 5)
        #expect(deadlines.timerFired(now: 4) == .schedule(5))
        #expect(deadlines.timerFired(now: 5) == .timeOut(bodyArrived: false))
    }

    @Test func anAnswerAlreadyBeingWrittenIsNotCutOff() {
        var deadlines = Deadlines()
        _ = deadlines.requestStarted(deadline: 5)
        _ = deadlines.requestStarted(deadline: 7)  // pipelined
        deadlines.answerBegan()
        #expect(deadlines.timerFired(now: 6) == .none)
        // Its end re-arms the timer for the next open request.
        #expect(deadlines.answerEnded() == .schedule(7))
        #expect(deadlines.timerFired(now: 8) == .timeOut(bodyArrived: false))
    }

    @Test func pipelinedRequestsEachGetTheirOwnDeadline() {
        var deadlines = Deadlines()
        #expect(deadlines.requestStarted(deadline: 10) == .schedule(10))
        #expect(deadlines.requestStarted(deadline: 12) == .none)
        _ = deadlines.answerEnded()
        #expect(deadlines.timerFired(now: 10) == .schedule(12))
        _ = deadlines.answerEnded()
        #expect(deadlines.timerFired(now: 12) == .none)
    }

    @Test func aTimeOutSaysWhetherTheBodyHadArrived() {
        var deadlines = Deadlines()
        _ = deadlines.requestStarted(deadline: 5)
        deadlines.requestEnded()
        _ = deadlines.requestStarted(deadline: 7)  // pipelined, its body still on the way
        _ = deadlines.answerEnded()
        #expect(deadlines.timerFired(now: 7) == .timeOut(bodyArrived: false), "a body that never came: the client's doing (408)")

        var slow = Deadlines()
        _ = slow.requestStarted(deadline: 5)
        slow.requestEnded()
        #expect(slow.timerFired(now: 5) == .timeOut(bodyArrived: true), "all of it arrived, answering took too long (503)")
    }
}
