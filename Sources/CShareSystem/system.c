// Functions that need _GNU_SOURCE or headers a module's header should not pull into every importer.
#define _GNU_SOURCE
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <fcntl.h>
#include <pthread.h>
#include <errno.h>
#include <linux/openat2.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "cshare_system.h"

long long cshare_peer_uid(int fd) {
    struct ucred credentials;
    socklen_t length = sizeof(credentials);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    return (long long)credentials.uid;
}

int cshare_set_thread_nice(int increment) {
    errno = 0;
    int base = getpriority(PRIO_PROCESS, (id_t)getpid());
    if (base == -1 && errno != 0) return -1;
    int wanted = base + increment;
    if (wanted > 19) wanted = 19;
    return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), wanted);
}

int cshare_openat2_beneath(int dirfd, const char *path, int flags, unsigned int mode) {
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = (uint64_t)(unsigned int)flags;
    how.mode = (flags & O_CREAT) ? mode : 0;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

int cshare_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags);
}

int cshare_open_unnamed(int dirfd, unsigned int mode) {
    return openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, (mode_t)mode);
}

// Whether linkat(2) names a file by its descriptor here (AT_EMPTY_PATH): 1 yes, 0 not tried yet, -1 no (a kernel
// before 6.10 without CAP_DAC_READ_SEARCH). The path through /proc costs a walk of four names per file.
static _Atomic int link_by_descriptor = 0;

int cshare_link_unnamed(int fd, int dirfd, const char *name) {
    if (link_by_descriptor >= 0) {
        if (linkat(fd, "", dirfd, name, AT_EMPTY_PATH) == 0) {
            link_by_descriptor = 1;
            return 0;
        }
        if (errno != ENOENT && errno != EPERM) return -1;
        if (link_by_descriptor == 0) link_by_descriptor = -1;
    }
    char path[40];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, path, dirfd, name, AT_SYMLINK_FOLLOW);
}

int cshare_lock_exclusive(int fd, int wait) {
    return flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB));
}

int cshare_set_thread_name(const char *name) {
    char truncated[16];
    strncpy(truncated, name, sizeof truncated - 1);
    truncated[sizeof truncated - 1] = 0;
    return pthread_setname_np(pthread_self(), truncated);
}

void cshare_release_free_memory(void) { malloc_trim(0); }

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

long long cshare_tcp_peer_uid(int fd) {
    struct sockaddr_storage own, peer;
    socklen_t own_length = sizeof own, peer_length = sizeof peer;
    if (getsockname(fd, (struct sockaddr *)&own, &own_length) != 0) return -1;
    if (getpeername(fd, (struct sockaddr *)&peer, &peer_length) != 0) return -1;
    if (own.ss_family != peer.ss_family) return -1;
    struct {
        struct nlmsghdr header;
        struct inet_diag_req_v2 request;
    } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST;
    message.request.sdiag_family = own.ss_family;
    message.request.sdiag_protocol = IPPROTO_TCP;
    message.request.idiag_states = ~0U;
    message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    // The peer's socket: its source is our peer's address, its destination ours.
    if (own.ss_family == AF_INET) {
        struct sockaddr_in *o = (struct sockaddr_in *)&own, *p = (struct sockaddr_in *)&peer;
        message.request.id.idiag_sport = p->sin_port;
        message.request.id.idiag_dport = o->sin_port;
        memcpy(message.request.id.idiag_src, &p->sin_addr, 4);
        memcpy(message.request.id.idiag_dst, &o->sin_addr, 4);
    } else if (own.ss_family == AF_INET6) {
        struct sockaddr_in6 *o = (struct sockaddr_in6 *)&own, *p = (struct sockaddr_in6 *)&peer;
        message.request.id.idiag_sport = p->sin6_port;
        message.request.id.idiag_dport = o->sin6_port;
        memcpy(message.request.id.idiag_src, &p->sin6_addr, 16);
        memcpy(message.request.id.idiag_dst, &o->sin6_addr, 16);
    } else {
        return -1;
    }
    int diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (diag < 0) return -1;
    struct timeval timeout = {1, 0};
    setsockopt(diag, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    long long uid = -1;
    if (send(diag, &message, sizeof message, 0) == (ssize_t)sizeof message) {
        char buffer[8192];
        ssize_t n = recv(diag, buffer, sizeof buffer, 0);
        struct nlmsghdr *reply = (struct nlmsghdr *)buffer;
        if (n > 0 && NLMSG_OK(reply, (unsigned)n) && reply->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
            struct inet_diag_msg *found = NLMSG_DATA(reply);
            uid = found->idiag_uid;
        }
    }
    close(diag);
    return uid;
}

int cshare_clone_range(int src_fd, unsigned long long src_offset, unsigned long long length, int dest_fd,
                       unsigned long long dest_offset) {
    struct file_clone_range range = {
        .src_fd = src_fd, .src_offset = src_offset, .src_length = length, .dest_offset = dest_offset};
    return ioctl(dest_fd, FICLONERANGE, &range);
}

int cshare_raise_open_files_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    if (limit.rlim_cur >= limit.rlim_max) return 0;
    limit.rlim_cur = limit.rlim_max;
    return setrlimit(RLIMIT_NOFILE, &limit);
}
