import Foundation
import PushCore
import PushIngest
import TestSupport
import Testing

/// The registration message examples producers read (docs/examples/registrations/), through the
/// decoder push-ingest's queue consumer uses: every valid one accepted, every invalid one refused
/// naming the field its file name starts with.
@Suite struct RegistrationContractExamplesTests {
    @Test func everyRegistrationExampleIsDecodedAsItSays() throws {
        let apps = RegistrationQueueMessageTests.apps
        let valid = try ContractExamples.examples("registrations", valid: true)
        let invalid = try ContractExamples.examples("registrations", valid: false)
        #expect(valid.count >= 5 && invalid.count >= 5)
        for example in valid {
            do {
                _ = try RegistrationMessage(body: example.body, apps: apps)
            } catch {
                Issue.record("\(example.name) refused: \(error.message)")
            }
        }
        for example in invalid {
            do {
                _ = try RegistrationMessage(body: example.body, apps: apps)
                Issue.record("\(example.name) was accepted")
            } catch {
                #expect(example.field != nil && error.field == example.field, "\(example.name): \(error.message)")
            }
        }
    }
}
