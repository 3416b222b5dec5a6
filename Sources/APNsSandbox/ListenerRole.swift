/// Which of APNs' APIs a listener serves. Apple answers channel management on hosts and ports of its
/// own (`api-manage-broadcast.push.apple.com:2196`, the development one on 2195) and notifications and
/// broadcasts on the push host; a request sent to the wrong one is 404 `BadPath`. With
/// `--management-port` the sandbox does the same; without it one port answers everything.
enum ListenerRole: Sendable, Equatable {
    /// One port for every API (no `--management-port`).
    case combined
    /// The push port when management has its own: `/3/device/…` and `/4/broadcasts/…`.
    case push
    /// `--management-port`: `/1/apps/…/channels` and `/1/apps/…/all-channels`.
    case management

    /// Whether a request for `route` (nil: a device notification path or anything else outside the
    /// broadcast APIs) belongs on this listener; if not, APNs answers 404 `BadPath`.
    func serves(_ route: ChannelRoute?) -> Bool {
        switch (self, route) {
        case (.combined, _): true
        case (.push, .channels?), (.push, .allChannels?): false
        case (.push, _): true
        case (.management, .channels?), (.management, .allChannels?), (.management, .unknown?): true
        case (.management, _): false
        }
    }
}
