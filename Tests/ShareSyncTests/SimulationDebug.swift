import Foundation
import ShareSync

extension Simulation {
    /// A path whose every device's view is printed as the simulation settles (SHARE_SYNC_TRACE).
    var traced: String? { ProcessInfo.processInfo.environment["SHARE_SYNC_TRACE"] }

    /// Every device's view of `path`: its entry, what is on disk, what it holds of the others'.
    func describe(_ path: String) -> String {
        devices.map { device in
            let local =
                device.store.local(path).map {
                    "\($0.entry.deleted ? "deleted" : "live") \($0.entry.version) stamp:\($0.stamp != nil)"
                } ?? "-"
            let disk =
                device.disk.nodes[path].map { "\($0.kind) \(String(decoding: $0.content, as: UTF8.self))" } ?? "-"
            let remotes = device.store.remotes(path).sorted { $0.key < $1.key }.map {
                "\(String($0.key, radix: 16).prefix(3)):\($0.value.deleted ? "del" : "live")\($0.value.version)"
            }.joined(separator: " ")
            return
                "d\(device.index): local \(local); disk \(disk); remotes \(remotes); requested \(device.requested[path].map { "\($0.version) from d\($0.peer)" } ?? "-")"
        }.joined(separator: "\n")
    }
}
