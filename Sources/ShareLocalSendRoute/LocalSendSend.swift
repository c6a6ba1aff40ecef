import CoreTransferable
import FoundationEssentials
import ShareEngine
import ShareNet
import ShareText
import ShareArchive
import ShareDisk
import ShareLocalSend
import ShareTLS
import ShareTrust
import ShareProtocol
import UniformTypeIdentifiers

/// `share send … --to NAME` where NAME is a LocalSend device this device's agent has seen: each item's
/// representation is chosen by the engine as for any receiver whose accept list is "any file, or text" (a file its
/// own form, a rich item its first file form, a folder its files, a text a LocalSend message), then sent by
/// LocalSend's upload: one `prepare-upload` (the device's user accepts or declines there), one `upload` per file.
package enum LocalSendSend {
    /// What a LocalSend device can take: anything, as a file; a representation that is text and produced as bytes
    /// goes as a LocalSend message.
    package static let accept = AcceptList([AcceptedType(.item)])

    package struct Report: Sendable {
        package var files = 0
        package var messages = 0
        package var bytes: UInt64 = 0
        package var seconds = 0.0
        package var refused: [(label: String, reason: String)] = []
        /// The items delivered, by label.
        package var delivered: [String] = []
    }

    /// One file to upload: where its bytes come from.
    struct Outgoing {
        var file: LocalSendFile
        var source: URL
        var temporary: Bool
    }

    package static func run(
        _ items: [ShareItem], to target: LocalSendSeen, pin: String?, name: String, paths: DevicePaths,
        progress: ProgressReporter, answerTimeout: Double = 130
    ) throws -> Report {
        try run(
            outgoing: items.map { try $0.outgoing(for: AccessPolicy.visibility(for: .localSend)) }, to: target,
            pin: pin, name: name, paths: paths,
            progress: progress, answerTimeout: answerTimeout)
    }

    /// `cancellation`: checked between blocks of each upload; a cancelled send tells the device (LocalSend's
    /// `cancel`), which drops what it holds of the upload.
    package static func run(
        outgoing items: [OutgoingItem], to target: LocalSendSeen, pin: String?, name: String, paths: DevicePaths,
        progress: ProgressReporter, answerTimeout: Double = 130, cancellation: SendCancellation? = nil
    ) throws -> Report {
        let started = ContinuousClock.now
        let identity = try LocalSendIdentity.load(paths)
        let client = try LocalSendClient(identity: identity)
        let own = ownInfo(name: name, fingerprint: try LocalSendIdentity.fingerprint(identity), paths: paths)
        var report = Report()
        var chosen: [String] = []
        var files: [Outgoing] = []
        var messages: [String] = []
        defer { for file in files where file.temporary { PathOperations.removeIfPresent(file.source.path) } }
        let negotiator = Negotiator(accept: accept)
        for outgoing in items {
            switch negotiator.choose(
                from: outgoing.representations.map(\.offered), senderDeclarations: outgoing.declarations)
            {
            case .failure(let failure):
                report.refused.append((outgoing.label, failure.description))
            case .success(let choice):
                chosen.append(outgoing.label)
                let representation = outgoing.representations[choice.representationIndex]
                let payload = try blockingAwait { try await representation.produce() }
                let text = UTType(representation.offered.contentType)?.conforms(to: .plainText) ?? false
                try add(
                    payload, representation.offered, label: outgoing.label, text: text, to: &files, messages: &messages)
            }
        }
        let address = target.address
        // A message each (LocalSend shows one text per request), then the files in one upload.
        for text in messages {
            let bytes = UInt64(text.utf8.count)
            let file = LocalSendFile(
                id: SecureRandom.bytes(8).hexString, fileName: "message.txt", size: bytes, fileType: "text/plain",
                preview: text)
            let session = try prepare(
                [file.id: file], own: own, to: target, pin: pin, client: client, timeout: answerTimeout)
            if let session, let token = session.files[file.id] {
                try uploadBytes(
                    Array(text.utf8), file: file, session: session.sessionId, token: token, to: address, client: client)
            }
            report.messages += 1
        }
        guard !files.isEmpty else {
            report.seconds = seconds(since: started)
            report.delivered = chosen
            return report
        }
        let total = files.reduce(UInt64(0)) { $0 + $1.file.size }
        progress.setSessionTotal(total, count: files.count)
        let described = Dictionary(files.map { ($0.file.id, $0.file) }, uniquingKeysWith: { a, _ in a })
        guard
            let session = try prepare(described, own: own, to: target, pin: pin, client: client, timeout: answerTimeout)
        else {
            report.seconds = seconds(since: started)
            report.delivered = chosen
            return report
        }
        for (number, file) in files.enumerated() {
            guard let token = session.files[file.file.id] else { continue }  // the device has it already
            progress.startItem(file.file.fileName, number: number + 1, total: file.file.size, alreadyHeld: 0)
            do {
                try uploadFile(
                    file, session: session.sessionId, token: token, to: address, client: client, progress: progress,
                    cancellation: cancellation)
            } catch let error as ShareFailure where error.code == .interrupted && cancellation?.isCancelled == true {
                let cancel = LocalSend.apiPrefix + "/cancel?sessionId=\(session.sessionId)"
                _ = try? client.post(address, cancel, json: [], timeout: 5)
                throw error
            }
            progress.finishItem()
            report.files += 1
            report.bytes += file.file.size
        }
        report.seconds = seconds(since: started)
        report.delivered = chosen
        return report
    }

    /// This device as its `prepare-upload` describes it: every field of LocalSend v2's info object (some apps refuse
    /// an upload whose sender lacks one, `port` among them).
    package static func ownInfo(name: String, fingerprint: String, paths: DevicePaths) -> LocalSendInfo {
        LocalSendInfo(
            alias: name, deviceModel: "share", deviceType: "desktop", fingerprint: fingerprint,
            port: LocalSendSettings.configuredPort(paths), protocol: "https", download: false)
    }

    static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// Turns a produced representation into files to upload, or a message.
    static func add(
        _ payload: ProducedPayload, _ offered: OfferedRepresentation, label: String, text: Bool,
        to files: inout [Outgoing], messages: inout [String]
    ) throws {
        let type = UTType(offered.contentType)
        let mime = type?.preferredMIMEType ?? "application/octet-stream"
        func fileName() -> String {
            if let suggested = offered.suggestedFileName, !suggested.isEmpty { return suggested }
            let ext = type?.preferredFilenameExtension
            return PathText.pathExtension(label).isEmpty && ext != nil ? "\(label).\(ext!)" : label
        }
        func described(_ name: String, _ url: URL, size: UInt64, temporary: Bool) throws -> Outgoing {
            Outgoing(
                file: LocalSendFile(
                    id: SecureRandom.bytes(8).hexString, fileName: name, size: size, fileType: mime,
                    sha256: try sha256(of: url)),
                source: url, temporary: temporary)
        }
        switch payload {
        case .data(let data):
            if text, let string = String(data: data, encoding: .utf8) {
                messages.append(string)
                return
            }
            let url = FileManager.default.temporaryDirectory.appendingPathComponent(
                "share-localsend-\(SecureRandom.bytes(8).hexString)")
            try data.write(to: url)
            files.append(try described(fileName(), url, size: UInt64(data.count), temporary: true))
        case .file(let url, _):
            let size = PosixFiles.size(url.path) ?? 0
            files.append(try described(fileName(), url, size: size, temporary: false))
        case .archive(let plan):
            // LocalSend sends a folder as its files, each named by its path in the folder.
            for entry in plan.entries where entry.kind == .file {
                guard case .file(let path, _) = entry.source else { continue }
                let url = URL(fileURLWithPath: path)
                // The folder's name, then the file's path in it, one slash between parts (LocalSend apps rebuild
                // the folder from these names; an empty part, as from a name ending in a slash, breaks them).
                let parts = (label.split(separator: "/") + entry.path.split(separator: "/")).filter { $0 != "." }
                var outgoing = try described(parts.joined(separator: "/"), url, size: entry.size, temporary: false)
                outgoing.file.fileType =
                    UTType(filenameExtension: url.pathExtension)?.preferredMIMEType ?? "application/octet-stream"
                files.append(outgoing)
            }
        }
    }

    static func openForReading(_ url: URL) throws -> OpenFile {
        do {
            return try Directory.open(url.deletingLastPathComponent().path).openFile(url.lastPathComponent, .read)
        } catch {
            throw ShareFailure(.noInput, "cannot read \(url.path): \(error)")
        }
    }

    static func sha256(of url: URL) throws -> String {
        let file = try openForReading(url)
        defer { file.close() }
        let hasher = SHA256Hasher()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: UInt64 = 0
        while true {
            let n = try file.read(into: &buffer, count: buffer.count, at: offset)
            if n == 0 { break }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += UInt64(n)
        }
        return hasher.finalize().hexString
    }

    /// LocalSend's `prepare-upload`; nil when nothing needs uploading (204: a message shown, or files already there).
    static func prepare(
        _ files: [String: LocalSendFile], own: LocalSendInfo, to target: LocalSendSeen, pin: String?,
        client: LocalSendClient, timeout: Double
    ) throws -> LocalSendUploadSession? {
        var path = LocalSend.apiPrefix + "/prepare-upload"
        if let pin { path += "?pin=" + pin.percentEncoded() }
        let body = Array(try JSONEncoder().encode(LocalSendPrepareUpload(info: own, files: files)))
        let answer: (status: Int, body: [UInt8], fingerprint: String)
        do {
            answer = try client.post(target.address, path, json: body, timeout: timeout)
        } catch let error as LocalSendError {
            throw ShareFailure(error.kind == .wrongDevice ? .notTrusted : .unavailable, error.message)
        } catch {
            throw ShareFailure(.unavailable, "\(target.alias) (LocalSend) did not answer: \(error)")
        }
        let who = "\(target.alias) (LocalSend)"
        switch answer.status {
        case 200:
            guard let session = try? JSONDecoder().decode(LocalSendUploadSession.self, from: Data(answer.body)) else {
                throw ShareFailure(
                    .protocolError, "\(who) answered prepare-upload with something that is not a session")
            }
            return session
        case 204: return nil
        case 401:
            throw ShareFailure(
                .refused, pin == nil ? "\(who) asks for a PIN; give it with --pin" : "\(who) refused the PIN; check it")
        case 403: throw ShareFailure(.refused, "\(who) declined the files")
        case 409: throw ShareFailure(.unavailable, "\(who) is busy with another transfer; try again soon")
        case 429: throw ShareFailure(.refused, "\(who) refuses more tries for now (too many wrong PINs); wait a minute")
        default: throw ShareFailure(.protocolError, "\(who) answered prepare-upload with HTTP \(answer.status)")
        }
    }

    static func target(_ file: LocalSendFile, session: String, token: String) -> String {
        func encode(_ text: String) -> String { text.percentEncoded() }
        return LocalSend.apiPrefix
            + "/upload?sessionId=\(encode(session))&fileId=\(encode(file.id))&token=\(encode(token))"
    }

    static func uploadBytes(
        _ bytes: [UInt8], file: LocalSendFile, session: String, token: String, to address: LocalSendAddress,
        client: LocalSendClient
    ) throws {
        let status = try client.upload(
            address, target(file, session: session, token: token), length: UInt64(bytes.count)
        ) {
            try $0.tls.write(bytes)
        }
        guard status == 200 || status == 204 else {
            throw ShareFailure(.protocolError, "the upload of \(file.fileName) ended with HTTP \(status)")
        }
    }

    static func uploadFile(
        _ outgoing: Outgoing, session: String, token: String, to address: LocalSendAddress, client: LocalSendClient,
        progress: ProgressReporter, cancellation: SendCancellation? = nil
    ) throws {
        let source = try openForReading(outgoing.source)
        defer { source.close() }
        let status: Int
        do {
            status = try client.upload(
                address, target(outgoing.file, session: session, token: token), length: outgoing.file.size
            ) {
                http in
                var buffer = [UInt8](repeating: 0, count: 1 << 20)
                var offset: UInt64 = 0
                while offset < outgoing.file.size {
                    if cancellation?.isCancelled == true {
                        throw ShareFailure(.interrupted, "the send was cancelled")
                    }
                    let want = Int(min(UInt64(buffer.count), outgoing.file.size - offset))
                    let n = try source.read(into: &buffer, count: want, at: offset)
                    guard n > 0 else {
                        throw ShareFailure(.noInput, "\(outgoing.source.path) became shorter while it was sent")
                    }
                    try buffer.withUnsafeBytes { try http.write(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                    offset += UInt64(n)
                    progress.advance(n)
                }
            }
        } catch let error as ShareFailure {
            throw error
        } catch {
            throw ShareFailure(.interrupted, "the upload of \(outgoing.file.fileName) broke off: \(error); send again")
        }
        switch status {
        case 200, 204: return
        case 403, 404, 409, 410: throw ShareFailure(.refused, "the LocalSend device cancelled the transfer")
        case 422:
            throw ShareFailure(.ioError, "\(outgoing.file.fileName) arrived different from what was sent; send again")
        default: throw ShareFailure(.protocolError, "the upload of \(outgoing.file.fileName) ended with HTTP \(status)")
        }
    }
}
