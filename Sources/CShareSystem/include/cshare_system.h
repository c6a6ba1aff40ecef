// glibc calls Swift cannot reach through its Glibc module.
#ifndef CSHARE_SYSTEM_H
#define CSHARE_SYSTEM_H

#include <malloc.h>

/// Caps glibc's per-thread malloc arenas: a process with hundreds of short-lived connection threads otherwise grows
/// one arena per burst of threads and keeps the memory.
static inline int cshare_limit_malloc_arenas(int arenas) {
    return mallopt(M_ARENA_MAX, arenas);
}

/// Renames `from` to `to` unless `to` exists (renameat2 with RENAME_NOREPLACE); -1 with errno EEXIST if it does
/// (system.c).
int cshare_rename_noreplace(const char *from, const char *to);

/// The user ID of the process at the other end of a Unix socket, or -1 (system.c).
long long cshare_peer_uid(int fd);

/// Sets the nice value of the calling thread only (Linux schedules threads individually) to the process's own
/// (its main thread's) plus `increment`: a thread otherwise inherits whatever its creator had; 0 or -1 with errno
/// (system.c).
int cshare_set_thread_nice(int increment);

#endif
