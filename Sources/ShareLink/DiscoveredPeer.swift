import Foundation

/// A device heard on the local network.
public struct DiscoveredPeer: Codable, Sendable, Equatable {
    public var id: String
    public var name: String
    public var address: PeerAddress
    public var lastSeen: Date
    public var version: Int

    public init(id: String, name: String, address: PeerAddress, lastSeen: Date, version: Int) {
        self.id = id
        self.name = name
        self.address = address
        self.lastSeen = lastSeen
        self.version = version
    }
}
