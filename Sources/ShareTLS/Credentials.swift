internal import CShareOpenSSL

/// A private key (one owner of one `EVP_PKEY`).
public final class PrivateKey: @unchecked Sendable {  // immutable after creation; OpenSSL keys are refcounted
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) { self.pointer = pointer }
    deinit { EVP_PKEY_free(pointer) }

    /// A new Ed25519 key.
    public static func generateEd25519() throws -> PrivateKey {
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nil) else {
            throw TLSError.drain("EVP_PKEY_CTX_new_id(Ed25519)")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw TLSError.drain("EVP_PKEY_keygen_init") }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen(context, &key) == 1, let key else { throw TLSError.drain("EVP_PKEY_keygen") }
        return PrivateKey(taking: key)
    }

    /// A new ECDSA key on P-256: for peers of other protocols (LocalSend's phones), which all speak it.
    public static func generateP256() throws -> PrivateKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw TLSError.drain("EVP_PKEY_CTX_new_from_name(EC)")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, "P-256") == 1 else {
            throw TLSError.drain("EVP_PKEY_keygen_init(P-256)")
        }
        var key: OpaquePointer?
        guard EVP_PKEY_generate(context, &key) == 1, let key else { throw TLSError.drain("EVP_PKEY_generate") }
        return PrivateKey(taking: key)
    }

    var isEd25519: Bool { EVP_PKEY_get_base_id(pointer) == EVP_PKEY_ED25519 }

    /// The key in PKCS#8 PEM.
    public func pemRepresentation() throws -> String {
        try MemoryBIO.string { bio in PEM_write_bio_PrivateKey(bio, pointer, nil, nil, 0, nil, nil) == 1 }
    }

    /// An Ed25519 signature of `message` by this key.
    public func sign(_ message: [UInt8]) throws -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw TLSError.drain("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, nil, nil, pointer) == 1 else {
            throw TLSError.drain("EVP_DigestSignInit")
        }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, message, message.count) == 1 else {
            throw TLSError.drain("EVP_DigestSign")
        }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1 else {
            throw TLSError.drain("EVP_DigestSign")
        }
        return Array(signature.prefix(length))
    }

    /// Reads a PEM private key.
    public convenience init(pem: String) throws {
        let key = try MemoryBIO.reading(pem) { bio in PEM_read_bio_PrivateKey(bio, nil, nil, nil) }
        guard let key else { throw TLSError.drain(.badCredentials, "the private key is not valid PEM") }
        self.init(taking: key)
    }
}

