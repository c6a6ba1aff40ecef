// swift-tools-version:6.0
import PackageDescription

// The seeds' profile app as a command-line program, built only on share's library products: one process adds a
// profile and sends it to a trusted device; another receives it as a Profile (importing it) or, declaring only
// String, as the profile's name.
let package = Package(
    name: "ProfileApp",
    dependencies: [
        .package(name: "share", path: "../..")
    ],
    targets: [
        // The model exactly as Apple's session writes it (Swift 5 mode: it declares `static var profile`).
        .target(
            name: "ProfileModel",
            dependencies: [
                .product(name: "CoreTransferable", package: "share"),
                .product(name: "UniformTypeIdentifiers", package: "share"),
            ],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .executableTarget(
            name: "profile-app",
            dependencies: [
                "ProfileModel",
                .product(name: "ShareKit", package: "share"),
                .product(name: "CoreTransferable", package: "share"),
                .product(name: "UniformTypeIdentifiers", package: "share"),
            ]
        ),
    ]
)
