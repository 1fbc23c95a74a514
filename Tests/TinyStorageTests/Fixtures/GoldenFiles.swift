import Foundation

/// Files written by earlier versions of TinyStorage, kept byte for byte so every later version is
/// checked against them.
enum GoldenFiles {
    /// A data file of format version 1 (the first release of this format), written through the
    /// public API by that version:
    ///
    /// ```swift
    /// try s.storeOrThrow(364, forKey: "streak", writeID: UUID(uuidString: "5B0C1D7E-8F0A-4C55-9D1E-3A6F2B7C9E10"))
    /// try s.storeOrThrow("Ada", forKey: "name")
    /// try s.storeOrThrow(Data([0, 1, 2, 0xFF]), forKey: "blob")          // stored as "AAEC\/w=="
    /// try s.storeOrThrow(Profile(name: "Grace", age: 85), forKey: "profile")
    /// try s.storeOrThrow("temporary", forKey: "gone")
    /// s.remove(key: "gone", writeID: UUID(uuidString: "00000000-0000-4000-8000-000000000001"))
    /// try s.bulkStoreOrThrow(items: ["日本語 🔑": "é", "flags": [true, false]], writeID: <the same>)
    /// try s.storeOrThrow(365, forKey: "streak")
    /// ```
    static let version1: Data = {
        let text = [
            "iVRJTllLVgoBAAAAAAAAAAEAAAAAAAAAAAAAAAZ4lewoAAAAt6rKkgECWwwdfo8KTFWdHjpvK3yeEAEAAAABBgAAAHN0cmVh",
            "awMAAAAzNjQYAAAArLNCnAEAAQAAAAEEAAAAbmFtZQUAAAAiQWRhIh4AAAAIA8RjAQABAAAAAQQAAABibG9iCwAAACJBQUVD",
            "XC93PT0iLwAAABT8+NQBAAEAAAABBwAAAHByb2ZpbGUZAAAAeyJhZ2UiOjg1LCJuYW1lIjoiR3JhY2UifR4AAACq7/p0AQAB",
            "AAAAAQQAAABnb25lCwAAACJ0ZW1wb3JhcnkiHwAAAJZb6pcBAgAAAAAAAEAAgAAAAAAAAAEBAAAAAgQAAABnb25lSwAAAOR6",
            "Ws0BAgAAAAAAAEAAgAAAAAAAAAECAAAAAQUAAABmbGFncwwAAABbdHJ1ZSxmYWxzZV0BDgAAAOaXpeacrOiqniDwn5SRBAAA",
            "ACLDqSIYAAAABX0+1QEAAQAAAAEGAAAAc3RyZWFrAwAAADM2NQ==",
        ].joined()
        guard let data = Data(base64Encoded: text) else { preconditionFailure("the fixture is not base64") }
        return data
    }()

    /// The writeIDs the version 1 file's records carry, in record order (`nil`: none).
    static let version1WriteIDs: [String?] = [
        "5B0C1D7E-8F0A-4C55-9D1E-3A6F2B7C9E10", nil, nil, nil, nil,
        "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000001", nil,
    ]

    /// A data file of format version 2, the last version before values could expire, written by
    /// that release's `tinystorage` tool (and cut where its records end: on Linux the file goes on
    /// with space allocated ahead):
    ///
    /// ```sh
    /// tinystorage write s streak 364
    /// tinystorage write s name --string Ada
    /// tinystorage write s blob --data "AAEC/w=="
    /// tinystorage write s profile '{"age":85,"name":"Grace"}'
    /// tinystorage write s gone --string temporary
    /// tinystorage delete s gone
    /// tinystorage write s "日本語 🔑" '"é"'
    /// tinystorage write s streak 365
    /// ```
    static let version2: Data = {
        let text = [
            "iVRJTllLVgoCAAAAAAAAAAEAAAAAAAAAAAAAAAAAAAAAAAAANMa9r5wBAAAAAAAAJYd6N3QBAAAAAAAAMLtAViAAAAC1Ye+c",
            "AgABAAAAAAAAAAEAAAABBgAAAHN0cmVhawMAAAAzNjQgAAAABO81GQIAAgAAAAAAAAABAAAAAQQAAABuYW1lBQAAACJBZGEi",
            "HwAAAO7gHsoCAAMAAAAAAAAAAQAAAAMEAAAAYmxvYgQAAAAAAQL/NwAAAMaXlYYCAAQAAAAAAAAAAQAAAAEHAAAAcHJvZmls",
            "ZRkAAAB7ImFnZSI6ODUsIm5hbWUiOiJHcmFjZSJ9JgAAAK99l5cCAAUAAAAAAAAAAQAAAAEEAAAAZ29uZQsAAAAidGVtcG9y",
            "YXJ5IhcAAACRvPKeAgAGAAAAAAAAAAEAAAACBAAAAGdvbmUpAAAAFTMubQIABwAAAAAAAAABAAAAAQ4AAADml6XmnKzoqp4g",
            "8J+UkQQAAAAiw6kiIAAAAPer5dYCAAgAAAAAAAAAAQAAAAEGAAAAc3RyZWFrAwAAADM2NQ==",
        ].joined()
        guard let data = Data(base64Encoded: text) else { preconditionFailure("the fixture is not base64") }
        return data
    }()
}
