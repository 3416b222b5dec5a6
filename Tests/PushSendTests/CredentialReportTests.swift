import APNs
import Foundation
import HTTP2Transport
import Logging
import PushCore
import TestSupport
import Testing

@testable import PushSend

/// Credentials as `pushctl apps check` and push-send's expiry watch judge them, from real files made
/// with openssl: certificates by expiry and subject, `.p12` passwords, key file modes and names.
@Suite("Credential reports")
struct CredentialReportTests {
    /// A scratch directory of credentials; removed by `remove()`.
    struct Files {
        let directory: URL

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("credential-report-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }

        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

        func openssl(_ arguments: [String]) async throws {
            let child = try ChildProcess(["/usr/bin/openssl"] + arguments)
            let status = await child.waitForExit()
            guard status == 0 else { throw TestFailure("openssl \(arguments.joined(separator: " ")): \(child.output)") }
        }

        /// A self-signed APNs-like certificate for `uid`, valid `days` days, as PEM (`<name>.pem`,
        /// `<name>.key`, mode 600) and `.p12` with password `secret`.
        func certificate(_ name: String, uid: String, days: Int) async throws {
            try await openssl([
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path("\(name).key"), "-out",
                path("\(name).pem"), "-days", String(days), "-subj", "/UID=\(uid)/CN=Apple Push Services: \(uid)/OU=TEAM000001",
            ])
            try await openssl([
                "pkcs12", "-export", "-in", path("\(name).pem"), "-inkey", path("\(name).key"), "-out", path("\(name).p12"), "-passout",
                "pass:secret",
            ])
            for file in ["\(name).key", "\(name).p12"] { chmod(path(file), 0o600) }
        }

        func signingKey(_ name: String, mode: mode_t = 0o600) async throws {
            try await openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path(name)])
            chmod(path(name), mode)
        }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    /// Now, read when used (after the files are made: a certificate is not valid before its making), a
    /// few seconds on so a certificate made this second counts as valid.
    static var now: Int64 { Int64(Date().timeIntervalSince1970) + 2 }

    func app(_ credentials: AppConfiguration.APNsCredentials, bundleID: String = "com.example.app") -> AppConfiguration {
        AppConfiguration(bundleID: bundleID, environment: .sandbox, apns: credentials)
    }

    @Test func aCertificateFarFromExpiryIsFineAndNamesItsSubjectAndExpiry() async throws {
        let files = try Files()
        defer { files.remove() }
        try await files.certificate("good", uid: "com.example.app", days: 365)
        for credentials in [
            AppConfiguration.APNsCredentials.pem(certificateFile: files.path("good.pem"), privateKeyFile: files.path("good.key")),
            .pkcs12(certificateFile: files.path("good.p12"), password: "secret"),
        ] {
            let report = CredentialReport.inspect(app(credentials), now: Self.now)
            #expect(report.kind == .certificate)
            #expect(report.problems.isEmpty && report.warnings.isEmpty, "\(report)")
            #expect(report.subject?.contains("UID=com.example.app") == true, "\(report.subject ?? "no subject")")
            let days = try #require(report.daysLeft(now: Self.now))
            #expect(days > 364 && days <= 365, "\(days)")
        }
    }

    @Test func expiryWithinThirtyDaysWarnsAndAnExpiredCertificateIsAProblem() async throws {
        let files = try Files()
        defer { files.remove() }
        try await files.certificate("soon", uid: "com.example.app", days: 10)
        let now = Self.now
        let soon = CredentialReport.inspect(app(.pkcs12(certificateFile: files.path("soon.p12"), password: "secret")), now: now)
        #expect(soon.problems.isEmpty)
        // 10 days from its making, judged a moment before it was made: 9 or 10 whole days left.
        #expect(soon.warnings.count == 1 && soon.warnings[0].contains(/^certificate: expires in (9|10) days/), "\(soon.warnings)")
        // The same certificate judged 11 days later: expired, so pushes fail now.
        let later = CredentialReport.inspect(app(.pkcs12(certificateFile: files.path("soon.p12"), password: "secret")), now: now + 11 * 86_400)
        #expect(later.problems.count == 1 && later.problems[0].hasPrefix("certificate: expired"), "\(later.problems)")
        #expect(try #require(later.daysLeft(now: now + 11 * 86_400)) < 0)
    }

