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
/// - **Credentials** (403, `FeatureNotEnabled`): the app is paused like for device tokens, and the
///   broadcast goes through `push.send`'s retry tiers.
/// - **No answer or a retryable one** (timeout, dropped connection, 429, 5xx): through the retry tiers
///   (``PushServiceKit/DeliverySettler``), dead-lettered once they are used up. A dropped connection
///   may hide an accepted broadcast, so at least once can mean one more broadcast then.
/// - **Paused app** or **past its expiration**: retried later, or a `failed.Expired` event.
extension SendBatchProcessor {
    func processBroadcast(_ delivery: AMQPDelivery, _ decoded: DecodedSendBatch, app: AppConfiguration, channel: String, logger: Logger) async {
        let batch = decoded.batch
        var logger = logger
        logger[metadataKey: "push.channel"] = "\(channel)"
        let markKey = ledger.key(app: app.bundleID, markSet: batch.effectiveMarkSet)
        await markSetLocks.lock(markKey)
        let (disposition, label) = await broadcastDisposition(decoded, app: app, channel: channel, markKey: markKey, logger: logger)
        let settled = await settler.settle(delivery, disposition, amqp: amqp, logger: logger)
        if case .settled = settled.outcome { metrics.batch(label) }
        markSetLocks.unlock(markKey)
    }

    /// What to do with a broadcast batch, and the `push_send_batches_total` label for it.
    private func broadcastDisposition(
        _ decoded: DecodedSendBatch, app: AppConfiguration, channel: String, markKey: String, logger: Logger
    ) async -> (DeliveryDisposition, String) {
        let batch = decoded.batch
        let started = now()
        func event(_ event: PushEvent) -> AMQPOutboundMessage {
            AMQPOutboundMessage(exchange: queues.eventsExchange, routingKey: event.routingKey, body: SendJSON.encode(event), mandatory: false)
        }
        func delivered() -> AMQPOutboundMessage {
            event(.broadcastDelivered(app: app.bundleID, requestID: batch.requestID, batchID: batch.batchID, channel: channel, at: now()))
        }
        func failed(_ reason: String) -> (DeliveryDisposition, String) {
            metrics.failed(reason, count: 1)
            logger.notice("broadcast refused", metadata: ["push.reason": "\(reason)"])
            let failure = PushEvent.broadcastFailed(
                app: app.bundleID, requestID: batch.requestID, batchID: batch.batchID, channel: channel, reason: reason, at: now())
            return (.ackAfterPublishing([event(failure)]), "broadcast_failed")
        }

        do {
            if try await ledger.marks(key: markKey).isAccepted(slot: 0) {
                metrics.duplicatesSkipped.increment()
                return (.ackAfterPublishing([delivered()]), "broadcast_repeated")
            }
        } catch {
            logger.warning(
                "dedupe lookup failed; broadcasting without it (a redelivered broadcast may go out twice)", metadata: ["push.error": "\(error)"])
        }
        if pauses.remaining(app.bundleID, now: started) != nil {
            return (.retry(reason: Self.pausedReason), "paused")
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
            return (.retry(reason: "InvalidCredentials"), "paused")
        }
        let broadcast = APNsBroadcast(
            bundleID: app.bundleID, channelID: channel, priority: decoded.priority, expiration: batch.expiration ?? 0,
            requestID: Self.requestID(forBatchID: batch.batchID), payload: decoded.payload)
        let response: APNsBroadcastResponse
        do {
            response = try await client.send(broadcast, timeout: configuration.requestTimeout)
        } catch {
            if error.code == .invalidRequest { return failed("BadRequest") }
            logger.warning("broadcast got no answer; retrying it", metadata: ["push.error": "\(error)"])
            return (.retry(reason: "\(error.code)"), "broadcast_retried")
        }
        let reason = response.reason?.rawValue ?? "HTTP\(response.status)"
        switch response.outcome {
        case .delivered:
            do {
                try await ledger.write([(key: markKey, bit: DeliveryMarks.acceptedBit(slot: 0))], value: true)
            } catch {
                logger.warning("could not record the broadcast's dedupe mark; a redelivery would send it again", metadata: ["push.error": "\(error)"])
            }
            metrics.delivered.increment()
            return (.ackAfterPublishing([delivered()]), "broadcast_delivered")
        case .retry:
            return (.retry(reason: reason), "broadcast_retried")
        case .credentialProblem:
            pauseApp(app.bundleID, reason: reason, logger: logger)
            return (.retry(reason: reason), "paused")
        case .channelNotRegistered, .permanentFailure:
            return failed(reason)
        }
    }

    /// The `apns-request-id` of a broadcast batch: a UUID derived from its batch id, so every try of
    /// one broadcast carries the same id in APNs' logs and ours.
    static func requestID(forBatchID batchID: String) -> UUID {
        func fnv(_ seed: UInt64) -> UInt64 {
            var hash = seed
            for byte in batchID.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
            return hash
        }
        let high = fnv(0xcbf2_9ce4_8422_2325)
        let low = fnv(0x8422_2325_cbf2_9ce4)
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
