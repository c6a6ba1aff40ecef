internal import CShareSystem
import FoundationEssentials
import Glibc

/// UDP: the discovery socket and its datagrams.
extension Syscalls {
    // MARK: UDP (discovery)

    /// A UDP socket for discovery on `port`, joined to the multicast `group`, sending with TTL 1 and looping back
    /// to this machine. Without `interface` it is bound to every IPv4 address (shared with other agents on this
    /// machine) and may broadcast. With `interface` (an IPv4 address; 127.0.0.1 keeps discovery on this machine) it
    /// is bound to the group address only, joins and sends on that interface only, and never broadcasts: nothing
    /// reaches it from another interface's unicast or broadcast.
    public static func discoverySocket(port: Int, group: String, interface: String? = nil) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure("socket") }
        var one: Int32 = 1
        let size = socklen_t(MemoryLayout<Int32>.size)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, size)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, size)
        if interface == nil { setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, size) }
        var ttl: UInt8 = 1
        setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_TTL, &ttl, socklen_t(1))
        var loop: UInt8 = 1
        setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_LOOP, &loop, socklen_t(1))
        var membership = ip_mreq()
        inet_pton(AF_INET, group, &membership.imr_multiaddr)
        membership.imr_interface.s_addr = INADDR_ANY
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = INADDR_ANY
        if let interface {
            var chosen = in_addr()
            guard inet_pton(AF_INET, interface, &chosen) == 1 else {
                close(fd)
                throw SocketError(message: "'\(interface)' is not an IPv4 address", code: EINVAL)
            }
            setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_IF, &chosen, socklen_t(MemoryLayout<in_addr>.size))
            membership.imr_interface = chosen
            address.sin_addr = membership.imr_multiaddr
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let error = failure("cannot bind UDP port \(port)")
            close(fd)
            throw error
        }
        // Without a multicast route (a bare namespace) joining fails; broadcast still works.
        _ = setsockopt(fd, Int32(IPPROTO_IP), IP_ADD_MEMBERSHIP, &membership, socklen_t(MemoryLayout<ip_mreq>.size))
        return fd
    }

    /// Sends one datagram to `host:port`; false when the network refuses (no route).
    @discardableResult
    public static func sendDatagram(_ fd: Int32, _ bytes: [UInt8], host: String, port: Int) -> Bool {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { return false }
        let sent = bytes.withUnsafeBytes { raw in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, raw.baseAddress, raw.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        return sent == bytes.count
    }

    /// The next datagram (at most `limit` bytes) and its sender's IPv4 address, or nil after `timeout` seconds.
    public static func receiveDatagram(_ fd: Int32, limit: Int = 2048, timeout: Double) throws -> (
        bytes: [UInt8], from: String
    )? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, Int32(timeout * 1000))
        if ready < 0 && errno != EINTR { throw failure("poll") }
        guard ready == 1 else { return nil }
        if poller.revents & Int16(POLLNVAL) != 0 { throw failure("poll", EBADF) }
        var buffer = [UInt8](repeating: 0, count: limit)
        var source = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let n = buffer.withUnsafeMutableBytes { raw in
            withUnsafeMutablePointer(to: &source) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    recvfrom(fd, raw.baseAddress, raw.count, 0, $0, &length)
                }
            }
        }
        if n < 0 && errno != EINTR && errno != EAGAIN { throw failure("recvfrom") }
        guard n > 0 else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        // A source address that cannot be written as text (never for IPv4 into a buffer of this size): dropped.
        guard inet_ntop(AF_INET, &source.sin_addr, &text, socklen_t(INET_ADDRSTRLEN)) != nil else { return nil }
        let address = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return (Array(buffer[0..<n]), address)
    }
}
