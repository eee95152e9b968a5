/*
 * test_stages.c — unit tests of pipeline stages and micro-batches in the
 * schedule (docs/language.md, "Pipeline stages").
 *
 * Each test writes a two-layer batched MLP with `stages p;` (and
 * `microbatches b: M;`) to a temporary file, runs the pipeline up to and
 * including "schedule" and asserts on the per-rank action lists: a rank of
 * another stage runs no kernel, joins no collective and receives nothing
 * in an instance's phase (it only sends the boundary activation it holds),
 * every collective's group lies in one stage, the boundary activation and
 * its gradient cross the stages once each way as redistributions of
 * exactly their tiles, and a micro-batched weight gradient is all-reduced
 * once, after its last micro-batch.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline.h"
#include "schedule.h"

static char tmpdir[64];
static char path[128];
static Compilation comp;
static int active;

static int group_setup(void **state) {
    (void)state;
    strcpy(tmpdir, "/tmp/primec-test-stages-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(path, sizeof path, "%s/model.prime", tmpdir);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    unlink(path);
    return rmdir(tmpdir);
}

static int test_teardown(void **state) {
    (void)state;
    if (active)
        compilation_free(&comp);
    active = 0;
    return 0;
}

/* The schedule of the MLP with `extra` after its mesh (p: 2, r: 2). */
static const Schedule *schedule_mlp(const char *extra) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "model mlp {\n"
            "    param layers = 2, b = 4, s = 8, h = 16, f = 32;\n"
            "    mesh(p: 2, r: 2);\n"
            "    %s\n"
            "    input x[b, s, h];\n"
            "    layer(x -> y) repeat layers {\n"
            "        weight w1[h, f];\n"
            "        weight w2[f, h];\n"
            "        hd = matmul_b(x, w1) use dp;\n"
            "        ac = relu_b(hd) use dp;\n"
            "        y = matmul_b(ac, w2) use dp;\n"
            "    }\n"
            "    l = sumsq_b(y) use dp;\n"
            "}\n",
            extra);
    assert_int_equal(fclose(f), 0);
    compilation_init(&comp, path, NULL);
    active = 1;
    comp.sink.out = NULL;
    int ok = pipeline_run(&comp, "schedule");
    for (int i = 0; !ok && i < comp.sink.count; ++i)
        fprintf(stderr, "diagnostic: %s\n", comp.sink.items[i].message);
    assert_true(ok);
    assert_int_equal(comp.schedules.count, 1);
    return comp.schedules.items[0];
}

/* The stage coordinate (mesh axis p, the first) of a rank of (p: 2, r: 2). */
static int stage_of_rank(int rank) {
    return rank / 2;
}

/* Off-stage ranks of every instance's phase run no kernel, collective,
 * add, allocation, receive or send: at most the completion (WAIT_KEPT)
 * of the sends of a boundary activation they hold, in a phase with a
 * boundary move, its waits, and the frees of tiles no later phase reads.
 * Every collective's group is in the phase's stage. */
static void check_stage_actions(const Schedule *s) {
    const Model *m = s->model;
    int completions = 0;
    for (int p = 0; p < s->phases.count; ++p) {
        const PhaseSched *ph = s->phases.items[p];
        if (ph->inst < 0)
            continue;
        int stage = m->instances[ph->inst].stage;
        for (int r = 0; r < m->mesh.ndev; ++r) {
            if (stage_of_rank(r) == stage)
                continue;
            for (int i = 0; i < ph->nactions[r]; ++i) {
                int op = ph->actions[r][i].op;
                if (op != PRIME_ACT_FREE && op != PRIME_ACT_WAIT_KEPT && op != PRIME_ACT_WAIT)
                    fail_msg("rank %d runs a %s in phase %d of stage %d", r, prime_action_name(op),
                             p, stage);
                /* A completion only of a boundary move (dead tiles are freed anywhere). */
                if (op == PRIME_ACT_WAIT_KEPT)
                    assert_true(ph->boundary.count > 0);
                completions += op == PRIME_ACT_WAIT_KEPT;
            }
        }
        for (int c = 0; c < ph->collectives.count; ++c) {
            const Collective *col = ph->collectives.items[c];
            for (int k = 0; k < col->gsize; ++k)
                assert_int_equal(stage_of_rank(col->group[k]), stage);
        }
    }
    assert_true(completions > 0); /* the boundary activation left its stage */
}

/* Every send to another stage is posted in the phase that wrote its tile
 * last, on the sender's stage, right before a KEEP; each KEEP is
 * completed by exactly one WAIT_KEPT of its tag on the same rank, in a
 * later phase of the other stage (the receiving phase); returns the
 * number of such sends. */
static int check_sends_at_producer(const Schedule *s) {
    const Model *m = s->model;
    int nsends = 0;
    for (int p = 0; p < s->phases.count; ++p) {
        const PhaseSched *ph = s->phases.items[p];
        for (int r = 0; r < m->mesh.ndev; ++r) {
            for (int i = 0; i < ph->nactions[r]; ++i) {
                const PrimeAction *a = &ph->actions[r][i];
                if (a->op == PRIME_ACT_SEND && stage_of_rank(a->peer) != stage_of_rank(r)) {
                    assert_true(ph->inst >= 0);
                    assert_int_equal(m->instances[ph->inst].stage, stage_of_rank(r));
                    int j = i;
                    while (j < ph->nactions[r] && ph->actions[r][j].op == PRIME_ACT_SEND)
                        ++j;
                    assert_true(j < ph->nactions[r]);
                    assert_int_equal(ph->actions[r][j].op, PRIME_ACT_KEEP);
                    int written = 0;
                    for (int k = 0; k < i; ++k)
                        written |= ph->actions[r][k].op == PRIME_ACT_KERNEL ||
                                           ph->actions[r][k].op == PRIME_ACT_ALLREDUCE
                                       ? ph->actions[r][k].tensor == a->tensor &&
                                             ph->actions[r][k].slot == a->slot
                                       : 0;
                    assert_true(written);
                    nsends++;
                }
                if (a->op != PRIME_ACT_KEEP)
                    continue;
                int waits = 0;
                for (int q = p + 1; q < s->phases.count; ++q) {
                    const PhaseSched *qh = s->phases.items[q];
                    for (int k = 0; k < qh->nactions[r]; ++k)
                        if (qh->actions[r][k].op == PRIME_ACT_WAIT_KEPT &&
                            qh->actions[r][k].tag == a->tag) {
                            assert_int_not_equal(m->instances[qh->inst].stage, stage_of_rank(r));
                            waits++;
                        }
                }
                assert_int_equal(waits, 1);
            }
        }
    }
    return nsends;
}

