import AMQP
import APNs
import Foundation
import Logging
import Metrics
import PushCore
import PushServiceKit

/// A broadcast batch (``PushCore/SendBatch/channel``): one APNs broadcast request on the channel,
/// however many devices listen (Apple, "Sending broadcast push notification requests to APNs").
///
/// - **Accepted** (200): its dedupe mark (slot 0 of the batch's mark set) is written, a `delivered`
///   event with the channel is published, and the delivery is acked. A redelivered copy finds the
///   mark and only repeats the event, so one kill of push-send between the answer and the ack does
///   not broadcast twice.
/// - **Refused for good** (`ChannelNotRegistered`, `BadChannelId`, a bad priority or payload…): a
///   `failed.<Reason>` event with the channel; acked.
/// - **Credentials** (403): the app is paused like for device tokens, and the broadcast goes through
///   `push.send`'s retry tiers.
/// - **No Broadcast capability** (`FeatureNotEnabled`, which APNs spells `BroadcastFeatureNotEnabled`):
///   only the app's broadcasts pause (its notifications to devices keep flowing), with a critical log
///   line saying what to enable; the broadcast waits in the retry tiers like a paused app's.
/// - **No answer or a retryable one** (timeout, dropped connection, 429, 5xx): through the retry tiers
///   (``PushServiceKit/DeliverySettler``) as ``RetryPolicy`` decides for tokens: not when the
///   broadcast's `expiration` is 0 ("try once") or would pass before the next tier (`failed.Expired`),
///   and at most `PUSH_SEND_MAX_ATTEMPTS` tries (`failed.<reason>` then). A dropped connection may
///   hide an accepted broadcast, so at least once can mean one more broadcast then; an app with
///   `delivery.guarantee: at-most-once` claims the broadcast before sending and reports a claimed but
///   unanswered one as `failed.Unknown` instead.
/// - **Shutdown** returns the delivery to the queue; **a paused app** is retried later; **past its
///   expiration**, a `failed.Expired` event.
extension SendBatchProcessor {
    func processBroadcast(_ delivery: AMQPDelivery, _ decoded: DecodedSendBatch, app: AppConfiguration, channel: String, logger: Logger) async {
        let batch = decoded.batch
        var logger = logger
        logger[metadataKey: "push.channel"] = "\(channel)"
        let markKey = ledger.key(app: app.bundleID, markSet: batch.effectiveMarkSet)
        await markSetLocks.lock(markKey)
        // The retry passes so far count as tries (the settler republishes the body unchanged).
        let attempt = Swift.max(0, DeliverySettler.retries(in: delivery.properties.headers) ?? 0)
        let (disposition, label) = await broadcastDisposition(
            decoded, app: app, channel: channel, markKey: markKey, attempt: attempt, logger: logger)
        let settled = await settler.settle(delivery, disposition, amqp: amqp, logger: logger)
        if case .settled = settled.outcome { metrics.batch(label) }
        markSetLocks.unlock(markKey)
    }

