import Foundation
import ShareLocalSendRoute
import Testing

@testable import ShareKit
import ShareTrust
import ShareReach
import ShareProtocol
import ShareEngine
import ShareAgent

/// What share says of itself to LocalSend devices.
@Suite struct LocalSendInfoTests {
    /// Every field of LocalSend v2's info object is in share's `prepare-upload` (an app refused it without `port`),
    /// and `port` is the one its LocalSend server listens on.
    @Test func thePrepareUploadInfoHasEveryFieldOfTheProtocol() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("share-lsinfo-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let paths = DevicePaths(config: folder, data: folder, state: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let info = LocalSendSend.ownInfo(name: "desk", fingerprint: "ab12", paths: paths)
        let object = try #require(
            try JSONSerialization.jsonObject(with: try JSONEncoder().encode(info)) as? [String: Any])
        for field in ["alias", "version", "deviceModel", "deviceType", "fingerprint", "port", "protocol", "download"] {
            #expect(object[field] != nil, "\(field) missing: \(object)")
        }
        #expect(object["port"] as? Int == 53317)
        try Data(#"{"localsend": {"port": 53400}}"#.utf8).write(to: paths.agentConfigFile)
        #expect(LocalSendSend.ownInfo(name: "desk", fingerprint: "ab12", paths: paths).port == 53400)
    }
}
