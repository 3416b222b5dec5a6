import PushServiceKit
import Testing

struct TrustedProxiesTests {
    @Test func theRightmostHopNoProxyOfOursAddedIsTheClient() throws {
        let proxies = try #require(TrustedProxies(parsing: "10.0.0.5, 10.0.0.6"))
        #expect(proxies.clientAddress(peer: "192.0.2.1", forwardedFor: ["203.0.113.7"]) == "192.0.2.1", "an untrusted peer's header is ignored")
        #expect(proxies.clientAddress(peer: "10.0.0.5", forwardedFor: ["203.0.113.7"]) == "203.0.113.7")
        // The client may write anything on the left; the rightmost entry our proxies did not add counts.
        #expect(proxies.clientAddress(peer: "10.0.0.5", forwardedFor: ["1.2.3.4, 203.0.113.7, 10.0.0.6"]) == "203.0.113.7")
        #expect(proxies.clientAddress(peer: "10.0.0.5", forwardedFor: ["1.2.3.4", "203.0.113.7"]) == "203.0.113.7")
        #expect(proxies.clientAddress(peer: "10.0.0.5", forwardedFor: []) == "10.0.0.5")
        #expect(proxies.clientAddress(peer: "10.0.0.5", forwardedFor: ["10.0.0.6"]) == "10.0.0.6")
        #expect(proxies.clientAddress(peer: "10.0.0.5", forwardedFor: [String(repeating: "x", count: 500)]).count == 64)
    }

    @Test func rangesMatchByPrefixInEitherFamily() throws {
        let proxies = try #require(TrustedProxies(parsing: "10.1.0.0/16,192.168.7.9,fd00::/8, 172.16.0.0/12"))
        for inside in ["10.1.0.1", "10.1.255.255", "192.168.7.9", "fd12:3456::1", "172.31.255.1", "::ffff:10.1.2.3"] {
            #expect(proxies.contains(inside), "\(inside)")
        }
        for outside in ["10.2.0.1", "192.168.7.10", "fe80::1", "172.32.0.1", "not an address", "", "10.1.0.0/16"] {
            #expect(!proxies.contains(outside), "\(outside)")
        }
        #expect(try #require(TrustedProxies(parsing: "0.0.0.0/0")).contains("203.0.113.1"))
        #expect(try #require(TrustedProxies(parsing: "10.0.0.0/9")).contains("10.127.0.1"))
        #expect(try !#require(TrustedProxies(parsing: "10.0.0.0/9")).contains("10.128.0.1"))
    }

    @Test func anEntryThatIsNoAddressOrRangeIsRefused() {
        for bad in ["10.0.0.300", "10.0.0.0/33", "fd00::/129", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/+8", "proxy.internal", "10.0.0.0/8/8"] {
            #expect(TrustedProxies(parsing: bad) == nil, "\(bad)")
        }
        #expect(TrustedProxies(parsing: "")?.isEmpty == true)
        #expect(TrustedProxies(parsing: " 10.0.0.1 , ")?.description == "10.0.0.1")
    }
}
