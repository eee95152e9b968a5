/*
 * prime_progress.h — a progress line for long work (a built program's
 * --repeat, primec-calibrate's sweep), on a terminal only.
 *
 * The line ("NAME: 40 of 200 (20%), 3.1 s left") is rewritten in place
 * with a carriage return and erased at the end, so nothing of it remains
 * in the output. It shows only when the stream is a terminal and the work
 * has taken longer than PRIME_PROGRESS_AFTER seconds (default 1; 0 shows
 * it from the first update), and is rewritten at most ten times a
 * second. Otherwise every call does nothing, so output that goes to a
 * file or a pipe never holds a progress line.
 */
#ifndef PRIME_PROGRESS_H
#define PRIME_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef struct PrimeProgress {
    FILE *out; /* NULL: silent */
    const char *what;
    long total;
    uint64_t t0_ns, last_ns, after_ns;
    int shown; /* a line is on the terminal */
} PrimeProgress;

/* `out` may be NULL (silent); it is used only when it is a terminal. */
void prime_progress_start(PrimeProgress *p, FILE *out, long total, const char *what);
/* `done` of `total` items finished. */
void prime_progress_update(PrimeProgress *p, long done);
/* Erases the line, if one was shown. */
void prime_progress_end(PrimeProgress *p);

#endif
