/*
 * progress.c — the progress line of long work (see prime_progress.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "prime_progress.h"

#include "prime_rt.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROGRESS_PERIOD_NS 100000000u

void prime_progress_start(PrimeProgress *p, FILE *out, long total, const char *what) {
    memset(p, 0, sizeof *p);
    if (!out || !isatty(fileno(out)))
        return;
    double after = 1.0;
    const char *env = getenv("PRIME_PROGRESS_AFTER");
    if (env && *env) {
        char *end;
        double v = strtod(env, &end);
        if (*end == '\0' && v >= 0 && v < 1e6)
            after = v;
    }
    p->out = out;
    p->what = what ? what : "";
    p->total = total;
    p->t0_ns = prime_clock_ns();
    p->after_ns = (uint64_t)(after * 1e9);
}

void prime_progress_update(PrimeProgress *p, long done) {
    if (!p->out || done >= p->total)
        return;
    uint64_t now = prime_clock_ns();
    if (now - p->t0_ns < p->after_ns || (p->shown && now - p->last_ns < PROGRESS_PERIOD_NS))
        return;
    double spent = (double)(now - p->t0_ns) * 1e-9;
    double left = done > 0 ? spent * (double)(p->total - done) / (double)done : 0;
    fprintf(p->out, "\r%s: %ld of %ld (%.0f%%), %.1f s left\033[K", p->what, done, p->total,
            p->total > 0 ? 100.0 * (double)done / (double)p->total : 0.0, left);
    fflush(p->out);
    p->shown = 1;
    p->last_ns = now;
}

void prime_progress_end(PrimeProgress *p) {
    if (p->out && p->shown) {
        fputs("\r\033[K", p->out);
        fflush(p->out);
    }
    p->shown = 0;
}
