// libzstd for chunks in transit: one-shot compression with the chunk's size known (so the window and tables fit the
// chunk, whatever the level) and exact decompression.
#ifndef CSHARE_ZSTD_SHIM_H
#define CSHARE_ZSTD_SHIM_H

#include <zstd.h>

#endif
