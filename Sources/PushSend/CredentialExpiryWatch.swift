import Foundation
public import Logging
public import PushCore
public import ServiceLifecycle

/// Warns before a certificate stops working: at start and every ``interval`` after, each
/// certificate-auth app's certificate is read again (``CredentialReport``), its days left go to
/// `push_credential_expiry_days{app,environment}`, and from ``CredentialReport/warningDays`` out a
/// warning is logged (an error once it expired or cannot be loaded). Token-auth apps have nothing
/// that expires and are skipped. The files are read again each time, so a certificate replaced on
/// disk is seen without a restart (push-send itself loads it on its next connection).
public struct CredentialExpiryWatch: Service {
    let apps: [AppConfiguration]
    let interval: Duration
    let metrics: SendMetrics
    let logger: Logger
    let now: @Sendable () -> Int64

    init(
        apps: AppsFile, interval: Duration = .seconds(3600), metrics: SendMetrics = SendMetrics(), logger: Logger,
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        self.apps = apps.bundleIDs.compactMap { apps.app(bundleID: $0) }
        self.interval = interval
        self.metrics = metrics
        self.logger = logger
        self.now = now
    }

    public func run() async throws {
        // A service group ends when one of its services returns: with nothing to watch, wait.
        guard apps.contains(where: { if case .token = $0.apns { false } else { true } }) else {
            try? await gracefulShutdown()
            return
        }
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                _ = self.check()
                try? await Task.sleep(for: self.interval)
            }
        }
    }

    /// One round: every certificate app's report, recorded and logged.
    @discardableResult
    func check() -> [CredentialReport] {
        let at = now()
        var reports: [CredentialReport] = []
        for app in apps {
            if case .token = app.apns { continue }
            let report = CredentialReport.inspect(app, now: at)
            reports.append(report)
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
