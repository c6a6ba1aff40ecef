/*
 * linkshaper: one emulated link between two network namespaces, for benchmarks on a kernel without netem.
 *
 *   linkshaper NS_A NS_B DELAY_US [NAME]
 *
 * Creates a TAP interface NAME (default "shl0") in namespace NS_A and one in NS_B (the caller addresses them, shapes their rate
 * with tbf and drops packets with nftables), prints "ready", and forwards every Ethernet frame from one to the other,
 * holding each for DELAY_US microseconds (the one-way delay), in order. The delay is packet-level, so the TCP
 * stacks on both sides see it, as they would on a real link. Runs until killed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 16384
#define FRAME 65600

struct slot {
    uint64_t due;
    uint32_t length;
    unsigned char *bytes;
};

/* Frames on their way in one direction, oldest first. */
struct queue {
    struct slot slots[SLOTS];
    unsigned head, count;
    uint64_t dropped;
};

static struct queue forward[2];

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

/* A TAP interface called `name` in the named network namespace. */
static int tap_in(const char *namespace, const char *name) {
    char path[256];
    snprintf(path, sizeof path, "/var/run/netns/%s", namespace);
    int ns = open(path, O_RDONLY | O_CLOEXEC);
    if (ns < 0) die(path);
    if (setns(ns, CLONE_NEWNET) != 0) die("setns");
    close(ns);
    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) die("/dev/net/tun");
    struct ifreq request;
    memset(&request, 0, sizeof request);
    request.ifr_flags = IFF_TAP | IFF_NO_PI;
    strncpy(request.ifr_name, name, IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &request) != 0) die("TUNSETIFF");
    return fd;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: linkshaper NS_A NS_B DELAY_US [NAME]\n");
        return 2;
    }
    const char *name = argc == 5 ? argv[4] : "shl0";
    uint64_t delay = (uint64_t)strtoull(argv[3], NULL, 10) * 1000ull;
    int fds[2];
    fds[0] = tap_in(argv[1], name);
    fds[1] = tap_in(argv[2], name);
    for (int d = 0; d < 2; d++)
        for (unsigned i = 0; i < SLOTS; i++) forward[d].slots[i].bytes = NULL;
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        uint64_t now = now_ns();
        /* Send what is due, in order, in each direction (direction d: from fds[d] to fds[1 - d]). */
        uint64_t next = UINT64_MAX;
        for (int d = 0; d < 2; d++) {
            struct queue *q = &forward[d];
            while (q->count > 0 && q->slots[q->head].due <= now) {
                struct slot *s = &q->slots[q->head];
                ssize_t n = write(fds[1 - d], s->bytes, s->length);
                if (n < 0 && errno == EAGAIN) break; /* the far side's queue is full: try again shortly */
                q->head = (q->head + 1) % SLOTS;
                q->count--;
            }
            if (q->count > 0 && q->slots[q->head].due < next) next = q->slots[q->head].due;
        }
        struct pollfd polls[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
        struct timespec wait, *timeout = NULL;
        if (next != UINT64_MAX) {
            uint64_t left = next > now ? next - now : 0;
            wait.tv_sec = (time_t)(left / 1000000000ull);
            wait.tv_nsec = (long)(left % 1000000000ull);
            timeout = &wait;
        }
        if (ppoll(polls, 2, timeout, NULL) < 0 && errno != EINTR) die("ppoll");
        now = now_ns();
        for (int d = 0; d < 2; d++) {
            if (!(polls[d].revents & POLLIN)) continue;
            struct queue *q = &forward[d];
            for (int burst = 0; burst < 64; burst++) {
                if (q->count == SLOTS) { /* more in flight than the link could hold: drop, as a full buffer does */
                    unsigned char scratch[FRAME];
                    if (read(fds[d], scratch, sizeof scratch) <= 0) break;
                    q->dropped++;
                    continue;
                }
                struct slot *s = &q->slots[(q->head + q->count) % SLOTS];
                if (!s->bytes && !(s->bytes = malloc(FRAME))) die("malloc");
                ssize_t n = read(fds[d], s->bytes, FRAME);
                if (n <= 0) break;
                s->length = (uint32_t)n;
                s->due = now + delay;
                q->count++;
            }
        }
    }
}
