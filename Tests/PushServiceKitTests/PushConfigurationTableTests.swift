import PushServiceKit
import TestSupport
import Testing

/// Every key PushConfiguration reads is in docs/configuration.md's tables and in `--help` with its default.
@Suite struct PushConfigurationTableTests {
    @Test func everyKeyIsDocumentedAndInHelp() {
        let mismatch = ConfigurationDocumentation.configurationPageMismatch(
            PushConfiguration.table, named: "shared", defaults: PushConfiguration(httpPort: PushConfiguration.DefaultHTTPPort.ingest))
        #expect(mismatch == nil, "\(mismatch ?? "")")
        #expect(ConfigurationDocumentation.missingFromHelp(PushConfiguration.table, help: PushConfiguration.environmentHelp) == [])
        #expect(PushConfiguration.keys.isSuperset(of: PushConfiguration.table.names))
    }
}
