import Foundation
import PushCore
import Redis
import TestSupport
import Testing
import TokenRegistry

/// Live Activity tokens beside the device records, against the shared test Redis (issue 13, item 1).
@Suite("Live Activity tokens in the registry", .timeLimit(.minutes(2)))
struct ActivityTokenRegistryTests {
    static let match = ActivityTokenSlot.pushToStart(attributesType: "MatchAttributes")

    /// Runs `body` with a registry, an app of its own and a registered device of alice's; removes the app's keys after.
    func withDevice(_ name: String, _ body: (TokenRegistry, String, DeviceToken, RedisClient) async throws -> Void) async throws {
        let redis = try await RegistryTesting.client()
        let registry = RegistryTesting.registry(redis)
        let app = RegistryTesting.uniqueApp(name)
        let device = RegistryTesting.token(1)
        _ = try await registry.upsert(
            app: app, token: device, registration: DeviceRegistration(user: "alice", locale: "de-DE", environment: .sandbox),
            defaultEnvironment: .production, now: 1_000)
        do {
            try await body(registry, app, device, redis)
        } catch {
            try? await RegistryTesting.cleanUp(redis, app: app)
            await redis.close()
            throw error
        }
        try await RegistryTesting.cleanUp(redis, app: app)
        await redis.close()
    }

    /// A device holds at most its app's cap of slots: a new slot beyond it is refused inside the
    /// script before anything is read in full, an existing slot still takes a new token, and once a
    /// slot is deleted (and its mark has lapsed) there is room again. With the default cap reached,
    /// a write to the device (its user changes: every slot is read) stays quick.
    @Test func aDeviceHoldsAtMostTheCapOfSlots() async throws {
        try await withDevice("cap") { registry, app, device, redis in
            let cap = 5
            for index in 0..<cap {
                let stored = try await registry.upsertActivityToken(
                    app: app, device: device,
                    registration: ActivityTokenRegistration(
                        slot: .pushToStart(attributesType: "Type\(index)"), pushToken: RegistryTesting.token(100 + index)),
                    defaultEnvironment: .production, now: 2_000 + Int64(index), maxSlots: cap)
                #expect(stored.applied && stored.refusedAtCap == nil)
            }
            let refused = try await registry.upsertActivityToken(
                app: app, device: device,
                registration: ActivityTokenRegistration(slot: .pushToStart(attributesType: "OneTooMany"), pushToken: RegistryTesting.token(200)),
                defaultEnvironment: .production, now: 3_000, maxSlots: cap)
            #expect(refused.refusedAtCap == cap && !refused.applied)
            #expect(try await redis.execute("HLEN", RegistryTesting.keys(app).deviceActivities(device)).integer == Int64(cap))
            #expect(try await redis.execute("EXISTS", RegistryTesting.keys(app).activityRecord(RegistryTesting.token(200))).integer == 0)
            let renewed = try await registry.upsertActivityToken(
                app: app, device: device,
                registration: ActivityTokenRegistration(slot: .pushToStart(attributesType: "Type0"), pushToken: RegistryTesting.token(300)),
                defaultEnvironment: .production, now: 3_001, maxSlots: cap)
            #expect(renewed.applied && renewed.refusedAtCap == nil, "an existing slot takes a new token at the cap")
            // A deleted slot leaves a mark; marks give way, so the device can start a new activity.
            #expect(try await registry.deleteActivityToken(app: app, device: device, slot: .pushToStart(attributesType: "Type1"), at: 3_002))
            let afterDelete = try await registry.upsertActivityToken(
                app: app, device: device,
                registration: ActivityTokenRegistration(slot: .pushToStart(attributesType: "AfterDelete"), pushToken: RegistryTesting.token(400)),
                defaultEnvironment: .production, now: 3_003, maxSlots: cap)
            #expect(afterDelete.applied && afterDelete.refusedAtCap == nil, "a deletion's mark gives way to a new slot")
            #expect(try await redis.execute("HLEN", RegistryTesting.keys(app).deviceActivities(device)).integer == Int64(cap))
        }
    }

