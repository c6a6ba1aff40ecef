// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "share",
    products: [
        .library(name: "UniformTypeIdentifiers", targets: ["UniformTypeIdentifiers"]),
        .library(name: "CoreTransferable", targets: ["CoreTransferable"]),
    ],
    targets: [
        .target(name: "UniformTypeIdentifiers"),
        .target(name: "CoreTransferable", dependencies: ["UniformTypeIdentifiers"]),
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
