// Functions that need _GNU_SOURCE or headers a module's header should not pull into every importer.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <errno.h>
#include <linux/openat2.h>
#include <malloc.h>
#include <stdint.h>
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
