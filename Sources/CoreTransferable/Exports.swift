// Apple's CoreTransferable and UniformTypeIdentifiers make Foundation's types (Data, URL, UUID, FileManager)
// visible to their importers; sample code relies on it.
@_exported import Foundation
@_exported import UniformTypeIdentifiers
