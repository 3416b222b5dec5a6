import APNs

/// The faults injected through `PUT /faults`; several may be active at once.
public struct SandboxFaults: Sendable, Equatable {
    /// A share of otherwise accepted notifications answered with an error status.
    public struct StatusRate: Sendable, Equatable {
        /// 429, 500 or 503.
        public var status: Int
        /// 0…1.
        public var rate: Double
        /// The reason answered; nil gives the status's usual one (``defaultReason(forStatus:)``).
        public var chosenReason: APNsReason?

        public init(status: Int, rate: Double, reason: APNsReason? = nil) {
            self.status = status
            self.rate = rate
            self.chosenReason = reason
        }

        /// The reason APNs gives with `status`.
        public var reason: APNsReason { chosenReason ?? SandboxFaults.defaultReason(forStatus: status) }
    }

    /// The statuses ``StatusRate`` may inject.
    public static let injectableStatuses: Set<Int> = [429, 500, 503]

    /// The reasons APNs answers with each injectable status (a fault may choose one; the first is
    /// the default): 503 is `ServiceUnavailable` or `Shutdown` (a server going down), 429
    /// `TooManyRequests` or `TooManyProviderTokenUpdates`.
    public static let reasonsByStatus: [Int: [APNsReason]] = [
        429: [.tooManyRequests, .tooManyProviderTokenUpdates], 500: [.internalServerError], 503: [.serviceUnavailable, .shutdown],
    ]

    public static func defaultReason(forStatus status: Int) -> APNsReason { reasonsByStatus[status]?.first ?? .serviceUnavailable }

    /// The reasons a `goaway_every` GOAWAY may carry in its debug data (any documented reason; these
    /// are the ones APNs is known to close connections with).
    public static let goawayReasons: [APNsReason] = [
        .shutdown, .idleTimeout, .expiredProviderToken, .invalidProviderToken, .missingProviderToken, .badCertificate,
        .badCertificateEnvironment, .badEnvironmentKeyInToken, .unrelatedKeyIdInToken, .tooManyProviderTokenUpdates, .forbidden,
    ]

    /// By status, ascending; one entry per status.
    public private(set) var statusRates: [StatusRate] = []
    /// After every N streams on a connection: GOAWAY with the last accepted stream id, then a graceful
    /// close once the streams up to it are answered.
    public var goawayEvery: Int?
    /// The reason those GOAWAYs carry (`{"reason": …}` in the debug data); nil sends none.
    public var goawayReason: APNsReason?
    /// Every answer waits this long (a timer in the event loop, not a blocked thread).
    public var delayMilliseconds: Int?
    /// After every N completed requests on a connection, the connection is reset without answering
    /// the Nth or anything still unanswered.
    public var dropEvery: Int?
    /// Every broadcast answers 400 `BroadcastFeatureNotEnabled`, as for an App ID without the
    /// Broadcast capability (management requests still work).
    public var broadcastFeatureNotEnabled = false

    public init() {}

    /// Sets (rate > 0) or removes (rate 0) the fault for `status`.
    public mutating func setRate(_ rate: Double, forStatus status: Int, reason: APNsReason? = nil) {
        statusRates.removeAll { $0.status == status }
        if rate > 0 {
            statusRates.append(StatusRate(status: status, rate: rate, reason: reason))
            statusRates.sort { $0.status < $1.status }
        }
    }

    public var isEmpty: Bool { self == SandboxFaults() }

    /// The injected status for a uniform `roll` in 0..<1: the rates are laid end to end, so 10% 503
    /// and 5% 429 refuse exactly 15% (a total over 1 refuses everything, the later statuses getting
    /// the rest).
    public func injectedRejection(roll: Double) -> PushRejection? {
        var threshold = 0.0
        for entry in statusRates {
            threshold += entry.rate
            if roll < threshold { return PushRejection(entry.status, entry.reason) }
        }
        return nil
    }
}
