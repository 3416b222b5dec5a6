import Testing

@testable import PushSend

/// The per-batch answer collection: complete, or cut short by cancellation (shutdown past the drain
/// timeout) with what arrived so far.
@Suite struct AnswerCollectorTests {
    @Test func waitReturnsEveryAnswerInOrder() async {
        let collector = AnswerCollector(count: 3)
        Task {
            collector.record(2, .retry(reason: "TooManyRequests"))
            collector.record(0, .delivered)
            collector.record(1, .invalidToken(reason: "Unregistered", since: 7))
        }
        let outcomes = await collector.wait()
        #expect(outcomes == [.delivered, .invalidToken(reason: "Unregistered", since: 7), .retry(reason: "TooManyRequests")])
    }

    @Test func answersThatArrivedBeforeWaitingAreKept() async {
        let collector = AnswerCollector(count: 1)
        collector.record(0, .delivered)
        #expect(await collector.wait() == [.delivered])
        #expect(await AnswerCollector(count: 0).wait() == [])
    }

    @Test func cancellationReturnsWhatArrivedAndIgnoresLaterAnswers() async {
        let collector = AnswerCollector(count: 2)
        collector.record(0, .delivered)
        let waiting = Task { await collector.wait() }
        try? await Task.sleep(for: .milliseconds(50))
        waiting.cancel()
        let outcomes = await waiting.value
        #expect(outcomes == [.delivered, nil])
        collector.record(1, .delivered)
        #expect(await collector.wait() == [.delivered, nil], "the batch stopped waiting; a late answer changes nothing")
    }
}
