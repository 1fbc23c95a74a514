// swift-tools-version: 6.2
import PackageDescription

// NB: a path dependency's identity is its folder's name, so the root package is "main" in one
// checkout and "tinystorage" in another. Derive it instead of hard-coding it.
let rootPackage = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "TinyStorage").lowercased()

let package = Package(
    name: "TinyStorageBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        .executableTarget(
            name: "TinyStorageBenchmarks",
            dependencies: [
                .product(name: "TinyStorage", package: rootPackage),
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "GRDB", package: "GRDB.swift"),
                "CBenchmarkSupport",
            ],
            path: "Benchmarks/TinyStorageBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Floors written in C for the benchmarks (CRC-32C, a robust process-shared mutex).
        .target(name: "CBenchmarkSupport", path: "Sources/CBenchmarkSupport"),
    ]
)
