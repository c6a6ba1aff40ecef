import ShareProtocol

let protocolVersionText = String(Limits.protocolVersion)
