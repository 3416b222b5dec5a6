/// What one worker thread gathered since it last reported: committed under one lock per event-loop
/// pass, before the answers go out, so a client that saw a 200 finds the delivery recorded.
struct WorkerBatch {
    var deliveries: [RecordedDelivery] = []
    var requests = 0
    var byStatus: [Int: Int] = [:]
    var byReason: [String: Int] = [:]
    var connections = 0
    var goaways = 0
    var droppedConnections = 0
    var abortedConnections = 0
    var lostAnswers = 0
    /// Channel-management requests, apart from notifications and broadcasts.
    var channelRequests = 0
    var channelByStatus: [Int: Int] = [:]
    var channelByReason: [String: Int] = [:]

    var isEmpty: Bool {
        requests == 0 && connections == 0 && goaways == 0 && droppedConnections == 0 && abortedConnections == 0 && lostAnswers == 0
            && deliveries.isEmpty && channelRequests == 0
    }

    mutating func count(status: Int, reason: String?) {
        requests += 1
        byStatus[status, default: 0] += 1
        if let reason { byReason[reason, default: 0] += 1 }
    }

    mutating func countChannelRequest(status: Int, reason: String?) {
        channelRequests += 1
        channelByStatus[status, default: 0] += 1
        if let reason { channelByReason[reason, default: 0] += 1 }
    }

    mutating func reset() {
        deliveries.removeAll(keepingCapacity: true)
        requests = 0
        byStatus.removeAll(keepingCapacity: true)
        byReason.removeAll(keepingCapacity: true)
        connections = 0
        goaways = 0
        droppedConnections = 0
        abortedConnections = 0
        lostAnswers = 0
        channelRequests = 0
        channelByStatus.removeAll(keepingCapacity: true)
        channelByReason.removeAll(keepingCapacity: true)
    }
}
