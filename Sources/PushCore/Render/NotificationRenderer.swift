/// Renders a push request's payload for one kind of device: its locale's catalog chain and its
/// alert/badge/sound settings. Pure; push-render calls it once per distinct (chain, settings) and
/// reuses the bytes for every device of that kind.
///
/// Steps, in order:
/// 1. **Device settings** (alert and Live Activity pushes): a disabled alert, badge or sound is left
///    out (a Live Activity alert's `sound` too). An alert push left with nothing to show is
///    ``RenderResult/skipped(_:)``, unless it has `content-available` 1: then it goes out as what it
///    has become, a background push at priority 5.
/// 2. **Server-side localisation** (`localize: "server"`): in the alert, `title-loc-key`/`title-loc-args`,
///    `subtitle-loc-key`/`subtitle-loc-args` and `loc-key`/`loc-args` become `title`, `subtitle` and
///    `body` from the first catalog along the chain that has the key (Live Activity alerts: the
///    `{"loc-key", "loc-args"}` forms of `title` and `body`). A key no catalog has, or whose format
///    cannot take the arguments, stays for the device (``RenderedNotification/deviceFallbackKeys``).
/// 3. **Size**: serialised compactly; over the push type's limit (4096 bytes, 5120 for voip), the
///    alert body (`alert` as a string, or `alert.body`) is cut at a character boundary and ends in
///    "…" so the payload fits; if there is no body, or even "…" alone does not fit, the request is
///    refused with ``PushRequestError/Code/payloadTooLarge``.
public struct NotificationRenderer: Sendable {
    public let request: PushRequest
    public let catalogs: LocalizationCatalogs

    public init(request: PushRequest, catalogs: LocalizationCatalogs) {
        self.request = request
        self.catalogs = catalogs
    }

    /// The catalog chain for a device locale; empty for `localize: "device"` (nothing is looked up).
    public func chain(for locale: String?) -> [String] {
        request.localization == .server ? catalogs.chain(for: locale) : []
    }

    /// Every chain a device can have, given the catalogs (a device's chain is that of the most
    /// specific catalog locale it matches, or the default's).
    public var possibleChains: [[String]] {
        guard request.localization == .server else { return [[]] }
        var chains: [[String]] = [catalogs.chain(for: nil)]
        for locale in catalogs.catalogs.keys.sorted() {
            let chain = catalogs.chain(for: locale)
            if !chains.contains(chain) { chains.append(chain) }
        }
        return chains
    }

    /// Renders every possible chain with every setting on, so a request whose payload cannot fit is
    /// refused before any batch is published (fewer parts never need more room).
    public func preflight() throws(PushRequestError) {
        for chain in possibleChains {
            _ = try render(chain: chain, settings: NotificationSettings())
        }
    }

    public func render(locale: String?, settings: NotificationSettings) throws(PushRequestError) -> RenderResult {
        try render(chain: chain(for: locale), settings: settings)
    }

