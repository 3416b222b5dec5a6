import PushRender
import PushServiceKit
import TestSupport
import Testing

/// Every key RenderConfiguration reads is in docs/configuration.md's tables and in `--help` with its default.
@Suite struct RenderConfigurationTableTests {
    @Test func everyKeyIsDocumentedAndInHelp() {
        let mismatch = ConfigurationDocumentation.configurationPageMismatch(
            RenderConfiguration.table, named: "push-render", defaults: RenderConfiguration())
        #expect(mismatch == nil, "\(mismatch ?? "")")
        #expect(ConfigurationDocumentation.missingFromHelp(RenderConfiguration.table, help: RenderConfiguration.environmentHelp) == [])
        #expect(RenderConfiguration.keys.isSuperset(of: RenderConfiguration.table.names))
    }
}
