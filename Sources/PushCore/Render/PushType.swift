/// The `apns-push-type` header: what kind of notification this is. Apple requires it (watchOS 6+,
/// iOS 13+) and routes, throttles and validates by it. The one table of types for push requests,
/// push-render, push-send, the APNs client and apns-sandbox.
///
/// `mdm` is a type APNs knows but push requests do not accept (``acceptedInRequests``): its topic is
/// the MDM certificate's, not one derived from an app's bundle id.
///
/// | type | `apns-topic` | priorities | size limit |
/// |---|---|---|---|
/// | `alert` | bundle id | 10 (default), 5, 1 | 4096 |
/// | `background` | bundle id | 5 only | 4096 |
/// | `location` | `<bundle id>.location-query` | 10 (default), 5, 1 | 4096 |
/// | `voip` | `<bundle id>.voip` | 10 (default), 5, 1 | 5120 |
/// | `complication` | `<bundle id>.complication` | 10 (default), 5, 1 | 4096 |
/// | `fileprovider` | `<bundle id>.pushkit.fileprovider` | 10 (default), 5, 1 | 4096 |
/// | `liveactivity` | `<bundle id>.push-type.liveactivity` | 10 (default), 5 | 4096 |
/// | `pushtotalk` | `<bundle id>.voip-ptt` | 10 (default), 5, 1 | 4096 |
/// | `widgets` | `<bundle id>.push-type.widgets` | 10 (default), 5, 1 | 4096 |
/// | `controls` | `<bundle id>.push-type.controls` | 10 (default), 5, 1 | 4096 |
/// | `mdm` | the MDM certificate's topic | 10 (default), 5, 1 | 4096 |
public struct PushType: Sendable, Hashable, CustomStringConvertible {
    /// The header value, e.g. `alert`.
    public let rawValue: String
    /// What APNs requires after the bundle id in `apns-topic`, e.g. `.voip`.
    public let topicSuffix: String

    private init(_ rawValue: String, topicSuffix: String = "") {
        self.rawValue = rawValue
        self.topicSuffix = topicSuffix
    }

    public static let alert = PushType("alert")
    public static let background = PushType("background")
    public static let location = PushType("location", topicSuffix: ".location-query")
    public static let voip = PushType("voip", topicSuffix: ".voip")
    public static let complication = PushType("complication", topicSuffix: ".complication")
    public static let fileprovider = PushType("fileprovider", topicSuffix: ".pushkit.fileprovider")
    /// MDM pushes use the topic of the MDM certificate, not one derived from a bundle id.
    public static let mdm = PushType("mdm")
    public static let liveactivity = PushType("liveactivity", topicSuffix: ".push-type.liveactivity")
    public static let pushtotalk = PushType("pushtotalk", topicSuffix: ".voip-ptt")
    public static let widgets = PushType("widgets", topicSuffix: ".push-type.widgets")
    public static let controls = PushType("controls", topicSuffix: ".push-type.controls")

    /// Every type Apple documents, in the order of its documentation.
    public static let allCases: [PushType] = [
        .alert, .background, .location, .voip, .complication, .fileprovider, .mdm, .liveactivity, .pushtotalk, .widgets,
        .controls,
    ]

    /// Every type a push request may name: all but `mdm`.
    public static let acceptedInRequests: [PushType] = allCases.filter { $0 != .mdm }

    /// The type named by an `apns-push-type` value; nil for anything Apple does not define.
    public init?(rawValue: String) {
        guard let known = Self.allCases.first(where: { $0.rawValue == rawValue }) else { return nil }
        self = known
    }

    /// The `apns-topic` for an app's bundle id: the bundle id plus ``topicSuffix`` (unchanged for
    /// `mdm`, whose topic is given as is, and when the suffix is already there).
    public func topic(forBundleID bundleID: String) -> String {
        guard !topicSuffix.isEmpty, !bundleID.hasSuffix(topicSuffix) else { return bundleID }
        return bundleID + topicSuffix
    }

    /// APNs' payload limit for this type: 5120 bytes for VoIP, 4096 otherwise.
    public var maximumPayloadSize: Int { self == .voip ? 5120 : 4096 }

    /// The priority used when the request names none: 5 for background pushes, 10 otherwise.
    public var defaultPriority: Int { self == .background ? 5 : 10 }

    /// The priorities APNs accepts with this type sent to a device token ("Using priority 10 is an
    /// error" for background pushes; Live Activity updates take 10 or 5). The one rule for push
    /// requests, push-send's checks, pushctl and the sandbox's strict mode.
    public var allowedPriorities: [Int] {
        switch self {
        case .background: [5]
        case .liveactivity: [10, 5]
        default: [10, 5, 1]
        }
    }

    /// The priorities a broadcast on a channel takes: Apple's broadcast page lists high, medium and
    /// low ("Notifications with Medium and Low apns-priority might get grouped and delivered in bursts").
    public static let broadcastPriorities = [10, 5, 1]

    /// The priorities allowed for this type to a device token, or on a channel when `broadcast`.
    public func allowedPriorities(broadcast: Bool) -> [Int] { broadcast ? Self.broadcastPriorities : allowedPriorities }

    /// Whether the device's alert/badge/sound settings shape the payload (types the user sees).
    public var honoursDeviceSettings: Bool { self == .alert || self == .liveactivity }

    public var description: String { rawValue }
}
