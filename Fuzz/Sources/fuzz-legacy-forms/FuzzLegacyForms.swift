import FuzzSupport
import PushCore

@testable import PushIngest

/// The legacy forms shipped iOS apps send (CONTRACT.md, "Legacy client forms"): the query and the
/// `application/x-www-form-urlencoded` body of `/register` and `POST /push_token`, their fields, the
/// app lookup by `app_name` and the `timestamp` + `credential` check under each credential mode.
///
/// The input is `<query>\n<body>` (no newline: a query alone), merged as push-ingest merges them.
/// The clock is the request's own `timestamp` when it has one, so the credential comparison is reached.
///
/// Invariant: a form whose credential is the one ``LegacyRegistrationForm/credential(for:mode:secret:)``
/// computes passes the check.
@main
enum FuzzLegacyForms {
    static func main() { FuzzDriver.run(fuzzLegacyForms) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLegacyForms(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = FuzzFixtures.bytes(start, count)
    let newline = bytes.firstIndex(of: UInt8(ascii: "\n"))
    let parameters: FormParameters
    do {
        let query = try FormParameters(urlEncoded: bytes[..<(newline ?? bytes.endIndex)])
        parameters = try newline.map { try FormParameters(urlEncoded: bytes[($0 + 1)...]).merging(query) } ?? query
    } catch {
        return FuzzFixtures.refused(error)
    }
    do {
        let pushToken = try LegacyPushTokenForm(parameters: parameters)
        FuzzFixtures.accepted("/push_token for user \(pushToken.registration.user ?? "none")")
    } catch {
        _ = FuzzFixtures.refused(error)
    }
    let form: LegacyRegistrationForm
    do {
        form = try LegacyRegistrationForm(parameters: parameters)
    } catch {
        return FuzzFixtures.refused(error)
    }
    let now = form.rawTimestamp.flatMap { Int64($0) } ?? FuzzFixtures.nowMilliseconds
    if let app = FuzzFixtures.apps.appForLegacyRegistration(appName: form.appName) {
        do {
            try form.verify(ingest: app.ingest, nowMilliseconds: now)
            FuzzFixtures.accepted("/register for \(app.bundleID)")
        } catch {
            _ = FuzzFixtures.refused(error)
        }
    }
    for ingest in [
        AppConfiguration.Ingest(credential: .md5),
        AppConfiguration.Ingest(credential: .hmacSHA256, secret: "fuzz-secret"),
        AppConfiguration.Ingest(credential: .none),
    ] {
        _ = try? form.verify(ingest: ingest, nowMilliseconds: now)
        guard let timestamp = form.rawTimestamp, ingest.credential != .none else { continue }
        var signed = form
        let message = Array((form.rawToken + form.rawUUID + timestamp).utf8)
        signed.credential = String(
            decoding: LegacyRegistrationForm.credential(for: message, mode: ingest.credential, secret: ingest.secret ?? ""), as: UTF8.self)
        if Int64(timestamp) == now, timestamp.utf8.count <= 16, timestamp.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
            (try? signed.verify(ingest: ingest, nowMilliseconds: now)) == nil
        {
            FuzzFixtures.violated("a correctly signed form is refused (\(ingest.credential))")
        }
    }
    return 0
}
