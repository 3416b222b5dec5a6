public import Logging
public import PushCore

extension Logger {
    /// This logger with the work queue a consumer takes from in `push.queue`.
    public func consuming(_ queue: WorkQueue) -> Logger {
        var logger = self
        logger[metadataKey: "push.queue"] = "\(queue.name)"
        return logger
    }
}
