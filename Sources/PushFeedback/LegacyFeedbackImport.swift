public import PushCore

/// `pushctl feedback import`: a legacy feedback stream (``PushCore/LegacyFeedbackStream``) applied under
/// the invalid-token rule, all or nothing as far as parsing goes — the whole stream is parsed before
/// anything is removed, so a truncated or corrupt dump changes nothing.
public enum LegacyFeedbackImport {
    /// What an import did.
    public struct Summary: Sendable, Equatable {
        /// Records in the stream.
        public var records: Int
        /// Distinct tokens (a token listed twice counts once, with its latest time).
        public var tokens: Int
        public var tally: TokenRemover.Tally
    }

    /// The stream's reports for `app`; throws before anything is applied.
    ///
    /// - Throws: ``PushCore/FeedbackError`` with the byte offset of the bad record, or naming `app`.
    public static func reports(from bytes: [UInt8], app: String) throws(FeedbackError) -> (records: Int, reports: [InvalidTokenReport]) {
        guard !app.isEmpty else { throw FeedbackError(.invalidField, field: "app", "must be the app's bundle id, not empty") }
        let records = try LegacyFeedbackStream.parse(bytes)
        return (records.count, LegacyFeedbackStream.reports(records, app: app))
    }

    /// Applies `reports` in batches of `batchSize` (one pipeline and one set of confirmed events each).
    ///
    /// A token this registry removed recently (its removal note still exists, see
    /// ``FeedbackConfiguration/removalNoteLifetime``) is announced again: an earlier run that failed
    /// may have removed it without its event being confirmed. Listeners tolerate duplicates; a lost
    /// event would not be recovered.
    ///
    /// - Parameter progress: called after each batch with the reports done so far.
    /// - Throws: ``ImportError`` when Redis or the broker failed, saying how far it got; running the
    ///   import again is safe.
    public static func apply(
        _ reports: [InvalidTokenReport],
        records: Int,
        remover: TokenRemover,
        batchSize: Int = 500,
        now: @Sendable () -> Int64 = FeedbackClock.milliseconds,
        progress: (Int) -> Void = { _ in }
    ) async throws -> Summary {
        var tally = TokenRemover.Tally()
        var done = 0
        let size = Swift.max(1, batchSize)
        while done < reports.count {
            let batch = Array(reports[done..<Swift.min(done + size, reports.count)])
            do {
                tally += try await remover.apply(batch, now: now(), reannounce: true)
            } catch {
                throw ImportError(applied: done, total: reports.count, underlying: error)
            }
            done += batch.count
            progress(done)
        }
        return Summary(records: records, tokens: reports.count, tally: tally)
    }

    /// An import stopped by Redis or the broker after `applied` of `total` tokens.
    public struct ImportError: Error, CustomStringConvertible {
        public let applied: Int
        public let total: Int
        public let underlying: any Error

        public var description: String {
            "stopped after \(applied) of \(total) tokens: \(underlying). Running the import again is safe."
        }
    }
}
