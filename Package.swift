// swift-tools-version: 6.2
import PackageDescription

/// Settings every Swift target gets, applied in one loop below so no target can drift.
let strictSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .treatWarning("ExplicitSendable", as: .error),
    .enableExperimentalFeature("StrictConcurrency=complete"),
]

let package = Package(
    name: "TinyStorage",
    platforms: [
        .macOS(.v14), .iOS(.v17), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1),
    ],
    products: [
        .library(name: "TinyStorage", targets: ["TinyStorage"]),
        .executable(name: "tinystorage", targets: ["TinyStorageCLI"]),
        // For test targets only (it imports Testing): the `.isolatedStore` trait.
        .library(name: "TinyStorageTesting", targets: ["TinyStorageTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // Tiny C helpers Swift cannot express portably: atomics on shared memory and hardware CRC32C.
        .target(name: "CTinyStorageShims"),
        .target(
            name: "TinyStorage",
            dependencies: [
                "CTinyStorageShims",
                .product(name: "Logging", package: "swift-log"),
            ],
            // The privacy manifest Apple requires of SDKs that call required-reason APIs (we call
            // `stat`/`fstat` and read `UserDefaults` in the migration). Copied unchanged into the
            // resource bundle, where Xcode's privacy report finds it.
            resources: [.copy("PrivacyInfo.xcprivacy")]
        ),
        // A store per test for Swift Testing. A target of its own so that apps, which link
        // `TinyStorage`, never link Testing.
        .target(
            name: "TinyStorageTesting",
            dependencies: ["TinyStorage"]
        ),
        // Only macOS and Linux have Foundation's `Process`; elsewhere the CLI and the helper are a
        // `main` that says so (Sources/TinyStorageCLI/UnsupportedPlatform.swift).
        .executableTarget(
            name: "TinyStorageCLI",
            dependencies: [
                "TinyStorage",
                .product(
                    name: "ArgumentParser", package: "swift-argument-parser",
                    condition: .when(platforms: [.macOS, .linux])),
            ]
        ),
        // The "other process" that integration tests spawn, kill and race against.
        .executableTarget(
            name: "TinyStorageTestHelper",
            dependencies: ["TinyStorage"]
        ),
        .testTarget(
            name: "TinyStorageTests",
            dependencies: ["TinyStorage"]
        ),
        // Real disk, real processes, kill -9, permissions. Depends on the executables so
        // `swift test` builds them; the tests find them beside the test bundle.
        .testTarget(
            name: "TinyStorageTestingTests",
            dependencies: ["TinyStorage", "TinyStorageTesting"]
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["TinyStorage", "TinyStorageTestHelper"]
        ),
        // Runs the built `tinystorage` executable as a user would.
        .testTarget(
            name: "CLITests",
            // TinyStorageTesting: DocumentationSnippetTests compiles the snippets that import it.
            dependencies: ["TinyStorageCLI", "TinyStorageTesting"]
        ),
    ]
)

for target in package.targets where target.type != .system && target.name != "CTinyStorageShims" {
    target.swiftSettings = (target.swiftSettings ?? []) + strictSettings
}