    @Test func aWrongPasswordAnotherAppsCertificateAndAMismatchedKeyAreProblems() async throws {
        let files = try Files()
        defer { files.remove() }
        try await files.certificate("good", uid: "com.example.app", days: 365)
        try await files.certificate("other", uid: "com.example.other", days: 365)

        let wrongPassword = CredentialReport.inspect(app(.pkcs12(certificateFile: files.path("good.p12"), password: "nope")), now: Self.now)
        #expect(wrongPassword.problems.count == 1 && wrongPassword.problems[0].contains("wrong password"), "\(wrongPassword.problems)")

        let otherApp = CredentialReport.inspect(app(.pkcs12(certificateFile: files.path("other.p12"), password: "secret")), now: Self.now)
        #expect(otherApp.problems == ["certificate: issued for com.example.other, not com.example.app (APNs would answer TopicDisallowed)"])
        // A certificate for a suffixed topic of the app (VoIP) is the app's.
        #expect(
            CredentialReport.certificateProblems(
                TLSCertificateSummary(subject: "", commonName: nil, userID: "com.example.app.voip", notBefore: 0, notAfter: Self.now + 86_400),
                app: "com.example.app", now: Self.now
            ).isEmpty)
        // Another app whose bundle id starts with this one's is another app.
        #expect(
            CredentialReport.certificateProblems(
                TLSCertificateSummary(subject: "", commonName: nil, userID: "com.example.app.pro", notBefore: 0, notAfter: Self.now + 86_400),
                app: "com.example.app", now: Self.now
            ).count == 1)

        let mismatched = CredentialReport.inspect(
            app(.pem(certificateFile: files.path("good.pem"), privateKeyFile: files.path("other.key"))), now: Self.now)
        #expect(mismatched.problems.count == 1 && mismatched.problems[0].contains("does not belong"), "\(mismatched.problems)")

        let missing = CredentialReport.inspect(app(.pkcs12(certificateFile: files.path("absent.p12"), password: "")), now: Self.now)
        #expect(missing.problems.count == 1 && missing.problems[0].hasPrefix("certificate_file: cannot read"), "\(missing.problems)")
    }

    @Test func tokenKeysAreLoadedAndTheirFileModeAndNameChecked() async throws {
        let files = try Files()
        defer { files.remove() }
        try await files.signingKey("AuthKey_ABCDE12345.p8")
        try await files.signingKey("AuthKey_ZZZZZ99999.p8", mode: 0o644)
        try "not a key".write(toFile: files.path("broken.p8"), atomically: true, encoding: .utf8)
        chmod(files.path("broken.p8"), 0o600)

        let good = CredentialReport.inspect(
            app(.token(.init(keyFile: files.path("AuthKey_ABCDE12345.p8"), keyID: "ABCDE12345", teamID: "TEAM000001"))), now: Self.now)
        #expect(good.kind == .token && good.keyID == "ABCDE12345" && good.teamID == "TEAM000001")
        #expect(good.problems.isEmpty && good.warnings.isEmpty && good.expiresAt == nil, "\(good)")

        let exposed = CredentialReport.inspect(
            app(.token(.init(keyFile: files.path("AuthKey_ZZZZZ99999.p8"), keyID: "ABCDE12345", teamID: "TEAM000001"))), now: Self.now)
        #expect(exposed.problems.isEmpty)
        #expect(exposed.warnings.count == 2, "\(exposed.warnings)")
        #expect(exposed.warnings.contains { $0.contains("readable by others (mode 644)") })
        #expect(exposed.warnings.contains { $0.contains("named for key ZZZZZ99999") })

        let broken = CredentialReport.inspect(
            app(.token(.init(keyFile: files.path("broken.p8"), keyID: "ABCDE12345", teamID: "TEAM000001"))), now: Self.now)
        #expect(broken.problems.count == 1 && broken.problems[0].hasPrefix("key_file:"), "\(broken.problems)")
    }

    /// Every app is reported (the console shows them from Redis); only certificates expire, so only
    /// they are logged.
    @Test func theWatchReportsEveryAppAndLogsCertificatesFromThirtyDaysOut() async throws {
        let files = try Files()
        defer { files.remove() }
        try await files.certificate("soon", uid: "com.example.app", days: 10)
        try await files.signingKey("AuthKey_ABCDE12345.p8")
        let apps = try AppsFile(apps: [
            app(.pkcs12(certificateFile: files.path("soon.p12"), password: "secret")),
            app(
                .token(.init(keyFile: files.path("AuthKey_ABCDE12345.p8"), keyID: "ABCDE12345", teamID: "TEAM000001")), bundleID: "com.example.token"),
        ])
        let logs = TestLogCapture()
        let now = Self.now
        let watch = CredentialExpiryWatch(apps: apps, logger: logs.logger, now: { now })
        let reports = watch.check()
        #expect(reports.map(\.app) == ["com.example.app", "com.example.token"])
        let warnings = logs.entries.filter { $0.level == .warning }
        #expect(warnings.count == 1 && warnings[0].message.contains(/expires in (9|10) days/), "\(logs.entries)")
        #expect(["9", "10"].contains(warnings.first?.metadata["push.days_left"]), "\(logs.entries)")
    }
}
