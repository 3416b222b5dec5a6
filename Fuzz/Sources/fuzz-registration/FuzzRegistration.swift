import Foundation
import FuzzSupport
import PushIngest

@testable import PushCore

/// A registration body: the JSON of `PUT /v1/apps/{app}/devices/{token}` (push-ingest's HTTP API) and
/// a `push.registrations` message (the same plus `app`, `token`, `op`, `registered_at`), also as a
/// Live Activity token registration (`push_token`, `attributes_type`, `expires_at`; `push_to_start`
/// or `activity` on the queue).
///
/// Invariant: the fast reader (``JSONObjectReader``) only answers for bodies `JSONSerialization`
/// reads the same way: whenever it answers, the registration decoded from its object equals the one
/// decoded from `JSONSerialization`'s (or both fail with the same message).
@main
enum FuzzRegistration {
    static func main() { FuzzDriver.run(fuzzRegistration) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRegistration(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let body = FuzzFixtures.bytes(start, count)
    if let fast = JSONObjectReader.object(body) {
        guard let slow = (try? JSONSerialization.jsonObject(with: Data(body), options: [])) as? [String: Any] else {
            FuzzFixtures.violated("JSONObjectReader read an object that JSONSerialization refuses")
        }
        let fastResult = Result { () throws(RegistrationError) in try DeviceRegistration(json: fast) }
        let slowResult = Result { () throws(RegistrationError) in try DeviceRegistration(json: slow) }
        switch (fastResult, slowResult) {
        case (.success(let a), .success(let b)) where a == b: break
        case (.failure(let a), .failure(let b)) where a.message == b.message: break
        default: FuzzFixtures.violated("JSONObjectReader and JSONSerialization disagree: \(fastResult) vs \(slowResult)")
        }
    }
    do {
        let registration = try DeviceRegistration(json: DeviceRegistration.decode(body: body))
        FuzzFixtures.accepted("API registration \(registration)")
    } catch {
        _ = FuzzFixtures.refused(error)
    }
    // The same body as a Live Activity token registration (…/push-to-start/{type}, …/activities/{id}).
    for slot in [ActivityTokenSlot.pushToStart(attributesType: "MatchAttributes"), .activity(id: "match-1234")] {
        do {
            let registration = try ActivityTokenRegistration(
                slot: slot, json: DeviceRegistration.decode(body: body), now: FuzzFixtures.nowMilliseconds)
            if let expiresAt = registration.expiresAt, expiresAt <= FuzzFixtures.nowMilliseconds {
                FuzzFixtures.violated("an update token accepted with an expiry in the past: \(expiresAt)")
            }
            FuzzFixtures.accepted("activity token \(registration.slot.field)")
        } catch {
            _ = FuzzFixtures.refused(error)
        }
    }
    do {
        let (message, registeredAt) = try RegistrationMessage.decode(body: body, apps: FuzzFixtures.apps, now: FuzzFixtures.nowMilliseconds)
        _ = (message.app, message.token)
        FuzzFixtures.accepted("queue message: \(message.operationName) at \(String(describing: registeredAt))")
        _ = try RegistrationEventTime.resolve(registeredAt, now: FuzzFixtures.nowMilliseconds)
    } catch {
        _ = FuzzFixtures.refused(error)
    }
    return 0
}
