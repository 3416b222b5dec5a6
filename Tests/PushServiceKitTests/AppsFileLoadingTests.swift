import Foundation
import PushCore
import PushServiceKit
import Testing

@Suite("Apps file loading")
struct AppsFileLoadingTests {
    static let app = #"""
        {"apps": {"com.example.game": {"apns": {"key_file": "keys/AuthKey_DEVKEY0001.p8", "key_id": "DEVKEY0001", "team_id": "DEVTEAM001"}}}}
        """#

    @Test func pathsAreResolvedAgainstTheAppsFileDirectory() async throws {
        try await withTemporaryDirectory { directory in
            let path = try write(Self.app, to: directory.appendingPathComponent("config/apps.json"))
            var configuration = PushConfiguration(httpPort: 1)
            configuration.appsFile = path
            let file = try configuration.loadAppsFile()
            #expect(
                file.app(bundleID: "com.example.game")?.apns
                    == .token(.init(keyFile: directory.path + "/config/keys/AuthKey_DEVKEY0001.p8", keyID: "DEVKEY0001", teamID: "DEVTEAM001"))
            )
        }
    }

    /// `ingest.secret_file` keeps the legacy forms' HMAC secret out of the apps file: read at load,
    /// relative to the apps file; a missing or short one is an error naming the app and field.
    @Test func theIngestSecretIsReadFromItsFile() async throws {
        try await withTemporaryDirectory { directory in
            let app = #"""
                {"apps": {"com.example.game": {"apns": {"key_file": "k.p8", "key_id": "DEVKEY0001", "team_id": "DEVTEAM001"},
                 "ingest": {"credential": "hmac-sha256", "secret_file": "keys/ingest-secret"}}}}
                """#
            let path = try write(app, to: directory.appendingPathComponent("config/apps.json"))
            var configuration = PushConfiguration(httpPort: 1)
            configuration.appsFile = path
            #expect(try configuration.loadAppsFile().app(bundleID: "com.example.game")?.ingest.secret == nil, "only push-ingest reads it")
            #expect {
                _ = try configuration.loadAppsFile(readIngestSecrets: true)
            } throws: { error in
                "\(error)".contains(#"apps["com.example.game"].ingest.secret_file"#) && "\(error)".contains("does not exist")
            }
            _ = try write("short\n", to: directory.appendingPathComponent("config/keys/ingest-secret"))
            #expect {
                _ = try configuration.loadAppsFile(readIngestSecrets: true)
            } throws: { error in
                "\(error)".contains("holds 5 characters; at least 16")
            }
            _ = try write(String(repeating: "ab", count: 32) + "\n", to: directory.appendingPathComponent("config/keys/ingest-secret"))
            #expect(
                try configuration.loadAppsFile(readIngestSecrets: true).app(bundleID: "com.example.game")?.ingest.secret
                    == String(repeating: "ab", count: 32))
            #expect(throws: AppsFileError.self) {
                _ = try AppsFile(
                    json: Data(
                        #"{"apps": {"a.b": {"apns": {"key_file": "k.p8", "key_id": "DEVKEY0001", "team_id": "DEVTEAM001"}, "ingest": {"secret": "x", "secret_file": "y"}}}}"#
                            .utf8))
            }
        }
    }

    @Test func aMissingAppsFileIsNamed() throws {
        var configuration = PushConfiguration(httpPort: 1)
        configuration.appsFile = "/nonexistent/apps.json"
        do {
            _ = try configuration.loadAppsFile()
            Issue.record("loaded")
        } catch {
            #expect(error.code == .appsFileUnreadable)
            #expect(error.key == "PUSH_APPS_FILE")
            #expect(error.description == #"PUSH_APPS_FILE: "/nonexistent/apps.json" does not exist"#)
        }
    }

    @Test func aBadAppsFileNamesTheFileTheAppAndTheField() async throws {
        try await withTemporaryDirectory { directory in
            let path = try write(
                Self.app.replacingOccurrences(of: "DEVKEY0001\"", with: "DEVKEY\""), to: directory.appendingPathComponent("apps.json"))
            do {
                _ = try AppsFile.load(path: path)
                Issue.record("loaded")
            } catch let error as ConfigurationError {
                #expect(error.code == .appsFileInvalid)
                #expect(
                    error.description
                        == #"PUSH_APPS_FILE: \#(path): apps["com.example.game"].apns.key_id: must be 10 characters (letters and digits), got "DEVKEY""#
                )
                #expect(error.appsFileError?.field == #"apps["com.example.game"].apns.key_id"#)
                #expect(error.appsFileError?.app == "com.example.game")
            }
        }
    }

    @Test func credentialFilesAreCheckedWhenRequired() async throws {
        try await withTemporaryDirectory { directory in
            let path = try write(Self.app, to: directory.appendingPathComponent("apps.json"))
            _ = try AppsFile.load(path: path)
            do {
                _ = try AppsFile.load(path: path, requireCredentialFiles: true)
                Issue.record("loaded")
            } catch let error as ConfigurationError {
                #expect(error.code == .appsFileUnreadable)
                #expect(
                    error.description
                        == #"PUSH_APPS_FILE: \#(path): apps["com.example.game"].apns.key_file: "\#(directory.path)/keys/AuthKey_DEVKEY0001.p8" does not exist or cannot be read"#
                )
            }
            try write("not really a key", to: directory.appendingPathComponent("keys/AuthKey_DEVKEY0001.p8"))
            let file = try AppsFile.load(path: path, requireCredentialFiles: true)
            #expect(file.bundleIDs == ["com.example.game"])
        }
    }
}
