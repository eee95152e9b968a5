/*
 * source.c — loading source files and mapping byte offsets to lines.
 *
 * A SourceFile owns a NUL-terminated copy of the text (in the arena) and
 * the byte offset of the first byte of every line. A newline ends a line;
 * a final newline does not start another one, so an offset at the very
 * end of a file maps to the end of its last line. Only regular files are
 * read, of at most SOURCE_MAX_BYTES (Spans hold 32-bit offsets, and the
 * whole file is parsed in memory).
 */
#define _POSIX_C_SOURCE 200809L
#include "source.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The largest source file: far more than any model needs, and small
 * enough that parsing it stays within memory and Spans' 32-bit offsets. */
#define SOURCE_MAX_BYTES (16u << 20) /* source_load_error says 16 MiB */

int source_load(SourceMap *map, const char *path) {
    /* O_NONBLOCK: opening a FIFO without a writer must not wait; it is
     * refused below like every file that is not a regular one. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    /* A directory, a device (/dev/zero never ends) or a pipe: refused at
     * once, as is a file above the size limit, before reading a byte. */
    if (!S_ISREG(st.st_mode) || st.st_size > (off_t)SOURCE_MAX_BYTES) {
        close(fd);
        errno = S_ISDIR(st.st_mode) ? EISDIR : !S_ISREG(st.st_mode) ? EINVAL : EFBIG;
        return -1;
    }
    /* The file may grow while it is read: read at most one byte more
     * than the limit. */
    size_t cap = (size_t)st.st_size + 1, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        ICE("out of memory reading '%s'", path);
    for (;;) {
        if (len == cap) {
            if (cap > SOURCE_MAX_BYTES) {
                free(buf);
                close(fd);
                errno = EFBIG;
                return -1;
            }
            cap = cap * 2 > SOURCE_MAX_BYTES + 1 ? SOURCE_MAX_BYTES + 1 : cap * 2;
            char *grown = realloc(buf, cap);
            if (!grown)
                ICE("out of memory reading '%s'", path);
            buf = grown;
        }
        ssize_t got = read(fd, buf + len, cap - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int saved = errno ? errno : EIO;
            free(buf);
            close(fd);
            errno = saved;
            return -1;
        }
        if (got == 0)
            break;
        len += (size_t)got;
    }
    close(fd);
    uint32_t id = source_add(map, path, buf, len);
    free(buf);
    return (int)id;
}

const char *source_load_error(int err) {
    switch (err) {
    case EISDIR:
        return "it is a directory";
    case EINVAL:
        return "not a regular file";
    case EFBIG:
        return "larger than the 16 MiB limit on a source file";
    default:
        return strerror(err);
    }
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
