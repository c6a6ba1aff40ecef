import ShareHTTP
import Foundation
import Glibc
import ShareKit
import ShareTrust
import ShareLocalSend
import ShareNet
import ShareProtocol
import ShareTLS
import ShareWeb
import Synchronization
import Testing
import ShareReach
import ShareEngine
import ShareAgent

/// Every server of share takes its connections through the one acceptor, and every HTTP server reads its heads
/// through the one HTTP layer: what a full descriptor table and a trickled head do is checked here once, for each of
/// them.
@Suite struct AcceptorTests {
    /// The servers, each made with `override` as its accept.
    enum Server: CaseIterable, CustomStringConvertible {
        case listener, localSend, web
        var description: String {
            switch self {
            case .listener: "the trusted-device listener"
            case .localSend: "LocalSend's server"
            case .web: "the page"
            }
        }
    }

    /// A running server, with a way to see that it accepted a connection and a way to stop it.
    struct Running {
        let port: Int
        /// Whether a connection made to it was taken (counted or answered).
        let took: @Sendable (Int32) -> Bool
        let stop: () -> Void
    }

    static func start(
        _ server: Server, override: AcceptOverride?, headTimeout: Double = 10,
        failed: @escaping @Sendable (Error) -> Void = { _ in }
    ) throws -> Running {
        let paths = scratchPaths("acceptor")
        let device = try LocalDevice.loadOrCreate(paths: paths, defaultName: "desk")
        switch server {
        case .listener:
            let listener = try Listener(
                device: device, host: "127.0.0.1", port: 0, verifier: { _ in true },
                hello: { Hello(name: "desk", role: .agent) }, accept: override
            ) { _ in }
            listener.start(failed: failed)
            return Running(
                port: listener.port, took: { _ in waitUntil(timeout: 10) { listener.handshakingConnections == 1 } },
                stop: { listener.stop(grace: 1) })
        case .localSend:
            var limits = LocalSendServer.Limits()
            limits.headTimeout = headTimeout
            let server = try LocalSendServer(
                identity: try p256Identity(), host: "127.0.0.1", port: 0, limits: limits, accept: override
            ) { _, http, _ in
                try http.writeResponse(200, json: Array("{}".utf8))
                return true
            }
            server.start(failed: failed)
            return Running(
                port: server.port, took: { _ in waitUntil(timeout: 10) { server.openConnections == 1 } },
                stop: { server.stop() })
        case .web:
            var limits = WebServer.Limits()
            limits.headTimeout = headTimeout
            let web = try WebServer(device: device, port: 0, limits: limits, discovery: nil, accept: override)
            web.start(failed: failed)
            return Running(
                port: web.port,
                took: { fd in
                    let request = "GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1:\(web.port)\r\n\r\n"
                    guard (try? Syscalls.writeAll(fd, Array(request.utf8))) != nil,
                        let status = try? Syscalls.readLine(fd, limit: 200)
                    else { return false }
                    return String(decoding: status, as: UTF8.self).hasPrefix("HTTP/1.1 200")
                }, stop: { web.stop() })
        }
    }

    /// A run of EMFILE (the listening socket stays readable all the while) is waited out with a back-off, not spun
    /// on: a second of failures costs a handful of calls (the
    /// back-off's 50 ms doubling: 5; a fixed 100 ms pause would be 10, a spin thousands), and the next connection is served.
    @Test(arguments: Server.allCases) func aFullDescriptorTableIsWaitedOut(_ server: Server) throws {
        let calls = Mutex((failing: 0, started: ContinuousClock.now))
        let override = AcceptOverride(failingFor: 60) { listener, timeout in
            let failing = calls.withLock { calls -> Bool in
                guard ContinuousClock.now - calls.started < .seconds(1) else { return false }
                calls.failing += 1
                return true
            }
            if failing { throw Syscalls.failure("accept", EMFILE) }
            return try Syscalls.accept(listener, timeout: timeout)
        }
        let running = try Self.start(server, override: override)
        defer { running.stop() }
        let fd = try Syscalls.connect(host: "127.0.0.1", port: running.port, timeout: 5)
        defer { Syscalls.close(fd) }
        Syscalls.setTimeouts(fd, seconds: 10)
        #expect(running.took(fd), "\(server) did not take a connection after the failures ended")
        let failing = calls.withLock { $0.failing }
        #expect(failing >= 1 && failing <= 8, "\(server) called accept \(failing) times in a second of EMFILE")
    }

    /// Accepting that never recovers is reported (the agent's part fails in the open) instead of spinning forever.
    @Test(arguments: Server.allCases) func acceptingThatNeverRecoversIsReported(_ server: Server) throws {
        let reported = Mutex<String?>(nil)
        let override = AcceptOverride(failingFor: 0.5) { _, _ in throw Syscalls.failure("accept", EMFILE) }
        let running = try Self.start(server, override: override) { error in reported.withLock { $0 = "\(error)" } }
        defer { running.stop() }
        #expect(waitUntil(timeout: 10) { reported.withLock { $0 } != nil }, "\(server) never reported")
        let said = reported.withLock { $0 } ?? ""
        #expect(said.contains("cannot accept connections") && said.contains("Too many open files"), "\(said)")
    }

