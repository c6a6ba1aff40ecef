import CoreTransferable
import Foundation
import ShareProtocol
import ShareReach
import ShareTLS
import UniformTypeIdentifiers

/// Valid inputs for each target, built with the encoders the sender uses, so the fuzzer starts from sessions that
/// get far. The archive seeds come from Python's tarfile and zipfile (`scripts/fuzz.sh --seeds`).
public enum FuzzSeeds {
    /// Writes `<folder>/<target>/<name>` for every target but `archive`.
    public static func write(to folder: URL) throws {
        for (target, seeds) in all() {
            let directory = folder.appendingPathComponent(target.rawValue, isDirectory: true)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            for (name, bytes) in seeds {
                try Data(bytes).write(to: directory.appendingPathComponent(name))
            }
        }
    }

    /// The files at `url`: the file itself, or a folder's files in name order (hidden files left out).
    public static func inputs(at url: URL) -> [URL] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else { return [] }
        guard isDirectory.boolValue else { return [url] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { url.appendingPathComponent($0) }
    }

    static func all() -> [(FuzzTarget, [(String, [UInt8])])] {
        [
            (.frames, frameSeeds()),
            (.messages, messageSeeds()),
            (.declarations, declarationSeeds()),
            (.deviceID, deviceIDSeeds()),
            (.servers, serverSeeds()),
        ]
    }

    static func frame(_ type: FrameType, _ message: some Encodable) -> [UInt8] {
        MessageCoding.frame(type, message).encoded()
    }

