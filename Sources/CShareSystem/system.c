// Functions that need _GNU_SOURCE, which a module's header cannot set for the system headers it imports.
#define _GNU_SOURCE
#include <malloc.h>
#include <sys/socket.h>
#include "cshare_system.h"

long long cshare_peer_uid(int fd) {
    struct ucred credentials;
    socklen_t length = sizeof(credentials);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    return (long long)credentials.uid;
}

int cshare_trim_heap(void) {
    return malloc_trim(0);
}