    /// Renders for a device whose catalog chain is `chain` (see ``chain(for:)``).
    public func render(chain: [String], settings: NotificationSettings) throws(PushRequestError) -> RenderResult {
        var pushType = request.pushType
        var priority = request.priority
        guard case .object(var members) = request.payload.json else { preconditionFailure("validated payload is an object") }
        let apsIndex = members.firstIndex(where: { $0.key == "aps" })
        var aps: [(key: String, value: JSONValue)] = []
        if let apsIndex, case .object(let apsMembers) = members[apsIndex].value { aps = apsMembers }

        // 1. Device settings.
        if pushType.honoursDeviceSettings {
            let disabled = Set([(settings.alert, "alert"), (settings.badge, "badge"), (settings.sound, "sound")].filter { !$0.0 }.map(\.1))
            if !disabled.isEmpty {
                aps.removeAll { disabled.contains($0.key) }
                if disabled.contains("sound"), let index = aps.firstIndex(where: { $0.key == "alert" }), case .object(var alert) = aps[index].value {
                    alert.removeAll { $0.key == "sound" }
                    aps[index].value = .object(alert)
                }
                if pushType == .alert, !aps.contains(where: { ["alert", "badge", "sound"].contains($0.key) }) {
                    guard aps.contains(where: { $0.key == "content-available" && $0.value.int64Value == 1 }) else {
                        return .skipped(.nothingToShow)
                    }
                    pushType = .background
                    priority = PushType.background.defaultPriority
                }
            }
        }

        // 2. Server-side localisation.
        var fallbackKeys: [String] = []
        var localizedWith: [String] = []
        if request.localization == .server, let index = aps.firstIndex(where: { $0.key == "alert" }), case .object(let alert) = aps[index].value {
            aps[index].value = .object(localize(alert: alert, chain: chain, fallbackKeys: &fallbackKeys, localizedWith: &localizedWith))
        }

        if let apsIndex { members[apsIndex].value = .object(aps) }

        // 3. Size.
        var payload = JSONValue.object(members).serialized()
        var truncated = false
        let limit = pushType.maximumPayloadSize
        if payload.count > limit {
            members = try truncateBody(members: members, apsIndex: apsIndex, size: payload.count, limit: limit, pushType: pushType)
            payload = JSONValue.object(members).serialized()
            truncated = true
        }
        return .notification(
            RenderedNotification(
                payload: payload, pushType: pushType, priority: priority, deviceFallbackKeys: fallbackKeys, localizedWith: localizedWith,
                truncated: truncated))
    }

    // MARK: Localisation

    /// The alert keys resolved server-side: (key, arguments, what the text becomes).
    private static let localizableParts: [(key: String, arguments: String, target: String)] = [
        ("title-loc-key", "title-loc-args", "title"),
        ("subtitle-loc-key", "subtitle-loc-args", "subtitle"),
        ("loc-key", "loc-args", "body"),
    ]

    private func localize(
        alert: [(key: String, value: JSONValue)], chain: [String], fallbackKeys: inout [String], localizedWith: inout [String]
    ) -> [(key: String, value: JSONValue)] {
        var replacements: [String: String] = [:]
        var dropped: Set<String> = []
        func resolve(key: String, arguments: JSONValue?) -> String? {
            guard let (format, locale) = catalogs.lookup(key, chain: chain) else { return nil }
            var strings: [String] = []
            if case .array(let values)? = arguments { strings = values.compactMap(\.stringValue) }
            guard let text = try? LocalizedFormat.format(format, arguments: strings) else { return nil }
            if !localizedWith.contains(locale) { localizedWith.append(locale) }
            return text
        }
        let object = JSONValue.object(alert)
        for part in Self.localizableParts {
            guard let key = object[part.key]?.stringValue else { continue }
            if let text = resolve(key: key, arguments: object[part.arguments]) {
                replacements[part.target] = text
                dropped.insert(part.key)
                dropped.insert(part.arguments)
            } else {
                fallbackKeys.append(key)
            }
        }
        // Live Activity alerts: "title"/"body" as {"loc-key", "loc-args"}.
        for target in ["title", "body"] where replacements[target] == nil {
            guard case .object = object[target], let key = object[target]?["loc-key"]?.stringValue else { continue }
            if let text = resolve(key: key, arguments: object[target]?["loc-args"]) {
                replacements[target] = text
            } else {
                fallbackKeys.append(key)
            }
        }
        guard !replacements.isEmpty else { return alert }
        let present = Set(alert.map(\.key))
        var result: [(key: String, value: JSONValue)] = []
        var placed: Set<String> = []
        for member in alert {
            if let text = replacements[member.key] {
                result.append((member.key, .string(text)))
                placed.insert(member.key)
            } else if dropped.contains(member.key) {
                if let part = Self.localizableParts.first(where: { $0.key == member.key }), !present.contains(part.target),
                    let text = replacements[part.target], !placed.contains(part.target)
                {
                    result.append((part.target, .string(text)))
                    placed.insert(part.target)
                }
            } else {
                result.append(member)
            }
        }
        return result
    }

    // MARK: Truncation

