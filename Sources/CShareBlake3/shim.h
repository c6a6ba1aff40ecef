// BLAKE3's reference C implementation (from Debian's librust-blake3-dev, built by scripts/setup.sh into a static
// library found through pkg-config as share_blake3): SIMD up to AVX-512, chosen at run time.
#include <blake3.h>
