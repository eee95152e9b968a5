/*
 * diag.h — the one diagnostics path.
 *
 * Every user-facing message goes through a DiagSink: gcc-style
 * `file:line:col: error: message`, then the source line and an underline
 * of the whole span (`^~~~`), then `note:` lines that point at the other
 * side of a conflict. The sink counts and stores every diagnostic so that
 * tests can inspect them, stops storing after a cap, and the driver ends
 * with `N errors generated.`.
 *
 * A user's mistake is a diagnostic. A broken compiler invariant is
 * ICE(...): `internal compiler error at file:line` on stderr, then exit 3
 * -- unless a recovery point is set (the language server's), which the
 * internal error then returns to instead.
 */
#ifndef PRIMEC_DIAG_H
#define PRIMEC_DIAG_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>

#include "source.h"

typedef enum DiagLevel { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE, DIAG_REMARK } DiagLevel;

typedef struct Diagnostic {
    DiagLevel level;
    Span span;
    int has_span; /* 0 for messages about no place in particular */
    const char *message;
} Diagnostic;

typedef struct DiagSink {
    const SourceMap *sources;
    Arena *arena;
    FILE *out; /* where to print as they come; NULL to only store */
    int color; /* reserved; 0 */
    int error_count;
    int warning_count;
    int max_errors;    /* stop printing (and storing) errors after this many; 0 = 20 */
    Diagnostic *items; /* every stored diagnostic, notes included, in order */
    int count;
    int cap;
    int suppressed; /* 1 after the cap was hit: notes of dropped errors are dropped too */
} DiagSink;

void diag_init(DiagSink *sink, const SourceMap *sources, Arena *arena, FILE *out);
void diag_error(DiagSink *sink, Span span, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void diag_warning(DiagSink *sink, Span span, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A note belongs to the error or warning reported just before it. */
void diag_note(DiagSink *sink, Span span, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A note with no source position. */
void diag_note_plain(DiagSink *sink, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An error with no source position, e.g. `primec: error: cannot open 'x.prime': ...`. */
void diag_error_plain(DiagSink *sink, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void diag_report(DiagSink *sink, DiagLevel level, const Span *span, const char *fmt, va_list ap);
/* Prints `N error(s) generated.` if there were errors. */
void diag_finish(DiagSink *sink);

/* Where an internal error goes instead of ending the process: diag_ice
 * writes its message into `message` and longjmps to `env` (setjmp returns
 * 1). What the interrupted pass had allocated in the compilation's arena
 * goes with the compilation; the caller must not use the compilation's IR
 * again, only free it. */
typedef struct IceRecovery {
    jmp_buf env;
    char message[512];
} IceRecovery;
/* Sets the recovery point of this thread, or clears it (NULL). */
void diag_ice_set_recovery(IceRecovery *recovery);

_Noreturn void diag_ice(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define ICE(...) diag_ice(__FILE__, __LINE__, __VA_ARGS__)
#define ICE_ASSERT(cond)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            diag_ice(__FILE__, __LINE__, "assertion failed: %s", #cond);                           \
    } while (0)

#endif
