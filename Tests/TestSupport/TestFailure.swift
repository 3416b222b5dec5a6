/// A test helper's failure, thrown so the test stops with a sentence saying what did not happen
/// (`TestSupport` is linked by a benchmark too, so it reports through errors, not Swift Testing).
public struct TestFailure: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
