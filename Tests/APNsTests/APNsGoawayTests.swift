import HTTP2Transport
import Testing

@testable import APNs

/// What a GOAWAY from APNs says: its reason read from the debug data, and whether the next
/// connection waits for the backoff.
@Suite struct APNsGoawayTests {
    @Test func theReasonIsReadFromTheDebugDataJSON() {
        let goaway = APNsGoaway(errorCode: HTTP2ErrorCode.noError, debugData: #"{"reason":"Shutdown"}"#)
        #expect(goaway.reason == .shutdown)
        #expect(APNsGoaway(errorCode: 0, debugData: " {\"reason\": \"ExpiredProviderToken\"}\n").reason == .expiredProviderToken)
        // Nothing, or JSON without a reason: no reason.
        #expect(APNsGoaway(errorCode: 0, debugData: "").reason == nil)
        #expect(APNsGoaway(errorCode: 0, debugData: #"{"other":1}"#).reason == nil)
        // Text that is not JSON is kept (cut to 100 characters) rather than lost.
        #expect(APNsGoaway(errorCode: 2, debugData: "going away").reason?.rawValue == "going away")
        #expect(APNsGoaway(errorCode: 2, debugData: String(repeating: "x", count: 500)).reason?.rawValue.count == 100)
    }

    /// Routine closes reconnect when needed; everything else waits for the backoff.
    @Test(
        arguments: [
            (nil, HTTP2ErrorCode.noError, false), ("Shutdown", HTTP2ErrorCode.noError, false), ("IdleTimeout", HTTP2ErrorCode.noError, false),
            // A routine reason wins over an error code some servers put with it.
            ("Shutdown", HTTP2ErrorCode.protocolError, false),
            (nil, HTTP2ErrorCode.protocolError, true), ("ExpiredProviderToken", HTTP2ErrorCode.noError, true),
            ("InvalidProviderToken", HTTP2ErrorCode.noError, true), ("BadCertificate", HTTP2ErrorCode.noError, true),
            ("BadCertificateEnvironment", HTTP2ErrorCode.noError, true), ("BadEnvironmentKeyInToken", HTTP2ErrorCode.noError, true),
            ("TooManyProviderTokenUpdates", HTTP2ErrorCode.noError, true), ("Forbidden", HTTP2ErrorCode.noError, true),
            ("SomethingNew", HTTP2ErrorCode.noError, true),
        ] as [(String?, UInt32, Bool)])
    func errorGoawaysAreTheOnesThatBackOff(reason: String?, errorCode: UInt32, isError: Bool) {
        let goaway = APNsGoaway(errorCode: errorCode, reason: reason.map(APNsReason.init))
        #expect(goaway.isError == isError, "\(goaway)")
        #expect(goaway.retiresProviderToken == (reason == "ExpiredProviderToken"))
    }

    @Test func metricLabelsStayBounded() {
        #expect(APNsGoaway(errorCode: 0, reason: nil).metricLabel == "none")
        #expect(APNsGoaway(errorCode: 0, reason: .shutdown).metricLabel == "Shutdown")
        #expect(APNsGoaway(errorCode: 0, reason: .badEnvironmentKeyInToken).metricLabel == "BadEnvironmentKeyInToken")
        #expect(APNsGoaway(errorCode: 0, reason: APNsReason("made up \(Int.random(in: 0...1000))")).metricLabel == "other")
    }
}
