public import APNs
import Foundation
internal import HTTP2Transport
public import PushCore
public import PushServiceKit

/// One app's APNs credentials as an operator needs to see them before they fail: what kind they
/// are, whom they name, when they expire, and what is wrong with them.
///
/// Made by ``inspect(_:now:)`` (reads the files: push-send's ``CredentialExpiryWatch`` and
/// `pushctl apps check`); the judgement itself, ``problems`` and ``warnings``, is made from values.
public struct CredentialReport: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// A `.p8` signing key (provider tokens): keys do not expire, Apple can revoke them.
        case token
        /// A `.p12` or PEM client certificate: expires (a year after Apple issued it).
        case certificate
    }

    public var app: String
    public var environment: AppConfiguration.Environment
    public var kind: Kind
    /// Token auth: the key id and team id; certificate auth: nil.
    public var keyID: String?
    public var teamID: String?
    /// Certificate auth: the certificate's subject and expiry (seconds since 1970), when it loaded.
    public var subject: String?
    public var expiresAt: Int64?
    /// What stops pushes now: the files cannot be loaded, the certificate expired, names another app.
    public var problems: [String]
    /// What will fail, or should not be: expiry within ``warningDays`` days, a key file others can
    /// read, a key file named for another key id.
    public var warnings: [String]

    /// Days before expiry from which a certificate is reported (and push-send logs a warning).
    public static let warningDays = 30.0

    /// Days from `now` (seconds since 1970) until the certificate expires; negative once it has.
    public func daysLeft(now: Int64) -> Double? {
        expiresAt.map { Double($0 - now) / 86_400 }
    }

    public var isUsable: Bool { problems.isEmpty }

    /// What the console shows of it (``PushServiceKit/CredentialSummaries``).
    public func summary(checkedAt: Int64) -> CredentialSummary {
        CredentialSummary(
            app: app, kind: kind.rawValue, environment: environment.rawValue, expiresAt: expiresAt, problems: problems, warnings: warnings,
            checkedAt: checkedAt)
    }

    /// Reads `app`'s credential files and judges them at `now` (seconds since 1970).
    public static func inspect(_ app: AppConfiguration, now: Int64) -> CredentialReport {
        var report = CredentialReport(
            app: app.bundleID, environment: app.environment, kind: .token, keyID: nil, teamID: nil, subject: nil, expiresAt: nil, problems: [],
            warnings: [])
        switch app.apns {
        case .token(let key):
            report.keyID = key.keyID
            report.teamID = key.teamID
            report.warnings += permissionWarnings(field: "key_file", path: key.keyFile)
            do {
                _ = try APNsSigningKey(p8File: key.keyFile, keyID: key.keyID, teamID: key.teamID)
            } catch {
                report.problems.append("key_file: \(error.message)")
            }
            if let named = keyIDInFileName(key.keyFile), named != key.keyID {
                report.warnings.append(
                    "key_id: \(key.keyID) but the key file is named for key \(named) (\(URL(fileURLWithPath: key.keyFile).lastPathComponent))")
            }
        case .pkcs12(let file, let password):
            report.kind = .certificate
            report.warnings += permissionWarnings(field: "certificate_file", path: file)
            report.load(APNsClientCertificate(source: .pkcs12(file: file, password: password)), app: app.bundleID, now: now)
        case .pem(let certificateFile, let privateKeyFile):
            report.kind = .certificate
            report.warnings += permissionWarnings(field: "private_key_file", path: privateKeyFile)
            report.load(
                APNsClientCertificate(source: .pem(certificateFile: certificateFile, privateKeyFile: privateKeyFile)), app: app.bundleID, now: now)
        }
        return report
    }

    private mutating func load(_ certificate: APNsClientCertificate, app: String, now: Int64) {
        do {
            let summary = try certificate.summary()
            subject = summary.subject
            expiresAt = summary.notAfter
            problems += Self.certificateProblems(summary, app: app, now: now)
            if let days = daysLeft(now: now), days >= 0, days < Self.warningDays {
                warnings.append("certificate: expires in \(Int(days.rounded(.down))) days (\(Self.date(summary.notAfter)))")
            }
        } catch {
            problems.append("certificate_file: \(error.message)")
        }
    }

    /// What makes a loaded certificate unusable for `app` at `now`.
    static func certificateProblems(_ summary: TLSCertificateSummary, app: String, now: Int64) -> [String] {
        var problems: [String] = []
        if summary.notAfter <= now {
            problems.append("certificate: expired \(date(summary.notAfter))")
        }
        if summary.notBefore > now {
            problems.append("certificate: not valid before \(date(summary.notBefore))")
        }
        // APNs certificates carry the bundle id as UID (the topic they may push to); the app's VoIP,
        // complication and file provider certificates name it with Apple's suffixes. Another bundle
        // id that merely starts with the app's (`com.example.app.pro`) is another app.
        if let userID = summary.userID, userID != app, !appleTopicSuffixes.contains(where: { userID == app + $0 }) {
            problems.append("certificate: issued for \(userID), not \(app) (APNs would answer TopicDisallowed)")
        }
        return problems
    }

    /// The suffixes Apple appends to a bundle id for an app's other push topics.
    static let appleTopicSuffixes = [".voip", ".complication", ".pushkit.fileprovider"]

    /// A private key readable by the group or others is one copy away from being someone else's.
    static func permissionWarnings(field: String, path: String) -> [String] {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue
        else { return [] }
        guard mode & 0o077 != 0 else { return [] }
        return ["\(field): \(path) is readable by others (mode \(String(mode, radix: 8))); chmod 600 it"]
    }

    /// The key id Apple puts in a downloaded key's name: `AuthKey_ABC123DEFG.p8`.
    static func keyIDInFileName(_ path: String) -> String? {
        let name = URL(fileURLWithPath: path).lastPathComponent
        guard name.hasPrefix("AuthKey_"), name.hasSuffix(".p8") else { return nil }
        let id = name.dropFirst("AuthKey_".count).dropLast(".p8".count)
        return id.count == 10 && id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) ? String(id) : nil
    }

    static func date(_ seconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate, .withTime, .withColonSeparatorInTime, .withTimeZone]
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}
