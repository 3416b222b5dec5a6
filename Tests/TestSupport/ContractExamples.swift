import Foundation
import PushCore

/// The message examples producers read in docs/examples/<kind>/: `valid/` ones every decoder must
/// accept, `invalid/` ones named `<field>--<what>.json` that it must refuse naming that field.
/// scripts/checks/contract.sh holds the same files to docs/schemas/, so schema and service agree.
public enum ContractExamples {
    public struct Example: Sendable {
        public let name: String
        public let body: [UInt8]
        /// The field an invalid example's refusal must name (the part of its name before `--`).
        public let field: String?
    }

    /// The examples of `kind` (`push-requests`, `registrations`, `feedback-events`), valid or invalid,
    /// in name order.
    public static func examples(_ kind: String, valid: Bool) throws -> [Example] {
        let directory = TestServers.packageRoot.appendingPathComponent("docs/examples/\(kind)/\(valid ? "valid" : "invalid")")
        return try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "json" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
            .map { file in
                let name = file.deletingPathExtension().lastPathComponent
                let field = name.range(of: "--").map { String(name[..<$0.lowerBound]) }
                return Example(name: file.lastPathComponent, body: try Array(Data(contentsOf: file)), field: field)
            }
    }

    /// What `decode` gets wrong about the examples of `kind`: a valid one it refuses, an invalid one
    /// it accepts or refuses naming another field (an empty list when it agrees with all), and how
    /// many examples there were of each kind.
    public static func disagreements<Source>(
        _ kind: String, decode: ([UInt8]) throws(InputError<Source>) -> Void
    ) throws -> (valid: Int, invalid: Int, problems: [String]) {
        let valid = try examples(kind, valid: true)
        let invalid = try examples(kind, valid: false)
        var problems: [String] = []
        for example in valid {
            do {
                try decode(example.body)
            } catch {
                problems.append("\(example.name) refused: \(error.message)")
            }
        }
        for example in invalid {
            do {
                try decode(example.body)
                problems.append("\(example.name) was accepted")
            } catch  where error.field != example.field {
                problems.append("\(example.name) refused naming another field: \(error.message)")
            } catch {}
        }
        return (valid.count, invalid.count, problems)
    }
}
