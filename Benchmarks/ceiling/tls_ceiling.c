/*
 * The ceiling for a file transfer on this machine: one file moved through OpenSSL TLS 1.3 (AES-128-GCM) over
 * loopback TCP, SHA-256 computed over the stream on both ends, the receiver writing the file; one thread per end,
 * a fixed buffer size. share does the same work plus framing, per-chunk digests and a resume ledger.
 *
 *   tls_ceiling serve PORT CERT KEY OUTPUT BUFSIZE     (prints "ready", receives one file, prints its digest)
 *   tls_ceiling send  PORT CERT KEY INPUT  BUFSIZE     (prints the digest and MiB/s)
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) {
    fprintf(stderr, "tls_ceiling: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

static SSL_CTX *context(int server, const char *cert, const char *key) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_method());
    if (!ctx) die("SSL_CTX_new");
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256");
    /* Same socket-reading strategy as share: whole socket buffers rather than one record header and body at a time. */
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_default_read_buffer_len(ctx, 64 * 1024);
    if (SSL_CTX_use_certificate_file(ctx, cert, SSL_FILETYPE_PEM) != 1) die("certificate");
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) die("key");
    (void)server;
    return ctx;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void hex(const unsigned char *d, char *out) {
    for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: tls_ceiling serve|send PORT CERT KEY FILE BUFSIZE\n");
        return 2;
    }
    int server = strcmp(argv[1], "serve") == 0;
    int port = atoi(argv[2]);
    size_t bufsize = (size_t)atol(argv[6]);
    unsigned char *buffer = malloc(bufsize);
    unsigned char digest[32];
    unsigned int dlen = 0;
    char digestHex[65];
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    SSL_CTX *ctx = context(server, argv[3], argv[4]);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    if (server) {
        int ls = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(ls, (struct sockaddr *)&addr, sizeof addr) || listen(ls, 1)) die("listen");
        printf("ready\n");
        fflush(stdout);
        int fd = accept(ls, NULL, NULL);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        SSL *ssl = SSL_new(ctx);
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) != 1) die("SSL_accept");
        int out = open(argv[5], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0) die("open output");
        /* Fill the whole buffer (TLS hands out one 16 KiB record per read), then hash and write it at once. */
        for (int eof = 0; !eof;) {
            size_t filled = 0;
            while (filled < bufsize) {
                int n = SSL_read(ssl, buffer + filled, (int)(bufsize - filled));
                if (n <= 0) { eof = 1; break; }
                filled += (size_t)n;
            }
            if (filled == 0) break;
            EVP_DigestUpdate(md, buffer, filled);
            if (write(out, buffer, filled) != (ssize_t)filled) die("write");
        }
        close(out);
        EVP_DigestFinal_ex(md, digest, &dlen);
        SSL_write(ssl, digest, 32);
        SSL_shutdown(ssl);
        hex(digest, digestHex);
        printf("%s\n", digestHex);
        return 0;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    double start = now();
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr)) die("connect");
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) != 1) die("SSL_connect");
    int in = open(argv[5], O_RDONLY);
    if (in < 0) die("open input");
    long long total = 0;
    for (;;) {
        ssize_t n = read(in, buffer, bufsize);
        if (n <= 0) break;
        EVP_DigestUpdate(md, buffer, n);
        for (ssize_t done = 0; done < n;) {
            int w = SSL_write(ssl, buffer + done, (int)(n - done));
            if (w <= 0) die("SSL_write");
            done += w;
        }
        total += n;
    }
    SSL_shutdown(ssl); /* close_notify: TLS 1.3 lets the server still answer with its digest */
    unsigned char peer[32];
    int got = 0;
    while (got < 32) {
        int n = SSL_read(ssl, peer + got, 32 - got);
        if (n <= 0) break;
        got += n;
    }
    double seconds = now() - start;
    EVP_DigestFinal_ex(md, digest, &dlen);
    if (got != 32 || memcmp(peer, digest, 32) != 0) die("digest mismatch");
    hex(digest, digestHex);
    printf("%s %.1f MiB/s\n", digestHex, total / seconds / 1048576.0);
    return 0;
}
