internal import CShareSystem
import Foundation
import Glibc

/// The POSIX socket calls share needs; the only file outside the C wrappers that touches raw pointers.
public enum Syscalls {
    /// Keeps a many-threaded process's memory flat: at most `arenas` malloc arenas.
    public static func limitMallocArenas(_ arenas: Int32 = 2) {
        _ = cshare_limit_malloc_arenas(arenas)
    }

    /// Writes to a closed socket must fail with EPIPE rather than kill the process.
    public static func ignoreSIGPIPE() {
        signal(SIGPIPE, SIG_IGN)
    }

    /// The bytes the interrupt handler writes, prepared before a signal can arrive (a handler must not allocate).
    nonisolated(unsafe) private static var interruptLine: [UInt8] = []
    nonisolated(unsafe) private static var interruptStatus: Int32 = 1

    /// On SIGINT, SIGTERM or SIGHUP: writes `line` to standard error and exits with `status` at once. The signals are
    /// unblocked first (a parent's mask is inherited, and the threads made later inherit this one's).
    public static func exitOnInterrupt(writing line: String, status: Int32) {
        interruptLine = Array(line.utf8)
        interruptStatus = status
        var set = sigset_t()
        sigemptyset(&set)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&set, signal) }
        let unblocked = pthread_sigmask(SIG_UNBLOCK, &set, nil)
        precondition(unblocked == 0, "pthread_sigmask failed: \(unblocked)")
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in
            Syscalls.interruptLine.withUnsafeBufferPointer { _ = write(STDERR_FILENO, $0.baseAddress, $0.count) }
            _exit(Syscalls.interruptStatus)
        }
        sigemptyset(&action.sa_mask)
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            let installed = sigaction(signal, &action, nil)
            precondition(installed == 0, "sigaction(\(signal)) failed: \(String(cString: strerror(errno)))")
        }
    }

    nonisolated(unsafe) private static var interruptWriter: Int32 = -1

    /// On SIGINT, SIGTERM or SIGHUP from now on, a byte (the signal's number) is written to the pipe whose read end
    /// this returns. The handlers are installed before this returns (a dispatch signal source installs its handler
    /// later, on another thread: a signal that came in between was lost).
    public static func interruptPipe() -> Int32 {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return -1 }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        _ = fcntl(fds[1], F_SETFL, O_NONBLOCK)
        interruptWriter = fds[1]
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { signal in
            var byte = UInt8(truncatingIfNeeded: signal)
            _ = write(Syscalls.interruptWriter, &byte, 1)
        }
        sigemptyset(&action.sa_mask)
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            let installed = sigaction(signal, &action, nil)
            precondition(installed == 0, "sigaction(\(signal)) failed: \(String(cString: strerror(errno)))")
        }
        var set = sigset_t()
        sigemptyset(&set)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&set, signal) }
        let unblocked = pthread_sigmask(SIG_UNBLOCK, &set, nil)
        precondition(unblocked == 0, "pthread_sigmask failed: \(unblocked)")
        return fds[0]
    }

    public struct SocketError: Error, CustomStringConvertible, Sendable {
        public let message: String
        public let code: Int32
        public var description: String { message }
        public var isTimeout: Bool { code == ETIMEDOUT || code == EAGAIN }
        public var isRefused: Bool { code == ECONNREFUSED }
    }

    public static func failure(_ what: String, _ code: Int32 = errno) -> SocketError {
        SocketError(message: "\(what): \(String(cString: strerror(code)))", code: code)
    }

    /// Resolves `host` (name, IPv4 or IPv6 literal) to socket addresses, IPv6 and IPv4 alike.
    public static func resolve(host: String, port: Int, passive: Bool = false) throws -> [(
        family: Int32, address: [UInt8]
    )] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        hints.ai_flags = passive ? AI_PASSIVE : 0
        var result: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host.isEmpty ? nil : host, String(port), &hints, &result)
        guard status == 0, let first = result else {
            throw SocketError(
                message: "cannot resolve \(host): \(String(cString: gai_strerror(status)))", code: EHOSTUNREACH)
        }
        defer { freeaddrinfo(first) }
        var out: [(Int32, [UInt8])] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor {
            let raw = UnsafeRawBufferPointer(start: info.pointee.ai_addr, count: Int(info.pointee.ai_addrlen))
            out.append((info.pointee.ai_family, Array(raw)))
            cursor = info.pointee.ai_next
        }
        return out
    }

    /// Connects to `host:port` within `timeout` seconds, trying each address; returns a blocking socket.
    public static func connect(host: String, port: Int, timeout: Double) throws -> Int32 {
        var lastError = SocketError(message: "no address for \(host)", code: EHOSTUNREACH)
        for (family, address) in try resolve(host: host, port: port) {
            let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else {
                lastError = failure("socket")
                continue
            }
            do {
                try connect(fd, address, timeout: timeout)
                setNoDelay(fd)
                return fd
            } catch let error as SocketError {
                close(fd)
                lastError = error
            }
        }
        throw lastError
    }

    private static func connect(_ fd: Int32, _ address: [UInt8], timeout: Double) throws {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        let status = address.withUnsafeBytes { raw in
            Glibc.connect(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
        if status != 0 {
            guard errno == EINPROGRESS else { throw failure("connect") }
            var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let ready = poll(&pfd, 1, Int32(timeout * 1000))
            if ready == 0 { throw SocketError(message: "connect timed out after \(timeout) s", code: ETIMEDOUT) }
            if ready < 0 { throw failure("poll") }
            var soError: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length)
            if soError != 0 { throw failure("connect", soError) }
        }
        _ = fcntl(fd, F_SETFL, flags)
    }

    /// Sets receive and send timeouts (seconds; 0 = none) on a blocking socket. Failing here would silently remove
    /// every timeout guarantee, so it is reported (it does not happen on a valid socket).
    public static func setTimeouts(_ fd: Int32, seconds: Double) {
        var tv = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        let size = socklen_t(MemoryLayout<timeval>.size)
        if setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, size) != 0
            || setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, size) != 0
        {
            Log.logger("share.socket").warning(
                "cannot set socket timeouts", metadata: ["error": "\(String(cString: strerror(errno)))"])
        }
    }

    public static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// A listening socket on `host:port` (port 0 picks one). `::` or an empty host listens on IPv6 and IPv4.
    public static func listen(host: String, port: Int, backlog: Int32 = 4096) throws -> (fd: Int32, port: Int) {
        let wildcard = host.isEmpty || host == "::" || host == "*"
        let candidates = try resolve(host: wildcard ? "::" : host, port: port, passive: true)
        var lastError = SocketError(message: "no address to listen on", code: EADDRNOTAVAIL)
        for (family, address) in candidates {
            let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else {
                lastError = failure("socket")
                continue
            }
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            if family == AF_INET6 {
                var only: Int32 = wildcard ? 0 : 1
                setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &only, socklen_t(MemoryLayout<Int32>.size))
            }
            let bound = address.withUnsafeBytes { raw in
                bind(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
            }
            guard bound == 0, Glibc.listen(fd, backlog) == 0 else {
                lastError = failure("cannot listen on \(host.isEmpty ? "*" : host):\(port)")
                close(fd)
                continue
            }
            return (fd, localPort(fd))
        }
        throw lastError
    }

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
        inet_ntop(AF_INET, &source.sin_addr, &text, socklen_t(INET_ADDRSTRLEN))
        return (Array(buffer[0..<n]), String(cString: text))
    }

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
    /// Sets the calling thread's CPU priority to the process's own lowered by `increment` nice steps (0: the
    /// process's own). Each long-lived thread sets it first: a thread started from a Dispatch or Swift concurrency
    /// thread would otherwise inherit that thread's QoS-derived nice value.
    /// Gives the memory the allocator holds free back to the system, after a burst that took much (an update of a
    /// large mirrored folder): the agent's resident size follows what it uses, not what it once used.
    public static func releaseFreeMemory() { cshare_release_free_memory() }

    public static func setThreadPriority(lowerBy increment: Int32) {
        if cshare_set_thread_nice(increment) != 0 {
            Log.logger("share.system").notice(
                "cannot lower a thread's priority", metadata: ["error": "\(String(cString: strerror(errno)))"])
        }
    }

    public static func peerUID(_ fd: Int32) -> uid_t? {
        let uid = cshare_peer_uid(fd)
        return uid < 0 ? nil : uid_t(uid)
    }

    /// Accepts one connection on a Unix socket, or nil when it was shut down.
    /// The next connection to a Unix socket within `timeout` seconds (nil if none came); its peer is "local".
    public static func unixAccept(_ listener: Int32, timeout: Double) throws -> (fd: Int32, peer: String)? {
        var pfd = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        let ready = poll(&pfd, 1, Int32(timeout * 1000))
        if ready == 0 { return nil }
        if ready < 0 {
            if errno == EINTR { return nil }
            throw failure("poll")
        }
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

    /// This machine's IPv4 and global IPv6 addresses (not loopback, not link-local), or 127.0.0.1.
    public static func interfaceAddresses() -> [String] {
        var first: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&first) == 0 else { return ["127.0.0.1"] }
        defer { freeifaddrs(first) }
        var found: [String] = []
        var cursor = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard let address = entry.pointee.ifa_addr, entry.pointee.ifa_flags & UInt32(IFF_LOOPBACK) == 0,
                entry.pointee.ifa_flags & UInt32(IFF_UP) != 0
            else { continue }
            var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            let family = Int32(address.pointee.sa_family)
            guard family == AF_INET || family == AF_INET6 else { continue }
            let length = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
            guard getnameinfo(address, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 else {
                continue
            }
            let text = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if family == AF_INET6, text.lowercased().hasPrefix("fe80") || text.utf8.contains(UInt8(ascii: "%")) {
                continue
            }
            if !found.contains(text) { found.append(text) }
        }
        return found.isEmpty ? ["127.0.0.1"] : found
    }

    public static func localPort(_ fd: Int32) -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard ok == 0 else { return 0 }
        return portOf(storage)
    }

    private static func portOf(_ storage: sockaddr_storage) -> Int {
        var copy = storage
        return withUnsafePointer(to: &copy) { pointer in
            if Int32(storage.ss_family) == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    Int(UInt16(bigEndian: $0.pointee.sin6_port))
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                Int(UInt16(bigEndian: $0.pointee.sin_port))
            }
        }
    }

    /// Waits up to `timeout` seconds for a connection; nil on timeout (so the caller can check for shutdown).
    public static func accept(_ listener: Int32, timeout: Double) throws -> (fd: Int32, peer: String)? {
        var pfd = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        let ready = poll(&pfd, 1, Int32(timeout * 1000))
        if ready == 0 { return nil }
        if ready < 0 {
            if errno == EINTR { return nil }
            throw failure("poll")
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let fd = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.accept(listener, $0, &length) }
        }
        if fd < 0 {
            if errno == EINTR || errno == EAGAIN || errno == ECONNABORTED { return nil }
            // Out of descriptors or memory: thrown, for the acceptor to back off (the listening socket stays
            // readable, so retrying at once would spin).
            throw failure("accept")
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        setNoDelay(fd)
        return (fd, describe(storage))
    }

    /// `1.2.3.4` of `1.2.3.4:5678`, `::1` of `[::1]:5678`.
    public static func host(of peer: String) -> String {
        if peer.hasPrefix("["), let close = peer.firstIndex(of: "]") {
            return String(peer[peer.index(after: peer.startIndex)..<close])
        }
        if let colon = peer.lastIndex(of: ":"), peer.filter({ $0 == ":" }).count == 1 { return String(peer[..<colon]) }
        return peer
    }

    /// Whom a connection from `peer` (`host:port`, as `describe` writes it) counts against: an IPv4 address, or an
    /// IPv6 /64 network (one host usually owns a whole /64).
    public static func quotaKey(_ peer: String) -> String {
        var host = peer
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            host = String(host[host.index(after: host.startIndex)..<close])
        } else if let colon = host.lastIndex(of: ":") {
            host = String(host[..<colon])
        }
        var v6 = in6_addr()
        guard host.contains(":" as Character), inet_pton(AF_INET6, host, &v6) == 1 else { return host }
        let bytes = withUnsafeBytes(of: &v6) { Array($0.prefix(8)) }
        return bytes.map { String($0, radix: 16) }.joined(separator: ".") + "/64"
    }

    /// `host:port` (IPv6 in brackets) of a socket address.
    public static func describe(_ storage: sockaddr_storage) -> String {
        var copy = storage
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafePointer(to: &copy) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST)
            }
        }
        let text =
            status == 0 ? String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
        let port = portOf(storage)
        let plain = text.hasPrefix("::ffff:") ? String(text.dropFirst(7)) : text
        return plain.contains(":" as Character) ? "[\(plain)]:\(port)" : "\(plain):\(port)"
    }

    public static func close(_ fd: Int32) { _ = Glibc.close(fd) }

    /// Ends our side of the stream and discards what the peer already sent (bounded in bytes and time), so the
    /// final close sends FIN rather than a reset that would destroy our last message (a TLS alert) in flight.
    public static func lingeringDrain(_ fd: Int32, maxBytes: Int = 1 << 20, timeout: Double = 1) {
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        var total = 0
        let deadline = Date().addingTimeInterval(timeout)
        while total < maxBytes {
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { break }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, Int32(remaining * 1000)) > 0 else { break }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n <= 0 { break }
            total += n
        }
    }

    /// Stops a blocking accept/read on `fd` from another thread.
    public static func shutdownSocket(_ fd: Int32) { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
}

