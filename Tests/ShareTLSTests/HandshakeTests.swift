import Foundation
import Glibc
import Testing

@testable import ShareTLS

/// Two TLS ends joined by a socket pair, each driven on its own thread.
@Suite struct HandshakeTests {
    func pair() -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        var tv = timeval(tv_sec: 5, tv_usec: 0)
        for fd in fds {
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        }
        return (fds[0], fds[1])
    }

    /// Runs the server handshake on a thread and the client here; returns both outcomes.
    func handshake(serverTrusts: Bool, clientTrusts: Bool) throws -> (
        server: Result<DeviceID?, TLSError>, client: Result<DeviceID?, TLSError>, payload: [UInt8]
    ) {
        let serverIdentity = try TLSIdentity.generate(commonName: "server")
        let clientIdentity = try TLSIdentity.generate(commonName: "client")
        let serverContext = try TLSContext(identity: serverIdentity, role: .server) {
            $0 == clientIdentity.deviceID && serverTrusts
        }
        let clientContext = try TLSContext(identity: clientIdentity, role: .client) {
            $0 == serverIdentity.deviceID && clientTrusts
        }
        let (a, b) = pair()
        let server = try TLSConnection(context: serverContext, fileDescriptor: a)
        let client = try TLSConnection(context: clientContext, fileDescriptor: b)
        let box = ResultBox()
        let thread = Thread {
            do {
                try server.handshake()
                var buffer = [UInt8](repeating: 0, count: 16)
                let n = try server.read(into: &buffer, count: 16)
                try server.write(Array(buffer[0..<n].reversed()))
                box.set(.success(server.peerID))
            } catch let error as TLSError {
                box.set(.failure(error))
                server.shutdown()
            } catch {}
        }
        thread.start()
        var clientResult: Result<DeviceID?, TLSError>
        var payload: [UInt8] = []
        do {
            try client.handshake()
            try client.write([1, 2, 3])
            var buffer = [UInt8](repeating: 0, count: 16)
            let n = try client.read(into: &buffer, count: 16)
            payload = Array(buffer[0..<n])
            clientResult = .success(client.peerID)
        } catch let error as TLSError {
            clientResult = .failure(error)
        }
        client.shutdown()
        return (box.wait(), clientResult, payload)
    }

    final class ResultBox: @unchecked Sendable {
        private let condition = NSCondition()
        private var value: Result<DeviceID?, TLSError>?
        func set(_ result: Result<DeviceID?, TLSError>) {
            condition.lock()
            value = result
            condition.broadcast()
            condition.unlock()
        }
        func wait() -> Result<DeviceID?, TLSError> {
            condition.lock()
            defer { condition.unlock() }
            let deadline = Date().addingTimeInterval(10)
            while value == nil && condition.wait(until: deadline) {}
            return value ?? .failure(TLSError(.timeout, "server thread did not finish"))
        }
    }

    @Test func mutuallyTrustedPeersTalk() throws {
        let outcome = try handshake(serverTrusts: true, clientTrusts: true)
        #expect(outcome.payload == [3, 2, 1])
        #expect((try? outcome.server.get()) != nil)
        #expect((try? outcome.client.get()) != nil)
    }

    @Test func serverRefusesAnUntrustedClientAndTheClientLearnsOnItsFirstRead() throws {
        let outcome = try handshake(serverTrusts: false, clientTrusts: true)
        guard case .failure(let server) = outcome.server, case .failure(let client) = outcome.client else {
            Issue.record("expected both sides to fail")
            return
        }
        #expect(server.kind == .peerNotTrusted)
        #expect(server.message.contains("share trust add"))
        #expect(client.kind == .rejectedByPeer)
    }

    @Test func clientRefusesAnUntrustedServer() throws {
        let outcome = try handshake(serverTrusts: true, clientTrusts: false)
        guard case .failure(let client) = outcome.client else {
            Issue.record("expected the client to fail")
            return
        }
        #expect(client.kind == .peerNotTrusted)
        if case .failure(let server) = outcome.server { #expect(server.kind == .rejectedByPeer) }
    }
}
