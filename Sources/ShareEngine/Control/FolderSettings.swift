import FoundationEssentials
import ShareProtocol

/// A shared folder as this device keeps it: its identity (never its name), what the person called it, where it is
/// here, how this device treats it, and the devices it is shared with.
package struct SharedFolderSettings: Codable, Sendable, Equatable {
    package enum Kind: String, Codable, Sendable, CaseIterable {
        /// Changes go both ways (the default).
        case sendReceive = "send-receive"
        /// This device's files are the truth: changes made elsewhere are not applied here.
        case sendOnly = "send-only"
        /// This device takes what the others have; its own changes are kept here and listed, never sent.
        case receiveOnly = "receive-only"
    }

    package var id: String
    package var label: String
    package var path: String
    package var kind: Kind
    /// Device IDs of the devices it is shared with.
    package var devices: [String]
    package var created: Date
    /// Made by `share mirror` (a send-only folder on the sending side; kept in the receiving agent's inbox).
    package var mirror: Bool?
    /// Its marker (`.sharefolder`) was made: from then on a folder without one is stopped, not taken for emptied.
    package var marked: Bool?
    /// How many days files replaced or removed by another device's change are kept in `.share-versions` (nil: the
    /// default, 30; 0: none kept).
    package var keepVersions: Int?
    /// How many conflict copies of one file are kept (nil: 10; 0: none, the losing version goes to the versions;
    /// -1: no limit).
    package var maxConflicts: Int?
    /// Paused here (`share sync pause`): nothing scanned, taken, sent or announced until it is resumed.
    package var paused: Bool?
    /// Device IDs this device stopped sharing it with (`share sync unshare`): not taken back from what the others
    /// say they share it with, until it is shared with them again (`share sync add … --with`).
    package var unshared: [String]?

    /// A name as a folder's label, as a hello carries it: control characters made `?`, at most 255 bytes (a
    /// folder's own name by default; a label kept from before it was checked never makes a hello break its rules).
    package static func label(_ name: String) -> String {
        var text = String(
            String.UnicodeScalarView(name.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : $0 }))
        while text.utf8.count > 255 { text.removeLast() }
        return text
    }

    package init(
        id: String, label: String, path: String, kind: Kind = .sendReceive, devices: [String], created: Date = Date()
    ) {
        self.id = id
        self.label = label
        self.path = path
        self.kind = kind
        self.devices = devices
        self.created = created
    }

    /// A new folder's identity: 3 groups of 5 letters and digits (`abcde-fghij-klmno`), as Syncthing's look.
    package static func newID() -> String {
        let alphabet = Array("abcdefghijkmnopqrstuvwxyz23456789")
        var generator = SystemRandomNumberGenerator()
        return (0..<3).map { _ in String((0..<5).map { _ in alphabet.randomElement(using: &generator)! }) }
            .joined(separator: "-")
    }
}

/// A folder another device shares with this one, waiting for this device's person to accept it (`share sync accept
/// ID --into PATH`) or decline it.
package struct FolderOffer: Codable, Sendable, Equatable {
    package var id: String
    package var label: String
    package var kind: String
    /// The device that offered it, and its name here.
    package var from: String
    package var fromName: String
    package var offered: Date
    /// The devices the offering device shares it with (IDs): those this device trusts as its owner's are linked too.
    package var devices: [String]?

    package init(id: String, label: String, kind: String, from: String, fromName: String, offered: Date = Date()) {
        self.id = id
        self.label = label
        self.kind = kind
        self.from = from
        self.fromName = fromName
        self.offered = offered
    }
}

