import Foundation
import PushCore
import PushServiceKit
import Testing

@testable import PushFeedback

/// The consumer's pure parts: settling batches, retry tiers, configuration and the inbox.
@Suite struct FeedbackConsumerLogicTests {
    @Test func aBatchIsAckedWithOneMultipleAckAfterItsRequeues() {
        let plan = FeedbackQueueConsumer.settlementPlan([.ack, .requeue, .ack, .ack])
        #expect(plan.requeue == [1])
        #expect(plan.ackThrough == 3)
        let allRequeued = FeedbackQueueConsumer.settlementPlan([.requeue, .requeue])
        #expect(allRequeued.requeue == [0, 1] && allRequeued.ackThrough == nil)
        let lastRequeued = FeedbackQueueConsumer.settlementPlan([.ack, .requeue])
        #expect(lastRequeued.requeue == [1] && lastRequeued.ackThrough == 0)
    }

    @Test func retriesClimbTheTiersAndEndInTheDeadQueue() {
        let queue = PushQueues(prefix: "t").feedback
        let maximum = FeedbackQueueConsumer.maximumRetries
        #expect(queue.retryQueue(afterRetries: 0, maximum: maximum) == "t.feedback.retry.5s")
        #expect(queue.retryQueue(afterRetries: 1, maximum: maximum) == "t.feedback.retry.1m")
        #expect(queue.retryQueue(afterRetries: 9, maximum: maximum) == "t.feedback.retry.10m")
        #expect(queue.retryQueue(afterRetries: 10, maximum: maximum) == nil)
        // A retries header anyone could set: negative dead-letters rather than indexing the tiers.
        #expect(queue.retryQueue(afterRetries: -1, maximum: maximum) == nil)
        #expect(queue.retryQueue(afterRetries: .min, maximum: maximum) == nil)
    }

    @Test func configurationHasDefaultsAndNamesBadKeys() async throws {
        let defaults = try FeedbackConfiguration(reader: await PushConfigurationReader.load(environment: [:]))
        #expect(defaults == FeedbackConfiguration())
        #expect(!defaults.sweepsStaleTokens)
        #expect(defaults.prefetch == 2000)
        let set = try FeedbackConfiguration(
            reader: await PushConfigurationReader.load(environment: [
                "PUSH_FEEDBACK_STALE_DAYS": "90", "PUSH_FEEDBACK_SWEEP_RATE": "50", "PUSH_FEEDBACK_SWEEP_INTERVAL_S": "3600",
                "PUSH_FEEDBACK_BATCH_SIZE": "5000", "PUSH_FEEDBACK_BATCHES_IN_FLIGHT": "64", "PUSH_FEEDBACK_REMOVAL_NOTE_S": "0",
            ])
        )
        #expect(set.staleDays == 90 && set.staleAge == 90 * 86_400_000)
        #expect(set.sweepRate == 50 && set.sweepInterval == .seconds(3600))
        #expect(set.prefetch == 65_535, "capped at AMQP's limit")
        #expect(set.removalNoteLifetime == .zero)
        let badReader = try await PushConfigurationReader.load(environment: ["PUSH_FEEDBACK_STALE_DAYS": "often"])
        #expect(throws: ConfigurationError.invalidValue(key: "PUSH_FEEDBACK_STALE_DAYS", value: "often", problem: "is not a whole number (0–3650)")) {
            try FeedbackConfiguration(reader: badReader)
        }
    }

    @Test func theInboxHandsOverWhatIsReadyUpToTheBatchSize() async {
        let inbox = DeliveryInbox<Int>()
        for value in 1...5 { inbox.put(value) }
        #expect(await inbox.take(max: 3) == [1, 2, 3])
        #expect(await inbox.take(max: 3) == [4, 5])
        let waiting = Task { await inbox.take(max: 3) }
        try? await Task.sleep(for: .milliseconds(50))
        inbox.put(6)
        #expect(await waiting.value == [6])
        inbox.put(7)
        inbox.finish()
        #expect(await inbox.take(max: 3) == [7])
        #expect(await inbox.take(max: 3) == nil)
    }
}

@Suite struct TokenRemovedJSONTests {
    @Test(arguments: [
        PushEvent.tokenRemoved(app: "com.example.game", token: String(repeating: "ab", count: 32), reason: "Unregistered", at: 1_767_225_000_123),
        PushEvent.tokenRemoved(app: "a/b\"c\\d\n\r\t\u{08}\u{0C}\u{01}\u{1F}\u{7F}é😀", token: "t", reason: "Stale", at: -5),
        PushEvent.failed(app: "x", requestID: "r/1", batchID: "b", reason: "BadDeviceToken", tokens: ["a", "b"], at: 0),
        PushEvent.delivered(app: "x", requestID: "r", batchID: "b/2", count: 7, at: 9),
    ])
    func theBytesAreJSONEncoders(_ event: PushEvent) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        #expect(TokenRemovedJSON.encode(event) == Array(try encoder.encode(event)))
    }
}
