/*
 * stdlib_embed.h — the standard library's .prime files, embedded into the
 * binary at build time (cmake/embed_stdlib.cmake writes the table).
 */
#ifndef PRIMEC_STDLIB_EMBED_H
#define PRIMEC_STDLIB_EMBED_H

#include <stddef.h>

typedef struct StdlibFile {
    const char *name; /* "<stdlib>/matmul.prime" */
    const char *text; /* NUL-terminated */
    size_t len;
} StdlibFile;

extern const StdlibFile stdlib_files[];
extern const int stdlib_file_count;

#endif