    @Test func aWriteToADeviceAtTheDefaultCapStaysQuick() async throws {
        try await withDevice("cap-time") { registry, app, device, redis in
            let cap = AppConfiguration.Ingest.defaultMaxActivitySlots
            for index in 0..<(cap + 50) {
                _ = try await registry.upsertActivityToken(
                    app: app, device: device,
                    registration: ActivityTokenRegistration(
                        slot: .pushToStart(attributesType: "T\(index)"), pushToken: RegistryTesting.token(1_000 + index)),
                    defaultEnvironment: .production, now: 2_000 + Int64(index))
            }
            #expect(try await redis.execute("HLEN", RegistryTesting.keys(app).deviceActivities(device)).integer == Int64(cap))
            // Changing the device's user moves every slot's token to the new user's sets.
            let start = ContinuousClock.now
            let rounds = 20
            for round in 0..<rounds {
                _ = try await registry.upsert(
                    app: app, token: device, registration: DeviceRegistration(user: "user-\(round)"), defaultEnvironment: .production,
                    now: 10_000 + Int64(round))
            }
            let each = (ContinuousClock.now - start) / rounds
            print("device write with \(cap) Live Activity slots (the cap): \(each) each (user change, every slot moved)")
            #expect(each < .milliseconds(100), "\(each)")
        }
    }

    @Test func aPushToStartTokenTakesTheDevicesUserLocaleAndEnvironmentAndJoinsItsSets() async throws {
        try await withDevice("pts") { registry, app, device, redis in
            let keys = RegistryTesting.keys(app)
            let token = RegistryTesting.token(2)
            let stored = try await registry.upsertActivityToken(
                app: app, device: device, registration: ActivityTokenRegistration(slot: Self.match, pushToken: token),
                defaultEnvironment: .production,
                now: 2_000)
            #expect(stored.created && stored.applied)
            #expect(stored.record.user == "alice" && stored.record.locale == "de-DE" && stored.record.environment == .sandbox)
            #expect(try await registry.activityToken(app: app, device: device, slot: Self.match) == stored.record)
            #expect(try await RegistryTesting.members(redis, keys.pushToStartTokens(attributesType: "MatchAttributes")) == [token.hex])
            #expect(try await RegistryTesting.members(redis, keys.pushToStartTokens(user: "alice")) == [token.hex])
            #expect(try await redis.execute("TTL", keys.activityRecord(token)).integer == -1, "no expiry by time")
            #expect(try await RegistryTesting.members(redis, keys.tokens) == [device.hex], "not a device of the app")

            // ActivityKit hands out a new token: it replaces the old one in the slot and in every set.
            let renewed = RegistryTesting.token(3)
            let replaced = try await registry.upsertActivityToken(
                app: app, device: device, registration: ActivityTokenRegistration(slot: Self.match, pushToken: renewed, user: "bob"),
                defaultEnvironment: .production, now: 3_000)
            #expect(replaced.created, "the new token had no record")
            #expect(replaced.record.user == "bob", "the registration's own user wins over the device's")
            #expect(try await RegistryTesting.members(redis, keys.pushToStartTokens(attributesType: "MatchAttributes")) == [renewed.hex])
            #expect(try await RegistryTesting.members(redis, keys.pushToStartTokens(user: "alice")) == [])
            #expect(try await RegistryTesting.members(redis, keys.pushToStartTokens(user: "bob")) == [renewed.hex])
            #expect(!(try await RegistryTesting.exists(redis, keys.activityRecord(token))))

            // An older registration arriving late changes nothing.
            let late = try await registry.upsertActivityToken(
                app: app, device: device, registration: ActivityTokenRegistration(slot: Self.match, pushToken: token),
                defaultEnvironment: .production,
                now: 2_500)
            #expect(!late.applied)
            #expect(try await registry.activityToken(app: app, device: device, slot: Self.match)?.pushToken == renewed)
        }
    }

