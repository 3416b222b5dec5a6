import Testing

@testable import PushRender

/// Lease owners are unique per claim, even when delivery tags repeat after a reconnect (issue 18,
/// item 4): the old owner was `<instance>/<delivery tag>`, and tags start again at 1.
@Suite struct LeaseOwnersTests {
    @Test func everyClaimGetsAnOwnerNeverUsedBeforeUnderTheProcessPrefix() async {
        let owners = LeaseOwners(instance: "host/42/7")
        let made = await withTaskGroup(of: [String].self) { group in
            for _ in 0..<8 { group.addTask { (0..<1000).map { _ in owners.next() } } }
            var all: [String] = []
            for await part in group { all += part }
            return all
        }
        #expect(Set(made).count == 8000)
        #expect(made.allSatisfy { $0.hasPrefix("host/42/7/") })
        #expect(LeaseOwners().prefix != LeaseOwners().prefix, "two processes (or consumers) never share a prefix")
    }
}
