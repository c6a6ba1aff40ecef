// glibc calls Swift cannot reach through its Glibc module.
#ifndef CSHARE_SYSTEM_H
#define CSHARE_SYSTEM_H

#include <malloc.h>

/// Caps glibc's per-thread malloc arenas: a process with hundreds of short-lived connection threads otherwise grows
/// one arena per burst of threads and keeps the memory.
static inline int cshare_limit_malloc_arenas(int arenas) {
    return mallopt(M_ARENA_MAX, arenas);
}


/// O_PATH (Linux): a descriptor that names a file without opening it for reading; glibc hides it without
/// _GNU_SOURCE.
#define CSHARE_O_PATH 0x200000

/// O_NOATIME (Linux): reads leave the file's access time alone (the owner's files, or with CAP_FOWNER); hidden
/// likewise.
#define CSHARE_O_NOATIME 01000000

/// openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS: opens `path` (relative, several
/// components) beneath `dirfd` without following any link and without leaving it; -1 with errno (ENOSYS where the
/// kernel lacks openat2, ELOOP or EXDEV for a link or an escape) (system.c).
int cshare_openat2_beneath(int dirfd, const char *path, int flags, unsigned int mode);

/// ioctl(FICLONERANGE): makes `length` bytes of `dest_fd` at `dest_offset` share the blocks of `src_fd` at
/// `src_offset` (a reflink: XFS, Btrfs, bcachefs); 0, or -1 with errno (EOPNOTSUPP or EXDEV where the file system
/// cannot, EINVAL for a range not aligned to its blocks) (system.c).
int cshare_clone_range(int src_fd, unsigned long long src_offset, unsigned long long length, int dest_fd,
                       unsigned long long dest_offset);

/// renameat2(2): `flags` 1 is RENAME_NOREPLACE; -1 with errno (system.c).
int cshare_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);

/// openat(2) with O_TMPFILE: a file without a name in the folder `dirfd`, open for writing, made with `mode` (the
/// umask applies); -1 with errno (EOPNOTSUPP or EISDIR where the file system cannot) (system.c).
int cshare_open_unnamed(int dirfd, unsigned int mode);

/// linkat(2) of a file opened by cshare_open_unnamed to `name` in `dirfd` (by its descriptor where the kernel lets
/// this process, otherwise through /proc/self/fd, which needs no privilege): 0, or -1 with errno (EEXIST when the
/// name is taken) (system.c).
int cshare_link_unnamed(int fd, int dirfd, const char *name);

/// flock(2) exclusive, without waiting: 0, or -1 with errno EWOULDBLOCK when another holder has it (system.c).
int cshare_lock_exclusive(int fd, int wait);

/// The user ID of the process at the other end of a Unix socket, or -1 (system.c).
long long cshare_peer_uid(int fd);

/// The owner of the other end of a connected TCP socket whose peer is on this machine (a loopback connection): the
/// kernel's socket table looked up by the connection's addresses and ports (sock_diag), or -1 when it lists no such
/// socket (the peer is elsewhere, or went away) (system.c).
long long cshare_tcp_peer_uid(int fd);

/// Sets the nice value of the calling thread only (Linux schedules threads individually) to the process's own
/// (its main thread's) plus `increment`: a thread otherwise inherits whatever its creator had; 0 or -1 with errno
/// (system.c).
int cshare_set_thread_nice(int increment);

/// Names the calling thread (the first 15 bytes; shown by top -H and in core dumps).
int cshare_set_thread_name(const char *name);

/// Raises the soft limit of open descriptors to the hard one (a service's soft limit is often 1,024, its hard one
/// half a million); 0 when done or already there.
int cshare_raise_open_files_limit(void);

/// Gives the memory the allocator holds free back to the system (malloc_trim): after a burst that took much.
void cshare_release_free_memory(void);

#endif