/* The boundary moves between the stages: each transfer from one stage to
 * the other; returns their bytes. */
static long cross_stage_bytes(const Schedule *s, int *nmoves) {
    long bytes = 0;
    *nmoves = 0;
    for (int p = 0; p < s->phases.count; ++p) {
        const PhaseSched *ph = s->phases.items[p];
        for (int i = 0; i < ph->boundary.count; ++i) {
            const Move *mv = ph->boundary.items[i];
            int crosses = 0;
            for (int k = 0; k < mv->ntransfers; ++k)
                crosses |=
                    stage_of_rank(mv->transfers[k].src) != stage_of_rank(mv->transfers[k].dst);
            if (!crosses)
                continue;
            for (int k = 0; k < mv->ntransfers; ++k)
                assert_int_not_equal(stage_of_rank(mv->transfers[k].src),
                                     stage_of_rank(mv->transfers[k].dst));
            bytes += mv->bytes;
            ++*nmoves;
        }
    }
    return bytes;
}

static void test_stages(void **state) {
    (void)state;
    const Schedule *s = schedule_mlp("stages p;");
    const Model *m = s->model;
    assert_int_equal(m->nstages, 2);
    assert_int_equal(m->instances[0].stage, 0);                 /* hd_0 */
    assert_int_equal(m->instances[m->ninstances - 1].stage, 1); /* l */
    check_stage_actions(s);
    /* y_0 to each of stage 1's 2 devices, dy_0 back to stage 0's. */
    assert_int_equal(check_sends_at_producer(s), 4);
    /* y_0 forward and dy_0 backward: [b / R, s, h] floats to each of the
     * other stage's 2 devices. */
    int nmoves;
    long bytes = cross_stage_bytes(s, &nmoves);
    assert_int_equal(nmoves, 2);
    assert_int_equal(bytes, 2 * 2 * (2 * 8 * 16 * 4));
    long redist = 0;
    for (int r = 0; r < m->mesh.ndev; ++r)
        redist += s->pred_bytes[PRIME_BYTES_REDIST][r];
    assert_int_equal(redist, bytes);
}

/* The weight gradients' all-reduces, by storage tensor name prefix "dw". */
static int weight_gradient_allreduces(const Schedule *s) {
    int n = 0;
    for (int p = 0; p < s->phases.count; ++p) {
        const PhaseSched *ph = s->phases.items[p];
        for (int c = 0; c < ph->collectives.count; ++c) {
            const Collective *col = ph->collectives.items[c];
            n += strncmp(s->tensors[col->tensor].name, "dw", 2) == 0;
        }
    }
    return n;
}

static void test_microbatches(void **state) {
    (void)state;
    const Schedule *one = schedule_mlp("stages p;");
    int ninst = one->model->ninstances;
    int reduces = weight_gradient_allreduces(one);
    long coll = 0;
    for (int r = 0; r < one->model->mesh.ndev; ++r)
        coll += one->pred_bytes[PRIME_BYTES_COLLECTIVE][r];
    test_teardown(NULL);

    const Schedule *s = schedule_mlp("stages p; microbatches b: 2;");
    const Model *m = s->model;
    assert_int_equal(m->nmicro, 2);
    assert_int_equal(m->ninstances, 2 * ninst);
    /* Micro-batch 1's copy of hd_0 is on stage 0, its loss on stage 1. */
    assert_string_equal(m->instances[ninst].name, "hd_0_mb1");
    assert_int_equal(m->instances[ninst].stage, 0);
    assert_int_equal(m->instances[2 * ninst - 1].stage, 1);
    check_stage_actions(s);
    /* Each weight gradient is all-reduced once, over both micro-batches:
     * the same all-reduces and bytes as without micro-batches, but for the
     * scalar loss's, once per micro-batch. */
    assert_int_equal(weight_gradient_allreduces(s), reduces);
    long mcoll = 0;
    for (int r = 0; r < m->mesh.ndev; ++r)
        mcoll += s->pred_bytes[PRIME_BYTES_COLLECTIVE][r];
    assert_true(mcoll > coll && mcoll - coll <= 4 * 4); /* one float per rank of stage 1 */
    /* Each micro-batch's half of the activation crosses each way. */
    int nmoves;
    long bytes = cross_stage_bytes(s, &nmoves);
    assert_int_equal(nmoves, 4);
    assert_int_equal(bytes, 2 * 2 * (2 * 8 * 16 * 4));
    assert_int_equal(check_sends_at_producer(s), 8);
    test_teardown(NULL);

    /* In 1F1B's order too: every send where its value is made. */
    s = schedule_mlp("stages p; microbatches b: 2 order 1f1b;");
    check_stage_actions(s);
    assert_int_equal(check_sends_at_producer(s), 8);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_stages, test_teardown),
        cmocka_unit_test_teardown(test_microbatches, test_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
