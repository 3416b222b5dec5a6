import Testing

@testable import APNsSandbox

@Suite("AnswerLedger: accepted answers a client may never have had")
struct AnswerLedgerTests {
    @Test func withoutConfirmationAnAnswerCountsReceivedOnceWritten() {
        var ledger = AnswerLedger(confirmsWithPing: false)
        for _ in 0..<3 { ledger.accepted() }
        #expect(ledger.acceptedStreamClosed(answerSent: true) == 0)
        #expect(ledger.acceptedStreamClosed(answerSent: true) == 0)
        // Two sent but not yet written, one still held (a delay): all three owed.
        #expect(ledger.unconfirmed == 3)
        #expect(ledger.outputFlushed() == false)
        #expect(ledger.unconfirmed == 1)
        #expect(ledger.end(clientSaidGoodbye: false) == 1)
        #expect(ledger.unconfirmed == 0)
    }

    @Test func aPingConfirmsOnlyWhatWasWrittenBeforeIt() {
        var ledger = AnswerLedger(confirmsWithPing: true)
        for _ in 0..<5 { ledger.accepted() }
        for _ in 0..<2 { _ = ledger.acceptedStreamClosed(answerSent: true) }
        #expect(ledger.outputFlushed() == true)  // a PING covering 2
        for _ in 0..<3 { _ = ledger.acceptedStreamClosed(answerSent: true) }
        #expect(ledger.outputFlushed() == false)  // one PING in flight at a time
        #expect(ledger.unconfirmed == 5)
        #expect(ledger.pingAcknowledged() == true)  // 3 more written since: another PING
        #expect(ledger.confirmed == 2)
        #expect(ledger.unconfirmed == 3)
        #expect(ledger.pingAcknowledged() == false)
        #expect(ledger.unconfirmed == 0)
        #expect(ledger.outputFlushed() == false)  // nothing new to confirm
    }

    @Test func anAcknowledgementWithNoPingOfOursChangesNothing() {
        var ledger = AnswerLedger(confirmsWithPing: true)
        ledger.accepted()
        _ = ledger.acceptedStreamClosed(answerSent: true)
        #expect(ledger.pingAcknowledged() == false)
        #expect(ledger.unconfirmed == 1)
    }

    @Test func aStreamResetBeforeItsAnswerLosesThatAnswerAtOnce() {
        var ledger = AnswerLedger(confirmsWithPing: false)
        ledger.accepted()
        #expect(ledger.acceptedStreamClosed(answerSent: false) == 1)
        #expect(ledger.unconfirmed == 0)
    }

    @Test func aGoodbyeExcusesSentAnswersButNotOwedOnes() {
        var ledger = AnswerLedger(confirmsWithPing: true)
        for _ in 0..<4 { ledger.accepted() }
        for _ in 0..<3 { _ = ledger.acceptedStreamClosed(answerSent: true) }
        _ = ledger.outputFlushed()
        #expect(ledger.end(clientSaidGoodbye: true) == 1)
        // Counted once: a second end adds nothing.
        #expect(ledger.end(clientSaidGoodbye: false) == 0)
    }
}
