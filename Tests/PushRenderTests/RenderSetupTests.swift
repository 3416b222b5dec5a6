import Foundation
import PushCore
import PushRender
import PushServiceKit
import TestSupport
import Testing

/// What push-render reads at start: its settings and the localisation directory (no servers).
@Suite("push-render configuration and catalogs")
struct RenderSetupTests {
    @Test func settingsHaveDefaultsAndNameTheKeyWhenWrong() async throws {
        let defaults = try RenderConfiguration(reader: try await PushConfigurationReader.load(environment: [:]))
        #expect(defaults.batchSize == 500)
        #expect(defaults.concurrency == 4)
        #expect(defaults.roundTokens == 10_000)
        #expect(defaults.defaultLocale == "en")
        #expect(defaults.progressTTL == .seconds(604_800))
        let set = try RenderConfiguration(
            reader: try await PushConfigurationReader.load(environment: [
                "PUSH_RENDER_BATCH_SIZE": "100", "PUSH_RENDER_CONCURRENCY": "2", "PUSH_RENDER_DEFAULT_LOCALE": "de",
                "PUSH_RENDER_PROGRESS_TTL_S": "60", "PUSH_RENDER_ROUND_TOKENS": "2000",
            ]))
        #expect(set == RenderConfiguration(batchSize: 100, concurrency: 2, roundTokens: 2000, defaultLocale: "de", progressTTL: .seconds(60)))
        for (key, value, problem) in [
            ("PUSH_RENDER_BATCH_SIZE", "0", "is not a whole number (1–5000)"),
            ("PUSH_RENDER_BATCH_SIZE", "lots", "is not a whole number (1–5000)"),
            ("PUSH_RENDER_CONCURRENCY", "100", "is not a whole number (1–64)"),
            ("PUSH_RENDER_DEFAULT_LOCALE", "en US", "is not a locale such as en or en-US"),
            ("PUSH_RENDER_PROGRESS_TTL_S", "-1", "is not a number of seconds (more than 0)"),
        ] {
            do {
                _ = try RenderConfiguration(reader: try await PushConfigurationReader.load(environment: [key: value]))
                Issue.record("\(key)=\(value) was accepted")
            } catch {
                #expect(error.message == "\(key): \"\(value)\" \(problem)")
            }
        }
    }

    @Test func theRepositoryCatalogsLoadAndRenderTheExample() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let catalogs = try LocalizationCatalogs.load(directory: root.appendingPathComponent("localization").path)
        #expect(Set(catalogs.catalogs.keys) == ["en", "de", "zh-hant"])
        let apps = try AppsFile(apps: [
            AppConfiguration(
                bundleID: "com.example.game", apns: .token(AppConfiguration.TokenKey(keyFile: "k.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ")))
        ])
        let request = try PushRequest(
            body: Array(
                #"{"id": "x", "app": "com.example.game", "to": {"all": true}, "localize": "server", "payload": {"aps": {"alert": {"loc-key": "GAME_PLAY_REQUEST_FORMAT", "loc-args": ["Jenna", "Frank"]}}}}"#
                    .utf8),
            apps: apps)
        let result = try NotificationRenderer(request: request, catalogs: catalogs).render(locale: "en-GB", settings: NotificationSettings())
        guard case .notification(let notification) = result else { throw TestFailure("skipped") }
        #expect(notification.payloadString == #"{"aps":{"alert":{"body":"Jenna and Frank have invited you to play Monopoly"}}}"#)
    }

    @Test func aBrokenCatalogStopsTheStartNamingFileAndLine() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("render-catalogs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data("\"A\" = \"a\";\n".utf8).write(to: directory.appendingPathComponent("en.strings"))
        try Data("ignored".utf8).write(to: directory.appendingPathComponent("README.txt"))
        #expect(try LocalizationCatalogs.load(directory: directory.path).catalogs.keys.sorted() == ["en"])
        try Data("\"A\" = \"a\";\n\"B\" = \"b\"\n".utf8).write(to: directory.appendingPathComponent("de.strings"))
        do {
            _ = try LocalizationCatalogs.load(directory: directory.path)
            Issue.record("accepted")
        } catch {
            #expect(error.description == "\(directory.appendingPathComponent("de.strings").path):3: expected ';' after the value of \"B\"")
        }
        #expect(try LocalizationCatalogs.load(directory: directory.appendingPathComponent("missing").path).catalogs.isEmpty)
    }
}
