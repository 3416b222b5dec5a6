import Foundation
import PushCore

extension PushConfiguration {
    /// Reads and checks ``appsFile`` (`PUSH_APPS_FILE`); relative credential paths in it are resolved
    /// against the apps file's directory.
    ///
    /// - Parameter requireCredentialFiles: Also check that every key and certificate file the apps
    ///   name exists (push-send and pushctl, which read them; push-ingest does not need them).
    /// - Parameter readIngestSecrets: Read every `ingest.secret_file` into `ingest.secret` (push-ingest,
    ///   the one that checks legacy credentials; the others need no secret).
    /// - Throws: ``ConfigurationError`` whose message names the file, the app and the field, e.g.
    ///   `PUSH_APPS_FILE: config/apps.json: apps["com.example.game"].apns.key_id: must be 10 characters …`.
    public func loadAppsFile(requireCredentialFiles: Bool = false, readIngestSecrets: Bool = false) throws(ConfigurationError) -> AppsFile {
        try AppsFile.load(path: appsFile, requireCredentialFiles: requireCredentialFiles, readIngestSecrets: readIngestSecrets)
    }
}

extension AppsFile {
    /// The key whose value names the apps file, used in error messages.
    static let configurationKey = "PUSH_APPS_FILE"

    /// Reads and checks the apps file at `path` (see ``PushConfiguration/loadAppsFile(requireCredentialFiles:readIngestSecrets:)``).
    public static func load(
        path: String, requireCredentialFiles: Bool = false, readIngestSecrets: Bool = false
    ) throws(ConfigurationError)
        -> AppsFile
    {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw .appsFileUnreadable(key: configurationKey, message: "\(JSONText.quoted(path)) does not exist")
        }
        guard !isDirectory.boolValue, let data = FileManager.default.contents(atPath: path) else {
            throw .appsFileUnreadable(key: configurationKey, message: "\(JSONText.quoted(path)) cannot be read")
        }
        var file: AppsFile
        do {
            file = try AppsFile(json: data, directory: directory(of: path))
        } catch {
            throw .appsFileInvalid(key: configurationKey, error: error.withFile(path))
        }
        if readIngestSecrets { file = try readSecretFiles(file, path: path) }
        if requireCredentialFiles {
            for bundleID in file.bundleIDs {
                guard let app = file.app(bundleID: bundleID) else { continue }
                for (field, credentialPath) in credentialFiles(of: app.apns) where !FileManager.default.isReadableFile(atPath: credentialPath) {
                    throw .appsFileUnreadable(
                        key: configurationKey,
                        message:
                            "\(path): apps[\(JSONText.quoted(bundleID))].apns.\(field): \(JSONText.quoted(credentialPath)) does not exist or cannot be read"
                    )
                }
            }
        }
        return file
    }

    /// The apps with their `ingest.secret_file` read into `ingest.secret` (the file's text without a
    /// final newline; at least 16 characters).
    static func readSecretFiles(_ file: AppsFile, path: String) throws(ConfigurationError) -> AppsFile {
        var apps: [AppConfiguration] = []
        var changed = false
        for bundleID in file.bundleIDs {
            guard var app = file.app(bundleID: bundleID) else { continue }
            if let secretFile = app.ingest.secretFile {
                let field = "\(path): apps[\(JSONText.quoted(bundleID))].ingest.secret_file"
                guard let data = FileManager.default.contents(atPath: secretFile) else {
                    throw .appsFileUnreadable(
                        key: configurationKey, message: "\(field): \(JSONText.quoted(secretFile)) does not exist or cannot be read")
                }
                let secret = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines)
                guard secret.utf8.count >= 16 else {
                    throw .appsFileUnreadable(
                        key: configurationKey,
                        message: "\(field): \(JSONText.quoted(secretFile)) holds \(secret.utf8.count) characters; at least 16 are needed")
                }
                app.ingest.secret = secret
                changed = true
            }
            apps.append(app)
        }
        guard changed else { return file }
        do {
            return try AppsFile(apps: apps)
        } catch {
            throw .appsFileInvalid(key: configurationKey, error: error.withFile(path))
        }
    }

    /// The directory part of `path` (`config` for `config/apps.json`, `""` for `apps.json`).
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else {
            return ""
        }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func credentialFiles(of credentials: AppConfiguration.APNsCredentials) -> [(String, String)] {
        switch credentials {
        case .token(let key):
            [("key_file", key.keyFile)]
        case .pkcs12(let certificateFile, _):
            [("certificate_file", certificateFile)]
        case .pem(let certificateFile, let privateKeyFile):
            [("certificate_file", certificateFile), ("private_key_file", privateKeyFile)]
        }
    }
}