    /// A whole receiving session: hello, an offer of a two-chunk file and a text, the chunks, done, bye.
    static func frameSeeds() -> [(String, [UInt8])] {
        let chunkSize = 4096
        let file = (0..<(chunkSize + 100)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let text = Array("on my way".utf8)
        let offer = Offer(
            items: [
                OfferItem(
                    id: "f1", label: "notes.bin",
                    representations: [
                        OfferedRepresentation(
                            contentType: "public.data", kind: .file, size: UInt64(file.count),
                            suggestedFileName: "notes.bin")
                    ], version: "4196-1700000000000000000-42"),
                OfferItem(
                    id: "t1", label: "text",
                    representations: [
                        OfferedRepresentation(
                            contentType: "public.utf8-plain-text", kind: .data, size: UInt64(text.count))
                    ]),
            ], chunkSize: chunkSize)
        func chunks(_ bytes: [UInt8]) -> ([UInt8], [UInt8]) {
            var frames: [UInt8] = []
            var digests: [UInt8] = []
            var index = 0
            var start = 0
            repeat {
                let piece = Array(bytes[start..<min(bytes.count, start + chunkSize)])
                let digest = SHA256Hasher.hash(piece)
                digests += digest
                let payload = ChunkHeader(index: index, digest: digest).encoded() + piece
                frames += Frame.header(type: .chunk, length: payload.count) + payload
                index += 1
                start += chunkSize
            } while start < bytes.count
            return (frames, SHA256Hasher.hash(digests))
        }
        let (fileChunks, fileDigest) = chunks(file)
        let (textChunks, textDigest) = chunks(text)
        let hello = frame(.hello, Hello(name: "laptop", role: .cli))
        let session =
            hello + frame(.offer, offer) + fileChunks
            + frame(.done, Done(item: "f1", size: UInt64(file.count), chunks: 2, digest: fileDigest.hexString))
            + textChunks
            + frame(.done, Done(item: "t1", size: UInt64(text.count), chunks: 1, digest: textDigest.hexString))
            + frame(.bye, Bye())
        let folder = Offer(
            items: [
                OfferItem(
                    id: "d1", label: "Holiday",
                    representations: [
                        OfferedRepresentation(contentType: "public.tar-archive", kind: .archive, size: 10240),
                        OfferedRepresentation(contentType: "public.utf8-plain-text", kind: .data),
                    ])
            ], chunkSize: chunkSize)
        return [
            ("session", session),
            ("hello", hello),
            ("offer-folder", frame(.offer, folder)),
            ("error", frame(.error, ProtocolError(.refused, "not now"))),
        ]
    }

    /// One valid payload per message type; the first byte is the type's number in `FuzzTarget.messages`.
    static func messageSeeds() -> [(String, [UInt8])] {
        func json(_ value: some Encodable) -> [UInt8] { MessageCoding.frame(.hello, value).payload }
        let offer = Offer(
            items: [
                OfferItem(
                    id: "p1", label: "Juan",
                    representations: [
                        OfferedRepresentation(contentType: "com.example.profile", kind: .data, size: 120),
                        OfferedRepresentation(contentType: "public.plain-text", kind: .data),
                    ],
                    declarations: [
                        UTTypeDeclaration(identifier: "com.example.profile", conformsTo: ["public.json"])
                    ])
            ], chunkSize: 1 << 20)
        let payloads: [[UInt8]] = [
            json(Hello(name: "desk", role: .agent, accept: AcceptList([AcceptedType(.plainText, maxSize: 4096)]))),
            json(offer),
            json(Select(choices: [Choice(item: "p1", representation: 1, reason: "text only")])),
            json(Resume(item: "p1", verified: [ChunkRange(0, 3), ChunkRange(5, 6)])),
            json(Done(item: "p1", size: 120, chunks: 1, digest: String(repeating: "ab", count: 32))),
            json(Ack(item: "p1", outcome: "saved", savedAs: "Juan.txt")),
            json(Ping(nonce: 42)),
            json(PairDecision(accept: true)),
            json(ClipboardRequest(peek: true)),
            json(ClipboardInfo(copied: 1.7e9, expires: 1.7e9 + 3600, labels: ["Juan"], types: [["public.plain-text"]])),
            json(ProtocolError(.digestMismatch, "chunk 3 does not match its digest")),
            json(Bye()),
            FolderPull(
                folder: "abcde-fghij-klmno",
                items: [.init(ref: "3f2a", path: "notes/plan.txt", digest: String(repeating: "ab", count: 32), size: 9)]
            ).frame(.folderPull, binary: true).payload,
            IndexUpdate(
                folder: "abcde-fghij-klmno", indexID: "1f2e", from: 0, to: 1,
                records: [
                    IndexRecord(
                        path: "notes/plan.txt", kind: 0, deleted: false, size: 9, modified: 1_800_000_000_000_000_000,
                        mode: 0o644, digest: Array(repeating: 7, count: 32), target: "", sequence: 1, modifiedBy: 42,
                        version: [(42, 1)])
                ]
            ).encoded(),
            FolderFiles(files: [FolderFiles.File(ref: "3f2a", bytes: Array("the plan\n".utf8))]).encoded(codec: nil),
        ]
        return payloads.enumerated().map { ("type-\($0.offset)", [UInt8($0.offset)] + $0.element) }
    }

    static func declarationSeeds() -> [(String, [UInt8])] {
        let json = """
            {"UTExportedTypeDeclarations": [{"UTTypeIdentifier": "com.example.profile",
              "UTTypeConformsTo": ["public.json", "public.content"], "UTTypeDescription": "Profile",
              "UTTypeTagSpecification": {"public.filename-extension": ["profile"],
                                         "public.mime-type": ["application/x-profile"]}}]}
            """
        let plist = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0"><dict><key>UTImportedTypeDeclarations</key><array><dict>
            <key>UTTypeIdentifier</key><string>com.example.video</string>
            <key>UTTypeConformsTo</key><array><string>public.movie</string></array>
            <key>UTTypeTagSpecification</key><dict><key>public.filename-extension</key><array><string>vid</string>
            </array></dict></dict></array></dict></plist>
            """
        return [("exported.json", Array(json.utf8)), ("imported.plist", Array(plist.utf8))]
    }

    static func deviceIDSeeds() -> [(String, [UInt8])] {
        let id = DeviceID(certificateDER: Array("a certificate".utf8))
        return [
            ("grouped", Array(id.description.utf8)),
            ("lowercase", Array(id.description.lowercased().utf8)),
            ("ungrouped", Array(id.description.replacingOccurrences(of: "-", with: "").utf8)),
        ]
    }

    /// A relay's answers (a join's success, an invitation, a ping) and a discovery server's answers (a lookup's JSON
    /// by length and chunked, an announcement's 204).
    static func serverSeeds() -> [(String, [UInt8])] {
        let invitation = SessionInvitation(
            from: [UInt8](repeating: 7, count: 32), key: [UInt8](repeating: 9, count: 32),
            address: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 203, 0, 113, 10], port: 22067, serverSocket: true)
        let relay =
            RelayMessage.response(code: 0, message: "success").encoded()
            + RelayMessage.sessionInvitation(invitation).encoded() + RelayMessage.ping.encoded()
        let lookup = Array(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 45\r\n\r\n{\"addresses\":[\"tcp://192.0.2.2:22000\"],\"x\":1}"
                .utf8)
        let chunked = Array(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{\"addresses\":[]}\r\n0\r\n\r\n".utf8)
        let announced = Array("HTTP/1.1 204 No Content\r\nReannounce-After: 1800\r\n\r\n".utf8)
        return [
            ("relay", [0] + relay), ("lookup", [1] + lookup), ("chunked", [1] + chunked),
            ("announced", [1] + announced),
        ]
    }
}
