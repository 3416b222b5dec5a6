import PushSend
import PushServiceKit
import TestSupport
import Testing

/// Every key SendConfiguration reads is in docs/configuration.md's tables and in `--help` with its default.
@Suite struct SendConfigurationTableTests {
    @Test func everyKeyIsDocumentedAndInHelp() {
        let mismatch = ConfigurationDocumentation.configurationPageMismatch(
            SendConfiguration.table, named: "push-send", defaults: SendConfiguration())
        #expect(mismatch == nil, "\(mismatch ?? "")")
        #expect(ConfigurationDocumentation.missingFromHelp(SendConfiguration.table, help: SendConfiguration.environmentHelp) == [])
        #expect(SendConfiguration.keys.isSuperset(of: SendConfiguration.table.names))
    }
}
