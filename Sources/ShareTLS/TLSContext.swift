internal import CShareOpenSSL

/// Decides whether a peer presenting a certificate may continue the handshake.
public typealias PeerVerifier = @Sendable (DeviceID) -> Bool

/// A TLS 1.3 context with this device's identity and mutual certificate authentication; one owner of one `SSL_CTX`.
///
/// Peers are checked in the verify callback against `verifier` (the trust store); self-signed certificates are the
/// norm, so the chain itself is not validated: the device ID (SHA-256 of the certificate) is the identity, and the
/// handshake proves the peer holds the matching key.
public final class TLSContext: @unchecked Sendable {  // immutable after init; SSL_CTX is safe to share once set up
    public enum Role: Sendable { case server, client }

    let pointer: OpaquePointer
    public let role: Role
    public let identity: TLSIdentity
    /// Kept alive as long as the context: OpenSSL holds an unretained pointer to it.
    private let verification: Verification

    final class Verification: Sendable {
        let verify: PeerVerifier
        init(_ verify: @escaping PeerVerifier) { self.verify = verify }
    }

    /// `alpn`: application protocols a client offers (a relay's protocol mode asks for `bep-relay`); none for share's
    /// own sessions.
    /// Whether the other end must present a certificate: share's own sessions require one (`required`); a server
    /// for another protocol's clients (LocalSend) asks for one and goes on without (`optional`), and `verifier`
    /// then sees only those that present one.
    public enum PeerCertificate: Sendable { case required, optional }

    /// `minimumTLS12`: TLS 1.2 too, for other protocols' peers (share's own sessions are TLS 1.3 only).
    public init(
        identity: TLSIdentity, role: Role, verifier: @escaping PeerVerifier, alpn: [String] = [],
        peerCertificate: PeerCertificate = .required, minimumTLS12: Bool = false
    ) throws {
        guard let context = SSL_CTX_new(TLS_method()) else { throw TLSError.drain("SSL_CTX_new") }
        pointer = context
        self.role = role
        self.identity = identity
        verification = Verification(verifier)
        guard cshare_SSL_CTX_set_min_proto_version(context, minimumTLS12 ? TLS1_2_VERSION : TLS1_3_VERSION) == 1,
            cshare_SSL_CTX_set_max_proto_version(context, TLS1_3_VERSION) == 1
        else { throw TLSError.drain("setting TLS 1.3 only") }
        cshare_SSL_CTX_set_secure_options(context)
        cshare_SSL_CTX_set_read_ahead(context, 64 << 10)
        // AES-GCM first: this CPU has AES-NI; ChaCha20 for peers without it.
        guard
            SSL_CTX_set_ciphersuites(
                context, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") == 1
        else { throw TLSError.drain("SSL_CTX_set_ciphersuites") }
        guard SSL_CTX_use_certificate(context, identity.certificate.pointer) == 1 else {
            throw TLSError.drain(.badCredentials, "SSL_CTX_use_certificate")
        }
        guard SSL_CTX_use_PrivateKey(context, identity.key.pointer) == 1, SSL_CTX_check_private_key(context) == 1 else {
            throw TLSError.drain(.badCredentials, "SSL_CTX_use_PrivateKey")
        }
        guard cshare_SSL_CTX_set_app_data(context, Unmanaged.passUnretained(verification).toOpaque()) == 1 else {
            throw TLSError.drain("SSL_CTX_set_app_data")
        }
        if !alpn.isEmpty {
            // The wire form: each name preceded by its length.
            var wire: [UInt8] = []
            for name in alpn {
                let bytes = Array(name.utf8)
                guard (1...255).contains(bytes.count) else { throw TLSError(.openssl, "bad ALPN name '\(name)'") }
                wire.append(UInt8(bytes.count))
                wire += bytes
            }
            // Returns 0 on success, unlike most of OpenSSL.
            guard SSL_CTX_set_alpn_protos(context, wire, UInt32(wire.count)) == 0 else {
                throw TLSError.drain("SSL_CTX_set_alpn_protos")
            }
        }
        let mode = peerCertificate == .required ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER
        SSL_CTX_set_verify(context, mode, verifyCallback)
        SSL_CTX_set_verify_depth(context, 4)
    }

    deinit { SSL_CTX_free(pointer) }
}

/// OpenSSL's verify callback: a non-capturing function that finds its context through app data.
private func verifyCallback(_ preverified: Int32, _ store: OpaquePointer?) -> Int32 {
    guard let store else { return 0 }
    // Only the leaf matters: its digest is the identity. Intermediate certificates are not trusted for anything.
    guard X509_STORE_CTX_get_error_depth(store) == 0 else { return 1 }
    guard let ssl = cshare_X509_STORE_CTX_get_ssl(store), let cert = X509_STORE_CTX_get_current_cert(store),
        let context = SSL_get_SSL_CTX(ssl), let verificationPointer = cshare_SSL_CTX_get_app_data(context),
        let statePointer = cshare_SSL_get_app_data(ssl)
    else { return 0 }
    let verification = Unmanaged<TLSContext.Verification>.fromOpaque(verificationPointer).takeUnretainedValue()
    let state = Unmanaged<TLSConnection.State>.fromOpaque(statePointer).takeUnretainedValue()
    let length = i2d_X509(cert, nil)
    guard length > 0 else { return 0 }
    var der = [UInt8](repeating: 0, count: Int(length))
    let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
        var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
        return i2d_X509(cert, &cursor)
    }
    guard written == length else { return 0 }
    let id = DeviceID(certificateDER: der)
    state.peerCertificateDER = der
    state.peerID = id
    if verification.verify(id) { return 1 }
    state.refusedPeer = true
    X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED)
    return 0
}
