import APNs
import FuzzSupport

/// An APNs answer (the HTTP/2 status and the refusal's JSON body, `{"reason": …, "timestamp": …}`)
/// through the APNs client's reading and push-send's classification (deliver, retry, invalid token,
/// permanent failure, credentials).
///
/// The input is one byte choosing the status, then the body.
@main
enum FuzzAPNsResponse {
    static func main() { FuzzDriver.run(fuzzAPNsResponse) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAPNsResponse(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = FuzzFixtures.bytes(start, count)
    guard let first = bytes.first else { return 0 }
    let statuses = [200, 400, 403, 404, 405, 410, 413, 429, 500, 503]
    let status = Int(first) < statuses.count ? statuses[Int(first)] : 100 + Int(first)
    let body = Array(bytes.dropFirst())
    let response = APNsResponse(status: status, apnsID: nil, apnsUniqueID: nil, body: body)
    let outcome = response.outcome
    // What push-send relies on, whatever the body says: only a 200 is delivered, a 410 is always a
    // dead token, a 5xx or 429 is retried unless it names the token, and the reading is stable.
    let namesTheToken = [APNsReason.badDeviceToken, .deviceTokenNotForTopic].contains(response.reason?.canonical)
    if (status == 200) != (outcome == .delivered) {
        FuzzFixtures.violated("status \(status) read as \(outcome)")
    }
    if status == 410, outcome != .invalidToken(since: response.timestamp) {
        FuzzFixtures.violated("410 read as \(outcome), not a dead token")
    }
    if status == 429 || (500...599).contains(status), !namesTheToken, outcome != .retry {
        FuzzFixtures.violated("\(status) \(String(describing: response.reason)) read as \(outcome), not a retry")
    }
    if body.isEmpty, response.reason != nil || response.timestamp != nil {
        FuzzFixtures.violated("an empty body read as a reason or a timestamp")
    }
    if APNsResponse(status: status, apnsID: nil, apnsUniqueID: nil, body: body) != response {
        FuzzFixtures.violated("the same answer read twice differently")
    }
    FuzzFixtures.accepted("\(status) \(String(describing: response.reason)) at \(String(describing: response.timestamp)): \(outcome)")
    return 0
}
