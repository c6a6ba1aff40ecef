import Synchronization
import FoundationEssentials

/// Resolution of a `Transferable` type into its ordered flat list of representations, cached per type.
///
/// `transferRepresentation` is static, so its resolution depends only on the type; the cache makes repeated look-ups
/// (one per item sent) a dictionary read.
public enum ResolvedRepresentations {
    private static let cache = ResolutionCache()

    /// The resolved list of `T`, from the cache.
    public static func of<T: Transferable>(_ type: T.Type) -> [ResolvedTransferRepresentation<T>] {
        if let cached = cache.get(ObjectIdentifier(type)) as? Resolved<T> { return cached.list }
        let resolved = resolve(type)
        cache.set(ObjectIdentifier(type), Resolved(list: resolved))
        return resolved
    }

    /// Resolves `T` without the cache.
    public static func resolve<T: Transferable>(_ type: T.Type) -> [ResolvedTransferRepresentation<T>] {
        var list: [ResolvedTransferRepresentation<T.Representation.Item>] = []
        list.reserveCapacity(12)
        T.transferRepresentation._resolve(into: &list)
        return castResolved(list, to: T.self)
    }
}

/// A cached list; a class so that the cache hit is a cheap class cast rather than an array cast.
private final class Resolved<T: Transferable>: Sendable {
    let list: [ResolvedTransferRepresentation<T>]
    init(list: [ResolvedTransferRepresentation<T>]) { self.list = list }
}

/// A small locked dictionary; reads vastly outnumber writes.
private final class ResolutionCache: Sendable {
    /// A resolved list: immutable once stored, so it may be shared between threads.
    private struct Entry: @unchecked Sendable {  // the list it holds is never changed after it is stored
        let object: AnyObject
    }

    private let storage = Mutex<[ObjectIdentifier: Entry]>([:])

    func get(_ key: ObjectIdentifier) -> AnyObject? {
        storage.withLock { $0[key]?.object }
    }

    func set(_ key: ObjectIdentifier, _ value: AnyObject) {
        let entry = Entry(object: value)
        storage.withLock { $0[key] = entry }
    }
}
