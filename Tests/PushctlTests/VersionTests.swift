import Foundation
import PushCore
import TestSupport
import Testing

/// One version everywhere a user reads it: each executable's `--version`, the image's label and
/// the changelog's newest release.
@Suite("The release version")
struct VersionTests {
    static let executables = ["push-ingest", "push-render", "push-send", "push-feedback", "push-console", "apns-sandbox", "pushctl"]

    @Test func isSemanticVersion() {
        #expect(PushVersion.current.wholeMatch(of: /(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?/) != nil)
    }

    /// `--version` prints the version alone and exits 0, before any configuration is read.
    @Test(arguments: executables)
    func everyExecutablePrintsIt(_ name: String) async throws {
        let child = try ChildProcess([TestServers.productsDirectory.appendingPathComponent(name).path, "--version"])
        #expect(await child.waitForExit() == 0)
        #expect(child.output == PushVersion.current + "\n", "\(name) --version printed \(child.output.debugDescription)")
    }

    @Test func theImageLabelCarriesIt() throws {
        let dockerfile = try String(contentsOf: TestServers.packageRoot.appendingPathComponent("deploy/Dockerfile"), encoding: .utf8)
        let argument = try #require(dockerfile.firstMatch(of: /\nARG PUSH_VERSION=(\S+)\n/), "deploy/Dockerfile has no ARG PUSH_VERSION")
        #expect(String(argument.1) == PushVersion.current)
        #expect(dockerfile.contains(#"org.opencontainers.image.version="${PUSH_VERSION}""#))
    }

    @Test func theChangelogsNewestReleaseIsIt() throws {
        let changelog = try String(contentsOf: TestServers.packageRoot.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let releases = changelog.matches(of: /\n## ([0-9][^ \n]*) — ([0-9]{4}-[0-9]{2}-[0-9]{2})\n/).map { String($0.1) }
        #expect(releases.first == PushVersion.current, "CHANGELOG.md's newest release is \(releases.first ?? "missing")")
        #expect(changelog.contains("\n## Unreleased\n"))
    }
}
