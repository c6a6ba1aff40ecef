// Header-only module; this file makes it a C target.