/// How a shared folder stands, as `share sync` and the page show it.
package struct FolderStatus: Codable, Sendable, Equatable {
    /// Whether every folder is up to date and in step with every device it is shared with (what
    /// `share sync --wait` waits for).
    package static func settled(_ folders: [FolderStatus]) -> Bool {
        folders.allSatisfy { $0.state == "paused" || ($0.state == "up to date" && $0.peers.allSatisfy(\.inStep)) }
    }

    /// One device it is shared with.
    package struct Peer: Codable, Sendable, Equatable {
        package var id: String
        package var name: String
        /// A link to it is open now.
        package var connected: Bool
        /// It holds every path at the version this device agrees on.
        package var inStep: Bool
        /// When it was last seen, linked, holding what this device holds (kept through restarts; nil: never).
        package var lastInStep: Date?
        /// Why no link to it is open, when one failed (it refused, or cannot be reached).
        package var reason: String?
        /// Connected, but it does not share this folder (removed it there, or has not accepted it yet).
        package var notSharing: Bool?
        /// Why, when it said: `offered` (not accepted yet), `declined`, `paused`, `removed` (there), or `unshared` (with
        /// this device, there).
        package var notSharingWhy: String?

        /// What a device that does not share the folder back is doing, in words (`share sync`, the page).
        package var notSharingWords: String {
            switch notSharingWhy {
            case FolderWithheld.offered: "has not accepted this folder yet"
            case FolderWithheld.declined: "declined this folder"
            case FolderWithheld.paused: "paused this folder there"
            case FolderWithheld.removed: "removed this folder there"
            case FolderWithheld.unshared: "no longer shares this folder with this device"
            default: "not sharing this folder with this device (paused, removed or unshared there, or not accepted yet)"
            }
        }

        /// Its name, and when it does not share the folder back, what it said of it: `desk (declined it)`.
        package var nameAndWhy: String { notSharing == true ? "\(name) (\(notSharingShort))" : name }

        /// The same, short (`share status`, the list of devices not in step).
        package var notSharingShort: String {
            switch notSharingWhy {
            case FolderWithheld.offered: "not accepted yet"
            case FolderWithheld.declined: "declined it"
            case FolderWithheld.paused: "paused it"
            case FolderWithheld.removed: "removed it"
            case FolderWithheld.unshared: "stopped sharing it with this device"
            default: "not sharing it"
            }
        }
        /// Not in step: how many paths its index holds at another version than this device agrees on (it lacks
        /// them, or this device does), when its index came.
        package var differing: Int?
        package init(id: String, name: String, connected: Bool, inStep: Bool, lastInStep: Date?, reason: String? = nil)
        {
            self.id = id
            self.name = name
            self.connected = connected
            self.inStep = inStep
            self.lastInStep = lastInStep
            self.reason = reason
        }
    }

    /// A conflict copy in the folder: the path it was made of, the copy, and both versions' device and time.
    package struct Conflict: Codable, Sendable, Equatable {
        package var path: String
        package var copy: String
        /// The device that made the version kept as the copy (its ID's first group), and when it was modified.
        package var loser: String
        package var loserTime: Date?
        /// The device whose version is at the path now, and when it was modified.
        package var winner: String?
        package var winnerTime: Date?
        /// The names of those devices here (this device's, or the name it trusts each by); nil when unknown.
        package var loserName: String?
        package var winnerName: String?
        /// The path holds a folder now: the file or link kept as the copy stood where files were made elsewhere.
        package var winnerIsFolder: Bool?
        package init(
            path: String, copy: String, loser: String, loserTime: Date?, winner: String?, winnerTime: Date?
        ) {
            self.path = path
            self.copy = copy
            self.loser = loser
            self.loserTime = loserTime
            self.winner = winner
            self.winnerTime = winnerTime
        }
    }

    /// One pull that brought files of the folder here: when it ended, from which device, how many files, what
    /// crossed the link and what was made from copies already here (a file's earlier version, a renamed file).
    package struct Pull: Codable, Sendable, Equatable {
        package var at: Date
        package var from: String
        package var files: Int
        package var crossed: UInt64
        package var fromLocal: UInt64
        package init(at: Date, from: String, files: Int, crossed: UInt64, fromLocal: UInt64) {
            self.at = at
            self.from = from
            self.files = files
            self.crossed = crossed
            self.fromLocal = fromLocal
        }
    }

    /// A path this device cannot bring to the agreed version now, and why.
    package struct Problem: Codable, Sendable, Equatable {
        package var path: String
        package var reason: String
        package init(path: String, reason: String) {
            self.path = path
            self.reason = reason
        }
    }

    package var settings: SharedFolderSettings
    /// `up to date`, `syncing`, `scanning`, `waiting for DEVICE`, `out of sync`, `stopped: REASON`.
    package var state: String
    /// What this device holds of it: files and their bytes.
    package var files: Int
    package var bytes: UInt64
    /// What it still needs from the others.
    package var neededFiles: Int
    package var neededBytes: UInt64
    /// Bytes a second coming in now, when something is.
    package var rate: Double?
    /// Files a second put in place now, when some are.
    package var fileRate: Double?

    /// About how long what is to come takes at the rates of the last seconds: the longer of its bytes at the byte
    /// rate and its files at the file rate (a thousand small files go at the pace of their number).
    package var secondsLeft: Double? {
        guard neededFiles > 0, let rate, rate > 0 else { return nil }
        let byBytes = Double(neededBytes) / rate
        guard let fileRate, fileRate > 0 else { return byBytes }
        return max(byBytes, Double(neededFiles) / fileRate)
    }
    /// What crossed the link for this folder since the agent started, and what was made from copies already here.
    package var bytesReceived: UInt64
    package var bytesFromLocal: UInt64
    package var peers: [Peer]
    package var conflicts: [Conflict]
    package var problems: [Problem]
    package var lastScan: Date?
    /// How long the last scan of the whole folder took, in seconds.
    package var lastScanSeconds: Double?
    /// The last pulls that brought files here (at most 20, the latest last).
    package var recentPulls: [Pull]?
    /// The last changes other devices made that were applied here (at most 200, the latest last).
    package var recentChanges: [Change]?

    /// A change another device made, applied here: `added`, `changed`, `renamed` or `deleted`; a `file`, `folder` or
    /// `link`.
    package struct Change: Codable, Sendable, Equatable {
        package var at: Date
        package var path: String
        package var action: String
        package var kind: String
        /// The device whose change it was: its name here, else its ID's first group.
        package var by: String
        /// A rename (`action` "renamed"): the path the file had.
        package var from: String?
        /// This device's concurrent version of the path, set aside for this change: the conflict copy it was kept as.
        package var keptAs: String?

        package init(
            at: Date, path: String, action: String, kind: String, by: String, from: String? = nil,
            keptAs: String? = nil
        ) {
            self.at = at
            self.path = path
            self.action = action
            self.kind = kind
            self.by = by
            self.from = from
            self.keptAs = keptAs
        }
    }

    package init(
        settings: SharedFolderSettings, state: String, files: Int, bytes: UInt64, neededFiles: Int,
        neededBytes: UInt64, rate: Double?, bytesReceived: UInt64, bytesFromLocal: UInt64, peers: [Peer],
        conflicts: [Conflict], problems: [Problem], lastScan: Date?, lastScanSeconds: Double? = nil,
        recentPulls: [Pull]? = nil, recentChanges: [Change]? = nil
    ) {
        self.settings = settings
        self.state = state
        self.files = files
        self.bytes = bytes
        self.neededFiles = neededFiles
        self.neededBytes = neededBytes
        self.rate = rate
        self.bytesReceived = bytesReceived
        self.bytesFromLocal = bytesFromLocal
        self.peers = peers
        self.conflicts = conflicts
        self.problems = problems
        self.lastScan = lastScan
        self.lastScanSeconds = lastScanSeconds
        self.recentPulls = recentPulls
        self.recentChanges = recentChanges
    }
}

/// A file a folder keeps in its versions (`share sync versions`): its path in the folder, when it was replaced or
/// removed, its size, and where it is kept beneath the folder.
package struct FolderVersion: Codable, Sendable, Equatable {
    package var path: String
    package var time: Date
    package var size: UInt64
    package var stored: String

    package init(path: String, time: Date, size: UInt64, stored: String) {
        self.path = path
        self.time = time
        self.size = size
        self.stored = stored
    }
}
