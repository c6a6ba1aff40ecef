internal import CShareSQLite
import Glibc

/// A value bound to or read from SQLite.
enum SQLValue {
    case integer(Int64)
    case text(String)
    case blob([UInt8])
    case null
}

/// A failure of SQLite, with its message.
public struct DatabaseError: Error, CustomStringConvertible {
    public let description: String
    /// The file is not a database, or its pages do not hold together (a bad sector, a copy cut short): what it holds
    /// cannot be trusted, and only a new index helps.
    public var damaged = false
    /// The disk that holds the file is full (SQLite's SQLITE_FULL).
    public var full = false
}

/// One SQLite connection (the only code that calls SQLite): write-ahead logging, so a transaction is either wholly
/// on disk or not at all after a crash or a kill; statements prepared once and kept. Confined to one thread at a time
/// (its owner's lock), like the folder it serves.
public final class Database {
    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]
    private var depth = 0

    /// Opens (creating) the database file at `path`.
    public init(path: String) throws {
        // An index names every file of its folder: only its owner reads it (SQLite gives its log the file's mode).
        let made = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard made >= 0 else {
            throw DatabaseError(description: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        Glibc.close(made)
        // One made by an earlier version (0644) is made private too; a log not there yet is made so by SQLite.
        for file in [path, path + "-wal", path + "-shm"] where chmod(file, 0o600) != 0 && errno != ENOENT {
            throw DatabaseError(description: "cannot make \(file) private: \(String(cString: strerror(errno)))")
        }
        var opened: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        guard sqlite3_open_v2(path, &opened, flags, nil) == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let opened { sqlite3_close(opened) }
            throw DatabaseError(description: "cannot open \(path): \(message)")
        }
        handle = opened
        sqlite3_busy_timeout(handle, 5000)
        // WAL: a writer never blocks a reader, and a transaction interrupted by a kill is rolled back on the next
        // open. NORMAL: a committed transaction survives a process crash (not a power cut, which the next scan and
        // the others' indexes repair).
        // Only this process uses the file (the agent, one per device): holding its lock for the connection's life
        // saves two file-lock calls per statement, and the log's index lives in memory.
        try execute("PRAGMA locking_mode = EXCLUSIVE")
        try execute("PRAGMA journal_mode = WAL")
        try execute("PRAGMA synchronous = NORMAL")
        try execute("PRAGMA foreign_keys = OFF")
        // Pages kept in memory: up to 32 MiB (SQLite's default is 2 MiB). An index of 100,000 files is larger than
        // that, and every lookup of a pull's placement then read its pages again through the kernel.
        try execute("PRAGMA cache_size = -32768")
        // The log is written back into the file every 8,192 pages (32 MiB; SQLite's default is 1,000): each time
        // costs two flushes to disk, which wait for everything else written meanwhile (a sync placing 100,000 files
        // waited on them more and more: 38 s with the default, 32 s with this). `relax()` empties the log when idle.
        try execute("PRAGMA wal_autocheckpoint = 8192")
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close(handle)
    }

    private func failure(_ what: String) -> DatabaseError {
        let code = sqlite3_errcode(handle) & 0xFF
        return DatabaseError(
            description: "\(what): \(String(cString: sqlite3_errmsg(handle)))",
            damaged: code == SQLITE_CORRUPT || code == SQLITE_NOTADB, full: code == SQLITE_FULL)
    }

    /// Checks that every page holds together (SQLite's quick check: each table and index read once, a tenth of a
    /// second for an index of 100,000 files, a second when none of it is in memory); a damaged file throws with
    /// `damaged` set.
    public func check() throws {
        var problems: [String] = []
        try query("PRAGMA quick_check(3)") { problems.append($0.text(0)) }
        guard problems == ["ok"] else {
            throw DatabaseError(description: problems.joined(separator: "; "), damaged: true)
        }
    }

    /// Hands back what a burst of work took: the log written back into the file and emptied, the cached pages given
    /// back (a sync of a large folder fills the page cache; an idle agent keeps none of it).
    public func relax() {
        try? execute("PRAGMA wal_checkpoint(TRUNCATE)")
        try? execute("PRAGMA shrink_memory")
    }

    /// Runs statements that return nothing.
    public func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(handle, sql, nil, nil, &message) == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? "unknown"
            sqlite3_free(message)
            let code = sqlite3_errcode(handle) & 0xFF
            throw DatabaseError(
                description: "\(sql.prefix(60)): \(text)", damaged: code == SQLITE_CORRUPT || code == SQLITE_NOTADB)
        }
    }

    /// Runs `body` in one transaction (nested calls join the outer one): committed when it returns, rolled back
    /// when it throws.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        if depth > 0 { return try body() }
        try execute("BEGIN IMMEDIATE")
        depth += 1
        do {
            let result = try body()
            depth -= 1
            try execute("COMMIT")
            return result
        } catch {
            depth -= 1
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Runs `sql` with `values` bound in order; calls `row` for each row returned.
    func query(_ sql: String, _ values: [SQLValue] = [], row: (Row) throws -> Void = { _ in }) throws {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (index, value) in values.enumerated() {
            let position = Int32(index + 1)
            let status: Int32
            switch value {
            case .integer(let number): status = sqlite3_bind_int64(statement, position, number)
            case .text(let text): status = sqlite3_bind_text(statement, position, text, -1, cshare_sqlite_transient())
            case .blob(let bytes):
                status = bytes.withUnsafeBytes {
                    sqlite3_bind_blob(statement, position, $0.baseAddress, Int32($0.count), cshare_sqlite_transient())
                }
            case .null: status = sqlite3_bind_null(statement, position)
            }
            guard status == SQLITE_OK else { throw failure("cannot bind a value") }
        }
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { return }
            guard status == SQLITE_ROW else { throw failure(String(sql.prefix(60))) }
            try row(Row(statement: statement))
        }
    }

    /// The rows changed by the last statement.
    var changes: Int { Int(sqlite3_changes(handle)) }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw failure("cannot prepare \(sql.prefix(60))")
        }
        statements[sql] = statement
        return statement
    }

    /// One row of a result, read by column position.
    struct Row {
        fileprivate let statement: OpaquePointer

        func integer(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
        func unsigned(_ column: Int32) -> UInt64 { UInt64(bitPattern: sqlite3_column_int64(statement, column)) }
        func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
        func text(_ column: Int32) -> String {
            guard let bytes = sqlite3_column_text(statement, column) else { return "" }
            return String(cString: bytes)
        }
        func blob(_ column: Int32) -> [UInt8] {
            let count = Int(sqlite3_column_bytes(statement, column))
            guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return [] }
            return Array(UnsafeRawBufferPointer(start: bytes, count: count))
        }
    }
}
