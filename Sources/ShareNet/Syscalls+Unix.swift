internal import CShareSystem
import FoundationEssentials
import Glibc

/// Unix sockets: the agent's control socket, its peer, and line-framed reads and writes on a descriptor.
extension Syscalls {
    // MARK: Unix sockets (the agent's control socket)

    private static func unixAddress(_ path: String) throws -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else {
            throw SocketError(
                message: "the socket path \(path) is longer than \(capacity - 1) bytes; use a shorter --config",
                code: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    /// Listens on a Unix socket at `path` (a stale socket file is replaced), readable and writable by the owner only.
    public static func unixListen(_ path: String) throws -> Int32 {
        var address = try unixAddress(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure("socket") }
        unlink(path)
        let previous = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        umask(previous)
        guard bound == 0, chmod(path, 0o600) == 0, Glibc.listen(fd, 64) == 0 else {
            let error = failure("cannot listen on \(path)")
            close(fd)
            throw error
        }
        return fd
    }

    public static func unixConnect(_ path: String) throws -> Int32 {
        var address = try unixAddress(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure("socket") }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let error = failure("cannot connect to \(path)")
            close(fd)
            throw error
        }
        return fd
    }

    /// The user ID of the process at the other end of a Unix socket.
    public static func peerUID(_ fd: Int32) -> uid_t? {
        let uid = cshare_peer_uid(fd)
        return uid < 0 ? nil : uid_t(uid)
    }

    /// The next connection to a Unix socket within `timeout` seconds (nil if none came); its peer is "local".
    public static func unixAccept(_ listener: Int32, timeout: Double) throws -> (fd: Int32, peer: String)? {
        guard try connectionWaits(listener, timeout: timeout) else { return nil }
        let fd = Glibc.accept(listener, nil, nil)
        if fd < 0 {
            if errno == EINTR || errno == EAGAIN || errno == ECONNABORTED { return nil }
            throw failure("accept")
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return (fd, "local")
    }

    /// Reads up to a newline (not included), at most `limit` bytes; nil at end of input.
    public static func readLine(_ fd: Int32, limit: Int = 1 << 20) throws -> [UInt8]? {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while line.count <= limit {
            let n = Glibc.read(fd, &byte, 1)
            if n < 0, errno == EINTR { continue }
            if n < 0 { throw failure("read") }
            if n == 0 { return line.isEmpty ? nil : line }
            if byte == 0x0A { return line }
            line.append(byte)
        }
        throw SocketError(message: "a control message is longer than \(limit) bytes", code: EMSGSIZE)
    }

    /// Reads exactly `count` bytes; fails when the stream ends first (or the socket's receive timeout passes).
    public static func readExactly(_ fd: Int32, _ count: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let n = out.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, count - filled) }
            if n < 0, errno == EINTR { continue }
            if n < 0 { throw failure("read") }
            if n == 0 { throw SocketError(message: "the connection closed", code: ECONNRESET) }
            filled += n
        }
        return out
    }

    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try writeAll(fd, $0) }
    }

    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw failure("write") }
            offset += n
        }
    }
}
