/*
 * The ceiling for a verified file transfer on this machine: one file through OpenSSL TLS 1.3 (AES-128-GCM) over
 * loopback TCP, a digest computed over the stream on both ends, the receiver writing the file, and the sender checking
 * the receiver's digest at the end. share does the same work plus framing, per-chunk digests and a resume ledger.
 * The digest is share's between two share ends, BLAKE3 (the same reference C library share links,
 * `pkg-config share_blake3`); TLS_CEILING_DIGEST=sha256 makes it SHA-256, as share with an older peer.
 *
 *   tls_ceiling serve PORT CERT KEY OUTPUT BUFSIZE [plain|tuned] [1|2] [SIZE]   receiver: prints "ready", then the
 *                                                                               digest
 *   tls_ceiling send  PORT CERT KEY INPUT  BUFSIZE [plain|tuned] [1|2] [SIZE]   sender: prints the digest and MiB/s
 *
 * plain: OpenSSL's default reading (a record header, then its body), as a simple pipe does; tuned: whole socket
 * buffers at once (read-ahead), as share does. 1: one thread per end (read, hash, send in turn); 2: two threads per
 * end, the file side (read + hash, or hash + write) beside the TLS side, with three buffers between them, as share's
 * large items do. SIZE (the file's size, which share's receiver knows from the offer): the receiver sets the output
 * file's size before writing into it and the sender advises sequential reading, as share does. The benchmark runs the
 * variants and compares share with the strongest.
 */
#include <arpa/inet.h>
#include <blake3.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <pthread.h>
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

static SSL_CTX *context(const char *cert, const char *key, int tuned) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_method());
    if (!ctx) die("SSL_CTX_new");
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256");
    if (tuned) {
        SSL_CTX_set_read_ahead(ctx, 1);
        SSL_CTX_set_default_read_buffer_len(ctx, 64 * 1024);
    }
    if (SSL_CTX_use_certificate_file(ctx, cert, SSL_FILETYPE_PEM) != 1) die("certificate");
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) die("key");
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

/* Three buffers handed between the TLS thread and the file thread. */
#define DEPTH 3
struct ring {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    unsigned char *buffers[DEPTH];
    size_t lengths[DEPTH];
    int head, count; /* filled buffers waiting, oldest at head */
    int done;
};

static struct ring ring = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
static size_t bufsize;
static EVP_MD_CTX *md;
static blake3_hasher b3;
static int use_blake3 = 1;

static void digest_update(const void *data, size_t n) {
    if (use_blake3) blake3_hasher_update(&b3, data, n);
    else EVP_DigestUpdate(md, data, n);
}

static void digest_final(unsigned char *out) {
    unsigned int length = 32;
    if (use_blake3) blake3_hasher_finalize(&b3, out, 32);
    else EVP_DigestFinal_ex(md, out, &length);
}
static int file_fd;
static SSL *ssl;

/* The producer side takes the next free slot (waiting while all are full). */
static int ring_free_slot(void) {
    pthread_mutex_lock(&ring.lock);
    while (ring.count == DEPTH) pthread_cond_wait(&ring.changed, &ring.lock);
    int slot = (ring.head + ring.count) % DEPTH;
    pthread_mutex_unlock(&ring.lock);
    return slot;
}

static void ring_put(size_t length) {
    pthread_mutex_lock(&ring.lock);
    ring.lengths[(ring.head + ring.count) % DEPTH] = length;
    ring.count++;
    pthread_cond_broadcast(&ring.changed);
    pthread_mutex_unlock(&ring.lock);
}

static void ring_finish(void) {
    pthread_mutex_lock(&ring.lock);
    ring.done = 1;
    pthread_cond_broadcast(&ring.changed);
    pthread_mutex_unlock(&ring.lock);
}

/* The consumer side: the oldest filled slot, or -1 at the end. */
static int ring_take(size_t *length) {
    pthread_mutex_lock(&ring.lock);
    while (ring.count == 0 && !ring.done) pthread_cond_wait(&ring.changed, &ring.lock);
    int slot = ring.count ? ring.head : -1;
    if (slot >= 0) *length = ring.lengths[slot];
    pthread_mutex_unlock(&ring.lock);
    return slot;
}

static void ring_release(void) {
    pthread_mutex_lock(&ring.lock);
    ring.head = (ring.head + 1) % DEPTH;
    ring.count--;
    pthread_cond_broadcast(&ring.changed);
    pthread_mutex_unlock(&ring.lock);
}

