import Foundation
import PushServiceKit
import Synchronization

/// Checks a settings type's ``ConfigurationTable`` against what people read: the configuration
/// tables of docs/configuration.md and the `--help` text, so neither can drift from the keys the code reads.
public enum ConfigurationDocumentation {
    /// The configuration page, relative to the package root.
    public static let configurationPagePath = "docs/configuration.md"

    /// docs/configuration.md, where the generated configuration tables live.
    public static var configurationPage: String {
        (try? String(contentsOf: TestServers.packageRoot.appendingPathComponent(configurationPagePath), encoding: .utf8)) ?? ""
    }

    /// docs/configuration.md's block between `<!-- configuration: NAME -->` and `<!-- /configuration -->`
    /// when it is the table generated from `table`; otherwise a message holding the block to paste there.
    public static func configurationPageMismatch<Settings>(
        _ table: ConfigurationTable<Settings>, named name: String, defaults: Settings
    ) -> String? {
        // Suites run in parallel; in record mode each rewrites the page, one at a time.
        pageLock.withLock { _ in mismatch(table, named: name, defaults: defaults) }
    }

    private static let pageLock = Mutex(())

    private static func mismatch<Settings>(_ table: ConfigurationTable<Settings>, named name: String, defaults: Settings) -> String? {
        let expected = table.markdown(defaults: defaults) + "\n"
        let start = "<!-- configuration: \(name) -->\n"
        let text = configurationPage
        guard let open = text.range(of: start), let close = text.range(of: "<!-- /configuration -->", range: open.upperBound..<text.endIndex) else {
            return "\(configurationPagePath) has no block \(start)…<!-- /configuration -->; it should hold:\n\(expected)"
        }
        let found = String(text[open.upperBound..<close.lowerBound])
        if found == expected { return nil }
        // `make docs` sets PUSH_TEST_RECORD_README=1 (the name predates the page's move out of the README).
        if ProcessInfo.processInfo.environment["PUSH_TEST_RECORD_README"] == "1" {
            // `make docs`: write the generated table into docs/configuration.md (record mode), then pass.
            let updated = text.replacingCharacters(in: open.upperBound..<close.lowerBound, with: expected)
            let url = TestServers.packageRoot.appendingPathComponent(configurationPagePath)
            return (try? updated.write(to: url, atomically: true, encoding: .utf8)) == nil ? "cannot write \(url.path)" : nil
        }
        return "\(configurationPagePath)'s \(name) configuration table differs from the code's (run `make docs`); it should be:\n\(expected)"
    }

    /// Keys of `table` whose line is not in `help`, each with its default.
    public static func missingFromHelp<Settings>(_ table: ConfigurationTable<Settings>, help: String) -> [String] {
        table.keys.map(\.name).filter { name in
            !help.split(separator: "\n").contains { $0.contains(name) && $0.contains("(default ") }
        }
    }
}
