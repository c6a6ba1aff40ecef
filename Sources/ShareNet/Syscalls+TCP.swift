internal import CShareSystem
import FoundationEssentials
import Glibc

/// TCP sockets: resolving, connecting, listening, accepting, addresses.
extension Syscalls {
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

    /// Whether a connection waits on `listener` within `timeout` seconds (false on timeout or a signal, so the caller
    /// can check for shutdown). The TCP and Unix accepts both wait through it.
    static func connectionWaits(_ listener: Int32, timeout: Double) throws -> Bool {
        var pfd = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        let ready = poll(&pfd, 1, Int32(timeout * 1000))
        if ready < 0 {
            if errno == EINTR { return false }
            throw failure("poll")
        }
        return ready > 0
    }

    /// Waits up to `timeout` seconds for a connection; nil on timeout (so the caller can check for shutdown).
    public static func accept(_ listener: Int32, timeout: Double) throws -> (fd: Int32, peer: String)? {
        guard try connectionWaits(listener, timeout: timeout) else { return nil }
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
