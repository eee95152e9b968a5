/*
 * format.c — see format.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "format.h"

#include "printer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// clang-format off
const char *const format_style = "{BasedOnStyle: LLVM, IndentWidth: 4, ColumnLimit: 100, AllowShortFunctionsOnASingleLine: None}";
// clang-format on

/* clang-format over text: a malloc'ed result, or NULL with *error. */
static char *run_clang_format(const char *text, size_t len, size_t *out_len, const char **error) {
    char path[] = "/tmp/primec-fmt-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        *error = "cannot create a temporary file";
        return NULL;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n <= 0) {
            close(fd);
            unlink(path);
            *error = "cannot write a temporary file";
            return NULL;
        }
        off += (size_t)n;
    }
    close(fd);
    size_t cmdlen = strlen(PRIMEC_CLANG_FORMAT) + strlen(format_style) + strlen(path) + 64;
    char *cmd = malloc(cmdlen);
    if (!cmd) {
        unlink(path);
        *error = "out of memory";
        return NULL;
    }
    snprintf(cmd, cmdlen, "'%s' '--style=%s' '%s'", PRIMEC_CLANG_FORMAT, format_style, path);
    FILE *pipe = popen(cmd, "r");
    free(cmd);
    if (!pipe) {
        unlink(path);
        *error = "cannot run clang-format";
        return NULL;
    }
    size_t cap = len + len / 4 + 1024, n = 0;
    char *out = malloc(cap);
    for (;;) {
        if (!out)
            break;
        if (n + 4096 > cap) {
            cap *= 2;
            char *o = realloc(out, cap);
            if (!o) {
                free(out);
                out = NULL;
                break;
            }
            out = o;
        }
        size_t got = fread(out + n, 1, cap - n - 1, pipe);
        if (got == 0)
            break;
        n += got;
    }
    int status = pclose(pipe);
    unlink(path);
    if (!out || status != 0 || n == 0) {
        free(out);
        *error = "clang-format failed";
        return NULL;
    }
    out[n] = 0;
    *out_len = n;
    return out;
}

/* The table regions: a line "// clang-format off" up to the line
 * "// clang-format on". clang-format would leave them as they are but
 * still spends most of its time reading them (two thirds of a small
 * layer's build), so they never reach it: each becomes a placeholder
 * declaration, and the region, wrapped here, takes its place after. */
static const char region_off[] = "// clang-format off\n", region_on[] = "// clang-format on\n";
static const char hole[] = "int primec_format_region_";

/* Prints line (len bytes, no newline), broken after the commas at brace
 * depth depth (1: inside its outermost braces) where it passes the
 * column limit; a piece still too long is broken one level deeper. */
static void wrap_line(Printer *p, const char *line, size_t len, int indent, int depth) {
    if ((size_t)indent + len <= 100 || depth > 3) {
        printer_printf(p, "%*s%.*s\n", indent, "", (int)len, line);
        return;
    }
    /* The pieces: split after ", " at the depth asked for. */
    size_t start = 0, col = 0;
    int d = 0, quoted = 0, first = 1;
    for (size_t i = 0; i <= len; ++i) {
        char ch = i < len ? line[i] : 0;
        if (quoted) {
            if (ch == '\\' && i + 1 < len)
                ++i;
            else if (ch == '"')
                quoted = 0;
            continue;
        }
        if (ch == '"')
            quoted = 1;
        else if (ch == '{')
            ++d;
        else if (ch == '}')
            --d;
        int cut = i == len || (ch == ',' && d == depth && i + 1 < len && line[i + 1] == ' ');
        if (!cut)
            continue;
        size_t end = i < len ? i + 1 : len; /* the comma stays with its piece */
        const char *piece = line + start;
        size_t plen = end - start;
        int at = first ? indent : indent + 4;
        if (first || col + 1 + plen > 100) {
            if (!first)
                printer_printf(p, "\n");
            if (at + plen > 100 && depth < 3) {
                /* Too long alone: broken deeper, then the line goes on. */
                size_t l = plen;
                while (l && piece[l - 1] == ' ')
                    --l;
                Printer sub;
                printer_init(&sub);
                wrap_line(&sub, piece, l, at, depth + 1);
                size_t sl;
                char *st = printer_take(&sub, &sl);
                printer_free(&sub);
                sl = sl ? sl - 1 : 0; /* without its newline */
                st[sl] = 0;
                printer_printf(p, "%s", st);
                const char *nl = strrchr(st, '\n');
                col = nl ? sl - (size_t)(nl - st) - 1 : sl;
                free(st);
            } else {
                printer_printf(p, "%*s%.*s", at, "", (int)plen, piece);
                col = (size_t)at + plen;
            }
        } else {
            printer_printf(p, " %.*s", (int)plen, piece);
            col += 1 + plen;
        }
        first = 0;
        if (i == len)
            break;
        start = end;
        while (start < len && line[start] == ' ')
            ++start;
        i = start - 1;
    }
    printer_printf(p, "\n");
}

