import ArgumentParser
import Foundation
import PushCore
import Redis
import TokenRegistry

extension PushctlCommand {
    /// `pushctl token show|delete`: one device's registration, for support tickets and clean-ups.
    struct Token: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Look up or delete a device token in the registry.",
            subcommands: [Show.self, Delete.self]
        )

        struct Target: ParsableArguments {
            @Option(help: "The app's bundle id.")
            var app: String

            @Option(help: "The device token (hex; <, > and spaces are stripped).")
            var token: String

            func deviceToken() throws -> DeviceToken {
                do {
                    return try DeviceToken(normalizing: token)
                } catch {
                    throw ValidationError("--token: \(error.message)")
                }
            }
        }

        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Print a token's record as JSON (exit 1 when it is not registered).")

            @OptionGroup var connection: ConnectionOptions
            @OptionGroup var target: Target

            func run() async throws {
                let token = try target.deviceToken()
                let redis = try await connection.redis()
                let record: DeviceRecord?
                do {
                    record = try await connection.registry(redis).record(app: target.app, token: token)
                } catch {
                    await redis.close()
                    throw error
                }
                await redis.close()
                guard let record else {
                    FileHandle.standardError.write(Data("pushctl token show: \(token.redacted) is not registered for \(target.app)\n".utf8))
                    throw ExitCode(1)
                }
                print(String(decoding: record.jsonData(), as: UTF8.self))
            }
        }

        struct Delete: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Remove a token's record and its user, topic and app set entries (exit 1 when it was not registered)."
            )

            @OptionGroup var connection: ConnectionOptions
            @OptionGroup var target: Target

            func run() async throws {
                let token = try target.deviceToken()
                let redis = try await connection.redis()
                let removed: Bool
                do {
                    removed = try await connection.registry(redis).delete(
                        app: target.app, token: token, at: Int64((Date().timeIntervalSince1970 * 1000).rounded()))
                } catch {
                    await redis.close()
                    throw error
                }
                await redis.close()
                guard removed else {
                    FileHandle.standardError.write(Data("pushctl token delete: \(token.redacted) was not registered for \(target.app)\n".utf8))
                    throw ExitCode(1)
                }
                print("deleted \(token.redacted) of \(target.app)")
            }
        }
    }
}
