extension TinyStorage {
    /// This version of TinyStorage, which `tinystorage --version` prints.
    ///
    /// NB: `-dev` until a release is tagged; the tag and this string change together.
    package static let version = "3.0.0-dev"
}
