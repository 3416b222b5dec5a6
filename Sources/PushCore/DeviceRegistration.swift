/// What a device registration says about a device (CONTRACT.md, "Registration HTTP API"): the body
/// of `PUT /v1/apps/{app}/devices/{token}`, the legacy forms, and `push.registrations` messages.
///
/// Every field is optional: a registration that leaves one out keeps nothing of the old value for
/// `user`, `locale`, `environment` (the app's default applies), `topics` and `device`, and the
/// defaults (all enabled) for `settings`. The newest registration of a token wins whole.
public struct DeviceRegistration: Sendable, Equatable {
    /// The app's user the device belongs to; tokens are looked up by user.
    public var user: String?
    /// A BCP 47 locale such as `zh-Hant-TW`, for server-side localisation.
    public var locale: String?
    /// The APNs environment; nil means the app's default.
    public var environment: AppConfiguration.Environment?
    /// Topics the device subscribes to (`to: {"topic": …}` targets them).
    public var topics: [String]
    public var device: DeviceInfo
    public var settings: NotificationSettings

    public init(
        user: String? = nil,
        locale: String? = nil,
        environment: AppConfiguration.Environment? = nil,
        topics: [String] = [],
        device: DeviceInfo = DeviceInfo(),
        settings: NotificationSettings = NotificationSettings()
    ) {
        self.user = user
        self.locale = locale
        self.environment = environment
        self.topics = topics
        self.device = device
        self.settings = settings
    }
}

/// Facts about the device, for operators and targeting; none is required.
public struct DeviceInfo: Sendable, Equatable {
    public var uuid: String?
    public var name: String?
    public var model: String?
    public var osVersion: String?
    public var appVersion: String?

    public init(uuid: String? = nil, name: String? = nil, model: String? = nil, osVersion: String? = nil, appVersion: String? = nil) {
        self.uuid = uuid
        self.name = name
        self.model = model
        self.osVersion = osVersion
        self.appVersion = appVersion
    }
}

/// Which parts of a notification the user allowed; a disabled part is left out of the payload.
public struct NotificationSettings: Sendable, Equatable {
    public var alert: Bool
    public var badge: Bool
    public var sound: Bool

    public init(alert: Bool = true, badge: Bool = true, sound: Bool = true) {
        self.alert = alert
        self.badge = badge
        self.sound = sound
    }
}

/// A stored token record: the registration plus its app, token, environment (resolved) and times.
public struct DeviceRecord: Sendable, Equatable {
    public var app: String
    public var token: DeviceToken
    public var user: String?
    public var locale: String?
    public var environment: AppConfiguration.Environment
    public var topics: [String]
    public var device: DeviceInfo
    public var settings: NotificationSettings
    /// When the token was first registered (ms since 1970).
    public var registeredAt: Int64
    /// When the token was last registered (ms since 1970). The invalid-token rule compares APNs'
    /// timestamp with this: a token registered again after APNs called it dead stays.
    public var updatedAt: Int64

    public init(
        app: String, token: DeviceToken, user: String?, locale: String?, environment: AppConfiguration.Environment,
        topics: [String], device: DeviceInfo, settings: NotificationSettings, registeredAt: Int64, updatedAt: Int64
    ) {
        self.app = app
        self.token = token
        self.user = user
        self.locale = locale
        self.environment = environment
        self.topics = topics
        self.device = device
        self.settings = settings
        self.registeredAt = registeredAt
        self.updatedAt = updatedAt
    }
}
