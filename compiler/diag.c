/*
 * diag.c — printing, counting and storing diagnostics.
 *
 * A located diagnostic prints as
 *
 *     file:LINE:COL: error: MESSAGE
 *     <the source line, verbatim>
 *     <padding>^~~~
 *
 * where the padding repeats the tabs of the source line (so the caret
 * lines up whatever the tab width) and skips UTF-8 continuation bytes (so
 * it lines up after non-ASCII text); '^' marks the first byte of the span
 * and '~' the rest of it on that line. Columns count bytes.
 *
 * The sink stores every diagnostic it prints (messages in the arena).
 * After max_errors errors it prints one fatal line and drops everything
 * that follows, notes included.
 */
#include "diag.h"

#include <stdlib.h>
#include <string.h>

#define DIAG_DEFAULT_MAX_ERRORS 20

void diag_init(DiagSink *sink, const SourceMap *sources, Arena *arena, FILE *out) {
    memset(sink, 0, sizeof(*sink));
    sink->sources = sources;
    sink->arena = arena;
    sink->out = out;
    sink->max_errors = DIAG_DEFAULT_MAX_ERRORS;
}

static const char *level_name(DiagLevel level) {
    switch (level) {
    case DIAG_ERROR:
        return "error";
    case DIAG_WARNING:
        return "warning";
    case DIAG_NOTE:
        return "note";
    case DIAG_REMARK:
        return "remark";
    }
    return "error";
}

static int is_utf8_continuation(unsigned char c) {
    return (c & 0xC0) == 0x80;
}

/* The source line of span->lo and the caret line under it. */
static void print_snippet(FILE *out, const SourceFile *f, Span span) {
    int line, col;
    source_line_col(f, span.lo, &line, &col);
    size_t len;
    const char *text = source_line_text(f, line, &len);
    fwrite(text, 1, len, out);
    fputc('\n', out);

    size_t start = (size_t)(col - 1); /* offset of the span in the line */
    for (size_t i = 0; i < start; i++) {
        unsigned char c = i < len ? (unsigned char)text[i] : ' ';
        if (c == '\t')
            fputc('\t', out);
        else if (!is_utf8_continuation(c))
            fputc(' ', out);
    }
    fputc('^', out);
    size_t end = start + (span.hi > span.lo ? span.hi - span.lo : 0);
    if (end > len)
        end = len;
    for (size_t i = start + 1; i < end; i++)
        if (!is_utf8_continuation((unsigned char)text[i]))
            fputc('~', out);
    fputc('\n', out);
}

static void store(DiagSink *sink, DiagLevel level, const Span *span, const char *message) {
    if (sink->count == sink->cap) {
        int cap = sink->cap ? sink->cap * 2 : 16;
        Diagnostic *items = ARENA_ARRAY(sink->arena, Diagnostic, cap);
        if (sink->count)
            memcpy(items, sink->items, sizeof(Diagnostic) * (size_t)sink->count);
        sink->items = items;
        sink->cap = cap;
    }
    Diagnostic *d = &sink->items[sink->count++];
    d->level = level;
    d->has_span = span != NULL;
    if (span)
        d->span = *span;
    d->message = message;
}

void diag_report(DiagSink *sink, DiagLevel level, const Span *span, const char *fmt, va_list ap) {
    if (sink->suppressed)
        return;
    if (level == DIAG_ERROR) {
        int cap = sink->max_errors > 0 ? sink->max_errors : DIAG_DEFAULT_MAX_ERRORS;
        if (sink->error_count >= cap) {
            sink->suppressed = 1;
            if (sink->out) {
                fputs("primec: fatal: too many errors emitted, stopping now\n", sink->out);
                fflush(sink->out);
            }
            return;
        }
        sink->error_count++;
    } else if (level == DIAG_WARNING) {
        sink->warning_count++;
    }

    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        ICE("diagnostic with a bad format: '%s'", fmt);
    char *message = arena_alloc(sink->arena, (size_t)n + 1);
    vsnprintf(message, (size_t)n + 1, fmt, ap);
    store(sink, level, span, message);

    FILE *out = sink->out;
    if (!out)
        return;
    if (span) {
        const SourceFile *f = source_get(sink->sources, span->file);
        int line, col;
        source_line_col(f, span->lo, &line, &col);
        fprintf(out, "%s:%d:%d: %s: %s\n", f->name, line, col, level_name(level), message);
        print_snippet(out, f, *span);
    } else if (level == DIAG_NOTE) {
        fprintf(out, "note: %s\n", message);
    } else {
        fprintf(out, "primec: %s: %s\n", level_name(level), message);
    }
    fflush(out);
}

void diag_error(DiagSink *sink, Span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_report(sink, DIAG_ERROR, &span, fmt, ap);
    va_end(ap);
}

void diag_warning(DiagSink *sink, Span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_report(sink, DIAG_WARNING, &span, fmt, ap);
    va_end(ap);
}

void diag_note(DiagSink *sink, Span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_report(sink, DIAG_NOTE, &span, fmt, ap);
    va_end(ap);
}

void diag_note_plain(DiagSink *sink, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_report(sink, DIAG_NOTE, NULL, fmt, ap);
    va_end(ap);
}

void diag_error_plain(DiagSink *sink, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_report(sink, DIAG_ERROR, NULL, fmt, ap);
    va_end(ap);
}

static const char *plural(int n) {
    return n == 1 ? "" : "s";
}

void diag_finish(DiagSink *sink) {
    if (!sink->out)
        return;
    int e = sink->error_count, w = sink->warning_count;
    if (e && w)
        fprintf(sink->out, "%d warning%s and %d error%s generated.\n", w, plural(w), e, plural(e));
    else if (e)
        fprintf(sink->out, "%d error%s generated.\n", e, plural(e));
    else if (w)
        fprintf(sink->out, "%d warning%s generated.\n", w, plural(w));
    fflush(sink->out);
}

static _Thread_local IceRecovery *ice_recovery;

void diag_ice_set_recovery(IceRecovery *recovery) {
    ice_recovery = recovery;
}

void diag_ice(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    if (ice_recovery) {
        IceRecovery *r = ice_recovery;
        ice_recovery = NULL;
        int n = snprintf(r->message, sizeof r->message, "at %s:%d: ", file, line);
        if (n < 0 || (size_t)n >= sizeof r->message)
            n = 0;
        va_start(ap, fmt);
        vsnprintf(r->message + n, sizeof r->message - (size_t)n, fmt, ap);
        va_end(ap);
        longjmp(r->env, 1);
    }
    va_start(ap, fmt);
    fprintf(stderr, "internal compiler error at %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    /* Exit code 3 means "compiler bug"; _Exit skips atexit handlers that
     * might touch the broken state. */
    _Exit(3);
}