    private func truncateBody(
        members: [(key: String, value: JSONValue)], apsIndex: Int?, size: Int, limit: Int, pushType: PushType
    ) throws(PushRequestError) -> [(key: String, value: JSONValue)] {
        func tooLarge(_ detail: String) -> PushRequestError {
            PushRequestError(
                .payloadTooLarge, field: "payload", "the rendered payload is \(size) bytes; \(pushType) pushes allow \(limit) (\(detail))")
        }
        guard let apsIndex, case .object(var aps) = members[apsIndex].value, let alertIndex = aps.firstIndex(where: { $0.key == "alert" }) else {
            throw tooLarge("there is no alert body to shorten")
        }
        var alert: [(key: String, value: JSONValue)]?
        var bodyIndex: Int?
        let body: String
        switch aps[alertIndex].value {
        case .string(let text):
            body = text
        case .object(let alertMembers):
            guard let index = alertMembers.firstIndex(where: { $0.key == "body" }), case .string(let text) = alertMembers[index].value else {
                throw tooLarge("there is no alert body to shorten")
            }
            alert = alertMembers
            bodyIndex = index
            body = text
        default:
            throw tooLarge("there is no alert body to shorten")
        }
        let budget = JSONValue.serializedLength(of: body) - (size - limit)
        guard let shortened = Self.truncate(body, toSerializedLength: budget) else {
            throw tooLarge("more than the alert body is too large: even an alert body of \"…\" does not fit")
        }
        if var alert, let bodyIndex {
            alert[bodyIndex].value = .string(shortened)
            aps[alertIndex].value = .object(alert)
        } else {
            aps[alertIndex].value = .string(shortened)
        }
        var result = members
        result[apsIndex].value = .object(aps)
        return result
    }

    /// The longest prefix of `text` (whole characters, trailing whitespace dropped) followed by "…"
    /// whose JSON string literal is at most `budget` bytes; nil when not even "…" fits.
    public static func truncate(_ text: String, toSerializedLength budget: Int) -> String? {
        let ellipsis = "…"
        let characters = Array(text)
        func candidate(_ count: Int) -> String {
            var prefix = String(characters[0..<count])
            while let last = prefix.last, last.isWhitespace { prefix.removeLast() }
            return prefix + ellipsis
        }
        guard JSONValue.serializedLength(of: ellipsis) <= budget else { return nil }
        var low = 0
        var high = characters.count
        // Invariant: candidate(low) fits; find the largest count that fits.
        while low < high {
            let middle = (low + high + 1) / 2
            if JSONValue.serializedLength(of: candidate(middle)) <= budget {
                low = middle
            } else {
                high = middle - 1
            }
        }
        return candidate(low)
    }
}

/// What rendering for one kind of device gave.
public enum RenderResult: Sendable, Equatable {
    case notification(RenderedNotification)
    /// Nothing is sent to such devices.
    case skipped(SkipReason)
}

/// Why a device gets nothing.
public enum SkipReason: String, Sendable, Hashable, CaseIterable {
    /// The device's settings leave nothing to show and there is no `content-available`.
    case nothingToShow = "nothing_to_show"
    /// The token vanished from the registry between the scan and the lookup.
    case unregistered
    /// The token's record cannot be read (a hand-edited or foreign hash).
    case unreadableRecord = "unreadable_record"
}

/// A payload rendered for one kind of device.
public struct RenderedNotification: Sendable, Equatable {
    /// The compact JSON that goes to APNs.
    public var payload: [UInt8]
    /// The request's push type, or `background` when settings left only `content-available`.
    public var pushType: PushType
    public var priority: Int
    /// Localisation keys left for the device because no catalog along the chain could render them.
    public var deviceFallbackKeys: [String]
    /// The catalogs (canonical locales) that supplied text.
    public var localizedWith: [String]
    /// Whether the alert body was shortened to fit.
    public var truncated: Bool

    public init(
        payload: [UInt8], pushType: PushType, priority: Int, deviceFallbackKeys: [String] = [], localizedWith: [String] = [], truncated: Bool = false
    ) {
        self.payload = payload
        self.pushType = pushType
        self.priority = priority
        self.deviceFallbackKeys = deviceFallbackKeys
        self.localizedWith = localizedWith
        self.truncated = truncated
    }

    public var payloadString: String { String(decoding: payload, as: UTF8.self) }
}
