import APNs
import Testing

import struct PushCore.PushType

@testable import APNsSandbox

@Suite("SandboxState: token states, faults, recording and counts")
struct SandboxStateTests {
    static func delivery(_ token: String, topic: String = "com.example.app", at time: Int64) -> RecordedDelivery {
        RecordedDelivery(
            token: token,
            topic: topic,
            headers: [PushRequest.Field("apns-topic", topic), PushRequest.Field("apns-priority", "10")],
            payload: Array(#"{"aps":{}}"#.utf8),
            receivedAt: time
        )
    }

    static func commit(_ state: SandboxState, _ deliveries: [RecordedDelivery]) {
        var batch = WorkerBatch()
        for delivery in deliveries {
            batch.deliveries.append(delivery)
            batch.count(status: 200, reason: nil)
        }
        state.commit(batch)
    }

    @Test func recordedDeliveriesKeepTheirParts() {
        let delivery = Self.delivery("aa", topic: "com.example.app.voip", at: 42)
        #expect(delivery.token == "aa")
        #expect(delivery.topic == "com.example.app.voip")
        #expect(delivery.headers == [PushRequest.Field("apns-topic", "com.example.app.voip"), PushRequest.Field("apns-priority", "10")])
        #expect(Array(delivery.payload) == Array(#"{"aps":{}}"#.utf8))
        #expect(delivery.receivedAt == 42)
        #expect(delivery.matches(app: "com.example.app"))
        #expect(!delivery.matches(app: "com.example.ap"))
        #expect(!delivery.matches(app: "com.example.app.voip.x"))
        let noHeaders = RecordedDelivery(token: "bb", topic: "t", headers: [], payload: [], receivedAt: 0)
        #expect(noHeaders.headers.isEmpty)
        let emptyValue = RecordedDelivery(token: "bb", topic: "t", headers: [PushRequest.Field("x", "")], payload: [], receivedAt: 0)
        #expect(emptyValue.headers == [PushRequest.Field("x", "")])
    }

    @Test func theRingKeepsTheNewestAndCountsStayExact() {
        let state = SandboxState(recordLimit: 3)
        Self.commit(state, (1...5).map { Self.delivery("t\($0)", at: Int64($0)) })
        #expect(state.deliveries().map(\.token) == ["t3", "t4", "t5"])
        #expect(state.statistics.delivered == 5)
        #expect(state.statistics.requests == 5)
        #expect(state.statistics.recorded == 3)
        Self.commit(state, [Self.delivery("t6", at: 6)])
        #expect(state.deliveries().map(\.token) == ["t4", "t5", "t6"])
        #expect(state.removeDeliveries() == 3)
        #expect(state.deliveries().isEmpty)
        #expect(state.statistics.delivered == 6)
        Self.commit(state, [Self.delivery("t7", at: 7)])
        #expect(state.deliveries().map(\.token) == ["t7"])
    }

    @Test func duplicateTrackingCountsPairsBeyondTheRecordLimit() {
        let state = SandboxState(recordLimit: 2, trackDuplicates: true)
        Self.commit(state, [Self.delivery("aa", at: 1), Self.delivery("bb", at: 2), Self.delivery("aa", at: 3)])
        // Same token, other topic: a distinct pair. Same bytes split differently: distinct too.
        Self.commit(state, [Self.delivery("aa", topic: "com.example.other", at: 4), Self.delivery("a", topic: "acom.example.app", at: 5)])
        Self.commit(state, [Self.delivery("bb", at: 6), Self.delivery("aa", at: 7)])
        #expect(state.statistics.delivered == 7)
        #expect(state.statistics.distinctDelivered == 4)
        #expect(state.statistics.duplicates == 3)
        #expect(state.removeDeliveries() == 2)
        Self.commit(state, [Self.delivery("bb", at: 8)])
        #expect(state.statistics.duplicates == 4)

        let untracked = SandboxState()
        Self.commit(untracked, [Self.delivery("aa", at: 1), Self.delivery("aa", at: 2)])
        #expect(untracked.statistics.distinctDelivered == nil)
        #expect(untracked.statistics.duplicates == nil)
        #expect(!String(decoding: AdminJSON.statistics(untracked.statistics), as: UTF8.self).contains("duplicates"))
        let json = String(decoding: AdminJSON.statistics(state.statistics), as: UTF8.self)
        #expect(json.hasSuffix(#","distinct_delivered":4,"duplicates":4}"#))
    }

    @Test func filters() {
        let state = SandboxState()
        Self.commit(
            state,
            [
                Self.delivery("aa", topic: "com.example.app", at: 10),
                Self.delivery("bb", topic: "com.example.app.voip", at: 20),
                Self.delivery("aa", topic: "com.other.app", at: 30),
                Self.delivery("cc", topic: "com.example.application", at: 40),
            ])
        #expect(state.deliveries(token: "AA").map(\.receivedAt) == [10, 30])
        #expect(state.deliveries(app: "com.example.app").map(\.receivedAt) == [10, 20])
        #expect(state.deliveries(since: 20).map(\.receivedAt) == [20, 30, 40])
        #expect(state.deliveries(token: "aa", app: "com.other.app").map(\.receivedAt) == [30])
        #expect(state.deliveries(limit: 2).map(\.receivedAt) == [30, 40])
        #expect(state.deliveries(token: "dd").isEmpty)
    }

    @Test func tokenStatesAndFaultsMoveTheGeneration() {
        let state = SandboxState()
        let start = state.generation
        state.setState(.unregistered(timestamp: 5), forToken: "ABCD")
        #expect(state.state(ofToken: "abcd") == .unregistered(timestamp: 5))
        #expect(state.generation > start)
        let afterToken = state.generation
        state.updateFaults { $0.goawayEvery = 10 }
        #expect(state.generation > afterToken)
        let (rules, generation) = state.rules()
        #expect(generation == state.generation)
        #expect(rules.faults.goawayEvery == 10)
        #expect(rules.tokenStates["abcd"] == .unregistered(timestamp: 5))
        state.setState(nil, forToken: "abcd")
        #expect(state.state(ofToken: "abcd") == nil)
        state.clearFaults()
        #expect(state.faults.isEmpty)
    }

    @Test func rulesAnswerFaultsFirstThenTokenStates() {
        var rules = SandboxRules()
        let push = AcceptedPush(deviceToken: "aa", topic: "t", pushType: .alert)
        #expect(rules.rejection(for: push, roll: 0) == nil)
        rules.tokenStates["aa"] = .unregistered(timestamp: 99)
        #expect(rules.rejection(for: push, roll: 0) == PushRejection(410, .unregistered, timestamp: 99))
        rules.tokenStates["aa"] = .bad
        #expect(rules.rejection(for: push, roll: 0) == PushRejection(400, .badDeviceToken))
        rules.faults.setRate(1, forStatus: 503)
        #expect(rules.rejection(for: push, roll: 0.999) == PushRejection(503, .serviceUnavailable))
    }

    @Test func statusFaultsLieEndToEnd() {
        var faults = SandboxFaults()
        faults.setRate(0.1, forStatus: 503)
        faults.setRate(0.05, forStatus: 429)
        faults.setRate(0.02, forStatus: 500)
        #expect(faults.statusRates.map(\.status) == [429, 500, 503])
        #expect(faults.injectedRejection(roll: 0.0) == PushRejection(429, .tooManyRequests))
        #expect(faults.injectedRejection(roll: 0.049) == PushRejection(429, .tooManyRequests))
        #expect(faults.injectedRejection(roll: 0.05) == PushRejection(500, .internalServerError))
        #expect(faults.injectedRejection(roll: 0.069) == PushRejection(500, .internalServerError))
        #expect(faults.injectedRejection(roll: 0.07) == PushRejection(503, .serviceUnavailable))
        #expect(faults.injectedRejection(roll: 0.169) == PushRejection(503, .serviceUnavailable))
        #expect(faults.injectedRejection(roll: 0.17) == nil)
        faults.setRate(0.2, forStatus: 503)
        #expect(faults.statusRates.count == 3)
        faults.setRate(0, forStatus: 429)
        #expect(faults.statusRates.map(\.status) == [500, 503])
    }

    @Test func seededRollsAreReproducibleAndRatesHold() {
        var first = FastRandom(seed: 7)
        var second = FastRandom(seed: 7)
        let a = (0..<100).map { _ in first.next() }
        let b = (0..<100).map { _ in second.next() }
        #expect(a == b)
        var faults = SandboxFaults()
        faults.setRate(0.1, forStatus: 503)
        var random = FastRandom(seed: 42)
        let refused = (0..<100_000).filter { _ in faults.injectedRejection(roll: random.nextUnitInterval()) != nil }.count
        #expect((9_000...11_000).contains(refused))
    }

    @Test func uuidsAreVersion4() {
        var random = FastRandom(seed: 1)
        var seen = Set<String>()
        for _ in 0..<1000 {
            let uuid = random.uuidString()
            #expect(PushRequestValidator.isUUID(uuid))
            #expect(Array(uuid)[14] == "4")
            #expect("89ab".contains(Array(uuid)[19]))
            #expect(uuid == uuid.lowercased())
            seen.insert(uuid)
        }
        #expect(seen.count == 1000)
    }
}
