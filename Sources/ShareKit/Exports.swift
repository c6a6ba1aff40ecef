// Everything built on ShareKit also talks to peers through ShareLink.
@_exported import ShareLink
@_exported import ShareReach
// A program that imports ShareKit has the model its values are written in (Transferable, UTType) and the events
// and messages its public API speaks of (TransferEvent, OfferItem).
@_exported import CoreTransferable
@_exported import UniformTypeIdentifiers
@_exported import ShareProtocol
