/*
 * printer.c — see printer.h.
 */
#include "printer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"

void printer_init(Printer *p) {
    memset(p, 0, sizeof *p);
    p->at_line_start = 1;
}

void printer_free(Printer *p) {
    free(p->data);
    memset(p, 0, sizeof *p);
}

static void reserve(Printer *p, size_t extra) {
    if (p->len + extra + 1 <= p->cap)
        return;
    size_t cap = p->cap ? p->cap : 4096;
    while (cap < p->len + extra + 1)
        cap *= 2;
    char *d = realloc(p->data, cap);
    if (!d)
        ICE("out of memory");
    p->data = d;
    p->cap = cap;
}

static void put(Printer *p, const char *s, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        if (p->at_line_start && s[i] != '\n') {
            reserve(p, (size_t)p->indent * 4);
            for (int k = 0; k < p->indent * 4; ++k)
                p->data[p->len++] = ' ';
            p->at_line_start = 0;
        }
        reserve(p, 1);
        p->data[p->len++] = s[i];
        if (s[i] == '\n')
            p->at_line_start = 1;
    }
    if (p->data)
        p->data[p->len] = 0;
}

void printer_printf(Printer *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[512];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        ICE("bad format");
    if ((size_t)n < sizeof small) {
        put(p, small, (size_t)n);
    } else {
        char *big = malloc((size_t)n + 1);
        if (!big)
            ICE("out of memory");
        vsnprintf(big, (size_t)n + 1, fmt, ap2);
        put(p, big, (size_t)n);
        free(big);
    }
    va_end(ap2);
}

void printer_indent(Printer *p, int delta) {
    p->indent += delta;
}

char *printer_take(Printer *p, size_t *len) {
    reserve(p, 0);
    p->data[p->len] = 0;
    char *d = p->data;
    if (len)
        *len = p->len;
    p->data = NULL;
    p->len = p->cap = 0;
    p->at_line_start = 1;
    return d;
}
