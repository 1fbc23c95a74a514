import Foundation
import Testing

@testable import TinyStorage

extension TinyStorage.Key where Value == Int {
    fileprivate static var volume: Self { .init("volume", default: 7) }
}

extension TinyStorage.Key where Value == String? {
    fileprivate static var nickname: Self { .init("nickname") }
}

/// `@TinyStorageItem` bound to typed keys.
@Suite struct TinyStorageItemKeyTests {
    struct Settings {
        @TinyStorageItem var volume: Int
        @TinyStorageItem var nickname: String?

        init(storage: TinyStorage) {
            _volume = TinyStorageItem(.volume, storage: storage)
            _nickname = TinyStorageItem(.nickname, storage: storage)
        }
    }

    @Test func propertyReadsTheKeyDefaultThenTheStoredValue() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let settings = Settings(storage: storage)
            #expect(settings.volume == 7)
            #expect(settings.nickname == nil)
            #expect(try storage.rawJSON().isEmpty)

            settings.volume = 3
            settings.nickname = "ada"
            #expect(openStore(directory)[.volume] == 3)
            #expect(Settings(storage: openStore(directory)).nickname == "ada")

            settings.nickname = nil
            #expect(try storage.rawJSON(forKey: "nickname") == nil)
        }
    }

    /// Issue 34, item 9: setting an optional property to `nil` removes the key (2.x stores JSON
    /// `null`), so it reads its default again: `nil` for a `nil` default, as 2.x reads.
    @Test func settingAnOptionalToNilRemovesTheKeySoItReadsItsDefault() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            @TinyStorageItem("nickname", storage: storage) var nickname: String? = nil
            @TinyStorageItem("title", storage: storage) var title: String? = "Reader"
            nickname = "ada"
            title = "Editor"
            nickname = nil
            title = nil
            #expect(!storage.contains("nickname") && !storage.contains("title"))
            #expect(nickname == nil)
            #expect(title == "Reader")
        }
    }

    @Test func declaredAsUsualWithATypedKey() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            @TinyStorageItem(.volume, storage: storage) var volume: Int
            #expect(volume == 7)
            volume += 1
            #expect(storage[.volume] == 8)
        }
    }
}
