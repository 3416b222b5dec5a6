import APNs
import PushCore
import Testing

@testable import PushRender

/// The pure parts of the fan-out: resumable positions and token dedupe.
@Suite("Fan-out parts: positions and dedupe")
struct FanOutPartsTests {
    @Test func positionsSurviveTheirRedisForm() {
        for position in [TargetPosition.start, TargetPosition(part: 3, cursor: "1234567"), TargetPosition(part: 120)] {
            #expect(TargetPosition(encoded: position.encoded) == position)
        }
        for bad in ["", "3", ":5", "x:0", "-1:0", "2:", "2:abc"] {
            #expect(TargetPosition(encoded: bad) == nil, "\(bad)")
        }
    }

    @Test func repeatsAreDroppedAcrossRoundsUpToTheCapacityAndWithinARoundBeyondIt() throws {
        let tokens = try (0..<10).map { try DeviceToken(normalizing: String(repeating: "0", count: 63) + String($0)) }
        var deduplicator = TokenDeduplicator(capacity: 5)
        #expect(tokens.map { deduplicator.insert($0) } == Array(repeating: true, count: 10))
        #expect(tokens.map { deduplicator.insert($0) } == Array(repeating: false, count: 10), "repeats within the round")
        deduplicator.endRound()
        #expect(tokens.prefix(5).allSatisfy { !deduplicator.insert($0) }, "kept across rounds within the capacity")
        #expect(tokens.suffix(5).allSatisfy { deduplicator.insert($0) }, "past the capacity only within a round")
    }

    @Test func fingerprintsSpreadSimilarTokens() {
        var seen = Set<UInt64>()
        for index in 0..<200_000 {
            let tail = String(index, radix: 16)
            seen.insert(TokenDeduplicator.fingerprint("ab" + String(repeating: "0", count: 62 - tail.count) + tail))
        }
        #expect(seen.count == 200_000)
    }
}

/// One push-type table serves push requests and the APNs client; requests take every type but mdm.
@Suite("Push types in requests and at APNs")
struct PushTypeTableTests {
    @Test func requestsAcceptEveryAPNsTypeButMDM() throws {
        #expect(PushType.allCases.count == 11)
        #expect(Set(PushType.allCases.map(\.rawValue)).subtracting(PushType.acceptedInRequests.map(\.rawValue)) == ["mdm"], "every type but mdm")
        for type in PushType.acceptedInRequests {
            #expect(type.allowedPriorities.allSatisfy { APNsPriority(rawValue: $0) != nil })
            #expect(PushType(rawValue: type.rawValue) == type)
        }
        #expect(PushType.mdm.topic(forBundleID: "com.example.mdm") == "com.example.mdm")
    }
}
