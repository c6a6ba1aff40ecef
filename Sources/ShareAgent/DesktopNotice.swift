import FoundationEssentials
import ShareText
import Glibc
import ShareThreads
import ShareEngine
import ShareTrust
import ShareNet

/// Tells the desktop that an offer waits (freedesktop notifications through `notify-send`, with the first preview
/// image), when a session bus is there; otherwise the agent's log line is the notice.
enum DesktopNotice {
    static let log = Log.logger("share.pending")

    static func announce(_ entry: PendingOffers.Entry, paths: DevicePaths) {
        log.notice(
            "an offer waits for your answer",
            metadata: ["from": "\(entry.fromName)", "id": "\(entry.id)", "items": "\(entry.itemCount)"])
        let lines = entry.items.prefix(3).map(PendingOffers.describe) + (entry.itemCount > 3 ? ["…"] : [])
        let icon = entry.items.first(where: { $0.image != nil })?.image.map {
            PendingOffers.folder(paths).appendingPathComponent($0).path
        }
        show(
            summary: "\(entry.fromName) wants to send \(entry.itemCount) item(s)",
            body: lines.joined(separator: "\n") + "\nshare accept \(entry.id)  ·  share decline \(entry.id)",
            icon: icon)
    }

    /// Shows a desktop notification (freedesktop notifications on the session bus) when the agent runs in a
    /// desktop session: through `notify-send`, or `gdbus` (GLib's, on every GNOME and most other desktops) calling
    /// `org.freedesktop.Notifications.Notify`. Nothing without a session bus or either tool. Never waits for it.
    static func show(summary: String, body: String, icon: String? = nil, milliseconds: Int = 60_000) {
        let environment = ProcessInfo.processInfo.environment
        guard environment["DBUS_SESSION_BUS_ADDRESS"] != nil else { return }
        let directories = (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map(String.init)
        func tool(_ name: String) -> String? {
            directories.map { $0 + "/" + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
        }
        let arguments: [String]
        let executable: String
        if let notifySend = tool("notify-send") {
            executable = notifySend
            arguments =
                ["--app-name=share", "--expire-time=\(milliseconds)"] + (icon.map { ["--icon=" + $0] } ?? [])
                + [summary, body]
        } else if let gdbus = tool("gdbus") {
            executable = gdbus
            arguments = [
                "call", "--session", "--timeout", "5", "--dest", "org.freedesktop.Notifications",
                "--object-path", "/org/freedesktop/Notifications", "--method",
                "org.freedesktop.Notifications.Notify", quoted("share"), "0", quoted(icon ?? ""), quoted(summary),
                quoted(body), "@as []", "@a{sv} {}", "\(milliseconds)",
            ]
        } else {
            return
        }
        // On a thread of its own, waited for (so it is reaped), and said in the log when it fails.
        Threads.start(name: "share-notify", stackSize: 256 << 10) {
            let process: ChildProcess
            do {
                process = try ChildProcess.start(executable, arguments, captureErrors: true)
            } catch {
                log.warning("no desktop notification", metadata: ["reason": "\(error)"])
                return
            }
            let said = process.readErrors(limit: 300)
            if process.wait() != 0 {
                log.warning(
                    "no desktop notification",
                    metadata: ["tool": "\(executable)", "reason": "\(String(decoding: said, as: UTF8.self).trimmed)"])
            }
        }
    }

    /// `text` as a GVariant string literal (what `gdbus call` reads): quoted, its quotes and backslashes escaped.
    static func quoted(_ text: String) -> String {
        var out = "'"
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "'": out += "\\'"
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "'"
    }
}
