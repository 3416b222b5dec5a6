import Foundation
public import Logging
public import PushCore
public import PushServiceKit
public import ServiceLifecycle

/// Warns before a certificate stops working: at start and every ``interval`` after, each app's
/// credential files are read again (``CredentialReport``) and summarized in Redis for the console
/// (``PushServiceKit/CredentialSummaries``, so the console needs no key of its own). For
/// certificate-auth apps the days left go to `push_credential_expiry_days{app,environment}`, and
/// from ``CredentialReport/warningDays`` out a warning is logged (an error once it expired or cannot
/// be loaded); token-auth keys do not expire. The files are read again each time, so a certificate
/// replaced on disk is seen without a restart (push-send itself loads it on its next connection).
public struct CredentialExpiryWatch: Service {
    let apps: [AppConfiguration]
    let interval: Duration
    let metrics: SendMetrics
    let logger: Logger
    let now: @Sendable () -> Int64
    let summaries: CredentialSummaries?

    init(
        apps: AppsFile, interval: Duration = .seconds(3600), metrics: SendMetrics = SendMetrics(), summaries: CredentialSummaries? = nil,
        logger: Logger, now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        self.apps = apps.bundleIDs.compactMap { apps.app(bundleID: $0) }
        self.summaries = summaries
        self.interval = interval
        self.metrics = metrics
        self.logger = logger
        self.now = now
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let reports = self.check()
                if let summaries = self.summaries {
                    do {
                        try await summaries.write(reports.map { $0.summary(checkedAt: self.now() * 1000) })
                    } catch {
                        self.logger.warning("could not write the credential summaries for the console", metadata: ["push.error": "\(error)"])
                    }
                }
                try? await Task.sleep(for: self.interval)
            }
        }
    }

    /// One round: every app's report; certificate apps' recorded and logged.
    @discardableResult
    func check() -> [CredentialReport] {
        let at = now()
        var reports: [CredentialReport] = []
        for app in apps {
            let report = CredentialReport.inspect(app, now: at)
            reports.append(report)
            if case .token = app.apns { continue }
            var metadata: Logger.Metadata = ["push.app": "\(app.bundleID)", "push.environment": "\(app.environment.rawValue)"]
            if let days = report.daysLeft(now: at) {
                metrics.credentialExpiry(app: app.bundleID, environment: app.environment.rawValue, days: days)
                metadata["push.days_left"] = "\(Int(days.rounded(.down)))"
            }
            if !report.problems.isEmpty {
                logger.error("APNs certificate unusable: \(report.problems.joined(separator: "; "))", metadata: metadata)
            } else if !report.warnings.isEmpty {
                logger.warning("APNs certificate: \(report.warnings.joined(separator: "; "))", metadata: metadata)
            }
        }
        return reports
    }
}