    /// A request head trickled a byte at a time (each read well within the idle timeout) is cut at the head's
    /// deadline with a 408, by each HTTP server.
    @Test(arguments: [Server.localSend, .web]) func aTrickledHeadIsCutAtItsDeadline(_ server: Server) throws {
        let running = try Self.start(server, override: nil, headTimeout: 1)
        defer { running.stop() }
        let fd = try Syscalls.connect(host: "127.0.0.1", port: running.port, timeout: 5)
        Syscalls.setTimeouts(fd, seconds: 10)
        var tls: TLSConnection?
        if server == .localSend {
            let context = try TLSContext(
                identity: try p256Identity(), role: .client, verifier: { _ in true }, minimumTLS12: true)
            tls = try TLSConnection(context: context, fileDescriptor: fd)
            try tls!.handshake()
        }
        defer { if tls == nil { Syscalls.close(fd) } }
        let http = tls.map { HTTPConnection($0) } ?? HTTPConnection(plain: PlainSocket(fd: fd))
        let started = ContinuousClock.now
        let head = Array("GET /api/localsend/v2/info HTTP/1.1\r\nHost: 127.0.0.1:\(running.port)\r\nX-Drip: ".utf8)
        var answer: HTTPHead?
        for byte in head + Array(repeating: UInt8(ascii: "a"), count: 50) {
            guard (try? http.write([byte])) != nil else { break }
            if ContinuousClock.now - started > .seconds(1.5) { break }
            Thread.sleep(forTimeInterval: 0.02)
        }
        answer = try? http.readHead(request: false)
        let took = ContinuousClock.now - started
        #expect(answer?.status == 408, "\(server) answered \(answer.map { "\($0.status)" } ?? "nothing")")
        #expect(took < .seconds(5), "\(server) took \(took) to cut a trickled head")
    }

    /// The servers that take one connection at a time (a pairing's port, a wormhole transit's direct port) use the
    /// same back-off through `next`, and are told once accepting has failed for good.
    @Test func oneAtATimeServersBackOffAndAreToldWhenAcceptingFailsForGood() throws {
        let calls = Mutex((failing: 0, started: ContinuousClock.now))
        let acceptor = try Acceptor(
            host: "127.0.0.1", port: 0, name: "pairing", limits: .serial,
            override: AcceptOverride(failingFor: 60) { listener, timeout in
                let failing = calls.withLock { calls -> Bool in
                    guard ContinuousClock.now - calls.started < .seconds(1) else { return false }
                    calls.failing += 1
                    return true
                }
                if failing { throw Syscalls.failure("accept", EMFILE) }
                return try Syscalls.accept(listener, timeout: timeout)
            })
        defer { acceptor.close() }
        let client = try Syscalls.connect(host: "127.0.0.1", port: acceptor.port, timeout: 5)
        defer { Syscalls.close(client) }
        var accepted: AcceptedConnection?
        let deadline = ContinuousClock.now + .seconds(10)
        while accepted == nil, ContinuousClock.now < deadline { accepted = try acceptor.next(timeout: 0.2) }
        #expect(accepted != nil, "the connection was not taken after the failures ended")
        if let accepted { Syscalls.close(accepted.fd) }
        #expect(calls.withLock { $0.failing } <= 8)

        let broken = try Acceptor(
            host: "127.0.0.1", port: 0, name: "transit", limits: .serial,
            override: AcceptOverride(failingFor: 0.3) { _, _ in throw Syscalls.failure("accept", EMFILE) })
        defer { broken.close() }
        var failure: Error?
        let until = ContinuousClock.now + .seconds(10)
        while failure == nil, ContinuousClock.now < until {
            do { _ = try broken.next(timeout: 0.1) } catch { failure = error }
        }
        #expect(failure is AcceptorFailure, "\(String(describing: failure))")
    }

    /// Stopping the listener lets a session in flight finish within the grace (a receive stopped as soon as its
    /// item arrived must still acknowledge it): sessions are interrupted only once the grace is over.
    @Test func aSessionInFlightFinishesWithinTheGrace() throws {
        let desk = try LocalDevice.loadOrCreate(paths: scratchPaths("grace-desk"), defaultName: "desk")
        let laptop = try LocalDevice.loadOrCreate(paths: scratchPaths("grace-laptop"), defaultName: "laptop")
        let answered = Mutex<Bool?>(nil)
        let listener = try Listener(
            device: desk, host: "127.0.0.1", port: 0, verifier: { _ in true },
            hello: { Hello(name: "desk", role: .agent) }
        ) { session in
            // Still working when the stop comes; answers afterwards.
            Thread.sleep(forTimeInterval: 0.5)
            let ok: Bool
            do {
                _ = try Exchange.answerPings(session.connection.channel)
                ok = true
            } catch {
                print("answer failed: \(error)")
                ok = false
            }
            answered.withLock { $0 = ok }
        }
        listener.start()
        let session = try SessionOpener.connect(
            from: laptop, to: PeerAddress(host: "127.0.0.1", port: listener.port),
            hello: Hello(name: "laptop", role: .cli), verifier: { _ in true })
        defer { session.connection.close() }
        #expect(waitUntil(timeout: 10) { listener.activeConnections == 1 })
        let stopped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            listener.stop(grace: 5)
            stopped.signal()
        }
        let trip = try? Exchange.ping(session.connection.channel)
        try? Exchange.bye(session.connection.channel)
        #expect(trip != nil, "the session was cut by the stop before its grace")
        #expect(stopped.wait(timeout: .now() + 10) == .success)
        #expect(answered.withLock { $0 } == true)
    }
}
