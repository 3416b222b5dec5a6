import ArgumentParser
import Foundation
import PushConsole

extension PushctlCommand {
    /// `pushctl console hash-password|hash-key`: the values of push-console's operators file.
    struct Console: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make entries for push-console's operators file (PUSH_CONSOLE_OPERATORS_FILE).",
            subcommands: [HashPassword.self, HashKey.self]
        )

        /// The first line of stdin, without its line end.
        static func readLine(what: String) throws -> String {
            guard let line = Swift.readLine(strippingNewline: true), !line.isEmpty else {
                throw ValidationError("give the \(what) on stdin (one line)")
            }
            return line
        }

        struct HashPassword: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "hash-password",
                abstract: "Read a password on stdin and print its PBKDF2-SHA256 hash for an operator's \"password\".",
                discussion: "Example: printf '%s\\n' \"$PASSWORD\" | pushctl console hash-password")

            @Option(help: "PBKDF2 rounds (100000–10000000).")
            var rounds = PasswordHash.defaultRounds

            func run() async throws {
                guard (100_000...10_000_000).contains(rounds) else { throw ValidationError("--rounds must be 100000–10000000") }
                let password = try Console.readLine(what: "password")
                guard password.count >= 12 else { throw ValidationError("the password must be at least 12 characters") }
                print(PasswordHash.make(password: password, rounds: rounds).encoded)
            }
        }

        struct HashKey: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "hash-key",
                abstract: "Read an API key on stdin and print its SHA-256 for an API key's \"key_sha256\".",
                discussion: "Make a key with e.g. `openssl rand -hex 32`; clients send it as Authorization: Bearer <key>.")

            func run() async throws {
                let key = try Console.readLine(what: "API key")
                guard key.count >= 32 else { throw ValidationError("the key must be at least 32 characters (openssl rand -hex 32)") }
                print(OperatorCredentials.keyDigestHex(key))
            }
        }
    }
}
