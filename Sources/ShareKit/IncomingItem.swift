import ShareDisk
import Synchronization
import CoreTransferable
import FoundationEssentials
import ShareProtocol
import ShareTrust
import UniformTypeIdentifiers
import ShareEngine

/// One item another device sent to this program: verified and kept on disk as the representation this program
/// chose from the sender's offer. What it is, where it comes from and how the sender previewed it are known before
/// anything is imported; `load(_:)` runs the importer of the type asked for (the shape of
/// `NSItemProvider.loadTransferable(type:)`).
///
///     for try await item in try client.receive(accepting: [Recipe.self, String.self]) {
///         print("\(item.preview.title) from \(item.from) as \(item.contentType.identifier)")
///         if let recipe = try? await item.load(Recipe.self) { … } else { print(try await item.load(String.self)) }
///     }
public struct IncomingItem: Sendable {
    /// What the sender calls it (a file name, a value's suggested name, "text").
    public let label: String
    /// What the sending program passed as the item's preview (its title, and a small image when one came); without
    /// one, the label is the title.
    public let preview: SharePreview
    /// The sending device, by the name this device gave it when it trusted it.
    public let from: String
    /// The sending device's ID.
    public let fromDevice: String
    /// For an item an agent passed on (a watch's send, for instance): the device it really comes from.
    public let origin: String?
    /// The representation this program chose among the ones offered: the first of its accept list (built from the
    /// declared types' `importedContentTypes()`, in order) that the sender could produce.
    public let contentType: UTType
    /// Its size in bytes.
    public let size: UInt64
    /// Where it is kept: a file, or a folder for a folder representation. It stays until `remove()`; in a folder
    /// the receive made itself, until neither the items nor the `IncomingItems` are held any more.
    public let fileURL: URL
    /// Keeps the receive's own folder while the item is held.
    let folder: ReceiveFolder

    init(_ item: ReceivedItem, folder: ReceiveFolder) {
        self.folder = folder
        label = item.label
        preview = SharePreview(item.preview, label: item.label)
        from = item.from
        fromDevice = item.fromDevice
        origin = item.origin
        contentType =
            UTType(item.contentType) ?? UTType(identifier: item.contentType, allowUndeclared: true) ?? .data
        size = item.size
        fileURL = URL(fileURLWithPath: item.path)
    }

    /// Creates a value of `type` from the item with that type's own importer (its `DataRepresentation`,
    /// `FileRepresentation`, `CodableRepresentation` or `ProxyRepresentation` whose content type the item's
    /// conforms to). Throws `TransferableSupportError` when the type cannot import this content type or its importer
    /// fails; the item stays, so another type can be tried.
    public func load<T: Transferable>(_ type: T.Type = T.self) async throws -> T {
        try await T(importing: fileURL, contentType: contentType)
    }

    /// Whether `type` declares an importer for this item's content type.
    public func canLoad<T: Transferable>(_ type: T.Type) -> Bool {
        T.importedContentTypes().contains { contentType.conforms(to: $0) }
    }

    /// Removes the kept file (or folder) once the program has what it needs.
    public func remove() throws {
        guard try PathOperations.remove(fileURL.path) else { throw CocoaError(.fileNoSuchFile) }
    }
}

/// The folder a receive keeps its items in; one the receive made itself goes, with what is left in it, when
/// nothing holds it any more (the `IncomingItems` and every item).
final class ReceiveFolder: Sendable {
    let url: URL
    let owned: Bool

    init(url: URL, owned: Bool) {
        self.url = url
        self.owned = owned
    }

    deinit { if owned { PathOperations.removeIfPresent(url.path) } }
}

/// A receive folder seen without keeping it.
final class HeldFolder: Sendable {
    private struct Reference: Sendable { weak var folder: ReceiveFolder? }
    private let reference: Mutex<Reference>

    init(_ folder: ReceiveFolder) { reference = Mutex(Reference(folder: folder)) }

    var folder: ReceiveFolder? { reference.withLock { $0.folder } }
}

/// The items arriving for a program, as they are verified (an `AsyncSequence`). Leaving the loop, or `stop()`,
/// ends the receive: the listener closes (or the agent forgets the program). Items already handed over stay
/// loadable while they are held.
public final class IncomingItems: AsyncSequence, Sendable {
    /// Each element is one verified item.
    public typealias Element = IncomingItem

    /// How the items come: the running agent hands them over, or this program listens itself.
    public enum Source: Sendable, Equatable {
        /// The device's agent receives and hands over what its peers send (its discovery, address and relays).
        case agent
        /// This program listens on this port.
        case listening(port: Int)
    }

    /// How the items come.
    public let source: Source
    /// Where items are kept.
    public var directory: URL { folder.url }
    private let folder: ReceiveFolder
    private let stream: AsyncThrowingStream<IncomingItem, Error>
    private let stopper: @Sendable () -> Void
    /// Whether a loop has started; a sequence dropped before any loop ends the receive itself.
    private let iterated = Once()

    init(
        source: Source, folder: ReceiveFolder, stream: AsyncThrowingStream<IncomingItem, Error>,
        stop: @escaping @Sendable () -> Void
    ) {
        self.source = source
        self.folder = folder
        self.stream = stream
        self.stopper = stop
    }

    deinit { if iterated.first() { stopper() } }

    /// Iterates the items; when the iteration is dropped (the loop is left), the receive ends. A loop keeps the
    /// receive and its folder by itself (`for try await item in try client.receive(…)` holds nothing else).
    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<IncomingItem, Error>.AsyncIterator
        let ending: Ending
        let folder: ReceiveFolder

        /// The next verified item; nil once the receive has ended (`stop()`, or the agent stopped: then it throws).
        public mutating func next() async throws -> IncomingItem? { try await base.next() }
    }

    /// Ends the receive when the last iterator holding it goes.
    final class Ending: Sendable {
        let stop: @Sendable () -> Void
        init(_ stop: @escaping @Sendable () -> Void) { self.stop = stop }
        deinit { stop() }
    }

    /// Starts a loop over the items (one loop at a time; the receive ends when it is left).
    public func makeAsyncIterator() -> Iterator {
        _ = iterated.first()
        return Iterator(base: stream.makeAsyncIterator(), ending: Ending(stopper), folder: folder)
    }

    /// Ends the receive now; a loop over the items ends after the ones already delivered.
    public func stop() { stopper() }
}
