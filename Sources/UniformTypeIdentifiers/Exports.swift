// Apple's UniformTypeIdentifiers makes Foundation visible to its importers (URL, Data in its API).
@_exported import Foundation
