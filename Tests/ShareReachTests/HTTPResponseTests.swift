import ShareHTTP
import Testing

@testable import ShareReach
import ShareNet

/// The discovery client's HTTP, read as it arrives: by length, chunked, or to the end of the stream, with limits.
@Suite struct HTTPResponseTests {
    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func aLookupAnswerByLengthIsWholeOnlyWhenAllOfItArrived() throws {
        let answer = Self.bytes(
            "HTTP/1.1 200 OK\r\nContent-Length: 17\r\nContent-Type: application/json\r\n\r\n{\"addresses\":[]}\n")
        for cut in 0..<answer.count {
            #expect(try HTTPResponse.parse(Array(answer[0..<cut]), complete: false) == nil, "cut \(cut)")
        }
        let response = try #require(try HTTPResponse.parse(answer, complete: false))
        #expect(response.status == 200 && response.headers["content-type"] == "application/json")
        #expect(response.body == Self.bytes("{\"addresses\":[]}\n"))
        #expect(throws: HTTPError.self) { try HTTPResponse.parse(Array(answer.dropLast()), complete: true) }
    }

    @Test func chunkedAndCloseDelimitedBodiesAndA204() throws {
        let chunked = Self.bytes(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n3;x=y\r\nefg\r\n0\r\n\r\n")
        #expect(try HTTPResponse.parse(chunked, complete: false)?.body == Self.bytes("abcdefg"))
        #expect(try HTTPResponse.parse(Array(chunked.dropLast(5)), complete: false) == nil)
        let closed = Self.bytes("HTTP/1.1 404 Not Found\r\n\r\nnot found")
        #expect(try HTTPResponse.parse(closed, complete: false) == nil)
        #expect(try HTTPResponse.parse(closed, complete: true)?.body == Self.bytes("not found"))
        let announced = Self.bytes("HTTP/1.1 204 No Content\r\nReannounce-After: 1800\r\n\r\n")
        let response = try #require(try HTTPResponse.parse(announced, complete: false))
        #expect(response.status == 204 && response.headers["reannounce-after"] == "1800")
    }

    @Test func oversizedAndMalformedAnswersAreErrors() {
        let huge = Self.bytes("HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n")
        #expect(throws: HTTPError.self) { try HTTPResponse.parse(huge, complete: false) }
        let endless = Self.bytes("HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: 20_000))
        #expect(throws: HTTPError.self) { try HTTPResponse.parse(endless, complete: false) }
        #expect(throws: HTTPError.self) {
            try HTTPResponse.parse(Self.bytes("SSH-2.0-OpenSSH\r\n\r\n"), complete: false)
        }
        let badChunk = Self.bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
        #expect(throws: HTTPError.self) { try HTTPResponse.parse(badChunk, complete: false) }
    }

    @Test func aRequestSaysWhatItCarries() {
        let request = String(
            decoding: HTTPResponse.request(
                method: "POST", path: "/v2/", host: "203.0.113.10:8443", body: Self.bytes("{}")),
            as: UTF8.self)
        #expect(request.hasPrefix("POST /v2/ HTTP/1.1\r\nHost: 203.0.113.10:8443\r\n"))
        #expect(request.contains("Content-Length: 2\r\n") && request.contains("Connection: close\r\n"))
        #expect(request.hasSuffix("\r\n\r\n{}"))
    }
}
