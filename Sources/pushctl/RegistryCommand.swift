import ArgumentParser
import Foundation
import Redis
import TokenRegistry

extension PushctlCommand {
    /// `pushctl registry status|migrate`: an app's registry layout, its shards, and moving it.
    struct Registry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show an app's registry layout and tokens per shard, or move it to another layout.",
            subcommands: [Status.self, Migrate.self]
        )

        struct Status: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Print the layout (shards, or a migration in progress) and the tokens of each shard and Redis server.")

            @OptionGroup var connection: ConnectionOptions

            @Option(help: "The app's bundle id.")
            var app: String

            @Flag(help: "Print one JSON object: app, state, shards, from, tokens, per_shard [{tag, tokens, server}], per_server {server: tokens}.")
            var json = false

            func run() async throws {
                let redis = try await connection.redis()
                do {
                    let registry = try connection.registry(redis)
                    let state = try await registry.layouts.state(app: app)
                    let counts = try await registry.tokenCounts(app: app)
                    await redis.close()
                    let total = counts.reduce(0) { $0 + $1.tokens }
                    var servers: [String: Int] = [:]
                    let shards = counts.map { keys, tokens -> [String: Any] in
                        let server = redis.server(forKey: keys.tokens).map(\.description) ?? "?"
                        servers[server, default: 0] += tokens
                        return ["tag": keys.tag, "tokens": tokens, "server": server]
                    }
                    if json {
                        var object: [String: Any] = [
                            "app": app, "state": state.source == nil ? "settled" : "migrating", "shards": state.target.shards, "tokens": total,
                            "per_shard": shards, "per_server": servers,
                        ]
                        if let from = state.source { object["from"] = from.shards }
                        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
                        print(String(decoding: data, as: UTF8.self))
                        return
                    }
                    print("\(app): \(state), \(total) tokens")
                    for shard in shards {
                        print("  {\(shard["tag"]!)}  \(shard["tokens"]!) tokens  on \(shard["server"]!)")
                    }
                    if servers.count > 1 {
                        for (server, tokens) in servers.sorted(by: { $0.key < $1.key }) {
                            let share = total > 0 ? Double(tokens) * 100 / Double(total) : 0
                            print("  \(server): \(tokens) tokens (\(String(format: "%.1f", share))%)")
                        }
                    }
                } catch {
                    await redis.close()
                    throw error
                }
            }
        }

        struct Migrate: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Move an app's registry to another layout, online: resumable, and safe to run again.",
                discussion: """
                    The services keep running: from the moment the layout says `migrating`, every write moves its device \
                    first, reads try the new layout first, and fan-outs scan the old layout before the new one. Each \
                    device moves in two scripts (an import that keeps what is newer in the new shard, then a removal from \
                    the old one), so an interrupted run is finished by running it again. Upgrade every service to this \
                    version before migrating a registry made by an older one.
                    """
            )

            @OptionGroup var connection: ConnectionOptions

            @Option(help: "The app's bundle id.")
            var app: String

            @Option(help: "The shards of the new layout (1-1024; default 24; 1 is the single-tag layout).")
            var shards = RegistryLayout.defaultShards

            @Option(help: "Devices moved at once (1-256).")
            var concurrency = 32

            func validate() throws {
                guard (1...RegistryLayout.maximumShards).contains(shards) else {
                    throw ValidationError("--shards \(shards) is not in 1–\(RegistryLayout.maximumShards)")
                }
                guard (1...256).contains(concurrency) else { throw ValidationError("--concurrency \(concurrency) is not in 1–256") }
            }

            func run() async throws {
                let redis = try await connection.redis()
                let started = ContinuousClock.now
                do {
                    let registry = try connection.registry(redis)
                    let report = try await registry.migrate(
                        app: app, to: RegistryLayout(shards: shards), concurrency: concurrency,
                        progress: { line in print(line) })
                    await redis.close()
                    if report.from == nil {
                        print("\(app): already in \(report.to); nothing to move")
                    } else {
                        print(
                            "\(app): moved from \(report.from!) to \(report.to): \(report.devices) devices, \(report.tombstones) tombstones, \(ContinuousClock.now - started)"
                        )
                    }
                } catch {
                    await redis.close()
                    throw error
                }
            }
        }
    }
}