/* A table region as it appears in the formatted file: its lines wrapped
 * at the column limit. */
static void print_region(Printer *p, const char *r, size_t len) {
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(r + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (r + i)) : len - i;
        int indent = 0;
        while ((size_t)indent < n && r[i + (size_t)indent] == ' ')
            ++indent;
        wrap_line(p, r + i + indent, n - (size_t)indent, indent, 1);
        i += n + 1;
    }
}

char *format_c(const char *text, size_t len, size_t *out_len, const char **error) {
    /* The regions, and the text with a placeholder for each. */
    size_t cap = 16, nregions = 0;
    const char **rs = malloc(cap * sizeof *rs);
    size_t *rl = malloc(cap * sizeof *rl);
    Printer in;
    printer_init(&in);
    const char *at = text, *end = text + len;
    while (rs && rl && at < end) {
        const char *off = strstr(at, region_off);
        while (off && off != text && off[-1] != '\n')
            off = strstr(off + 1, region_off);
        const char *on = off ? strstr(off, region_on) : NULL;
        if (!off || !on || on[-1] != '\n') {
            printer_printf(&in, "%.*s", (int)(end - at), at);
            break;
        }
        on += sizeof region_on - 1;
        if (nregions == cap) {
            cap *= 2;
            const char **r2 = realloc(rs, cap * sizeof *rs);
            size_t *l2 = r2 ? realloc(rl, cap * sizeof *rl) : NULL;
            if (!r2 || !l2) {
                free(r2 ? (void *)r2 : (void *)rs);
                rs = NULL;
                break;
            }
            rs = r2;
            rl = l2;
        }
        rs[nregions] = off;
        rl[nregions] = (size_t)(on - off);
        printer_printf(&in, "%.*s%s%zu;\n", (int)(off - at), at, hole, nregions);
        ++nregions;
        at = on;
    }
    size_t in_len;
    char *in_text = printer_take(&in, &in_len);
    printer_free(&in);
    if (!rs || !rl || !in_text) {
        free(rs);
        free(rl);
        free(in_text);
        *error = "out of memory";
        return NULL;
    }
    char *formatted = run_clang_format(in_text, in_len, out_len, error);
    free(in_text);
    if (!formatted || nregions == 0) {
        free(rs);
        free(rl);
        return formatted;
    }
    /* The regions back in their places. */
    Printer out;
    printer_init(&out);
    const char *f = formatted;
    size_t k = 0;
    for (const char *h; (h = strstr(f, hole)) != NULL;) {
        char *stop;
        unsigned long long n = strtoull(h + sizeof hole - 1, &stop, 10);
        if (*stop != ';' || n != k || (h != formatted && h[-1] != '\n'))
            break;
        printer_printf(&out, "%.*s", (int)(h - f), f);
        print_region(&out, rs[k], rl[k]);
        ++k;
        f = stop + 1;
        if (*f == '\n')
            ++f;
    }
    printer_printf(&out, "%s", f);
    free(formatted);
    free(rs);
    free(rl);
    if (k != nregions) {
        printer_free(&out);
        *error = "clang-format moved a table region's placeholder";
        return NULL;
    }
    return printer_take(&out, out_len);
}