extension Syscalls {
    /// Reads up to `count` bytes at `offset` into the start of `buffer`; returns the number read (0 at end of file).
    public static func pread(_ fd: Int32, into buffer: inout [UInt8], count: Int, offset: Int64) throws -> Int {
        precondition(count <= buffer.count)
        var done = 0
        while done < count {
            let n = buffer.withUnsafeMutableBytes { raw in
                Glibc.pread(fd, raw.baseAddress! + done, count - done, off_t(offset) + off_t(done))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw failure("read")
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Writes all of `bytes` at `offset`.
    public static func pwriteAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>, offset: Int64) throws {
        try bytes.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let n = Glibc.pwrite(fd, raw.baseAddress! + done, raw.count - done, off_t(offset) + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw failure("write")
                }
                done += n
            }
        }
    }

    /// Whether `fd` has bytes (or an end of stream) to read right now.
    /// Waits until one of `fds` can be read (or has closed), at most `timeout` seconds; false on timeout or error.
    public static func waitReadable(_ fds: [Int32], timeout: Double) -> Bool {
        var polls = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        while true {
            let n = poll(&polls, nfds_t(polls.count), Int32(timeout * 1000))
            if n < 0 && errno == EINTR { continue }
            return n > 0
        }
    }

    /// Reads off and drops what the other side still sends on `fd`, `limit` bytes and `seconds` at most however
    /// slowly it arrives, so that closing after a refusal does not reset the connection under the answer it has yet
    /// to read. Raw bytes: under TLS they are records nobody will decrypt.
    public static func drain(_ fd: Int32, limit: Int, seconds: Double) {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        var left = limit
        var scratch = [UInt8](repeating: 0, count: 16 << 10)
        while left > 0 {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { return }
            let ms = Double(remaining.components.seconds) + Double(remaining.components.attoseconds) / 1e18
            guard waitReadable([fd], timeout: ms) else { return }
            let n = recv(fd, &scratch, min(scratch.count, left), Int32(MSG_DONTWAIT))
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard n > 0 else { return }
            left -= n
        }
    }

