/*
 * budget.h — the compiler's memory budget.
 *
 * The analysis of a plan still keeps every device's actions (docs/
 * program-form.md, "What still grows"), so a model on enough devices
 * needs more memory than the machine has. Rather than be killed by the
 * system, or fail in malloc as an internal error, the compiler counts
 * the bytes its arenas hold, all together, and past the budget reports
 * an error at the model (or run) it was working on and exits with 1.
 *
 * The count is the process's, not a compilation's: the one piece of
 * state the compiler keeps outside a Compilation (an arena knows no
 * compilation). The budget is PRIMEC_MAX_MEMORY (a byte count: 512M, 8G, 16GiB,
 * 2000000000, or `none`) or `--max-memory`, by default half of this
 * machine's physical memory. The language server sets none.
 */
#ifndef PRIMEC_BUDGET_H
#define PRIMEC_BUDGET_H

#include <stddef.h>

#include "diag.h"

/* A positive byte count: digits (a decimal fraction allowed) and an
 * optional K, KiB, M, MiB, G, GiB (powers of 1024) or GB (10^9); 0 after
 * setting *ok to 0 when s is none of these or needs 62 bits or more. */
long budget_parse_bytes(const char *s, int *ok);

/* Sets the budget: bytes, or 0 for none. */
void budget_set(size_t bytes);
/* PRIMEC_MAX_MEMORY's budget, or the default; 0 after an error on
 * stderr when the variable is malformed. */
int budget_init_from_env(void);

/* What the compiler is working on, for the error: `what` (e.g. "the
 * schedule of model 'm' on 4096 devices"), reported at span through sink
 * (has_span 0: no position). The strings must outlive the work. */
void budget_context(DiagSink *sink, const Span *span, const char *what);

/* Called by the arenas: bytes taken from and given back to the system.
 * A charge past the budget reports and exits with 1. */
void budget_charge(size_t bytes);
void budget_release(size_t bytes);

#endif
