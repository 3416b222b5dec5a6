/// The release every executable reports with `--version`. The image's `org.opencontainers.image.version`
/// label (deploy/Dockerfile's `PUSH_VERSION`) and CHANGELOG.md's newest release heading carry the same
/// value; a test holds the three together, so a release changes them in one commit.
public enum PushVersion {
    /// Semantic versioning: the message contract and the environment are the public API.
    public static let current = "1.0.0"
}
