import Foundation
import PushCore
import TestSupport
import Testing

/// docs/apps-file.md names every field the apps file takes, at every level: the decoder's own
/// refusal of an unknown field lists what it allows there, so a field added to the decoder and not
/// to the reference fails here.
@Suite("The apps file reference")
struct AppsFileDocumentationTests {
    static let reference: String = {
        let url = TestServers.packageRoot.appendingPathComponent("docs/apps-file.md")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }()

    /// An apps file with an unknown field at one level, as JSON: top, app, apns (token and
    /// certificate fields), ingest, rate_limits, delivery.
    static let probes: [(level: String, json: String)] = [
        ("top", #"{"apps": {}, "zz_unknown": 1}"#),
        ("app", String(decoding: AppsFileTests.file(app: #""zz_unknown": 1"#), as: UTF8.self)),
        ("apns", String(decoding: AppsFileTests.file(app: #""apns": {"key_id": "ABC123DEFG", "zz_unknown": 1}"#), as: UTF8.self)),
        ("ingest", String(decoding: AppsFileTests.file(app: #""ingest": {"zz_unknown": 1}"#), as: UTF8.self)),
        ("rate_limits", String(decoding: AppsFileTests.file(app: #""rate_limits": {"zz_unknown": 1}"#), as: UTF8.self)),
        ("delivery", String(decoding: AppsFileTests.file(app: #""delivery": {"zz_unknown": 1}"#), as: UTF8.self)),
    ]

    @Test(arguments: probes.map(\.level))
    func everyFieldTheDecoderAllowsIsDocumented(_ level: String) throws {
        let json = try #require(Self.probes.first { $0.level == level }?.json)
        let error = try #require(AppsFileTests.error(decoding: Data(json.utf8)))
        let text = "\(error)"
        let allowed = try #require(text.firstMatch(of: /allowed here: ([^)]*)\)/), "the refusal lists no fields: \(text)")
        let fields = allowed.1.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(!fields.isEmpty)
        let missing = fields.filter { !Self.reference.contains("`\($0)`") }
        #expect(missing.isEmpty, "docs/apps-file.md does not name \(missing) (\(level))")
    }
}