    /// What to do with a broadcast batch, and the `push_send_batches_total` label for it.
    private func broadcastDisposition(
        _ decoded: DecodedSendBatch, app: AppConfiguration, channel: String, markKey: String, attempt: Int, logger: Logger
    ) async -> (DeliveryDisposition, String) {
        let batch = decoded.batch
        let started = now()
        let atMostOnce = app.delivery.guarantee == .atMostOnce
        func event(_ event: PushEvent) -> AMQPOutboundMessage {
            AMQPOutboundMessage(exchange: queues.eventsExchange, routingKey: event.routingKey, body: SendJSON.encode(event), mandatory: false)
        }
        func delivered() -> AMQPOutboundMessage {
            event(.broadcastDelivered(app: app.bundleID, requestID: batch.requestID, batchID: batch.batchID, channel: channel, at: now()))
        }
        func failed(_ reason: String) -> (DeliveryDisposition, String) {
            metrics.failed(reason, app: app.bundleID, count: 1)
            logger.notice("broadcast refused", metadata: ["push.reason": "\(reason)"])
            let failure = PushEvent.broadcastFailed(
                app: app.bundleID, requestID: batch.requestID, batchID: batch.batchID, channel: channel, reason: reason, at: now())
            return (.ackAfterPublishing([event(failure)]), "broadcast_failed")
        }
        /// Another try later, if the expiration and the attempts allow one, no sooner than `wait` allows.
        func retry(_ reason: String, wait: RetryWait = .prompt) -> (DeliveryDisposition, String) {
            switch policy.afterRetryableFailure(attempt: attempt, wait: wait, expiration: batch.expiration, now: now()) {
            case .republish: (.retry(reason: reason, atLeast: policy.shortestWait(wait)), "broadcast_retried")
            case .expired: failed("Expired")
            case .exhausted: failed(reason)
            }
        }

        do {
            let marks = try await ledger.marks(key: markKey)
            if marks.isAccepted(slot: 0) {
                metrics.duplicatesSkipped.increment()
                return (.ackAfterPublishing([delivered()]), "broadcast_repeated")
            }
            if atMostOnce, marks.isClaimed(slot: 0) {
                // Handed to APNs before a crash, answer never recorded: at most once means not again.
                return failed(Self.unknownReason)
            }
        } catch {
            if atMostOnce {
                logger.warning("delivery marks unreadable; deferring an at-most-once broadcast", metadata: ["push.error": "\(error)"])
                return (.retry(reason: Self.ledgerUnavailableReason), "broadcast_retried")
            }
            logger.warning(
                "dedupe lookup failed; broadcasting without it (a redelivered broadcast may go out twice)", metadata: ["push.error": "\(error)"])
        }
        // Both pauses may run; the broadcast waits for the later end.
        let pauseEnds = [pauses.remaining(app.bundleID, now: started), pauses.remaining(Self.broadcastPauseKey(app.bundleID), now: started)]
        if let paused = pauseEnds.compactMap({ $0 }).max() {
            return (.retry(reason: Self.pausedReason, atLeast: paused), "paused")
        }
        if RetryPolicy.isExpired(expiration: batch.expiration, now: started) {
            return failed("Expired")
        }
        let client: any NotificationSending
        do {
            client = try clients.client(app: app, environment: batch.environment)
        } catch {
            logger.critical("cannot make an APNs client for the app: its credentials or endpoint are unusable", metadata: ["push.error": "\(error)"])
            pauseApp(app.bundleID, reason: "InvalidCredentials", logger: logger)
            return (.retry(reason: "InvalidCredentials", atLeast: configuration.credentialPause), "paused")
        }
        let broadcast = APNsBroadcast(
            bundleID: app.bundleID, channelID: channel, priority: decoded.priority, expiration: batch.expiration ?? 0,
            requestID: Self.requestID(app: app.bundleID, batchID: batch.batchID), payload: decoded.payload)
        if atMostOnce {
            do {
                try await ledger.write([(key: markKey, bit: DeliveryMarks.claimedBit(slot: 0))], value: true)
            } catch {
                logger.warning("could not claim an at-most-once broadcast; deferring it", metadata: ["push.error": "\(error)"])
                return (.retry(reason: Self.ledgerUnavailableReason), "broadcast_retried")
            }
        }
        let response: APNsBroadcastResponse
        do {
            response = try await client.send(broadcast, timeout: configuration.requestTimeout)
        } catch {
            switch error.code {
            case .invalidRequest:
                return failed("BadRequest")
            case .shutdown:
                return (.requeue(after: .zero), "requeued")
            case .credentials:
                pauseApp(app.bundleID, reason: "InvalidCredentials", logger: logger)
                return (.retry(reason: "InvalidCredentials", atLeast: configuration.credentialPause), "paused")
            case .connectionLost where atMostOnce, .timeout where atMostOnce:
                // APNs may have accepted what it did not answer: at most once reports it unknown.
                return failed(Self.unknownReason)
            default:
                logger.warning("broadcast got no answer", metadata: ["push.error": "\(error)"])
                return retry("\(error.code)")
            }
        }
        let reason = response.reason?.rawValue ?? "HTTP\(response.status)"
        switch response.outcome {
        case .delivered:
            do {
                try await ledger.write([(key: markKey, bit: DeliveryMarks.acceptedBit(slot: 0))], value: true)
            } catch {
                logger.warning("could not record the broadcast's dedupe mark; a redelivery would send it again", metadata: ["push.error": "\(error)"])
            }
            metrics.delivered(app: app.bundleID, count: 1)
            return (.ackAfterPublishing([delivered()]), "broadcast_delivered")
        case .retry:
            return retry(reason, wait: RetryWait(status: response.status, reason: response.reason))
        case .credentialProblem where response.reason?.canonical == .featureNotEnabled:
            pauseBroadcasts(app.bundleID, reason: reason, logger: logger)
            return (.retry(reason: reason, atLeast: configuration.credentialPause), "paused")
        case .credentialProblem:
            pauseApp(app.bundleID, reason: reason, logger: logger)
            return (.retry(reason: reason, atLeast: configuration.credentialPause), "paused")
        case .channelNotRegistered, .permanentFailure:
            return failed(reason)
        }
    }

    /// The pause of an app's broadcasts alone, in ``AppPauses`` beside the apps' own pauses.
    static func broadcastPauseKey(_ app: String) -> String { "\(app) broadcasts" }

    /// APNs says the app has no Broadcast capability: its broadcasts pause for the credential pause,
    /// its notifications to devices do not.
    func pauseBroadcasts(_ app: String, reason: String, logger: Logger) {
        metrics.credentialFailure(app: app)
        if pauses.pause(Self.broadcastPauseKey(app), for: configuration.credentialPause, now: now()) {
            if let pauseNotes {
                let duration = configuration.credentialPause
                Task { try? await pauseNotes.write(app: app, reason: "\(reason) (broadcasts only)", duration: duration) }
            }
            logger.critical(
                "APNs says broadcasting is not enabled for the app: its broadcasts are paused, its notifications to devices keep flowing. Enable the Broadcast capability of its App ID on developer.apple.com.",
                metadata: ["push.reason": "\(reason)", "push.pause_s": "\(configuration.credentialPause.components.seconds)"]
            )
        }
    }

    /// The `apns-request-id` of a broadcast batch: a UUID derived from the app and the batch id, so
    /// every try of one broadcast carries the same id in APNs' logs and ours.
    static func requestID(app: String, batchID: String) -> UUID {
        let name = Array(app.utf8) + [0] + Array(batchID.utf8)
        // Two independent 64-bit hashes: FNV-1a of the name, and of the name reversed.
        func fnv(_ bytes: some Sequence<UInt8>) -> UInt64 {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
            return hash
        }
        let high = fnv(name)
        let low = fnv(name.reversed())
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<8 {
            bytes[index] = UInt8(truncatingIfNeeded: high >> (8 * UInt64(index)))
            bytes[8 + index] = UInt8(truncatingIfNeeded: low >> (8 * UInt64(index)))
        }
        bytes[6] = (bytes[6] & 0x0f) | 0x50  // version 5 style: name-based
        bytes[8] = (bytes[8] & 0x3f) | 0x80  // RFC 4122 variant
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9], bytes[10], bytes[11],
                bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }
}
