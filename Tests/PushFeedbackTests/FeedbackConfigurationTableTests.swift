import PushFeedback
import PushServiceKit
import TestSupport
import Testing

/// Every key FeedbackConfiguration reads is in docs/configuration.md's tables and in `--help` with its default.
@Suite struct FeedbackConfigurationTableTests {
    @Test func everyKeyIsDocumentedAndInHelp() {
        let mismatch = ConfigurationDocumentation.configurationPageMismatch(
            FeedbackConfiguration.table, named: "push-feedback", defaults: FeedbackConfiguration())
        #expect(mismatch == nil, "\(mismatch ?? "")")
        #expect(ConfigurationDocumentation.missingFromHelp(FeedbackConfiguration.table, help: FeedbackConfiguration.environmentHelp) == [])
        #expect(FeedbackConfiguration.keys.isSuperset(of: FeedbackConfiguration.table.names))
    }
}
