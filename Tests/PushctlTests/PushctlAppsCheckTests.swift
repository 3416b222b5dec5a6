import Foundation
import TestSupport
import Testing

/// `pushctl apps check` as an operator runs it: per app what the credentials are and what is wrong,
/// and an exit status a deploy pipeline can gate on.
@Suite("pushctl apps check")
struct PushctlAppsCheckTests {
    func run(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        let child = try ChildProcess([PushctlTests.pushctl, "apps", "check"] + arguments)
        return (await child.waitForExit(), child.output)
    }

    func openssl(_ arguments: [String]) async throws {
        let child = try ChildProcess(["/usr/bin/openssl"] + arguments)
        guard await child.waitForExit() == 0 else { throw TestFailure("openssl \(arguments.joined(separator: " ")): \(child.output)") }
    }

    @Test func goodCredentialsPassExpiringOnesWarnAndBrokenOnesFail() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apps-check-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = { (name: String) in directory.appendingPathComponent(name).path }
        try await openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path("AuthKey_GAME000001.p8")])
        chmod(path("AuthKey_GAME000001.p8"), 0o600)
        try await openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path("shop.key"), "-out", path("shop.pem"),
            "-days", "20", "-subj", "/UID=com.example.shop/CN=Apple Push Services: com.example.shop",
        ])
        try await openssl([
            "pkcs12", "-export", "-in", path("shop.pem"), "-inkey", path("shop.key"), "-out", path("shop.p12"), "-passout", "pass:secret",
        ])
        chmod(path("shop.p12"), 0o600)
        func appsFile(shopPassword: String) throws -> String {
            let json = """
                {"apps": {
                  "com.example.game": {"environment": "production",
                    "apns": {"key_file": "AuthKey_GAME000001.p8", "key_id": "GAME000001", "team_id": "TEAM000001"}},
                  "com.example.shop": {"environment": "sandbox",
                    "apns": {"certificate_file": "shop.p12", "certificate_password": "\(shopPassword)"}}
                }}
                """
            try json.write(toFile: path("apps.json"), atomically: true, encoding: .utf8)
            return path("apps.json")
        }

        // Both load; the certificate expires within 30 days: a warning, exit 0 (1 with --strict).
        let fine = try await run(["--apps-file", try appsFile(shopPassword: "secret")])
        #expect(fine.status == 0, "\(fine.output)")
        #expect(fine.output.contains("auth: token, key id GAME000001, team id TEAM000001"), "\(fine.output)")
        #expect(fine.output.contains(/auth: certificate, subject .*UID=com.example.shop/), "\(fine.output)")
        #expect(fine.output.contains(/warning: certificate: expires in (19|20) days/), "\(fine.output)")
        #expect(fine.output.contains("0 problems, 1 warning"), "\(fine.output)")
        #expect(try await run(["--apps-file", path("apps.json"), "--strict"]).status == 1)

        let json = try await run(["--apps-file", path("apps.json"), "--json"])
        #expect(json.status == 0, "\(json.output)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
        let apps = try #require(object["apps"] as? [[String: Any]])
        #expect(apps.map { $0["app"] as? String } == ["com.example.game", "com.example.shop"])
        #expect(apps[1]["auth"] as? String == "certificate" && apps[1]["environment"] as? String == "sandbox")
        #expect([19, 20].contains(apps[1]["days_left"] as? Int ?? -1), "\(apps[1])")

        // A wrong password is a problem: exit 1, naming it.
        let wrong = try await run(["--apps-file", try appsFile(shopPassword: "nope")])
        #expect(wrong.status == 1, "\(wrong.output)")
        #expect(wrong.output.contains("PROBLEM: certificate_file: wrong password for the .p12 file"), "\(wrong.output)")

        // An invalid apps file: exit 2, the message names the app and the field.
        try #"{"apps": {"com.example.game": {}}}"#.write(toFile: path("apps.json"), atomically: true, encoding: .utf8)
        let invalid = try await run(["--apps-file", path("apps.json")])
        #expect(invalid.status == 2, "\(invalid.output)")
        #expect(invalid.output.contains(#"apps["com.example.game"].apns"#), "\(invalid.output)")
    }
}
