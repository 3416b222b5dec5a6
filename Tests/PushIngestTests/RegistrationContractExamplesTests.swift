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
        let result = try ContractExamples.disagreements("registrations") { body throws(RegistrationError) in
            _ = try RegistrationMessage(body: body, apps: RegistrationQueueMessageTests.apps)
        }
        #expect(result.valid >= 5 && result.invalid >= 5)
        #expect(result.problems.isEmpty, "\(result.problems)")
    }
}
