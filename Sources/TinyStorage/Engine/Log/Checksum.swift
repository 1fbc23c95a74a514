import CTinyStorageShims

/// CRC-32C (Castagnoli) of a byte range, hardware-accelerated where the CPU allows.
///
/// The engine checksums every record with it; see `crc32c.c` for the implementations.
@inline(__always)
func crc32c(_ bytes: UnsafeRawBufferPointer, startingWith crc: UInt32 = 0) -> UInt32 {
    guard let base = bytes.baseAddress, !bytes.isEmpty else { return crc }
    return ts_crc32c(crc, base, bytes.count)
}
