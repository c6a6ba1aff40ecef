internal import CShareSodium

/// libsodium's primitives, as magic-wormhole uses them: the Ed25519 group for SPAKE2, XSalsa20-Poly1305 secret boxes
/// and HMAC-SHA-256. The only file that imports libsodium; every buffer length is checked before a call.
enum Sodium {
    /// libsodium's one-time set-up (safe to call again and from any thread).
    static let ready: Bool = sodium_init() >= 0

    static func randomBytes(_ count: Int) -> [UInt8] {
        precondition(ready, "libsodium did not initialize")
        var bytes = [UInt8](repeating: 0, count: count)
        randombytes_buf(&bytes, count)
        return bytes
    }

    static func sha256(_ data: [UInt8]) -> [UInt8] {
        precondition(ready, "libsodium did not initialize")
        var digest = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        precondition(crypto_hash_sha256(&digest, data, UInt64(data.count)) == 0, "SHA-256 failed")
        return digest
    }

    static func hmacSHA256(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var state = crypto_auth_hmacsha256_state()
        var mac = [UInt8](repeating: 0, count: Int(crypto_auth_hmacsha256_BYTES))
        precondition(
            crypto_auth_hmacsha256_init(&state, key, key.count) == 0
                && crypto_auth_hmacsha256_update(&state, data, UInt64(data.count)) == 0
                && crypto_auth_hmacsha256_final(&state, &mac) == 0, "HMAC-SHA-256 failed")
        return mac
    }

    // MARK: The Ed25519 group (points in their standard 32-byte encoding, scalars little-endian mod L)

    static let pointBytes = Int(crypto_core_ed25519_BYTES)
    static let scalarBytes = Int(crypto_core_ed25519_SCALARBYTES)

    /// On the curve, canonical, in the prime-order subgroup, and not of small order.
    static func isValidPoint(_ point: [UInt8]) -> Bool {
        point.count == pointBytes && crypto_core_ed25519_is_valid_point(point) == 1
    }

    static func add(_ p: [UInt8], _ q: [UInt8]) -> [UInt8]? {
        var r = [UInt8](repeating: 0, count: pointBytes)
        return crypto_core_ed25519_add(&r, p, q) == 0 ? r : nil
    }

    static func subtract(_ p: [UInt8], _ q: [UInt8]) -> [UInt8]? {
        var r = [UInt8](repeating: 0, count: pointBytes)
        return crypto_core_ed25519_sub(&r, p, q) == 0 ? r : nil
    }

    /// `scalar`·B (the base point), the scalar taken as it is (no clamping); nil for the identity.
    static func multiplyBase(_ scalar: [UInt8]) -> [UInt8]? {
        var r = [UInt8](repeating: 0, count: pointBytes)
        return crypto_scalarmult_ed25519_base_noclamp(&r, scalar) == 0 ? r : nil
    }

    /// `scalar`·`point` (no clamping); nil for the identity or a point of small order.
    static func multiply(_ scalar: [UInt8], _ point: [UInt8]) -> [UInt8]? {
        var r = [UInt8](repeating: 0, count: pointBytes)
        return crypto_scalarmult_ed25519_noclamp(&r, scalar, point) == 0 ? r : nil
    }

    /// A little-endian number of up to 64 bytes, reduced mod L.
    static func reduce(littleEndian number: [UInt8]) -> [UInt8] {
        precondition(number.count <= 64)
        let wide = number + [UInt8](repeating: 0, count: 64 - number.count)
        var r = [UInt8](repeating: 0, count: scalarBytes)
        crypto_core_ed25519_scalar_reduce(&r, wide)
        return r
    }

    // MARK: Secret boxes (XSalsa20-Poly1305)

    static let keyBytes = Int(crypto_secretbox_KEYBYTES)
    static let nonceBytes = Int(crypto_secretbox_NONCEBYTES)
    static let macBytes = Int(crypto_secretbox_MACBYTES)

    /// `nonce` followed by the authenticated ciphertext (what PyNaCl's `SecretBox.encrypt` returns).
    static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8]) -> [UInt8] {
        precondition(key.count == keyBytes && nonce.count == nonceBytes)
        var box = [UInt8](repeating: 0, count: plaintext.count + macBytes)
        precondition(crypto_secretbox_easy(&box, plaintext, UInt64(plaintext.count), nonce, key) == 0, "sealing failed")
        return nonce + box
    }

    /// Seals `plaintext` under `nonce` into `out` (the MAC then the ciphertext: `plaintext.count + macBytes` bytes),
    /// without allocating: transit's records.
    static func seal(
        _ plaintext: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer, key: [UInt8],
        into out: UnsafeMutableRawBufferPointer
    ) -> Bool {
        guard key.count == keyBytes, nonce.count == nonceBytes, out.count == plaintext.count + macBytes else {
            return false
        }
        let empty: UInt8 = 0
        return withUnsafePointer(to: empty) { nothing in
            crypto_secretbox_easy(
                out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? nothing, UInt64(plaintext.count),
                nonce.baseAddress!.assumingMemoryBound(to: UInt8.self), key) == 0
        }
    }

    /// Opens `box` (the MAC then the ciphertext) sealed under `nonce` into `out` (`box.count - macBytes` bytes);
    /// false if it does not authenticate under `key`.
    static func open(
        _ box: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer, key: [UInt8],
        into out: UnsafeMutableRawBufferPointer
    ) -> Bool {
        guard key.count == keyBytes, nonce.count == nonceBytes, box.count >= macBytes,
            out.count == box.count - macBytes, let boxStart = box.baseAddress
        else { return false }
        var scratch: UInt8 = 0
        return withUnsafeMutablePointer(to: &scratch) { nothing in
            crypto_secretbox_open_easy(
                out.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? nothing,
                boxStart.assumingMemoryBound(to: UInt8.self), UInt64(box.count),
                nonce.baseAddress!.assumingMemoryBound(to: UInt8.self), key) == 0
        }
    }

    /// The plaintext of `nonce + ciphertext`, or nil if it does not authenticate under `key`.
    static func open(_ sealed: [UInt8], key: [UInt8]) -> [UInt8]? {
        guard key.count == keyBytes, sealed.count >= nonceBytes + macBytes else { return nil }
        let nonce = Array(sealed[0..<nonceBytes])
        let box = Array(sealed[nonceBytes...])
        var plaintext = [UInt8](repeating: 0, count: box.count - macBytes)
        guard crypto_secretbox_open_easy(&plaintext, box, UInt64(box.count), nonce, key) == 0 else { return nil }
        return plaintext
    }
}
