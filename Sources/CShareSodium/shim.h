// libsodium (Debian's libsodium-dev): the primitives magic-wormhole's protocol is built on (Ed25519 group operations
// for SPAKE2, XSalsa20-Poly1305 secret boxes, HMAC-SHA-256 for HKDF).
#include <sodium.h>
