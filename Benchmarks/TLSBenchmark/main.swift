// TLS benchmark: handshake + ping latency, and raw authenticated throughput between two processes.
//   share-bench-tls latency --config DIR --peer HOST:PORT [--count 200]
//   share-bench-tls serve   --config DIR [--port 0]          (prints "port N", serves one stream, exits)
//   share-bench-tls stream  --config DIR --peer HOST:PORT --bytes N [--buffer 262144]
import Foundation
import ShareProtocol
import ShareTLS
import ShareTrust
import ShareReach
import ShareEngine

func option(_ name: String) -> String? {
    let args = CommandLine.arguments
    guard let index = args.firstIndex(of: name), index + 1 < args.count else { return nil }
    return args[index + 1]
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("share-bench-tls: \(message)\n".utf8))
    exit(1)
}

let mode = CommandLine.arguments.dropFirst().first ?? ""
guard let config = option("--config") else { fail("--config DIR is required") }
let device = try LocalDevice.loadOrCreate(paths: DevicePaths.resolve(configOverride: config))
let trust = try TrustStore.load(device.paths.trustFile)
let verifier: PeerVerifier = { id in trust.device(id) != nil }

switch mode {
case "latency":
    guard let peer = option("--peer").flatMap(PeerAddress.init(parsing:)) else { fail("--peer HOST:PORT") }
    let count = Int(option("--count") ?? "200") ?? 200
    var samples: [Double] = []
    for _ in 0..<count {
        let start = ContinuousClock.now
        let session = try SessionOpener.connect(
            from: device, to: peer, hello: Hello(name: device.name, role: .cli), verifier: verifier)
        try session.connection.send(.ping, Ping(nonce: 1))
        _ = try session.connection.receive(.pong, as: Ping.self)
        try session.connection.send(.bye, Bye())
        session.connection.close()
        samples.append((ContinuousClock.now - start).seconds * 1000)
    }
    samples.sort()
    let median = samples[samples.count / 2]
    let p99 = samples[min(samples.count - 1, Int(Double(samples.count) * 0.99))]
    print(String(format: "handshake+hello+ping over %d connections: median %.2f ms, p99 %.2f ms", count, median, p99))

case "serve":
    let done = DispatchSemaphore(value: 0)
    let bufferSize = Int(option("--buffer") ?? "262144") ?? 262144
    let listener = try Listener(
        device: device, host: "127.0.0.1", port: Int(option("--port") ?? "0") ?? 0, verifier: verifier,
        hello: { Hello(name: device.name, role: .agent) }
    ) { session in
        defer { done.signal() }
        do {
            let header = try session.connection.receive(.ping, as: Ping.self)
            let total = Int(header.nonce)
            try session.connection.send(.pong, header)
            var buffer = [UInt8](repeating: 0, count: bufferSize)
            var received = 0
            while received < total {
                let want = min(buffer.count, total - received)
                let n = try buffer.withUnsafeMutableBytes {
                    try session.connection.channel.stream.read(
                        into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<want]))
                }
                if n == 0 { break }
                received += n
            }
            try session.connection.send(.pong, Ping(nonce: UInt64(received)))
        } catch {
            FileHandle.standardError.write(Data("serve: \(error)\n".utf8))
        }
    }
    listener.start()
    FileHandle.standardOutput.write(Data("port \(listener.port)\n".utf8))
    done.wait()
    listener.stop(grace: 1)

case "stream":
    guard let peer = option("--peer").flatMap(PeerAddress.init(parsing:)) else { fail("--peer HOST:PORT") }
    let total = Int(option("--bytes") ?? "\(1 << 30)") ?? (1 << 30)
    let bufferSize = Int(option("--buffer") ?? "262144") ?? 262144
    let start = ContinuousClock.now
    let session = try SessionOpener.connect(
        from: device, to: peer, hello: Hello(name: device.name, role: .cli), verifier: verifier)
    try session.connection.send(.ping, Ping(nonce: UInt64(total)))
    _ = try session.connection.receive(.pong, as: Ping.self)
    let buffer = [UInt8](repeating: 0x5A, count: bufferSize)
    var sent = 0
    while sent < total {
        let n = min(buffer.count, total - sent)
        try buffer.withUnsafeBytes {
            try session.connection.channel.stream.write(UnsafeRawBufferPointer(rebasing: $0[0..<n]))
        }
        sent += n
    }
    let ack = try session.connection.receive(.pong, as: Ping.self)
    let seconds = (ContinuousClock.now - start).seconds
    guard Int(ack.nonce) == total else { fail("receiver counted \(ack.nonce) of \(total) bytes") }
    print(
        String(
            format: "share stream: %d MiB in %.2f s = %.0f MiB/s (%@)", total >> 20, seconds,
            Double(total) / seconds / 1_048_576, session.connection.tlsDescription))

default:
    fail("mode must be latency, serve or stream")
}
