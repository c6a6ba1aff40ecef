// Everything built on ShareKit also talks to peers through ShareLink.
@_exported import ShareLink
@_exported import ShareReach
