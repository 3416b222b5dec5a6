import Foundation

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
}
