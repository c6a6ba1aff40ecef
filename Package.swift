// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "share",
    products: [
        .library(name: "UniformTypeIdentifiers", targets: ["UniformTypeIdentifiers"]),
        .library(name: "CoreTransferable", targets: ["CoreTransferable"]),
        // Transferable values across machines: ShareClient sends them to trusted devices and receives them as the
        // types a program declares, over the same identity, trust and engine as the share command.
        .library(name: "ShareKit", targets: ["ShareKit"]),
        // ShareClient's sends to LocalSend devices by name (`ShareClient.reachLocalSendDevices()`): opt-in, so that a
        // program using ShareKit links LocalSend only when it asks.
        .library(name: "ShareKitLocalSend", targets: ["ShareKitLocalSend"]),
        .executable(name: "share", targets: ["share"]),
        .executable(name: "share-watch", targets: ["share-watch"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    ],
    targets: [
        .target(name: "UniformTypeIdentifiers"),
        .target(name: "CoreTransferable", dependencies: ["UniformTypeIdentifiers"]),
        .systemLibrary(
            name: "CShareOpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // BLAKE3's reference C implementation, built by scripts/setup.sh from Debian's sources (a static library).
        .systemLibrary(name: "CShareBlake3", pkgConfig: "share_blake3"),
        .target(name: "ShareTLS", dependencies: ["CShareOpenSSL", "CShareBlake3"]),
        .systemLibrary(
            name: "CShareArchive", pkgConfig: "libarchive", providers: [.apt(["libarchive-dev"])]),
        .systemLibrary(name: "CShareZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),
        .systemLibrary(name: "CShareSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CShareSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // magic-wormhole's protocol: SPAKE2 as its reference implementation computes it, its key schedule and
        // secret boxes (libsodium), and its codes.
        .target(
            name: "ShareWormhole",
            dependencies: [
                "ShareText",
                "ShareHTTP",
                "CShareSodium", "ShareNet", "ShareThreads", "ShareTrust", "ShareTLS", "ShareDisk", "ShareArchive",
            ]),
        // LocalSend's protocol (v2): its HTTPS API as server and client, and its discovery.
        .target(
            name: "ShareLocalSend",
            dependencies: [
                "ShareText",
                "ShareHTTP",
                "ShareNet", "ShareThreads", "ShareTrust", "ShareTLS", .product(name: "Logging", package: "swift-log"),
            ]),
        .target(
            name: "ShareArchive",
            dependencies: [
                "ShareText",
                "CShareArchive", "CShareZstd", "ShareDisk", "ShareThreads", "UniformTypeIdentifiers",
            ]),
        .target(name: "ShareProtocol", dependencies: ["CoreTransferable", "ShareThreads", "ShareText"]),
        // Shared folders' logic, pure: version vectors, the global version of each path, the planner, the scanner's
        // comparison, and a folder's steps over a disk and an index it is given (the agent's, or a simulation's).
        .target(name: "ShareSync", dependencies: ["ShareText", "ShareProtocol"]),
        // A shared folder's index in SQLite (the only importer of CShareSQLite).
        .target(name: "ShareSyncStore", dependencies: ["ShareSync", "CShareSQLite"]),
        // Locks, conditions and threads on pthreads: Foundation's NSObject-based ones would link CoreFoundation, the
        // rest of Foundation and ICU into the watch.
        .target(name: "ShareThreads", dependencies: ["CShareSystem"]),
        // Text, numbers, times and untyped JSON on the standard and C libraries: Foundation's NSString layer
        // (String(format:), CharacterSet, JSONSerialization, DateFormatter) links CoreFoundation and ICU's 34 MB of
        // data into a statically linked binary.
        .target(name: "ShareText"),
        .target(name: "CShareSystem"),
        // The one way to create, open, move or remove anything under a folder we were given: directory handles.
        .target(name: "ShareDisk", dependencies: ["CShareSystem", "ShareText"]),
        // Sockets and system calls, the peer connection (TLS carrying the protocol's frames), the one acceptor every
        // server runs on, and the one writer of the standard streams.
        .target(
            name: "ShareNet",
            dependencies: [
                "ShareTLS", "ShareProtocol", "ShareThreads", "CShareSystem",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The one HTTP/1.1 layer (heads and bodies with their deadlines and sizes) and WebSocket client, on ShareNet's
        // sockets: every HTTP speaker uses it (LocalSend, the page, Global Discovery, the wormhole mailbox). A module
        // of its own so that the watch, which speaks no HTTP, does not link Foundation's string and URL code.
        .target(name: "ShareHTTP", dependencies: ["ShareText", "ShareNet", "ShareTLS"]),
        // Devices and their identity, the trust store, trust notices and AccessPolicy (every "may this device…"),
        // and the sessions opened over them (hello, ping): what every device needs to talk to a peer, and nothing
        // more (the watch links only this, the network, TLS and the protocol, to stay small).
        .target(
            name: "ShareTrust",
            dependencies: [
                "ShareText",
                "ShareNet", "ShareTLS", "ShareProtocol", "CShareSystem", "ShareDisk", "ShareThreads",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Beyond the LAN: Syncthing's Global Discovery v3 and Relay Protocol v1 clients, and the choice of a path to
        // a trusted device (its known addresses, then what it announced, then a relay).
        .target(
            name: "ShareReach",
            dependencies: [
                "ShareText",
                "ShareHTTP",
                "ShareNet", "ShareThreads", "ShareTrust", "ShareTLS", "ShareProtocol",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .target(name: "ShareProfileModel", dependencies: ["CoreTransferable", "ShareDisk"]),
        .target(
            name: "ShareProfiles",
            dependencies: ["ShareText", "ShareProfileModel", "CoreTransferable", "ShareArchive", "ShareDisk"]),
        // The engine: sessions, sinks, partials and ledgers, the job model, the control socket's protocol, the
        // listener that authenticates sessions. LocalSend's glue is ShareLocalSendRoute's and sends by code are the
        // command line's (ShareCLI's CodeTransfers): the library product links neither LocalSend nor libsodium.
        .target(
            name: "ShareEngine",
            dependencies: [
                "ShareText",
                "ShareHTTP",
                "ShareNet", "ShareThreads", "ShareTrust", "ShareReach", "ShareTLS", "ShareProtocol", "ShareProfiles",
                "ShareArchive", "CoreTransferable", "CShareSystem", "ShareDisk",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        // The engine over LocalSend: sends to LocalSend devices (each item's representation chosen by the engine), the
        // agent's LocalSend settings, identity, trusted and seen devices. The agent, the command line and the page
        // use it; ShareKit only through ShareKitLocalSend.
        .target(
            name: "ShareLocalSendRoute",
            dependencies: [
                "ShareText", "ShareEngine", "ShareLocalSend", "ShareNet", "ShareTrust", "ShareTLS", "ShareProtocol",
                "ShareArchive", "ShareDisk", "CoreTransferable", "UniformTypeIdentifiers",
            ]),
        // Shared folders on the agent (`share sync`): each folder's index and worker, the folder links, the pulls.
        .target(
            name: "ShareFolders",
            dependencies: [
                "ShareText",
                "ShareSync", "ShareSyncStore", "ShareEngine", "ShareNet", "ShareTrust", "ShareReach", "ShareTLS",
                "ShareProtocol", "ShareDisk", "ShareThreads", "CoreTransferable",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The agent: its parts (outbox, router, discovery, notices, watches, LocalSend's inbox) as services.
        .target(
            name: "ShareAgent",
            dependencies: [
                "ShareText",
                "ShareEngine", "ShareNet", "ShareThreads", "ShareTrust", "ShareReach", "ShareTLS", "ShareProtocol",
                "ShareProfiles", "ShareArchive", "CoreTransferable", "ShareDisk", "ShareLocalSend",
                "ShareLocalSendRoute",
                "ShareFolders",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        // The library product: ShareClient, ShareItem, IncomingItem over the engine.
        .target(
            name: "ShareKit",
            dependencies: [
                "ShareText",
                "ShareEngine", "ShareNet", "ShareThreads", "ShareTrust", "ShareReach", "ShareTLS", "ShareProtocol",
                "ShareProfiles", "ShareArchive", "CoreTransferable", "UniformTypeIdentifiers", "ShareDisk",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .target(
            name: "ShareKitLocalSend",
            dependencies: ["ShareKit", "ShareEngine", "ShareLocalSendRoute", "ShareTrust"]),
        // The agent's own page on 127.0.0.1 (`share web`, `share agent --web`), on LocalSend's HTTP/1.1 code.
        .target(
            name: "ShareWeb",
            dependencies: [
                "ShareText",
                "ShareHTTP",
                "ShareKit", "ShareEngine", "ShareAgent", "ShareNet", "ShareThreads", "ShareTrust", "ShareLocalSend",
                "ShareLocalSendRoute",
                "ShareDisk", "ShareReach", "ShareTLS",
                "ShareArchive",
                "CoreTransferable", "UniformTypeIdentifiers", .product(name: "Logging", package: "swift-log"),
            ]),
        .target(
            name: "ShareCLI",
            dependencies: [
                "ShareText",
                "ShareKit", "ShareEngine", "ShareAgent", "ShareNet", "ShareThreads", "ShareTrust", "ShareReach",
                "ShareTLS",
                "ShareProtocol", "ShareProfiles", "ShareWatch", "ShareDisk", "ShareCommandLine",
                "ShareLocalSend", "ShareLocalSendRoute", "ShareKitLocalSend", "ShareWeb", "ShareFolders",
                "ShareWormhole",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        .executableTarget(name: "share", dependencies: ["ShareCLI", "ShareKit", "ShareKitLocalSend"]),
        // Exit statuses and the one-line errors of the command-line programs (`share`, `share-watch`): the
        // libraries throw typed failures; only these programs turn them into exit codes.
        .target(name: "ShareCommandLine", dependencies: ["ShareNet", "ShareTrust"]),
        // The watch-style client: a separate small executable (`share watch` runs it) that links no Foundation
        // beyond FoundationEssentials, no libarchive and no ArgumentParser, to stay within its memory budget.
        .target(
            name: "ShareWatch",
            dependencies: [
                "ShareNet", "ShareTrust", "ShareProtocol", "ShareTLS", "ShareProfileModel", "ShareDisk", "ShareText",
            ]),
        // Release builds, for the watch's memory budget (16 MiB): not position-independent (the loader has no
        // relocations to apply to the binary's data: about 1 MiB resident); no dynamic export of every symbol (the
        // loader looks up every library's symbols in the executable first: 330 KiB of tables touched); and the few
        // C++ library functions Swift's runtime calls linked in from libstdc++.a (Deploy/watch-link holds only the
        // archive and is searched first), instead of mapping all of libstdc++.so (about 1 MiB).
        .executableTarget(
            name: "share-watch", dependencies: ["ShareWatch", "ShareTLS", "ShareCommandLine"],
            linkerSettings: [
                .unsafeFlags(
                    [
                        "-Xclang-linker", "-no-pie", "-Xlinker", "--no-export-dynamic",
                        "-L\(Context.packageDirectory)/Deploy/watch-link",
                    ], .when(configuration: .release))
            ]),
        .executableTarget(
            name: "share-bench-tls", dependencies: ["ShareEngine", "ShareTrust", "ShareProtocol", "ShareTLS"],
            path: "Benchmarks/TLSBenchmark"),
        .executableTarget(
            name: "share-bench-archive", dependencies: ["ShareArchive"], path: "Benchmarks/ArchiveBenchmark"),
        .executableTarget(
            name: "share-bench-delta", dependencies: ["ShareProtocol"], path: "Benchmarks/DeltaBenchmark"),
        .target(
            name: "ShareFuzzTargets",
            dependencies: [
                "ShareHTTP",
                "ShareProtocol", "ShareTLS", "ShareNet", "ShareTrust", "ShareArchive", "ShareReach", "CoreTransferable",
                "UniformTypeIdentifiers",
            ]),
        .executableTarget(
            name: "share-fuzz", dependencies: ["ShareFuzzTargets"], path: "Fuzz",
            exclude: ["corpus", "archive_seeds.py"]),
        .executableTarget(
            name: "share-bench-types",
            dependencies: ["CoreTransferable", "UniformTypeIdentifiers"],
            path: "Benchmarks/TypesBenchmark"
        ),
        .testTarget(
            name: "UniformTypeIdentifiersTests",
            dependencies: ["UniformTypeIdentifiers"],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(name: "ShareTLSTests", dependencies: ["ShareTLS"]),
        .testTarget(
            name: "ShareReachTests", dependencies: ["ShareHTTP", "ShareReach", "ShareNet", "ShareTrust", "ShareTLS"]),
        .testTarget(
            name: "ShareWormholeTests",
            dependencies: ["ShareHTTP", "ShareWormhole", "ShareNet", "ShareDisk", "ShareTLS", "ShareTestSupport"]),
        .testTarget(name: "ShareDiskTests", dependencies: ["ShareDisk"]),
        .testTarget(name: "ShareTextTests", dependencies: ["ShareText"]),
        .testTarget(name: "ShareSyncTests", dependencies: ["ShareSync", "ShareSyncStore", "ShareProtocol"]),
        .target(name: "ShareTestSupport", path: "Tests/ShareTestSupport"),
        .testTarget(
            name: "ShareArchiveTests", dependencies: ["ShareArchive", "ShareTestSupport"], exclude: ["Fixtures"]),
        .testTarget(
            name: "ShareProtocolTests", dependencies: ["ShareProtocol", "ShareFuzzTargets", "ShareTLS", "ShareArchive"]),
        .testTarget(
            name: "ShareKitTests",
            dependencies: [
                "ShareHTTP",
                "ShareKit", "ShareEngine", "ShareAgent", "ShareNet", "ShareWeb", "ShareCLI", "share", "share-watch",
                "ShareTestSupport", "ShareLocalSendRoute", "ShareKitLocalSend",
            ],
            exclude: ["Fixtures"]),
        .testTarget(
            name: "CoreTransferableTests",
            dependencies: ["CoreTransferable", "UniformTypeIdentifiers"]
        ),
        // Apple's own sample code, compiled unchanged in Swift 5 language mode (it uses `static var`).
        .testTarget(
            name: "SeedSampleTests",
            dependencies: ["CoreTransferable", "UniformTypeIdentifiers"],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
    ],
    swiftLanguageModes: [.v6]
)
