import Foundation

/// The apps file (`PUSH_APPS_FILE`, CONTRACT.md "Apps file"): every app the provider serves, by bundle id.
///
/// ```json
/// {"apps": {"com.example.game": {"display_names": ["Monopoly Party"], "default": true,
///   "environment": "production",
///   "apns": {"key_file": "keys/AuthKey_ABC123DEFG.p8", "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ"},
///   "ingest": {"api_keys": ["…"], "credential": "md5", "secret": "…", "timestamp_window_s": 300},
///   "rate_limits": {"per_device_per_hour": 60, "per_app_per_second": 5000}}}}
/// ```
///
/// Rules (each broken rule is an ``AppsFileError`` naming the app and the field):
/// - the top level holds only `apps`, an object with at least one app;
/// - unknown fields are **rejected**, not ignored, so a typo (`"defualt": true`) cannot pass silently;
/// - at most one app has `"default": true`;
/// - a bundle id or display name names one app only (compared case-insensitively), so the legacy
///   `app_name` lookup is never ambiguous;
/// - field defaults and value rules are those of ``AppConfiguration``;
/// - relative file paths (`key_file`, `certificate_file`, `private_key_file`) are resolved against the
///   directory passed to ``init(json:directory:)``, the apps file's own directory.
///
/// Pure: decoding takes bytes; reading the file is the service kit's job.
public struct AppsFile: Sendable, Equatable {
    /// The apps by bundle id.
    public let apps: [String: AppConfiguration]
    /// The app with `"default": true`, if any.
    public let defaultApp: AppConfiguration?
    /// Lowercased bundle ids and display names → bundle id, for the legacy `app_name` lookup.
    private let bundleIDsByName: [String: String]

    /// Checks each app (``AppConfiguration/validate()``) and the rules between apps.
    public init(apps: [AppConfiguration]) throws(AppsFileError) {
        if apps.isEmpty {
            throw AppsFileError(.missingField, field: "apps", app: nil, reason: "must name at least one app")
        }
        var byBundleID: [String: AppConfiguration] = [:]
        var bundleIDsByName: [String: String] = [:]
        var defaultApp: AppConfiguration?
        for app in apps.sorted(by: { $0.bundleID < $1.bundleID }) {
            try app.validate()
            let path = AppsFileError.appPath(app.bundleID)
            if byBundleID[app.bundleID] != nil {
                throw AppsFileError(.conflict, field: path, app: app.bundleID, reason: "the bundle id appears twice")
            }
            byBundleID[app.bundleID] = app
            if app.isDefault {
                if let existing = defaultApp {
                    throw AppsFileError(
                        .conflict,
                        field: "\(path).default",
                        app: app.bundleID,
                        reason: "only one app can be the default, and \(AppsFileError.appPath(existing.bundleID)) already is"
                    )
                }
                defaultApp = app
            }
        }
        // Bundle ids first, so a display name that equals another app's bundle id is the one reported.
        for app in byBundleID.values.sorted(by: { $0.bundleID < $1.bundleID }) {
            let key = app.bundleID.lowercased()
            if let other = bundleIDsByName[key] {
                throw AppsFileError(
                    .conflict,
                    field: AppsFileError.appPath(app.bundleID),
                    app: app.bundleID,
                    reason: "the bundle id differs from \(AppsFileError.appPath(other)) only in case"
                )
            }
            bundleIDsByName[key] = app.bundleID
        }
        for app in byBundleID.values.sorted(by: { $0.bundleID < $1.bundleID }) {
            for (index, name) in app.displayNames.enumerated() {
                let key = name.lowercased()
                if let other = bundleIDsByName[key], other != app.bundleID {
                    throw AppsFileError(
                        .conflict,
                        field: "\(AppsFileError.appPath(app.bundleID)).display_names[\(index)]",
                        app: app.bundleID,
                        reason: "\(AppsFileError.quoted(name)) already names \(AppsFileError.appPath(other)) (names are compared case-insensitively)"
                    )
                }
                bundleIDsByName[key] = app.bundleID
            }
        }
        self.apps = byBundleID
        self.defaultApp = defaultApp
        self.bundleIDsByName = bundleIDsByName
    }

    /// The bundle ids, sorted.
    public var bundleIDs: [String] {
        apps.keys.sorted()
    }

    /// The app with exactly this bundle id.
    public func app(bundleID: String) -> AppConfiguration? {
        apps[bundleID]
    }

    /// The app a legacy `app_name` names: a bundle id or a display name, compared case-insensitively.
    public func app(named name: String) -> AppConfiguration? {
        bundleIDsByName[name.lowercased()].flatMap { apps[$0] }
    }

    /// The app that takes a legacy registration: the one `appName` names, otherwise the default app.
    ///
    /// `nil` when `appName` names no app and no app is the default.
    public func appForLegacyRegistration(appName: String?) -> AppConfiguration? {
        if let appName, !appName.isEmpty, let app = app(named: appName) {
            return app
        }
        return defaultApp
    }
}
