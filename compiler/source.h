/*
 * source.h — the files of a compilation and their line maps.
 *
 * Each file is read whole into one NUL-terminated buffer (the lexer
 * never refills). Nodes carry Spans (file id + half-open byte range);
 * line and column are computed only when a diagnostic is printed, from
 * the file's table of line starts.
 */
#ifndef PRIMEC_SOURCE_H
#define PRIMEC_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"

typedef struct Span {
    uint32_t file; /* index into SourceMap.files; */
    uint32_t lo;   /* first byte */
    uint32_t hi;   /* one past the last byte */
} Span;

typedef struct SourceFile {
    const char *name; /* as given by the user, or "<stdlib>/matmul.prime" */
    const char *text; /* NUL-terminated */
    size_t len;
    uint32_t *line_starts; /* byte offset of each line's first byte */
    int nlines;
} SourceFile;

typedef struct SourceMap {
    Arena *arena;
    SourceFile **files;
    int count;
    int cap;
} SourceMap;

void source_map_init(SourceMap *map, Arena *arena);
/* Adds a file from memory (text is copied); returns its id. */
uint32_t source_add(SourceMap *map, const char *name, const char *text, size_t len);
/* Reads a file from disk; returns its id, or -1 with errno set (EISDIR:
 * a directory; EINVAL: not a regular file; EFBIG: above the size limit). */
int source_load(SourceMap *map, const char *path);
/* Why source_load failed, in words, for its errno. */
const char *source_load_error(int err);
const SourceFile *source_get(const SourceMap *map, uint32_t file);
/* 1-based line and column of a byte offset (column counts bytes). */
void source_line_col(const SourceFile *file, uint32_t offset, int *line, int *col);
/* The text of the 1-based line, without its newline. */
const char *source_line_text(const SourceFile *file, int line, size_t *len);
Span span_join(Span a, Span b);

#endif