/* Receiver, two threads: this one hashes and writes what the TLS thread read. */
static void *hash_and_write(void *unused) {
    (void)unused;
    size_t length;
    int slot;
    while ((slot = ring_take(&length)) >= 0) {
        digest_update(ring.buffers[slot], length);
        if (write(file_fd, ring.buffers[slot], length) != (ssize_t)length) die("write");
        ring_release();
    }
    return NULL;
}

/* Sender, two threads: this one reads and hashes the file for the TLS thread. */
static void *read_and_hash(void *unused) {
    (void)unused;
    for (;;) {
        int slot = ring_free_slot();
        ssize_t n = read(file_fd, ring.buffers[slot], bufsize);
        if (n <= 0) break;
        digest_update(ring.buffers[slot], n);
        ring_put((size_t)n);
    }
    ring_finish();
    return NULL;
}

/* Fills `buffer` from TLS (TLS hands out one 16 KiB record per read); 0 at the end. */
static size_t fill(unsigned char *buffer) {
    size_t filled = 0;
    while (filled < bufsize) {
        int n = SSL_read(ssl, buffer + filled, (int)(bufsize - filled));
        if (n <= 0) break;
        filled += (size_t)n;
    }
    return filled;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: tls_ceiling serve|send PORT CERT KEY FILE BUFSIZE [plain|tuned] [1|2]\n");
        return 2;
    }
    int server = strcmp(argv[1], "serve") == 0;
    int port = atoi(argv[2]);
    bufsize = (size_t)atol(argv[6]);
    int tuned = argc > 7 ? strcmp(argv[7], "plain") != 0 : 1;
    int threads = argc > 8 ? atoi(argv[8]) : 1;
    long long sized = argc > 9 ? atoll(argv[9]) : 0;
    for (int i = 0; i < DEPTH; i++) ring.buffers[i] = malloc(bufsize);
    unsigned char *buffer = ring.buffers[0];
    unsigned char digest[32];
    char digestHex[65];
    md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    blake3_hasher_init(&b3);
    const char *chosen = getenv("TLS_CEILING_DIGEST");
    if (chosen && strcmp(chosen, "sha256") == 0) use_blake3 = 0;
    SSL_CTX *ctx = context(argv[3], argv[4], tuned);
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
        ssl = SSL_new(ctx);
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) != 1) die("SSL_accept");
        file_fd = open(argv[5], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (file_fd < 0) die("open output");
        if (sized > 0 && ftruncate(file_fd, sized) != 0) die("ftruncate");
        if (threads == 2) {
            pthread_t writer;
            pthread_create(&writer, NULL, hash_and_write, NULL);
            for (;;) {
                int slot = ring_free_slot();
                size_t n = fill(ring.buffers[slot]);
                if (n == 0) break;
                ring_put(n);
            }
            ring_finish();
            pthread_join(writer, NULL);
        } else {
            for (;;) {
                size_t n = fill(buffer);
                if (n == 0) break;
                digest_update(buffer, n);
                if (write(file_fd, buffer, n) != (ssize_t)n) die("write");
            }
        }
        close(file_fd);
        digest_final(digest);
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
    ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) != 1) die("SSL_connect");
    file_fd = open(argv[5], O_RDONLY);
    if (file_fd < 0) die("open input");
    if (sized > 0) posix_fadvise(file_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    long long total = 0;
    pthread_t reader;
    if (threads == 2) pthread_create(&reader, NULL, read_and_hash, NULL);
    for (;;) {
        size_t n;
        unsigned char *data;
        int slot = -1;
        if (threads == 2) {
            slot = ring_take(&n);
            if (slot < 0) break;
            data = ring.buffers[slot];
        } else {
            ssize_t got = read(file_fd, buffer, bufsize);
            if (got <= 0) break;
            n = (size_t)got;
            data = buffer;
            digest_update(data, n);
        }
        for (size_t done = 0; done < n;) {
            int w = SSL_write(ssl, data + done, (int)(n - done));
            if (w <= 0) die("SSL_write");
            done += (size_t)w;
        }
        total += (long long)n;
        if (threads == 2) ring_release();
    }
    if (threads == 2) pthread_join(reader, NULL);
    SSL_shutdown(ssl); /* close_notify: TLS 1.3 lets the receiver still answer with its digest */
    unsigned char peer[32];
    int got = 0;
    while (got < 32) {
        int n = SSL_read(ssl, peer + got, 32 - got);
        if (n <= 0) break;
        got += n;
    }
    double seconds = now() - start;
    digest_final(digest);
    if (got != 32 || memcmp(peer, digest, 32) != 0) die("digest mismatch");
    hex(digest, digestHex);
    printf("%s %.1f MiB/s\n", digestHex, total / seconds / 1048576.0);
    return 0;
}
