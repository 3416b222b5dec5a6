import Testing

@testable import PushCore

/// Tokens reach logs only as an 8-character prefix: every log line interpolates a token, a record
/// or an error, never the hex itself.
struct DeviceTokenRedactionTests {
    let hex = "c0ffee00" + String(repeating: "ab", count: 28)

    @Test func aTokenPrintsAsItsPrefixHoweverItIsInterpolated() throws {
        let token = try DeviceToken(normalizing: hex)
        #expect("\(token)" == "c0ffee00…")
        #expect(String(describing: token) == "c0ffee00…")
        #expect(token.redacted == "c0ffee00…")
        #expect(!"\([token])".contains(hex))
        #expect(!"\(Optional(token) as Any)".contains(hex))
    }

    @Test func anErrorAboutAMalformedTokenDoesNotRepeatIt() {
        for bad in [hex + "z", hex + "a", String(hex.prefix(60))] {
            #expect {
                _ = try DeviceToken(normalizing: bad)
            } throws: { error in
                !"\(error)".contains(String(bad.prefix(16)))
            }
        }
    }
}
