import Hummingbird
import PushIngest
import Testing

/// The table `405`'s `Allow` comes from: templates match one component per `{name}`, nothing more.
@Suite("Route table")
struct RouteTableTests {
    let table = RouteTable([
        .init(.put, "/v1/apps/{app}/devices/{token}"),
        .init(.get, "/v1/apps/{app}/devices/{token}"),
        .init(.get, "/register"),
        .init(.post, "/register"),
        .init(.get, "/register"),
    ])

    @Test func aKnownPathHasItsMethodsOnceInOrder() {
        #expect(table.methods(forPath: "/v1/apps/com.example.game/devices/abc") == [.put, .get])
        #expect(table.methods(forPath: "/register") == [.get, .post])
    }

    @Test func otherShapesHaveNone() {
        #expect(table.methods(forPath: "/v1/apps/com.example.game/devices").isEmpty)
        #expect(table.methods(forPath: "/v1/apps/com.example.game/devices/abc/extra").isEmpty)
        #expect(table.methods(forPath: "/v1/apps//devices/abc").isEmpty, "a parameter matches a non-empty component only")
        #expect(table.methods(forPath: "/").isEmpty)
    }

    /// The router skips empty components, so the table does too: a trailing or doubled slash is the
    /// same path.
    @Test func emptyComponentsAreSkippedAsTheRouterSkipsThem() {
        #expect(table.methods(forPath: "/register/") == [.get, .post])
        #expect(table.methods(forPath: "//register") == [.get, .post])
    }
}
