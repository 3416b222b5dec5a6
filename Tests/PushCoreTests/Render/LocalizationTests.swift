import Foundation
import PushCore
import TestSupport
import Testing

@Suite("Localisation: .strings catalogs, formats, fallback chain")
struct LocalizationTests {
    @Test func stringsSyntaxCommentsEscapesAndUnquotedKeys() throws {
        let text = #"""
            /* A block comment
               over two lines */
            "GAME_PLAY_REQUEST_FORMAT" = "%@ and %@ have invited you to play Monopoly";
            // A line comment
            SHIPPED_TITLE = "Your order has shipped"; // trailing comment
            "ESCAPES" = "quote \" backslash \\ newline \n tab \t unicode \U00e9 \u263A pair \UD83D\uDE00 octal \101";
            "KEY_ONLY";
            "MULTI" =
                "spans
            lines";
            "DUP" = "first";
            "DUP" = "last";
            """#
        let catalog = try StringsCatalog(data: Array(text.utf8), name: "en.strings")
        #expect(catalog["GAME_PLAY_REQUEST_FORMAT"] == "%@ and %@ have invited you to play Monopoly")
        #expect(catalog["SHIPPED_TITLE"] == "Your order has shipped")
        #expect(catalog["ESCAPES"] == "quote \" backslash \\ newline \n tab \t unicode é ☺ pair 😀 octal A")
        #expect(catalog["KEY_ONLY"] == "KEY_ONLY")
        #expect(catalog["MULTI"] == "spans\nlines")
        #expect(catalog["DUP"] == "last", "the last value of a repeated key wins")
        #expect(catalog.strings.count == 6)
    }

    @Test(arguments: [UTF16Layout.littleEndianBOM, .bigEndianBOM, .littleEndianNoBOM, .utf8BOM])
    func encodings(layout: UTF16Layout) throws {
        let text = "/* 中文 */\n\"GREETING\" = \"你好, %@ 😀\";\n"
        let catalog = try StringsCatalog(data: layout.encode(text), name: "zh-Hant.strings")
        #expect(catalog["GREETING"] == "你好, %@ 😀")
    }

    @Test(arguments: [
        ("\"A\" = \"x\"", "en.strings:1: expected ';' after the value of \"A\""),
        ("\"A\" \"x\";", "en.strings:1: expected '=' after the key \"A\", found '\"'"),
        ("\n\n\"A\" = \"unterminated;", "en.strings:3: unterminated string"),
        ("/* never closed\n\"A\" = \"x\";", "en.strings:1: unterminated /* comment"),
        ("\"A\" = ;", "en.strings:1: expected a value, found ';'"),
    ])
    func malformedCatalogsNameFileAndLine(text: String, message: String) {
        #expect(throws: StringsCatalogError.self) { try StringsCatalog(data: Array(text.utf8), name: "en.strings") }
        do {
            _ = try StringsCatalog(data: Array(text.utf8), name: "en.strings")
        } catch {
            #expect(error.description == message)
        }
    }

    @Test func invalidEncodingIsRefused() {
        #expect(throws: StringsCatalogError.self) { try StringsCatalog(data: [0x22, 0xC3, 0x28, 0x22], name: "x.strings") }
        #expect(throws: StringsCatalogError.self) { try StringsCatalog(data: [0xFF, 0xFE, 0x41], name: "x.strings") }
    }

    @Test func formats() throws {
        #expect(
            try LocalizedFormat.format("%@ and %@ have invited you to play Monopoly", arguments: ["Jenna", "Frank"])
                == "Jenna and Frank have invited you to play Monopoly")
        #expect(try LocalizedFormat.format("%2$@ bringt %1$@", arguments: ["A-1", "DHL"]) == "DHL bringt A-1")
        #expect(
            try LocalizedFormat.format("%d new, 100%% sure, %ld left, %lld total", arguments: ["5", "-3", "9000000000"])
                == "5 new, 100% sure, -3 left, 9000000000 total")
        #expect(try LocalizedFormat.format("%1$@ %1$@ %2$d", arguments: ["echo", "7"]) == "echo echo 7")
        #expect(
            try LocalizedFormat.format("[%5d] [%-4@] [%03d] [%.2f] [%x]", arguments: ["42", "ab", "7", "3.14159", "255"])
                == "[   42] [ab  ] [007] [3.14] [ff]")
        #expect(try LocalizedFormat.format("no conversions", arguments: ["unused"]) == "no conversions")
        #expect(throws: LocalizedFormatError.self) { try LocalizedFormat.format("%@ and %@", arguments: ["one"]) }
        #expect(throws: LocalizedFormatError.self) { try LocalizedFormat.format("%d items", arguments: ["many"]) }
        #expect(throws: LocalizedFormatError.self) { try LocalizedFormat.format("%k", arguments: ["x"]) }
        #expect(throws: LocalizedFormatError.self) { try LocalizedFormat.format("trailing %", arguments: []) }
    }

    /// Decoders are fuzzed: mutated strings files and format strings never crash.
    @Test func mutatedCatalogsAndFormatsNeverCrash() {
        let valid = Array("/* c */\n\"K\" = \"%1$@ und %2$d \\U00e9 \\n \\101\";\n// x\nU = \"v\";\n".utf8)
        var generator = SplitMix64(seed: 7)
        let alphabet = Array(#"/*"\=;%$@dlU0123456789.-uxf "#.utf8) + [0x0A, 0xC3, 0xA9, 0xFF, 0xFE, 0x00, 0xD8]
        for _ in 0..<5_000 {
            let bytes = generator.mutated(valid, alphabet: alphabet)
            if let catalog = try? StringsCatalog(data: bytes, name: "fuzz.strings") {
                for format in catalog.strings.values {
                    _ = try? LocalizedFormat.format(format, arguments: ["a", "12"])
                }
            }
            _ = try? LocalizedFormat.format(String(decoding: bytes, as: UTF8.self), arguments: ["x", "3", "4.5"])
        }
        #expect(throws: LocalizedFormatError.self) { try LocalizedFormat.format("%99999999999999999999999d", arguments: ["1"]) }
        #expect(throws: LocalizedFormatError.self) { try LocalizedFormat.format("%.99999999999999999999f", arguments: ["1"]) }
        #expect(throws: LocalizedFormatError.self) { try LocalizedFormat.format("%99999999999999999999$@", arguments: ["1"]) }
    }

    @Test func fallbackChain() {
        let catalogs = LocalizationCatalogs(catalogs: [
            "en": StringsCatalog(strings: [:]), "zh": StringsCatalog(strings: [:]), "zh_Hant": StringsCatalog(strings: [:]),
            "zh-Hant-TW": StringsCatalog(strings: [:]), "de": StringsCatalog(strings: [:]),
        ])
        #expect(catalogs.chain(for: "zh-Hant-TW") == ["zh-hant-tw", "zh-hant", "zh", "en"])
        #expect(catalogs.chain(for: "zh_Hant_HK") == ["zh-hant", "zh", "en"])
        #expect(catalogs.chain(for: "zh-TW") == ["zh-hant", "zh", "en"], "the script Taiwan writes")
        #expect(catalogs.chain(for: "zh-CN") == ["zh", "en"], "no zh-Hans catalog")
        #expect(catalogs.chain(for: "de_CH.UTF-8") == ["de", "en"])
        #expect(catalogs.chain(for: "fr-FR") == ["en"])
        #expect(catalogs.chain(for: nil) == ["en"])
        #expect(catalogs.chain(for: "") == ["en"])
        let german = LocalizationCatalogs(catalogs: ["de": StringsCatalog(strings: [:])], defaultLocale: "de")
        #expect(german.chain(for: "fr") == ["de"], "a configured default locale")
    }

    @Test func serverLocalisationPerLocaleAlongTheChain() throws {
        let payload =
            #"{"aps": {"alert": {"title-loc-key": "SHIPPED_TITLE", "loc-key": "GAME_PLAY_REQUEST_FORMAT", "loc-args": ["Jenna", "Frank"]}}}"#
        let server = #""localize": "server""#
        let german = try rendered(payload, extra: server, catalogs: sampleCatalogs, locale: "de-AT")
        #expect(
            german.payloadString
                == #"{"aps":{"alert":{"title":"Your order has shipped","body":"Jenna und Frank haben dich zu Monopoly eingeladen"}}}"#)
        #expect(german.localizedWith == ["en", "de"], "the title came from the default catalog")
        let taiwan = try rendered(payload, extra: server, catalogs: sampleCatalogs, locale: "zh-Hant-TW")
        #expect(taiwan.payloadString == #"{"aps":{"alert":{"title":"订单已发货","body":"Jenna 和 Frank 邀請你玩《地產大亨》"}}}"#, "zh-Hant → zh → en")
        let unknown = try rendered(payload, extra: server, catalogs: sampleCatalogs, locale: "fr")
        #expect(
            unknown.payloadString
                == #"{"aps":{"alert":{"title":"Your order has shipped","body":"Jenna and Frank have invited you to play Monopoly"}}}"#)
        let positional = try rendered(
            #"{"aps": {"alert": {"loc-key": "ORDER_SHIPPED_FORMAT", "loc-args": ["A-17", "DHL"]}}}"#, extra: server, catalogs: sampleCatalogs,
            locale: "de")
        #expect(positional.payloadString == #"{"aps":{"alert":{"body":"DHL bringt deine Bestellung A-17."}}}"#)
    }

    @Test func keysNoCatalogHasFallBackToTheDevice() throws {
        let notification = try rendered(
            #"{"aps": {"alert": {"title": "Fallback title", "title-loc-key": "UNKNOWN_TITLE", "subtitle-loc-key": "UNKNOWN_SUB", "subtitle-loc-args": ["x"], "loc-key": "GAME_PLAY_REQUEST_FORMAT", "loc-args": ["Jenna"]}}}"#,
            extra: #""localize": "server""#, catalogs: sampleCatalogs, locale: "en")
        // The body's format needs two arguments but got one: left to the device too.
        #expect(
            notification.payloadString
                == #"{"aps":{"alert":{"title":"Fallback title","title-loc-key":"UNKNOWN_TITLE","subtitle-loc-key":"UNKNOWN_SUB","subtitle-loc-args":["x"],"loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Jenna"]}}}"#
        )
        #expect(notification.deviceFallbackKeys == ["UNKNOWN_TITLE", "UNKNOWN_SUB", "GAME_PLAY_REQUEST_FORMAT"])
    }

    @Test func aServerTitleReplacesAPlainTitle() throws {
        let notification = try rendered(
            #"{"aps": {"alert": {"title": "Old", "body": "Plain body", "title-loc-key": "SHIPPED_TITLE"}}}"#,
            extra: #""localize": "server""#, catalogs: sampleCatalogs, locale: "en")
        #expect(notification.payloadString == #"{"aps":{"alert":{"title":"Your order has shipped","body":"Plain body"}}}"#)
    }

    @Test func theRepositoryCatalogsLoad() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("localization")
        for locale in ["en", "de", "zh-Hant"] {
            let data = try Data(contentsOf: directory.appendingPathComponent("\(locale).strings"))
            let catalog = try StringsCatalog(data: Array(data), name: "\(locale).strings")
            #expect(catalog["GAME_PLAY_REQUEST_FORMAT"] != nil, "\(locale).strings has the example key")
        }
    }
}

enum UTF16Layout: CaseIterable, Sendable {
    case littleEndianBOM, bigEndianBOM, littleEndianNoBOM, utf8BOM

    func encode(_ text: String) -> [UInt8] {
        func units(bigEndian: Bool) -> [UInt8] {
            text.utf16.flatMap { unit in bigEndian ? [UInt8(unit >> 8), UInt8(unit & 0xFF)] : [UInt8(unit & 0xFF), UInt8(unit >> 8)] }
        }
        switch self {
        case .littleEndianBOM: return [0xFF, 0xFE] + units(bigEndian: false)
        case .bigEndianBOM: return [0xFE, 0xFF] + units(bigEndian: true)
        case .littleEndianNoBOM: return units(bigEndian: false)
        case .utf8BOM: return [0xEF, 0xBB, 0xBF] + Array(text.utf8)
        }
    }
}
