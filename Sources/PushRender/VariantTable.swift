import PushCore

/// The payloads of one request, rendered once per kind of device and shared by every device of that
/// kind: a device's kind is its catalog chain (from its locale; irrelevant for `localize: "device"`)
/// and its alert/badge/sound settings, so a request has at most (chains × 8) renderings however
/// many devices it reaches. Kinds that render to the same bytes, push type and priority share one
/// ``Variant``, so their devices share batches.
///
/// Not thread-safe: one fan-out owns it.
final class VariantTable {
    /// One distinct rendered notification and what batches of it start with.
    final class Variant {
        let id: Int
        let notification: RenderedNotification
        private(set) var encoders: [AppConfiguration.Environment: SendBatchEncoder] = [:]

        init(id: Int, notification: RenderedNotification) {
            self.id = id
            self.notification = notification
        }

        func encoder(for environment: AppConfiguration.Environment, request: PushRequest) -> SendBatchEncoder {
            if let encoder = encoders[environment] { return encoder }
            let encoder = SendBatchEncoder(
                requestID: request.id, app: request.app.bundleID, environment: environment, pushType: notification.pushType.rawValue,
                priority: notification.priority, expiration: request.expiration, collapseID: request.collapseID, payload: notification.payload)
            encoders[environment] = encoder
            return encoder
        }
    }

    /// What a kind of device gets.
    enum Entry {
        case variant(Variant)
        case skipped(SkipReason)
    }

    private struct PayloadKey: Hashable {
        let payload: [UInt8]
        let pushType: String
        let priority: Int
    }

    let renderer: NotificationRenderer
    private var chains: [[String]] = []
    private var chainIndexByChain: [[String]: Int] = [:]
    private var chainIndexByLocale: [String: Int] = [:]
    private var chainIndexWithoutLocale: Int?
    private var entries: [Int: Entry] = [:]
    private var variantsByPayload: [PayloadKey: Variant] = [:]
    private(set) var variants: [Variant] = []

    init(renderer: NotificationRenderer) {
        self.renderer = renderer
    }

    /// The rendering for a device with `locale` and `settings`.
    ///
    /// - Throws: ``PushCore/PushRequestError`` only if a rendering fails that ``NotificationRenderer/preflight()``
    ///   passed (it cannot, by construction; the caller skips such devices rather than failing the request).
    func entry(locale: String?, settings: NotificationSettings) throws(PushRequestError) -> Entry {
        let chainIndex = self.chainIndex(for: locale)
        let key = chainIndex << 3 | (settings.alert ? 4 : 0) | (settings.badge ? 2 : 0) | (settings.sound ? 1 : 0)
        if let entry = entries[key] { return entry }
        let entry: Entry
        switch try renderer.render(chain: chains[chainIndex], settings: settings) {
        case .skipped(let reason):
            entry = .skipped(reason)
        case .notification(let notification):
            let payloadKey = PayloadKey(payload: notification.payload, pushType: notification.pushType.rawValue, priority: notification.priority)
            if let variant = variantsByPayload[payloadKey] {
                entry = .variant(variant)
            } else {
                let variant = Variant(id: variants.count, notification: notification)
                variants.append(variant)
                variantsByPayload[payloadKey] = variant
                entry = .variant(variant)
            }
        }
        entries[key] = entry
        return entry
    }

    private func chainIndex(for locale: String?) -> Int {
        if let locale, let index = chainIndexByLocale[locale] { return index }
        if locale == nil, let index = chainIndexWithoutLocale { return index }
        let chain = renderer.chain(for: locale)
        let index: Int
        if let known = chainIndexByChain[chain] {
            index = known
        } else {
            index = chains.count
            chains.append(chain)
            chainIndexByChain[chain] = index
        }
        if let locale {
            // Bounded: device locales are a few hundred at most; a flood of junk locales only costs this table.
            if chainIndexByLocale.count < 10_000 { chainIndexByLocale[locale] = index }
        } else {
            chainIndexWithoutLocale = index
        }
        return index
    }
}
