import Glibc
import Synchronization

/// The one writer of standard output and standard error. A reader that goes away (`share receive | head -1`, a
/// closed terminal) is not an error of share's: a write that meets a closed pipe says so (`ReaderGone`) instead of
/// trapping, and the process stops cleanly — content that cannot be delivered stops the transfer and tells the peer
/// why; narrative and listings end the process (exit 0 when standard output's reader left, as `yes | head` does;
/// 141 when standard error's did).
public enum Console {
    public enum Stream: Sendable, Equatable {
        case output, error

        var descriptor: Int32 { self == .output ? STDOUT_FILENO : STDERR_FILENO }
    }

    /// The reader of `stream` closed its end: nothing written there can arrive.
    public struct ReaderGone: Error, Sendable, CustomStringConvertible {
        public let stream: Stream
        public var description: String {
            "the program reading its \(stream == .output ? "output" : "messages") ended"
        }
    }

    /// The exit status of a process whose reader of `stream` went away.
    public static func exitStatus(for stream: Stream) -> Int32 { stream == .output ? 0 : 141 }

    private static let gone = Mutex<Stream?>(nil)

    /// The first stream whose reader went away, if one did.
    public static var readerGone: Stream? { gone.withLock { $0 } }

    /// Writes all of `text`; throws `ReaderGone` when the reader closed its end (EPIPE). Other write errors (a full
    /// disk behind a redirection) drop the text: output must never be the reason a transfer fails.
    public static func write(_ text: String, to stream: Stream) throws(ReaderGone) {
        if gone.withLock({ $0 == stream }) { throw ReaderGone(stream: stream) }
        do {
            try Syscalls.writeAll(stream.descriptor, Array(text.utf8))
        } catch let error as Syscalls.SocketError where error.code == EPIPE {
            gone.withLock { $0 = $0 ?? stream }
            throw ReaderGone(stream: stream)
        } catch {
            return
        }
    }

    /// Writes `text`; when the reader went away, the process ends at once with `exitStatus(for:)` (a listing or a
    /// line of narrative nobody can read any more).
    public static func writeOrLeave(_ text: String, to stream: Stream) {
        do {
            try write(text, to: stream)
        } catch {
            leave(error)
        }
    }

    /// Ends the process as a closed `error.stream` asks.
    public static func leave(_ error: ReaderGone) -> Never {
        _exit(exitStatus(for: error.stream))
    }
}
