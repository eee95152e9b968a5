/*
 * sched_test.h — what the tests that compile one input twice and compare
 * the schedules share (test_sched_fold.c, test_sched_orbit.c).
 */
#ifndef PRIMEC_SCHED_TEST_H
#define PRIMEC_SCHED_TEST_H

#include <stddef.h>

#include "pipeline.h"

/* Compiles path, a file or FILE@MODEL for one model of it, through the
 * schedule pass into c, diagnostics stored and not printed; `file`
 * (cap bytes) receives the file's name, which c keeps a pointer to.
 * Returns pipeline_run's result. */
int sched_test_compile(Compilation *c, char *file, size_t cap, const char *path, int predict_only);

#endif
