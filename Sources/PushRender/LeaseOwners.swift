import Foundation
import Synchronization

/// The lease owner ids of one push-render process: `<host>/<pid>/<random>/<claim number>`. Each claim
/// gets a number never used before in the process, so two copies of one request (a redelivery after a
/// reconnect, when delivery tags start again at 1) never share an owner: one copy's release or
/// checkpoint cannot act on the other's lease. The shared prefix tells the process's own leases apart.
final class LeaseOwners: Sendable {
    /// What every owner id of this process starts with.
    let prefix: String
    private let claims = Atomic<UInt64>(0)

    init(instance: String = "\(ProcessInfo.processInfo.hostName)/\(ProcessInfo.processInfo.processIdentifier)/\(UInt32.random(in: 0...UInt32.max))") {
        prefix = instance + "/"
    }

    /// A new owner id for one claim.
    func next() -> String {
        prefix + String(claims.add(1, ordering: .relaxed).newValue)
    }
}
