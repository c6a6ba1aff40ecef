// libarchive for Swift: the headers, plus the macros Swift cannot see.
#ifndef CSHARE_ARCHIVE_SHIM_H
#define CSHARE_ARCHIVE_SHIM_H

#include <archive.h>
#include <archive_entry.h>
#include <locale.h>
#include <sys/stat.h>

static inline unsigned int cshare_ae_ifreg(void) { return AE_IFREG; }
static inline unsigned int cshare_ae_ifdir(void) { return AE_IFDIR; }
static inline unsigned int cshare_ae_iflnk(void) { return AE_IFLNK; }
static inline unsigned int cshare_ae_ifmt(void) { return AE_IFMT; }

/// libarchive writes non-ASCII names only under a UTF-8 character type (it crashes in the C locale).
static inline void cshare_archive_use_utf8_names(void) {
    const char *current = setlocale(LC_CTYPE, NULL);
    if (current == NULL || current[0] == 'C' || current[0] == 'P') {
        if (setlocale(LC_CTYPE, "C.UTF-8") == NULL) setlocale(LC_CTYPE, "en_US.UTF-8");
    }
}

#endif
