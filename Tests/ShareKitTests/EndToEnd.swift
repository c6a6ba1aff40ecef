import Testing

/// Every end-to-end suite runs inside this one, one test at a time: they start real processes that compete for the
/// machine's two cores, and timing bounds (handshake timeouts, pacing) must not depend on what else runs.
@Suite(.serialized) struct EndToEnd {}
