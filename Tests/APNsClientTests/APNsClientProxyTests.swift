import APNs
import Foundation
import TestSupport
import Testing

/// APNs through a company's egress proxy (HTTP CONNECT), against the built apns-sandbox behind a
/// CONNECT proxy on loopback: TLS and ALPN h2 run end to end through the tunnel.
@Suite("APNs client through a CONNECT proxy")
struct APNsClientProxyTests {
    @Test func notificationsReachTheSandboxThroughTheTunnel() async throws {
        let sandbox = try await SandboxProcess()
        let proxy = try ConnectProxy(credentials: ("egress", "p@ss:word"))
        defer { proxy.stop() }
        let client = try makeClient(sandbox) {
            $0.proxy = try? APNsProxy(url: "http://egress:p%40ss%3Aword@127.0.0.1:\(proxy.port)")
            $0.connections = 1
        }
        let results = await sendAll(client, (0..<50).map { _ in alert(TestTokens.random()) })
        #expect(results.allSatisfy { (try? $0.get().status) == 200 }, "\(results.prefix(3))")
        #expect(proxy.targets == ["127.0.0.1:\(sandbox.port)"], "one tunnel, to the sandbox: \(proxy.targets)")
        #expect(proxy.authorizations.first == "Basic " + Data("egress:p@ss:word".utf8).base64EncodedString())
        let stats = try #require(try await sandbox.admin("GET", "/stats").json)
        #expect(number(stats["delivered"]) == 50, "the sandbox received them: \(stats)")
        await client.shutdown()
    }

    @Test func aProxyThatRefusesIsNamedInTheErrorWithoutItsPassword() async throws {
        let sandbox = try await SandboxProcess()
        let proxy = try ConnectProxy(credentials: ("egress", "right"))
        defer { proxy.stop() }
        let client = try makeClient(sandbox) {
            $0.proxy = try? APNsProxy(url: "http://egress:wrong-secret@127.0.0.1:\(proxy.port)")
            $0.requestTimeout = .seconds(3)
        }
        let result = await sendAll(client, [alert()]).first
        guard case .failure(let error)? = result else {
            Issue.record("sent through a proxy that refused: \(String(describing: result))")
            return
        }
        #expect(error.code == .connectFailed, "\(error)")
        #expect(error.message.contains("the proxy http://egress:***@127.0.0.1:\(proxy.port)") && error.message.contains("407"), "\(error)")
        #expect(!error.message.contains("wrong-secret"))
        #expect(!error.message.contains("Proxy-Authenticate") && !error.message.contains("\r"), "only the status line: \(error)")
        await client.shutdown()
    }

    @Test func proxyURLsAreCheckedAndTheirPasswordsMasked() throws {
        #expect(try APNsProxy(url: "http://proxy.corp:3128").description == "http://proxy.corp:3128")
        #expect(try APNsProxy(url: "http://u:secret@proxy.corp:3128/").description == "http://u:***@proxy.corp:3128")
        #expect(try APNsProxy(url: "http://[fd00::1]:8080").description == "http://[fd00::1]:8080")
        #expect(try APNsProxy(url: "http://proxy").description == "http://proxy:80")
        for bad in [
            "https://proxy:3128", "proxy:3128", "http://proxy:0", "http://proxy:99999", "http://proxy:3128/path", "http://", "http://:secret@p:1",
        ] {
            #expect(throws: APNsClientError.self, "\(bad)") { try APNsProxy(url: bad) }
        }
    }
}
