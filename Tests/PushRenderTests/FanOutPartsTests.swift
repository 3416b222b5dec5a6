import APNs
import PushCore
import Testing

@testable import PushRender

/// The pure parts of the fan-out: resumable positions and token dedupe.
@Suite("Fan-out parts: positions and dedupe")
struct FanOutPartsTests {
    @Test func positionsSurviveTheirRedisForm() {
        let runID = String(repeating: "a1", count: 20)
        for position in [
            TargetPosition.start, TargetPosition(part: 120),
            TargetPosition(part: 3, layout: 4, cursors: ["0", nil, "1234567", "9"], epochs: [nil, nil, runID, "b"]),
            TargetPosition(part: 0, layout: 1, cursors: [nil]),
        ] {
            #expect(TargetPosition(encoded: position.encoded) == position, "\(position.encoded)")
        }
        #expect(TargetPosition(part: 3, layout: 2, cursors: ["5", nil], epochs: ["r", nil]).encoded == "3:2:5@r,-")
        for bad in ["", "3", ":5", "x:0", "-1:0", "2:", "2:abc", "1:2:0", "1:2:0,x", "1:1:", "1:0:5", "1:2000:0"] {
            #expect(TargetPosition(encoded: bad) == nil, "\(bad)")
        }
    }

    /// Positions saved before sharding (`<part>:<cursor>`, the run_id in `scan_epoch`) resume as the
    /// single-tag layout's.
    @Test func aPositionFromBeforeShardingIsTheSingleTagLayouts() {
        #expect(
            TargetPosition(encoded: "2:12345", legacyEpoch: "run") == TargetPosition(part: 2, layout: 1, cursors: ["12345"], epochs: ["run"]))
        #expect(TargetPosition(encoded: "0:0", legacyEpoch: "run") == TargetPosition(part: 0, layout: 1, cursors: ["0"], epochs: [nil]))
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

    @Test func aRoundPlanSurvivesItsRedisFormAndRefusesAnythingElse() {
        var plan = RoundPlan(startSequence: 41)
        plan.add(markSet: "r/42#00000000000000ff", fingerprints: [1, 2, 3], slots: [0, 1, 2])
        plan.add(markSet: "r/7#ünï", fingerprints: [UInt64.max, 9], slots: [65_535, 4])
        plan.add(markSet: "r/42#00000000000000ff", fingerprints: [4], slots: [3])
        #expect(plan.count == 6)
        #expect(plan.place(of: 4)! == ("r/42#00000000000000ff", 3))
        #expect(plan.place(of: UInt64.max)! == ("r/7#ünï", 65_535))
        #expect(plan.place(of: 5) == nil)
        let bytes = plan.encoded
        #expect(RoundPlan(encoded: bytes) == plan)
        #expect(RoundPlan(encoded: RoundPlan(startSequence: 0).encoded) == RoundPlan(startSequence: 0))
        for cut in [0, 1, 9, 13, 20, bytes.count - 1] {
            #expect(RoundPlan(encoded: Array(bytes.prefix(cut))) == nil, "cut at \(cut)")
        }
        #expect(RoundPlan(encoded: bytes + [0]) == nil, "trailing bytes")
        #expect(RoundPlan(encoded: [2] + bytes.dropFirst()) == nil, "another version")
        var huge = bytes
        huge.replaceSubrange(9..<13, with: [0xff, 0xff, 0xff, 0xff])
        #expect(RoundPlan(encoded: huge) == nil, "a count the bytes cannot hold")
    }

    @Test func aPlanCarriesOnTheFirstPlacesOfTokensNotYetReached() {
        var first = RoundPlan(startSequence: 10)
        first.add(markSet: "r/11#aa", fingerprints: [1, 2, 3], slots: [0, 1, 2])
        var next = RoundPlan(startSequence: 12)
        next.add(markSet: "r/13#bb", fingerprints: [7], slots: [0])
        next.carryOver([3, 99], from: first)
        #expect(next.place(of: 3)! == ("r/11#aa", 2), "a token of the first try not yet reached keeps its place")
        #expect(next.place(of: 99) == nil)
        #expect(next.place(of: 7)! == ("r/13#bb", 0))
        #expect(RoundPlan(encoded: next.encoded) == next)
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