    @Test func anUpdateTokenExpiresWithItsActivityAndSoDoItsSets() async throws {
        try await withDevice("update") { registry, app, device, redis in
            let keys = RegistryTesting.keys(app)
            let token = RegistryTesting.token(4)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let slot = ActivityTokenSlot.activity(id: "match-1234")
            let stored = try await registry.upsertActivityToken(
                app: app, device: device,
                registration: ActivityTokenRegistration(slot: slot, pushToken: token, attributesType: "MatchAttributes", expiresAt: now + 60_000),
                defaultEnvironment: .production, now: now)
            #expect(stored.record.expiresAt == now + 60_000)
            #expect(try await RegistryTesting.members(redis, keys.activityTokens(activityID: "match-1234")) == [token.hex])
            #expect(try await RegistryTesting.members(redis, keys.activityTokens(user: "alice")) == [token.hex])
            for key in [keys.activityRecord(token), keys.activityTokens(activityID: "match-1234"), keys.activityTokens(user: "alice")] {
                let ttl = try #require(try await redis.execute("PTTL", key).integer)
                #expect(ttl > 50_000 && ttl <= 60_000, "\(key) expires with the activity: \(ttl) ms")
            }
            // A second device's token for the same activity keeps the set alive as long as it lives.
            let other = RegistryTesting.token(5)
            _ = try await registry.upsertActivityToken(
                app: app, device: RegistryTesting.token(6),
                registration: ActivityTokenRegistration(slot: slot, pushToken: other, expiresAt: now + 120_000),
                defaultEnvironment: .production, now: now)
            let setTTL = try #require(try await redis.execute("PTTL", keys.activityTokens(activityID: "match-1234")).integer)
            #expect(setTTL > 110_000)
            // The activity ends on the first device: its slot is emptied, the other device's token stays.
            #expect(try await registry.deleteActivityToken(app: app, device: device, slot: slot, at: now + 1))
            #expect(try await registry.activityToken(app: app, device: device, slot: slot) == nil)
            #expect(try await RegistryTesting.members(redis, keys.activityTokens(activityID: "match-1234")) == [other.hex])
            #expect(!(try await registry.deleteActivityToken(app: app, device: device, slot: slot, at: now + 2)), "idempotent")
            // A registration from before the deletion, redelivered, does not bring it back.
            let revived = try await registry.upsertActivityToken(
                app: app, device: device, registration: ActivityTokenRegistration(slot: slot, pushToken: token, expiresAt: now + 60_000),
                defaultEnvironment: .production, now: now)
            #expect(!revived.applied)
            #expect(try await registry.activityToken(app: app, device: device, slot: slot) == nil)
        }
    }

    @Test func aDeviceWithoutARecordGetsTheAppsEnvironment() async throws {
        try await withDevice("bare") { registry, app, _, _ in
            let stranger = RegistryTesting.token(7)
            let stored = try await registry.upsertActivityToken(
                app: app, device: stranger, registration: ActivityTokenRegistration(slot: Self.match, pushToken: RegistryTesting.token(8)),
                defaultEnvironment: .production, now: 1_000)
            #expect(stored.record.environment == .production)
            #expect(stored.record.user == nil && stored.record.locale == nil)
        }
    }

