/*
 * source.c — loading source files and mapping byte offsets to lines.
 *
 * A SourceFile owns a NUL-terminated copy of the text (in the arena) and
 * the byte offset of the first byte of every line. A newline ends a line;
 * a final newline does not start another one, so an offset at the very
 * end of a file maps to the end of its last line. Files are limited to
 * under 4 GiB because Spans hold 32-bit offsets.
 */
#include "source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"

void source_map_init(SourceMap *map, Arena *arena) {
    memset(map, 0, sizeof(*map));
    map->arena = arena;
}

static void compute_lines(Arena *arena, SourceFile *f) {
    int n = 1;
    for (size_t i = 0; i < f->len; i++)
        if (f->text[i] == '\n' && i + 1 < f->len)
            n++;
    f->line_starts = ARENA_ARRAY(arena, uint32_t, n);
    f->nlines = n;
    int k = 0;
    f->line_starts[k++] = 0;
    for (size_t i = 0; i < f->len; i++)
        if (f->text[i] == '\n' && i + 1 < f->len)
            f->line_starts[k++] = (uint32_t)(i + 1);
}

uint32_t source_add(SourceMap *map, const char *name, const char *text, size_t len) {
    ICE_ASSERT(len < UINT32_MAX);
    if (map->count == map->cap) {
        int cap = map->cap ? map->cap * 2 : 8;
        SourceFile **files = ARENA_ARRAY(map->arena, SourceFile *, cap);
        if (map->count)
            memcpy(files, map->files, sizeof(SourceFile *) * (size_t)map->count);
        map->files = files;
        map->cap = cap;
    }
    SourceFile *f = ARENA_NEW(map->arena, SourceFile);
    f->name = arena_strdup(map->arena, name);
    f->text = arena_strndup(map->arena, text, len);
    f->len = len;
    compute_lines(map->arena, f);
    map->files[map->count] = f;
    return (uint32_t)map->count++;
}

int source_load(SourceMap *map, const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        ICE("out of memory reading '%s'", path);
    for (;;) {
        if (len == cap) {
            if (cap >= (size_t)UINT32_MAX / 2) {
                free(buf);
                fclose(fp);
                errno = EFBIG;
                return -1;
            }
            cap *= 2;
            char *grown = realloc(buf, cap);
            if (!grown)
                ICE("out of memory reading '%s'", path);
            buf = grown;
        }
        size_t got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(fp)) {
        int saved = errno ? errno : EIO;
        free(buf);
        fclose(fp);
        errno = saved;
        return -1;
    }
    fclose(fp);
    uint32_t id = source_add(map, path, buf, len);
    free(buf);
    return (int)id;
}

const SourceFile *source_get(const SourceMap *map, uint32_t file) {
    ICE_ASSERT(file < (uint32_t)map->count);
    return map->files[file];
}

void source_line_col(const SourceFile *file, uint32_t offset, int *line, int *col) {
    if (offset > file->len)
        offset = (uint32_t)file->len;
    /* The last line whose start is <= offset. */
    int lo = 0, hi = file->nlines - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (file->line_starts[mid] <= offset)
            lo = mid;
        else
            hi = mid - 1;
    }
    *line = lo + 1;
    *col = (int)(offset - file->line_starts[lo]) + 1;
}

const char *source_line_text(const SourceFile *file, int line, size_t *len) {
    if (line < 1)
        line = 1;
    if (line > file->nlines)
        line = file->nlines;
    const char *start = file->text + file->line_starts[line - 1];
    const char *end = file->text + file->len;
    const char *p = start;
    while (p < end && *p != '\n')
        p++;
    /* A CRLF file's lines end in "\r\n"; the '\r' is part of the newline. */
    if (p > start && p[-1] == '\r')
        p--;
    *len = (size_t)(p - start);
    return start;
}

Span span_join(Span a, Span b) {
    Span s = a;
    if (b.lo < s.lo)
        s.lo = b.lo;
    if (b.hi > s.hi)
        s.hi = b.hi;
    return s;
}
