/*
 * plan_fixture.h — what the planner's unit tests share: a cost model that
 * prices a schedule by its counted bytes and peak (so that a test needs no
 * hardware profile), a move price, and a model file written to /tmp.
 * Included by test_plan.c and test_plan_train.c after cmocka.h.
 */
#ifndef PRIMEC_TEST_PLAN_FIXTURE_H
#define PRIMEC_TEST_PLAN_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan.h"

/* The busiest device's bytes and its peak give the time (compute shrinks
 * with the devices that share the work: modelled by the peak, as smaller
 * tiles make a smaller peak); the forward pass is 0.4 of it; the gradient
 * all-reduces of instance 0 are priced per input, like the rest. */
static PlanCost bytes_cost(const Schedule *s, Arena *scratch, void *ctx) {
    (void)ctx;
    (void)scratch;
    PlanCost c;
    memset(&c, 0, sizeof c);
    long worst = 0, peak = 0, coll = 0;
    for (int d = 0; d < s->model->mesh.ndev; ++d) {
        long b = 0;
        for (int k = 0; k < PRIME_BYTES_KIND_COUNT; ++k)
            b += s->pred_bytes[k][d];
        if (b > worst)
            worst = b;
        if (s->pred_bytes[PRIME_BYTES_COLLECTIVE][d] > coll)
            coll = s->pred_bytes[PRIME_BYTES_COLLECTIVE][d];
        if (s->pred_peak[d] > peak)
            peak = s->pred_peak[d];
    }
    c.time = 1e-6 * (double)worst + 1e-7 * (double)peak;
    c.fwd_time = 0.4 * c.time;
    c.coll_bytes = coll;
    c.coll_time = 1e-6 * (double)coll;
    c.peak = peak;
    for (int q = 0; q < s->phases.count; ++q) {
        const PhaseSched *ph = s->phases.items[q];
        if (ph->inst != 0 || (ph->kind != PHASE_BWD && ph->kind != PHASE_GRAD))
            continue;
        for (int g = 0; g < ph->groups.count; ++g) {
            const Collective *col = ph->groups.items[g];
            c.reduce_bytes[ph->wrt] += col->bytes / s->model->mesh.ndev;
            c.reduce_time[ph->wrt] += 1e-6 * (double)(col->bytes / s->model->mesh.ndev);
        }
    }
    return c;
}

static double bytes_move(long bytes, void *ctx) {
    (void)ctx;
    return 1e-6 * (double)bytes + 1e-6;
}

/* The file the test wrote last (unlink it when done). */
static char path[128];

static void write_file(const char *text) {
    strcpy(path, "/tmp/primec-test-plan-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
}

#endif
