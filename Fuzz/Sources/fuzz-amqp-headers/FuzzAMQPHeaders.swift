import CRabbitMQ
import FuzzSupport
import PushCore
import PushServiceKit

@testable import AMQP

/// The properties of a delivery's content header as they come off the wire (flags, then each
/// property; the headers field table with nested tables and arrays), through rabbitmq-c's decoder,
/// the AMQP module's copy into Swift (``RabbitSession/properties(_:)``) and the decisions made on
/// headers anyone could set: the retry count (`x-push-retries`) choosing a retry tier or a dead letter
/// carrying `x-push-error`.
///
/// Invariants: a retry goes to a tier of the queue with the count plus one; a delivery whose count is
/// negative, not an integer or used up is dead-lettered with the reason in `x-push-error`.
@main
enum FuzzAMQPHeaders {
    static func main() { FuzzDriver.run(fuzzAMQPHeaders) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAMQPHeaders(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var pool = amqp_pool_t()
    init_amqp_pool(&pool, 131_072)
    defer { empty_amqp_pool(&pool) }
    var decoded: UnsafeMutableRawPointer?
    let status = amqp_decode_properties(
        UInt16(AMQP_BASIC_CLASS), &pool, amqp_bytes_t(len: count, bytes: UnsafeMutableRawPointer(mutating: start)), &decoded)
    guard status >= 0, let decoded else { return FuzzFixtures.refused(RabbitSession.describe(status)) }
    let properties = RabbitSession.properties(decoded.assumingMemoryBound(to: amqp_basic_properties_t.self).pointee)
    FuzzFixtures.accepted("headers \(properties.headers)")

    let queues = PushQueues.standard
    let settler = DeliverySettler(queue: queues.send, queues: queues, subject: "send batch", gaveUp: "gave up")
    let retries = DeliverySettler.retries(in: properties.headers)
    switch settler.settlement(for: .retry(reason: "fuzz"), body: [1, 2, 3], properties: properties) {
    case .retry(let message, let passes, _):
        guard let retries, retries >= 0, retries < DeliverySettler.maximumRetries, passes == retries + 1,
            message.properties.headers[DeliverySettler.retriesHeader]?.intValue == Int64(passes),
            queues.send.retryQueues.contains(where: { $0.name == message.routingKey })
        else {
            FuzzFixtures.violated("retry \(passes) to \(message.routingKey) from retries header \(String(describing: retries))")
        }
    case .deadLetter(let message, _, _):
        guard message.properties.headers[PushQueues.errorHeader]?.stringValue != nil else {
            FuzzFixtures.violated("a dead letter without \(PushQueues.errorHeader)")
        }
    default:
        FuzzFixtures.violated("a retry settled as neither a retry nor a dead letter")
    }
    return 0
}
