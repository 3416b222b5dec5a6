/// A `delay_ms` timer: which stream of which connection to answer.
struct DelayedAnswer {
    let connectionID: UInt64
    let streamID: Int32
}
