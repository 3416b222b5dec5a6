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
    let response = APNsResponse(status: status, apnsID: nil, apnsUniqueID: nil, body: Array(bytes.dropFirst()))
    let outcome = response.outcome
    FuzzFixtures.accepted("\(status) \(String(describing: response.reason)) at \(String(describing: response.timestamp)): \(outcome)")
    return 0
}
