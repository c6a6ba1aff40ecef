// The OpenSSL macros Swift cannot import, as static inline functions. Nothing else lives here.
#ifndef CSHARE_OPENSSL_SHIM_H
#define CSHARE_OPENSSL_SHIM_H

#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/rand.h>

static inline int cshare_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

static inline int cshare_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}

/// Options for our contexts: no renegotiation, no compression, no tickets (sessions are not resumed), and the
/// server's cipher order wins (AES-128-GCM first: fastest with AES-NI).
static inline void cshare_SSL_CTX_set_secure_options(SSL_CTX *ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
}

/// Read whole socket buffers at once rather than one record header and body at a time (fewer system calls).
static inline void cshare_SSL_CTX_set_read_ahead(SSL_CTX *ctx, size_t buffer) {
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_default_read_buffer_len(ctx, buffer);
}

static inline long cshare_BIO_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

static inline void *cshare_SSL_CTX_get_app_data(const SSL_CTX *ctx) { return SSL_CTX_get_app_data(ctx); }
static inline int cshare_SSL_CTX_set_app_data(SSL_CTX *ctx, void *arg) { return SSL_CTX_set_app_data(ctx, arg); }
static inline void *cshare_SSL_get_app_data(const SSL *ssl) { return SSL_get_app_data(ssl); }
static inline int cshare_SSL_set_app_data(SSL *ssl, void *arg) { return SSL_set_app_data(ssl, arg); }

/// The SSL connection a certificate-verification context belongs to.
static inline SSL *cshare_X509_STORE_CTX_get_ssl(X509_STORE_CTX *store) {
    return (SSL *)X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
}

#endif
