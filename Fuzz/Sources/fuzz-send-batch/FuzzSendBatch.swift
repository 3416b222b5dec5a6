import FuzzSupport
import PushCore
import PushSend

/// A `push.send` body (CONTRACT.md, "Send batch v1") through push-send's decoding and checks, then
/// the APNs request of each token.
///
/// Invariant: a batch that passes the checks gives a request per token with the batch's payload.
@main
enum FuzzSendBatch {
    static func main() { FuzzDriver.run(fuzzSendBatch) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSendBatch(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let body = FuzzFixtures.bytes(start, count)
    let decoded: DecodedSendBatch
    do {
        decoded = try DecodedSendBatch(body: body)
    } catch {
        return FuzzFixtures.refused(error)
    }
    FuzzFixtures.accepted("send batch \(decoded.batch.batchID), \(decoded.batch.tokens.count) tokens")
    for (index, token) in decoded.batch.tokens.enumerated() {
        let notification = decoded.notification(token: token)
        guard notification.payload == decoded.payload, decoded.batch.slot(at: index) >= 0 else {
            FuzzFixtures.violated("token \(index) of an accepted batch gives a different request")
        }
    }
    _ = decoded.batch.effectiveMarkSet
    return 0
}
