import Metrics
public import ServiceLifecycle

/// `push_dependency_up{dependency="rabbitmq"|"redis"}`: 1 while the service is connected to it, 0
/// otherwise, sampled every ``interval`` (1 s, so a dashboard does not show a dependency down for long
/// after it came up). Unlike `/readyz`, which a load balancer sees, this is what
/// alerts and dashboards see; a broker that blocks publishing still counts as up here
/// (`push_amqp_publishing_blocked` says that).
public struct DependencyGauges: Service {
    public struct Dependency: Sendable {
        public let name: String
        public let isUp: @Sendable () -> Bool

        public init(_ name: String, isUp: @escaping @Sendable () -> Bool) {
            self.name = name
            self.isUp = isUp
        }
    }

    let dependencies: [Dependency]
    let interval: Duration

    public init(_ dependencies: [Dependency], interval: Duration = .seconds(1)) {
        self.dependencies = dependencies
        self.interval = interval
    }

    public func run() async throws {
        let gauges = dependencies.map { (dependency: $0, gauge: Gauge(label: "push_dependency_up", dimensions: [("dependency", $0.name)])) }
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                for (dependency, gauge) in gauges { gauge.record(dependency.isUp() ? 1 : 0) }
                try? await Task.sleep(for: self.interval)
            }
        }
    }
}
