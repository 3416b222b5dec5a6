import PushConsole
import PushServiceKit
import TestSupport
import Testing

/// Every key ConsoleConfiguration reads is in docs/configuration.md's tables and in `--help` with
/// its default; the operators file is required.
@Suite struct ConsoleConfigurationTableTests {
    @Test func everyKeyIsDocumentedAndInHelp() {
        let mismatch = ConfigurationDocumentation.configurationPageMismatch(
            ConsoleConfiguration.table, named: "push-console", defaults: ConsoleConfiguration())
        #expect(mismatch == nil, "\(mismatch ?? "")")
        #expect(ConfigurationDocumentation.missingFromHelp(ConsoleConfiguration.table, help: ConsoleConfiguration.environmentHelp) == [])
    }

    @Test func withoutAnOperatorsFileTheConsoleDoesNotStart() async throws {
        let empty = try await PushConfigurationReader.load(environment: [:])
        #expect {
            _ = try ConsoleConfiguration(reader: empty)
        } throws: { error in
            "\(error)".contains("PUSH_CONSOLE_OPERATORS_FILE") && "\(error)".contains("no default password")
        }
        let configured = try ConsoleConfiguration(
            reader: try await PushConfigurationReader.load(environment: [
                "PUSH_CONSOLE_OPERATORS_FILE": "/etc/ops.json", "PUSH_CONSOLE_SECURE_COOKIES": "true",
            ]))
        #expect(configured.operatorsFile == "/etc/ops.json" && configured.secureCookies)
    }
}