    @Test func aDeviceDeletedOrReportedInvalidTakesItsActivityTokensAlong() async throws {
        try await withDevice("cascade") { registry, app, device, redis in
            let keys = RegistryTesting.keys(app)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            func addTokens(to device: DeviceToken, seed: Int) async throws -> [DeviceToken] {
                let start = RegistryTesting.token(seed)
                let update = RegistryTesting.token(seed + 1)
                _ = try await registry.upsertActivityToken(
                    app: app, device: device, registration: ActivityTokenRegistration(slot: Self.match, pushToken: start),
                    defaultEnvironment: .production, now: now)
                _ = try await registry.upsertActivityToken(
                    app: app, device: device,
                    registration: ActivityTokenRegistration(slot: .activity(id: "m"), pushToken: update, expiresAt: now + 60_000),
                    defaultEnvironment: .production, now: now)
                return [start, update]
            }
            let first = try await addTokens(to: device, seed: 20)
            #expect(try await registry.delete(app: app, token: device, at: now + 1))
            for token in first { #expect(!(try await RegistryTesting.exists(redis, keys.activityRecord(token)))) }
            #expect(!(try await RegistryTesting.exists(redis, keys.deviceActivities(device))))
            #expect(try await RegistryTesting.members(redis, keys.pushToStartTokens(attributesType: "MatchAttributes")) == [])
            #expect(try await RegistryTesting.members(redis, keys.activityTokens(activityID: "m")) == [])

            let second = RegistryTesting.token(30)
            _ = try await registry.upsert(
                app: app, token: second, registration: DeviceRegistration(user: "dave"), defaultEnvironment: .production, now: now)
            let tokens = try await addTokens(to: second, seed: 31)
            let outcome = try await registry.removeIfNotRegistered(
                [InvalidTokenReport(app: app, token: second, reason: "Unregistered", invalidSince: now + 5)], now: now + 6, noteLifetime: nil)
            #expect(try outcome[0].get() == .removed(user: "dave"))
            for token in tokens { #expect(!(try await RegistryTesting.exists(redis, keys.activityRecord(token)))) }
            #expect(try await RegistryTesting.members(redis, keys.pushToStartTokens(user: "dave")) == [])
        }
    }

    /// Deletions win over older registrations whatever token they name: a slot emptied at T, or a
    /// device deleted at T, is not filled again by a registration from before T that arrives late.
    @Test func lateOlderRegistrationsDoNotRefillADeletedSlotOrDevice() async throws {
        try await withDevice("late") { registry, app, device, _ in
            let slot = ActivityTokenSlot.activity(id: "m")
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            _ = try await registry.upsertActivityToken(
                app: app, device: device,
                registration: ActivityTokenRegistration(slot: slot, pushToken: RegistryTesting.token(40), expiresAt: now + 60_000),
                defaultEnvironment: .production, now: now)
            #expect(try await registry.deleteActivityToken(app: app, device: device, slot: slot, at: now + 10))
            let late = try await registry.upsertActivityToken(
                app: app, device: device,
                registration: ActivityTokenRegistration(slot: slot, pushToken: RegistryTesting.token(41), expiresAt: now + 60_000),
                defaultEnvironment: .production, now: now + 5)
            #expect(!late.applied, "another token from before the slot's deletion")
            let newer = try await registry.upsertActivityToken(
                app: app, device: device,
                registration: ActivityTokenRegistration(slot: slot, pushToken: RegistryTesting.token(42), expiresAt: now + 60_000),
                defaultEnvironment: .production, now: now + 20)
            #expect(newer.applied)

            #expect(try await registry.delete(app: app, token: device, at: now + 30))
            let beforeDeletion = try await registry.upsertActivityToken(
                app: app, device: device, registration: ActivityTokenRegistration(slot: Self.match, pushToken: RegistryTesting.token(43)),
                defaultEnvironment: .production, now: now + 25)
            #expect(!beforeDeletion.applied, "the device was deleted after this registration")
            let afterDeletion = try await registry.upsertActivityToken(
                app: app, device: device, registration: ActivityTokenRegistration(slot: Self.match, pushToken: RegistryTesting.token(44)),
                defaultEnvironment: .production, now: now + 40)
            #expect(afterDeletion.applied)
        }
    }

    /// A device that changes hands (Alice logs out, Bob logs in) takes its push-to-start token out of
    /// Alice's set, so a start for Alice never reaches Bob's phone.
    @Test func aDeviceChangingUserMovesTheActivityTokensThatTookItsUser() async throws {
        try await withDevice("handover") { registry, app, device, redis in
            let keys = RegistryTesting.keys(app)
            let token = RegistryTesting.token(60)
            let own = RegistryTesting.token(61)
            _ = try await registry.upsertActivityToken(
                app: app, device: device, registration: ActivityTokenRegistration(slot: Self.match, pushToken: token),
                defaultEnvironment: .production,
                now: 2_000)
            _ = try await registry.upsertActivityToken(
                app: app, device: device,
                registration: ActivityTokenRegistration(slot: .pushToStart(attributesType: "Other"), pushToken: own, user: "carol"),
                defaultEnvironment: .production, now: 2_000)
            _ = try await registry.upsert(
                app: app, token: device, registration: DeviceRegistration(user: "bob"), defaultEnvironment: .production, now: 3_000)
            #expect(try await RegistryTesting.members(redis, keys.pushToStartTokens(user: "alice")) == [])
            #expect(try await RegistryTesting.members(redis, keys.pushToStartTokens(user: "bob")) == [token.hex])
            #expect(try await registry.activityToken(app: app, device: device, slot: Self.match)?.user == "bob")
            #expect(try await RegistryTesting.members(redis, keys.pushToStartTokens(user: "carol")) == [own.hex], "its own user stays")
            // Logged out: the device has no user now, and neither has the token.
            _ = try await registry.upsert(app: app, token: device, registration: DeviceRegistration(), defaultEnvironment: .production, now: 4_000)
            #expect(try await RegistryTesting.members(redis, keys.pushToStartTokens(user: "bob")) == [])
            #expect(try await registry.activityToken(app: app, device: device, slot: Self.match)?.user == nil)
        }
    }

    /// A device reported invalid at T keeps the activity tokens registered after T (newer news).
    @Test func anInvalidDeviceKeepsActivityTokensRegisteredAfterTheReport() async throws {
        try await withDevice("cascade-since") { registry, app, device, _ in
            let old = RegistryTesting.token(50)
            let recent = RegistryTesting.token(51)
            _ = try await registry.upsertActivityToken(
                app: app, device: device, registration: ActivityTokenRegistration(slot: Self.match, pushToken: old), defaultEnvironment: .production,
                now: 2_000)
            _ = try await registry.upsertActivityToken(
                app: app, device: device, registration: ActivityTokenRegistration(slot: .pushToStart(attributesType: "Other"), pushToken: recent),
                defaultEnvironment: .production, now: 9_000)
            let outcome = try await registry.removeIfNotRegistered(
                [InvalidTokenReport(app: app, token: device, reason: "Unregistered", invalidSince: 5_000)], now: 9_500, noteLifetime: nil)
            #expect(try outcome[0].get() == .removed(user: "alice"))
            #expect(try await registry.activityToken(app: app, device: device, slot: Self.match) == nil)
            #expect(try await registry.activityToken(app: app, device: device, slot: .pushToStart(attributesType: "Other"))?.pushToken == recent)
        }
    }

    @Test func feedbackRemovesAnActivityTokenByTheInvalidTokenRule() async throws {
        try await withDevice("feedback") { registry, app, device, redis in
            let keys = RegistryTesting.keys(app)
            let token = RegistryTesting.token(9)
            _ = try await registry.upsertActivityToken(
                app: app, device: device, registration: ActivityTokenRegistration(slot: Self.match, pushToken: token),
                defaultEnvironment: .production,
                now: 5_000)
            // Reported invalid before it was registered: kept.
            let early = try await registry.removeIfNotRegistered(
                [InvalidTokenReport(app: app, token: token, reason: "Unregistered", invalidSince: 4_000)], now: 6_000, noteLifetime: .seconds(60))
            #expect(try early[0].get() == .keptRegisteredAfter(5_000))
            let removed = try await registry.removeIfNotRegistered(
                [InvalidTokenReport(app: app, token: token, reason: "Unregistered", invalidSince: 5_000)], now: 6_000, noteLifetime: .seconds(60))
            #expect(try removed[0].get() == .removed(user: "alice"))
            #expect(try await registry.activityToken(app: app, device: device, slot: Self.match) == nil)
            #expect(try await RegistryTesting.members(redis, keys.pushToStartTokens(attributesType: "MatchAttributes")) == [])
            #expect(try await RegistryTesting.members(redis, keys.pushToStartTokens(user: "alice")) == [])
            #expect(try await registry.record(app: app, token: device) != nil, "the device itself stays")
            let again = try await registry.removeIfNotRegistered(
                [InvalidTokenReport(app: app, token: token, reason: "Unregistered", invalidSince: 5_000)], now: 6_500, noteLifetime: .seconds(60))
            guard case .notFound(let earlier?) = try again[0].get() else { throw TestFailure("expected the removal note: \(again)") }
            #expect(earlier.reason == "Unregistered")
        }
    }
}
