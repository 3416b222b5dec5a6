import PushIngest
import PushServiceKit
import TestSupport
import Testing

/// Every key IngestConfiguration reads is in docs/configuration.md's tables and in `--help` with its default.
@Suite struct IngestConfigurationTableTests {
    @Test func everyKeyIsDocumentedAndInHelp() {
        let mismatch = ConfigurationDocumentation.configurationPageMismatch(
            IngestConfiguration.table, named: "push-ingest", defaults: IngestConfiguration())
        #expect(mismatch == nil, "\(mismatch ?? "")")
        #expect(ConfigurationDocumentation.missingFromHelp(IngestConfiguration.table, help: IngestConfiguration.environmentHelp) == [])
        #expect(IngestConfiguration.keys.isSuperset(of: IngestConfiguration.table.names))
    }
}