    /// Waits up to `timeout` seconds for the other end of `fd` to hang up (shut down its side or close), whatever
    /// bytes it sent before; true when it did.
    public static func waitHangUp(_ fd: Int32, timeout: Double) -> Bool {
        // POLLRDHUP (Linux): the peer closed its writing side, even with unread data still queued.
        let readHangUp: Int16 = 0x2000
        var pfd = pollfd(fd: fd, events: readHangUp, revents: 0)
        while true {
            let n = poll(&pfd, 1, Int32(timeout * 1000))
            if n < 0 && errno == EINTR { continue }
            return n > 0 && pfd.revents & (readHangUp | Int16(POLLHUP) | Int16(POLLERR)) != 0
        }
    }

    public static func isReadable(_ fd: Int32) -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&pfd, 1, 0) > 0
    }

    /// Bytes available to an unprivileged user on the file system holding `path`.
    public static func freeSpace(_ path: String) -> UInt64? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return UInt64(info.f_bavail) * UInt64(info.f_frsize)
    }

    /// Whether standard output is a terminal.
    public static var stdinIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }
    public static var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }
    public static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    /// The width of the terminal on standard output (nil when it is not one); `COLUMNS` wins when set.
    public static var stdoutColumns: Int? { columns(of: STDOUT_FILENO) }

    /// The width of the terminal on standard error (nil when it is not one); `COLUMNS` wins when set.
    public static var stderrColumns: Int? { columns(of: STDERR_FILENO) }

    static func columns(of fd: Int32) -> Int? {
        if let columns = ProcessInfo.processInfo.environment["COLUMNS"].flatMap(Int.init), columns > 0 {
            return columns
        }
        var size = winsize()
        guard ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }
}
