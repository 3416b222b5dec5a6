/// The `apns-push-type` header: what kind of notification this is. Apple requires it (watchOS 6+,
/// iOS 13+) and routes, throttles and validates by it.
public struct APNsPushType: Sendable, Hashable, CustomStringConvertible {
    /// The header value, e.g. `alert`.
    public let rawValue: String
    /// What Apple appends to the bundle id to form this type's `apns-topic`, e.g. `.voip`.
    public let topicSuffix: String

    private init(_ rawValue: String, topicSuffix: String = "") {
        self.rawValue = rawValue
        self.topicSuffix = topicSuffix
    }

    public static let alert = APNsPushType("alert")
    public static let background = APNsPushType("background")
    public static let location = APNsPushType("location", topicSuffix: ".location-query")
    public static let voip = APNsPushType("voip", topicSuffix: ".voip")
    public static let complication = APNsPushType("complication", topicSuffix: ".complication")
    public static let fileprovider = APNsPushType("fileprovider", topicSuffix: ".pushkit.fileprovider")
    /// MDM pushes use the topic of the MDM certificate, not one derived from a bundle id.
    public static let mdm = APNsPushType("mdm")
    public static let liveactivity = APNsPushType("liveactivity", topicSuffix: ".push-type.liveactivity")
    public static let pushtotalk = APNsPushType("pushtotalk", topicSuffix: ".voip-ptt")
    public static let widgets = APNsPushType("widgets", topicSuffix: ".push-type.widgets")
    public static let controls = APNsPushType("controls", topicSuffix: ".push-type.controls")

    /// Every type Apple documents, in the order of its documentation.
    public static let allCases: [APNsPushType] = [
        .alert, .background, .location, .voip, .complication, .fileprovider, .mdm, .liveactivity, .pushtotalk, .widgets,
        .controls,
    ]

    /// The type named by an `apns-push-type` value; nil for anything Apple does not define.
    public init?(rawValue: String) {
        guard let known = Self.allCases.first(where: { $0.rawValue == rawValue }) else { return nil }
        self = known
    }

    /// The `apns-topic` for an app's bundle id: the bundle id plus this type's suffix (unchanged for
    /// `mdm`, whose topic is given as is, and when the suffix is already there).
    public func topic(forBundleID bundleID: String) -> String {
        guard !topicSuffix.isEmpty, !bundleID.hasSuffix(topicSuffix) else { return bundleID }
        return bundleID + topicSuffix
    }

    /// The payload size limit APNs applies to this type: 5120 bytes for VoIP, 4096 otherwise.
    public var maximumPayloadSize: Int { self == .voip ? 5120 : 4096 }

    public var description: String { rawValue }
}

/// The `apns-priority` header.
public enum APNsPriority: Int, Sendable, Hashable, CaseIterable {
    /// Deliver immediately (alerts, sounds, badges).
    case immediate = 10
    /// Deliver when power considerations allow (required for background pushes).
    case conserveEnergy = 5
    /// Prioritise the device's power over everything; may not wake the device.
    case low = 1
}
