import APNs
import Foundation
import Synchronization

/// The broadcast channels apns-sandbox knows, per bundle id: what the management API creates, reads,
/// deletes and lists, what broadcasts are checked against, and what the admin API's `GET /channels`
/// shows. Thread-safe (one lock: management requests are few, and a broadcast is one request
/// whatever the audience).
///
/// Like Apple's, ids are random (16 bytes, base64) and never given out twice, a channel's storage
/// policy is fixed at creation, and an app has at most ``limit`` channels (Apple: 10,000 per app and
/// environment); past it creation answers `CannotCreateChannelConfig`.
public final class ChannelRegistry: Sendable {
    /// Apple's limit per app and environment.
    public static let defaultLimit = 10_000

    /// One channel as `GET /channels` lists it.
    public struct Channel: Sendable, Equatable {
        public var bundleID: String
        public var id: String
        public var storagePolicy: APNsChannelStoragePolicy
        /// When it was created, ms since 1970.
        public var createdAt: Int64
        /// Broadcasts accepted on it.
        public var broadcasts: Int
    }

    private struct Storage {
        /// Bundle id → its channels in creation order.
        var apps: [String: [Channel]] = [:]
    }

    /// Channels per bundle id.
    public let limit: Int
    private let storage = Mutex(Storage())

    public init(limit: Int = ChannelRegistry.defaultLimit) {
        self.limit = max(1, limit)
    }

    /// Creates a channel; nil when the app is at its limit.
    func create(bundleID: String, storagePolicy: APNsChannelStoragePolicy, now: Int64) -> String? {
        var random = SystemRandomNumberGenerator()
        let id = Data((0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }).base64EncodedString()
        return storage.withLock { storage -> String? in
            guard storage.apps[bundleID, default: []].count < limit else { return nil }
            storage.apps[bundleID, default: []].append(
                Channel(bundleID: bundleID, id: id, storagePolicy: storagePolicy, createdAt: now, broadcasts: 0))
            return id
        }
    }

    /// The channel's storage policy; nil when the app has no such channel.
    public func storagePolicy(bundleID: String, channelID: String) -> APNsChannelStoragePolicy? {
        storage.withLock { $0.apps[bundleID]?.first(where: { $0.id == channelID })?.storagePolicy }
    }

    /// Deletes a channel; false when the app had no such channel.
    func delete(bundleID: String, channelID: String) -> Bool {
        storage.withLock { storage in
            guard let index = storage.apps[bundleID]?.firstIndex(where: { $0.id == channelID }) else { return false }
            storage.apps[bundleID]!.remove(at: index)
            if storage.apps[bundleID]!.isEmpty { storage.apps[bundleID] = nil }
            return true
        }
    }

    /// The app's channel ids, in creation order.
    public func channelIDs(bundleID: String) -> [String] {
        storage.withLock { $0.apps[bundleID]?.map(\.id) ?? [] }
    }

    /// Counts an accepted broadcast; false when the channel was deleted meanwhile.
    func noteBroadcast(bundleID: String, channelID: String) -> Bool {
        storage.withLock { storage in
            guard let index = storage.apps[bundleID]?.firstIndex(where: { $0.id == channelID }) else { return false }
            storage.apps[bundleID]![index].broadcasts += 1
            return true
        }
    }

    /// Every channel (of `bundleID` when given), by bundle id, then in creation order.
    public func channels(bundleID: String? = nil) -> [Channel] {
        storage.withLock { storage in
            if let bundleID { return storage.apps[bundleID] ?? [] }
            return storage.apps.keys.sorted().flatMap { storage.apps[$0]! }
        }
    }

    /// Forgets every channel (admin `DELETE /channels`); returns how many there were.
    @discardableResult
    public func removeAll() -> Int {
        storage.withLock { storage in
            defer { storage.apps = [:] }
            return storage.apps.values.reduce(0) { $0 + $1.count }
        }
    }
}
