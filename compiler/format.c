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
 * declaration, and the region, laid out here, takes its place after. */
static const char region_off[] = "// clang-format off\n", region_on[] = "// clang-format on\n";
static const char hole[] = "int primec_format_region;\n";

/* The column limit of format_style. */
enum { columns = 100 };

/* The next region at or after from: [*off, *on) with its two marker
 * lines, or 0. */
static int next_region(const char *text, const char *from, const char **off, const char **on) {
    const char *o = strstr(from, region_off);
    while (o && o != text && o[-1] != '\n')
        o = strstr(o + 1, region_off);
    const char *e = o ? strstr(o, region_on) : NULL;
    if (!e || e[-1] != '\n')
        return 0;
    *off = o;
    *on = e + sizeof region_on - 1;
    return 1;
}

/* Prints line (len bytes) from column indent on, broken after the
 * commas at brace depth depth (1: inside its outermost braces) where it
 * passes the column limit, continuation lines indented by 4; a piece
 * too long alone is broken one level deeper. No newline at the end;
 * returns the column the line ends at. */
static size_t wrap(Printer *p, const char *line, size_t len, size_t indent, int depth) {
    if (indent + len <= columns || depth > 3) {
        printer_printf(p, "%.*s", (int)len, line);
        return indent + len;
    }
    size_t start = 0, col = indent;
    int d = 0, quoted = 0;
    for (size_t i = 0; i <= len; ++i) {
        char ch = i < len ? line[i] : ',';
        if (quoted) {
            if (ch == '\\' && i + 1 < len)
                ++i;
            else if (ch == '"')
                quoted = 0;
            continue;
        }
        d += ch == '{' ? 1 : ch == '}' ? -1 : 0;
        quoted = ch == '"';
        if (i < len && !(ch == ',' && d == depth && i + 1 < len && line[i + 1] == ' '))
            continue;
        /* A piece, the comma with it. */
        size_t end = i < len ? i + 1 : len, plen = end - start;
        if (start > 0 && col + 1 + plen <= columns) {
            printer_printf(p, " ");
            ++col;
        } else if (start > 0) {
            printer_printf(p, "\n%*s", (int)(indent + 4), "");
            col = indent + 4;
        }
        col = wrap(p, line + start, plen, col, depth + 1);
        if (i == len)
            break;
        for (start = end; start < len && line[start] == ' ';)
            ++start;
        i = start - 1;
    }
    return col;
}

char *format_c(const char *text, size_t len, size_t *out_len, const char **error) {
    /* The text with a placeholder for each region. */
    Printer in;
    printer_init(&in);
    const char *at = text, *off, *on;
    for (; next_region(text, at, &off, &on); at = on)
        printer_printf(&in, "%.*s%s", (int)(off - at), at, hole);
    printer_printf(&in, "%.*s", (int)(text + len - at), at);
    size_t in_len;
    char *in_text = printer_take(&in, &in_len);
    printer_free(&in);
    if (!in_text) {
        *error = "out of memory";
        return NULL;
    }
    char *formatted = run_clang_format(in_text, in_len, out_len, error);
    free(in_text);
    if (!formatted)
        return NULL;
    /* The regions back in their places, in their order, each line laid
     * out from its own indentation. */
    Printer out;
    printer_init(&out);
    const char *f = formatted, *h;
    for (at = text; (h = strstr(f, hole)) != NULL; f = h + sizeof hole - 1) {
        if ((h != formatted && h[-1] != '\n') || !next_region(text, at, &off, &on))
            break;
        printer_printf(&out, "%.*s", (int)(h - f), f);
        for (const char *l = off; l < on;) {
            const char *nl = strchr(l, '\n');
            size_t indent = strspn(l, " ");
            printer_printf(&out, "%*s", (int)indent, "");
            wrap(&out, l + indent, (size_t)(nl - l) - indent, indent, 1);
            printer_printf(&out, "\n");
            l = nl + 1;
        }
        at = on;
    }
    printer_printf(&out, "%s", f);
    free(formatted);
    if (h || next_region(text, at, &off, &on)) {
        printer_free(&out);
        *error = "clang-format moved a table region's placeholder";
        return NULL;
    }
    return printer_take(&out, out_len);
}
