import Foundation
import PushCore
import PushServiceKit
import Testing

@testable import PushFeedback

/// The consumer's pure parts: retry tiers and configuration (settling batches and the inbox are the
/// service kit's: BoundedConsumerTests, DeliverySettlerTests).
@Suite struct FeedbackConsumerLogicTests {
    @Test func retriesClimbTheTiersAndEndInTheDeadQueue() {
        let queue = PushQueues(prefix: "t").feedback
        let maximum = DeliverySettler.maximumRetries
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
