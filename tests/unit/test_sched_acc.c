/*
 * test_sched_acc.c — the schedule's accumulators (sched_accumulate.c)
 * against a reference.
 *
 * sched_acc_merge works on the slices an accumulator holds and may swap
 * the two accumulators' arrays; sched_acc_new reuses accumulators from the
 * run's pool. Both must behave exactly like the plain definition, which
 * this test spells out as a loop over every reduction slice: counts add
 * (saturating at 255), a slice's first step is the receiving
 * accumulator's where both hold it, and the first double count is the
 * receiver's own, else the smallest slice both hold, else the sender's.
 * Random accumulators (duplicates included) are merged both ways and
 * compared field by field, through several reuses from the pool.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"

#define MAX_RED 48

/* An accumulator as the plain definition sees it. */
typedef struct RefAcc {
    unsigned char red[MAX_RED];
    long red_step[MAX_RED];
    long first_dup;
    long dup_steps[2];
} RefAcc;

static void ref_add(RefAcc *a, long r, long step) {
    if (a->red[r] && a->first_dup < 0) {
        a->first_dup = r;
        a->dup_steps[0] = a->red_step[r];
        a->dup_steps[1] = step;
    }
    if (!a->red[r])
        a->red_step[r] = step;
    if (a->red[r] < 255)
        a->red[r]++;
}

static void ref_merge(RefAcc *into, const RefAcc *from, long nred) {
    for (long r = 0; r < nred; ++r) {
        if (from->red[r] && into->red[r] && into->first_dup < 0) {
            into->first_dup = r;
            into->dup_steps[0] = from->red_step[r];
            into->dup_steps[1] = into->red_step[r];
        }
        if (from->red[r] && !into->red[r])
            into->red_step[r] = from->red_step[r];
        unsigned v = (unsigned)into->red[r] + from->red[r];
        into->red[r] = (unsigned char)(v > 255 ? 255 : v);
    }
    if (from->first_dup >= 0 && into->first_dup < 0) {
        into->first_dup = from->first_dup;
        into->dup_steps[0] = from->dup_steps[0];
        into->dup_steps[1] = from->dup_steps[1];
    }
}

static unsigned long rng = 12345;
static long next_rand(long n) {
    rng = rng * 6364136223846793005ul + 1442695040888963407ul;
    return (long)((rng >> 33) % (unsigned long)n);
}

/* Adds `adds` random slices (some twice, when dups) to both forms. */
static void fill(Acc *a, RefAcc *ref, long nred, int adds, int dups, long *step) {
    memset(ref, 0, sizeof *ref);
    ref->first_dup = -1;
    for (int k = 0; k < adds; ++k) {
        long r = next_rand(nred);
        if (!dups && a->red[r])
            continue;
        sched_acc_add(a, r, *step);
        ref_add(ref, r, *step);
        ++*step;
    }
}

static void assert_same(const Acc *a, const RefAcc *ref, long nred) {
    long nset = 0;
    for (long r = 0; r < nred; ++r) {
        assert_int_equal(a->red[r], ref->red[r]);
        if (ref->red[r]) {
            assert_int_equal(a->red_step[r], ref->red_step[r]);
            nset++;
        }
    }
    /* The list of held slices: each held slice once. */
    assert_int_equal(a->nset, nset);
    for (long k = 0; k < a->nset; ++k) {
        assert_true(a->set[k] >= 0 && a->set[k] < nred);
        assert_true(a->red[a->set[k]] > 0);
        for (long q = 0; q < k; ++q)
            assert_true(a->set[q] != a->set[k]);
    }
    assert_int_equal(a->first_dup, ref->first_dup);
    if (ref->first_dup >= 0) {
        assert_int_equal(a->dup_steps[0], ref->dup_steps[0]);
        assert_int_equal(a->dup_steps[1], ref->dup_steps[1]);
    }
}

static void test_merge_matches_definition(void **state) {
    (void)state;
    Arena *arena = arena_create();
    Builder b;
    memset(&b, 0, sizeof b);
    b.arena = arena;
    b.scratch = arena;
    for (int trial = 0; trial < 400; ++trial) {
        AccState as;
        memset(&as, 0, sizeof as);
        as.nred = 1 + next_rand(MAX_RED);
        long step = 0;
        /* Several merges in one run, so that pooled accumulators (and
         * swapped arrays) are reused. */
        for (int round = 0; round < 6; ++round) {
            Acc *into = sched_acc_new(&b, &as, 3, 7, 1);
            Acc *from = sched_acc_new(&b, &as, 5, 7, 2);
            RefAcc rinto, rfrom;
            int dups = next_rand(4) == 0;
            fill(into, &rinto, as.nred, (int)next_rand(as.nred + 2), dups, &step);
            fill(from, &rfrom, as.nred, (int)next_rand(as.nred + 2), dups, &step);
            assert_same(into, &rinto, as.nred);
            assert_same(from, &rfrom, as.nred);
            sched_acc_merge(into, from);
            ref_merge(&rinto, &rfrom, as.nred);
            assert_same(into, &rinto, as.nred);
            /* The receiver keeps what it is, whatever arrays it got. */
            assert_int_equal(into->dev, 3);
            assert_int_equal(into->slot, 1);
            assert_int_equal(into->tile, 7);
            ptrvec_push(arena, &as.pool, from);
            if (next_rand(2))
                ptrvec_push(arena, &as.pool, into);
        }
    }
    arena_destroy(arena);
}

/* A pooled accumulator comes back empty. */
static void test_pool_reuse_is_empty(void **state) {
    (void)state;
    Arena *arena = arena_create();
    Builder b;
    memset(&b, 0, sizeof b);
    b.arena = arena;
    b.scratch = arena;
    AccState as;
    memset(&as, 0, sizeof as);
    as.nred = 9;
    Acc *a = sched_acc_new(&b, &as, 0, 1, 0);
    for (long r = 0; r < 9; r += 2)
        sched_acc_add(a, r, r);
    sched_acc_add(a, 4, 20);
    assert_int_equal(a->first_dup, 4);
    ptrvec_push(arena, &as.pool, a);
    Acc *c = sched_acc_new(&b, &as, 2, 3, 4);
    assert_ptr_equal(c, a);
    assert_int_equal(as.pool.count, 0);
    assert_int_equal(c->nset, 0);
    assert_int_equal(c->first_dup, -1);
    assert_int_equal(c->dev, 2);
    assert_int_equal(c->tile, 3);
    assert_int_equal(c->slot, 4);
    for (long r = 0; r < 9; ++r)
        assert_int_equal(c->red[r], 0);
    arena_destroy(arena);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_matches_definition),
        cmocka_unit_test(test_pool_reuse_is_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