/// An X.509 certificate (one owner of one `X509`).
public final class Certificate: @unchecked Sendable {  // immutable after creation
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) { self.pointer = pointer }
    deinit { X509_free(pointer) }

    /// A self-signed certificate for `key` with common name `commonName`, valid for `years`.
    public static func selfSigned(key: PrivateKey, commonName: String, years: Int = 20) throws -> Certificate {
        guard let cert = X509_new() else { throw TLSError.drain("X509_new") }
        let certificate = Certificate(taking: cert)
        guard X509_set_version(cert, 2) == 1 else { throw TLSError.drain("X509_set_version") }
        var serial = [UInt8](repeating: 0, count: 8)
        guard RAND_bytes(&serial, Int32(serial.count)) == 1 else { throw TLSError.drain("RAND_bytes") }
        let serialValue = serial.reduce(0) { ($0 << 8) | Int($1) } & 0x7FFF_FFFF_FFFF_FFFF
        guard ASN1_INTEGER_set_int64(X509_get_serialNumber(cert), Int64(serialValue)) == 1 else {
            throw TLSError.drain("ASN1_INTEGER_set_int64")
        }
        guard X509_gmtime_adj(X509_getm_notBefore(cert), -3600) != nil,
            X509_gmtime_adj(X509_getm_notAfter(cert), years * 365 * 24 * 3600) != nil
        else { throw TLSError.drain("X509_gmtime_adj") }
        guard X509_set_pubkey(cert, key.pointer) == 1 else { throw TLSError.drain("X509_set_pubkey") }
        guard let name = X509_get_subject_name(cert) else { throw TLSError.drain("X509_get_subject_name") }
        let cn = Array(commonName.utf8.prefix(64))
        guard X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, cn, Int32(cn.count), -1, 0) == 1 else {
            throw TLSError.drain("X509_NAME_add_entry_by_txt")
        }
        guard X509_set_issuer_name(cert, name) == 1 else { throw TLSError.drain("X509_set_issuer_name") }
        // Ed25519 signs without a separate digest; ECDSA with SHA-256.
        guard X509_sign(cert, key.pointer, key.isEd25519 ? nil : EVP_sha256()) > 0 else {
            throw TLSError.drain("X509_sign")
        }
        return certificate
    }

    /// The certificate in DER.
    public func derBytes() throws -> [UInt8] {
        let length = i2d_X509(pointer, nil)
        guard length > 0 else { throw TLSError.drain("i2d_X509") }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        let written = bytes.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_X509(pointer, &cursor)
        }
        guard written == length else { throw TLSError.drain("i2d_X509") }
        return bytes
    }

    /// The device ID of this certificate.
    public func deviceID() throws -> DeviceID { DeviceID(certificateDER: try derBytes()) }

    /// The certificate in PEM.
    public func pemRepresentation() throws -> String {
        try MemoryBIO.string { bio in PEM_write_bio_X509(bio, pointer) == 1 }
    }

    /// Reads a PEM certificate.
    public convenience init(pem: String) throws {
        let cert = try MemoryBIO.reading(pem) { bio in PEM_read_bio_X509(bio, nil, nil, nil) }
        guard let cert else { throw TLSError.drain(.badCredentials, "the certificate is not valid PEM") }
        self.init(taking: cert)
    }

    /// Parses DER bytes.
    public convenience init(der: [UInt8]) throws {
        let cert = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_X509(nil, &cursor, buffer.count)
        }
        guard let cert else { throw TLSError.drain(.badCredentials, "the certificate is not valid DER") }
        self.init(taking: cert)
    }

    /// Whether `signature` is this certificate's key's Ed25519 signature of `message`.
    public func verifies(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        guard let publicKey = X509_get0_pubkey(pointer), let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        defer { ERR_clear_error() }
        guard EVP_DigestVerifyInit(context, nil, nil, nil, publicKey) == 1 else { return false }
        return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
    }

    /// Checks that this is a share device's certificate, as `share id` makes them: an Ed25519 key, a self-signed
    /// X.509 v3 certificate whose signature verifies against its own key, issuer equal to subject with a common
    /// name, and within its validity. (TLS already proved the peer holds the key; this is hygiene against
    /// certificates crafted to look like one.) Throws `badCredentials` naming what is wrong.
    public func checkAsShareDevice() throws {
        defer { ERR_clear_error() }
        guard let publicKey = X509_get0_pubkey(pointer), EVP_PKEY_get_base_id(publicKey) == EVP_PKEY_ED25519 else {
            throw TLSError(.badCredentials, "its key is not Ed25519")
        }
        guard X509_verify(pointer, publicKey) == 1 else {
            throw TLSError(.badCredentials, "its signature does not verify against its own key")
        }
        guard X509_get_version(pointer) == 2 else {
            throw TLSError(.badCredentials, "it is not an X.509 version 3 certificate")
        }
        guard let subject = X509_get_subject_name(pointer), let issuer = X509_get_issuer_name(pointer),
            X509_NAME_cmp(subject, issuer) == 0, X509_NAME_entry_count(subject) > 0
        else {
            throw TLSError(.badCredentials, "it is not self-issued with a name")
        }
        guard X509_cmp_current_time(X509_get0_notBefore(pointer)) < 0,
            X509_cmp_current_time(X509_get0_notAfter(pointer)) > 0
        else {
            throw TLSError(.badCredentials, "it is not valid now")
        }
    }

    /// Whether `key` is the private key for this certificate's public key.
    public func matches(_ key: PrivateKey) -> Bool {
        guard let publicKey = X509_get0_pubkey(pointer) else { return false }
        return EVP_PKEY_eq(publicKey, key.pointer) == 1
    }
}

/// A key and its certificate: what a device presents in every handshake.
public struct TLSIdentity: Sendable {
    public let key: PrivateKey
    public let certificate: Certificate
    public let deviceID: DeviceID

    public init(key: PrivateKey, certificate: Certificate) throws {
        guard certificate.matches(key) else {
            throw TLSError(.badCredentials, "the private key does not belong to the certificate")
        }
        self.key = key
        self.certificate = certificate
        self.deviceID = try certificate.deviceID()
    }

    /// A new Ed25519 key with a self-signed certificate.
    public static func generate(commonName: String) throws -> TLSIdentity {
        let key = try PrivateKey.generateEd25519()
        return try TLSIdentity(key: key, certificate: try Certificate.selfSigned(key: key, commonName: commonName))
    }
}

/// Memory BIOs for PEM conversion.
enum MemoryBIO {
    static func string(_ write: (OpaquePointer) -> Bool) throws -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw TLSError.drain("BIO_new") }
        defer { BIO_free(bio) }
        guard write(bio) else { throw TLSError.drain("PEM write") }
        var data: UnsafeMutablePointer<CChar>?
        let length = cshare_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { throw TLSError.drain("BIO_get_mem_data") }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }

    static func reading<T>(_ text: String, _ read: (OpaquePointer) -> T?) throws -> T? {
        let bytes = Array(text.utf8)
        return try bytes.withUnsafeBytes { raw -> T? in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else {
                throw TLSError.drain("BIO_new_mem_buf")
            }
            defer { BIO_free(bio) }
            return read(bio)
        }
    }
}
