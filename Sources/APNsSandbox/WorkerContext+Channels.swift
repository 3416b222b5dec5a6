import APNs

extension WorkerContext {
    /// Answers a broadcast or channel-management request (``ChannelRequestValidator`` judges it):
    /// creates, reads, deletes or lists channels in the shared ``ChannelRegistry``, or records an
    /// accepted broadcast like a delivery, with its channel. Every answer names the request in
    /// `apns-request-id` (the one sent, else a new UUID), as Apple's do.
    ///
    /// Broadcasts count in `/stats` like notifications (and take the injected status faults);
    /// management requests count apart (`channel_requests`, `channel_by_status`, `channel_by_reason`),
    /// so `delivered` stays the number of accepted notifications and broadcasts.
    func answerChannelRequest(_ request: PushRequest, route: ChannelRoute, authentication: ConnectionAuthentication) -> PushAnswer {
        let sentID = request.value(of: "apns-request-id")
        let requestID = sentID.flatMap { PushRequestValidator.isUUID($0) ? $0 : nil } ?? random.uuidString()
        var answer = PushAnswer(status: 200, apnsID: requestID, uniqueID: nil, body: [], idHeader: "apns-request-id")
        let channels = state.channels
        let now = wallMilliseconds
        let validation = ChannelRequestValidator.validate(
            request, route: route, authentication: authentication, providerTokens: verifier, now: now / 1000,
            storagePolicy: { channels.storagePolicy(bundleID: $0, channelID: $1) }
        )
        var rejection: PushRejection?
        switch validation {
        case .rejected(let refusal):
            rejection = refusal
        case .accepted(.create(let bundleID, let storagePolicy)):
            if let channelID = channels.create(bundleID: bundleID, storagePolicy: storagePolicy, now: now) {
                answer.status = 201
                answer.channelID = channelID
            } else {
                rejection = PushRejection(400, .cannotCreateChannelConfig)
            }
        case .accepted(.read(_, _, let storagePolicy)):
            answer.body = Array(#"{"message-storage-policy":\#(storagePolicy.rawValue),"push-type":"\#(APNsChannelClient.channelPushType)"}"#.utf8)
        case .accepted(.delete(let bundleID, let channelID)):
            if channels.delete(bundleID: bundleID, channelID: channelID) {
                answer.status = 204
            } else {
                rejection = PushRejection(400, .channelNotRegistered)
            }
        case .accepted(.list(let bundleID)):
            var body = Array(#"{"channels":["#.utf8)
            for (index, channelID) in channels.channelIDs(bundleID: bundleID).enumerated() {
                if index > 0 { body.append(UInt8(ascii: ",")) }
                AdminJSON.appendString(channelID, to: &body)
            }
            body.append(contentsOf: "]}".utf8)
            answer.body = body
        case .accepted(.broadcast(let bundleID, let channelID)):
            let roll = rules.faults.statusRates.isEmpty ? 1 : random.nextUnitInterval()
            if rules.faults.broadcastFeatureNotEnabled {
                // In APNs' spelling, not the table's (FeatureNotEnabled).
                rejection = PushRejection(400, .broadcastFeatureNotEnabled)
            } else if let injected = rules.faults.injectedRejection(roll: roll) {
                rejection = injected
            } else if channels.noteBroadcast(bundleID: bundleID, channelID: channelID) {
                batch.deliveries.append(
                    RecordedDelivery(
                        token: "", topic: bundleID, headers: request.headers.filter { $0.name != "authorization" }, payload: request.body,
                        receivedAt: now, channel: channelID)
                )
            } else {
                rejection = PushRejection(400, .channelNotRegistered)
            }
        }
        if let rejection {
            answer.status = rejection.status
            answer.body = rejection.body
        }
        if case .broadcast = route {
            batch.count(status: answer.status, reason: rejection?.reason.rawValue)
        } else {
            batch.countChannelRequest(status: answer.status, reason: rejection?.reason.rawValue)
        }
        return answer
    }
}
