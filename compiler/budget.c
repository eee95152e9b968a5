/*
 * budget.c — the compiler's memory budget (see budget.h).
 */
#define _DEFAULT_SOURCE
#include "budget.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t limit, held;
static DiagSink *ctx_sink;
static Span ctx_span;
static int ctx_has_span;
static const char *ctx_what;
static int reporting;

long budget_parse_bytes(const char *s, int *ok) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || *s < '0' || *s > '9') {
        *ok = 0;
        return 0;
    }
    double mul = 1;
    if (!strcmp(end, "K") || !strcmp(end, "KiB"))
        mul = 1024.0;
    else if (!strcmp(end, "M") || !strcmp(end, "MiB"))
        mul = 1024.0 * 1024;
    else if (!strcmp(end, "G") || !strcmp(end, "GiB"))
        mul = 1024.0 * 1024 * 1024;
    else if (!strcmp(end, "GB"))
        mul = 1e9;
    else if (*end) {
        *ok = 0;
        return 0;
    }
    /* A positive byte count that fits a long with room for sums of it. */
    *ok = v > 0 && v * mul < 0x1p62;
    return *ok ? (long)(v * mul) : 0;
}

void budget_set(size_t bytes) {
    limit = bytes;
}

/* Half of the physical memory (0 when unknown). */
static size_t budget_default(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0)
        return 0;
    return (size_t)pages * (size_t)size / 2;
}

int budget_init_from_env(void) {
    const char *v = getenv("PRIMEC_MAX_MEMORY");
    if (!v || !*v) {
        budget_set(budget_default());
        return 1;
    }
    if (!strcmp(v, "none")) {
        budget_set(0);
        return 1;
    }
    int ok = 0;
    long b = budget_parse_bytes(v, &ok);
    if (!ok) {
        fprintf(stderr,
                "primec: error: bad PRIMEC_MAX_MEMORY '%s' (a byte count such as 8G, 512M, "
                "2000000000, or none)\n",
                v);
        return 0;
    }
    budget_set((size_t)b);
    return 1;
}

void budget_context(DiagSink *sink, const Span *span, const char *what) {
    ctx_sink = sink;
    ctx_has_span = span != NULL;
    if (span)
        ctx_span = *span;
    ctx_what = what;
}

static void report(void) {
    reporting = 1;
    const double mib = (double)limit / (1024.0 * 1024);
    char size[64];
    if (mib >= 1024)
        snprintf(size, sizeof size, "%.2f GiB", mib / 1024);
    else
        snprintf(size, sizeof size, "%.1f MiB", mib);
    const char *what = ctx_what ? ctx_what : "the compilation";
    if (ctx_sink && ctx_has_span) {
        diag_error(ctx_sink, ctx_span,
                   "%s needs more than %s of memory, the compiler's budget "
                   "(PRIMEC_MAX_MEMORY or --max-memory; by default half of this machine's memory)",
                   what, size);
        diag_note_plain(ctx_sink, "the analysis keeps the actions of every device, step and "
                                  "layer; fewer devices or layers need less");
        diag_finish(ctx_sink);
    } else {
        fprintf(stderr,
                "primec: error: %s needs more than %s of memory, the compiler's budget "
                "(PRIMEC_MAX_MEMORY or --max-memory; by default half of this machine's memory)\n",
                what, size);
    }
    fflush(stdout);
    fflush(stderr);
    _exit(1);
}

void budget_charge(size_t bytes) {
    held += bytes;
    if (limit && held > limit && !reporting)
        report();
}

void budget_release(size_t bytes) {
    held = bytes > held ? 0 : held - bytes;
}
