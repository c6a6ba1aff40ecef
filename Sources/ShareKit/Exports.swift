// A program that imports ShareKit has the model its values are written in (Transferable, UTType): Apple's names.
@_exported import CoreTransferable
@_exported import UniformTypeIdentifiers
import ShareEngine
import ShareTrust
import ShareProtocol
import ShareTLS

// The other types ShareKit's API speaks of, under the names docs/LIBRARY.md uses, without re-exporting the modules
// that define them.
public typealias ShareFailure = ShareTrust.ShareFailure
public typealias LocalDevice = ShareTrust.LocalDevice
public typealias DeviceID = ShareTLS.DeviceID
public typealias TransferEvent = ShareProtocol.TransferEvent
public typealias OfferItem = ShareProtocol.OfferItem
public typealias RefusedItem = ShareEngine.RefusedItem
public typealias ShareItem = ShareEngine.ShareItem
public typealias SharedFile = ShareEngine.SharedFile
public typealias SharedFolder = ShareEngine.SharedFolder
public typealias SharePreview = ShareEngine.SharePreview
