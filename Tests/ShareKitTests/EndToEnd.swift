import Testing

/// The end-to-end suites that move bytes (transfers, resumes, faults, folders, archives) run inside this one, one
/// test at a time: they start real processes that compete for the machine's two cores.
@Suite(.serialized) struct EndToEnd {}

/// The end-to-end suites of agents, watches and the policy run inside this one, one test at a time, beside
/// `EndToEnd`: they mostly wait on processes (handshakes, keepalives, attaches) rather than move bytes, so the two
/// groups overlap well. No timing bound of theirs depends on the other group: memory and CPU are measured per
/// process, and an agent's answers are timed on its own socket.
@Suite(.serialized) struct EndToEndAgents {}
