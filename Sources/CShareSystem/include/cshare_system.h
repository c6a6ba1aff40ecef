// glibc calls Swift cannot reach through its Glibc module.
#ifndef CSHARE_SYSTEM_H
#define CSHARE_SYSTEM_H

#include <malloc.h>

/// Caps glibc's per-thread malloc arenas: a process with hundreds of short-lived connection threads otherwise grows
/// one arena per burst of threads and keeps the memory.
static inline int cshare_limit_malloc_arenas(int arenas) {
    return mallopt(M_ARENA_MAX, arenas);
}

#endif
