import Testing

@testable import APNsSandbox

/// Which API each listener answers (the rest is 404 BadPath, as on Apple's hosts).
@Suite struct ListenerRoleTests {
    @Test func eachListenerServesItsOwnAPI() {
        let device: ChannelRoute? = ChannelRoute(path: "/3/device/abc")
        let channels = ChannelRoute(path: "/1/apps/com.example.app/channels")
        let all = ChannelRoute(path: "/1/apps/com.example.app/all-channels")
        let broadcast = ChannelRoute(path: "/4/broadcasts/apps/com.example.app")
        #expect(device == nil)
        for route in [device, channels, all, broadcast] { #expect(ListenerRole.combined.serves(route)) }
        #expect(ListenerRole.push.serves(device) && ListenerRole.push.serves(broadcast))
        #expect(!ListenerRole.push.serves(channels) && !ListenerRole.push.serves(all))
        #expect(ListenerRole.management.serves(channels) && ListenerRole.management.serves(all))
        #expect(!ListenerRole.management.serves(device) && !ListenerRole.management.serves(broadcast))
    }
}
