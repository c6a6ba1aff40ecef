internal import CShareSystem
import Glibc

/// Who is at the other end of a loopback TCP connection: the kernel's socket table (sock_diag) lists the peer's
/// socket of a connection made on this machine, with its owner. A server that serves only its own user (the page)
/// refuses another local user's connections at once, so they hold nothing.
package enum LoopbackPeer {
    /// The user owning the other end of the connected socket `fd`; nil when it is not a socket of this machine.
    package static func owner(of fd: Int32) -> uid_t? {
        let uid = cshare_tcp_peer_uid(fd)
        return uid >= 0 ? uid_t(uid) : nil
    }
}
