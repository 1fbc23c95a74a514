/// `statfs` types (`f_type`) of file systems on which commits append with `pwrite`, not through
/// a mapping (see `AppendMapping.fileSystemsKeepingAllocatedSpace`), for tests.
enum OtherFileSystem {
    static let btrfs: Int64 = 0x9123_683E
    static let zfs: Int64 = 0x2FC1_2FC1
    static let nfs: Int64 = 0x6969
}
