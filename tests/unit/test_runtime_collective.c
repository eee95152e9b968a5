/*
 * test_runtime_collective.c — ring all-reduce, reduce-scatter and
 * all-gather: results over groups of 1, 2, 3, 4 and 8 members and sizes
 * that do and do not divide (n < g included), subgroups with idle ranks,
 * ring orders other than rank order, concurrent disjoint groups, repeated
 * calls on one tag, and that the byte counters and peak memory (scratch
 * included) equal the prediction functions for every rank. The maximum
 * variants of all-reduce and reduce-scatter run every case too, on
 * negative values whose maximum moves between members with the element
 * (a tile starting from 0 instead of -inf would show), and count the
 * same bytes as the sums.
 *
 * Values are small integers, so every sum is exact in float.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include "prime_rt.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static atomic_int failures;

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            atomic_fetch_add(&failures, 1);                                                        \
            fprintf(stderr, "%s:%d: expectation failed: %s\n", __FILE__, __LINE__, #cond);         \
        }                                                                                          \
    } while (0)

#define MAXDEV 8

typedef enum Op {
    OP_ALLREDUCE,
    OP_REDUCE_SCATTER,
    OP_ALLREDUCE_MAX,
    OP_REDUCE_SCATTER_MAX,
    OP_ALLGATHER,
    OP_COUNT
} Op;

static int is_max(Op op) {
    return op == OP_ALLREDUCE_MAX || op == OP_REDUCE_SCATTER_MAX;
}

/* The collective whose bytes op sends. */
static Op bytes_like(Op op) {
    return op == OP_ALLREDUCE_MAX        ? OP_ALLREDUCE
           : op == OP_REDUCE_SCATTER_MAX ? OP_REDUCE_SCATTER
                                         : op;
}

/* One collective call: each rank's group (NULL: idle this time). */
typedef struct Case {
    Op op;
    size_t n;
    int tag;
    const int *group[MAXDEV];
    int gsize[MAXDEV];
    int repeat; /* calls in a row on the same tag */
} Case;

static float value(int rank, size_t i) {
    return (float)((rank + 1) * 1000 + (int)(i % 97));
}

/* For the maxima: negative, and the largest on a member that depends on i. */
static float max_value(int rank, size_t i) {
    return -(float)(((size_t)rank * 5 + i * 3) % 11) - 1.0f;
}

static size_t lo(size_t n, int g, int c) {
    return (size_t)c * n / (size_t)g;
}

static int position(const int *group, int g, int rank) {
    for (int i = 0; group && i < g; i++) {
        if (group[i] == rank)
            return i;
    }
    return -1;
}

static PrimeStatus call(Op op, PrimeDev *dev, const int *group, int g, float *buf, size_t n,
                        int tag) {
    switch (op) {
    case OP_ALLREDUCE:
        return prime_allreduce_sum(dev, group, g, buf, n, tag);
    case OP_REDUCE_SCATTER:
        return prime_reduce_scatter_sum(dev, group, g, buf, n, tag);
    case OP_ALLREDUCE_MAX:
        return prime_allreduce_max(dev, group, g, buf, n, tag);
    case OP_REDUCE_SCATTER_MAX:
        return prime_reduce_scatter_max(dev, group, g, buf, n, tag);
    case OP_ALLGATHER:
    case OP_COUNT:
        break;
    }
    return prime_allgather(dev, group, g, buf, n, tag);
}

static void case_fn(PrimeDev *dev, void *arg) {
    const Case *c = arg;
    int me = prime_dev_rank(dev);
    const int *group = c->group[me];
    int g = c->gsize[me];
    int p = position(group, g, me);
    if (p < 0)
        return;
    size_t n = c->n;
    float *buf = prime_alloc(dev, n);
    EXPECT(buf != NULL);
    if (!buf)
        return;
    for (int rep = 0; rep < c->repeat; rep++) {
        for (size_t i = 0; i < n; i++) {
            int mine = i >= lo(n, g, p) && i < lo(n, g, p + 1);
            buf[i] = c->op == OP_ALLGATHER && !mine ? -1.0f
                     : is_max(c->op)                ? max_value(me, i)
                                                    : value(me, i);
        }
        EXPECT(call(c->op, dev, group, g, buf, n, c->tag) == PRIME_OK);
        for (int q = 0; q < g; q++) {
            for (size_t i = lo(n, g, q); i < lo(n, g, q + 1); i++) {
                float want = 0.0f;
                if (c->op == OP_ALLGATHER) {
                    want = value(group[q], i);
                } else if (is_max(c->op)) {
                    if (c->op == OP_REDUCE_SCATTER_MAX && q != p)
                        continue;
                    want = max_value(group[0], i);
                    for (int m = 1; m < g; m++)
                        want = max_value(group[m], i) > want ? max_value(group[m], i) : want;
                } else {
                    if (c->op == OP_REDUCE_SCATTER && q != p)
                        continue;
                    for (int m = 0; m < g; m++)
                        want += value(group[m], i);
                }
                EXPECT(buf[i] == want);
            }
        }
    }
    prime_free(dev, buf, n);
    EXPECT(prime_dev_status(dev) == PRIME_OK);
}

static uint64_t predicted(Op op, size_t n, int g, int p) {
    switch (bytes_like(op)) {
    case OP_ALLREDUCE:
        return prime_allreduce_bytes(n, g, p);
    case OP_REDUCE_SCATTER:
        return prime_reduce_scatter_bytes(n, g, p);
    case OP_ALLREDUCE_MAX:
    case OP_REDUCE_SCATTER_MAX:
    case OP_ALLGATHER:
    case OP_COUNT:
        break;
    }
    return prime_allgather_bytes(n, g, p);
}

/* The same counts worked out from the schedule, independently of the
 * runtime: reduce-scatter sends every chunk but p, all-gather every chunk
 * but p + 1. */
static uint64_t by_hand(Op op, size_t n, int g, int p) {
    op = bytes_like(op);
    if (g == 1)
        return 0;
    size_t own = lo(n, g, p + 1) - lo(n, g, p);
    int q = (p + 1) % g;
    size_t next = lo(n, g, q + 1) - lo(n, g, q);
    uint64_t rs = (uint64_t)(n - own) * 4, ag = (uint64_t)(n - next) * 4;
    return op == OP_ALLREDUCE ? rs + ag : op == OP_REDUCE_SCATTER ? rs : ag;
}

/* Runs the case and checks the counters of every rank of the world. */
static void run_case(PrimeWorld *w, const Case *c) {
    int nd = prime_world_size(w);
    atomic_store(&failures, 0);
    prime_world_reset_counters(w);
    assert_int_equal(prime_world_run(w, case_fn, (void *)c), PRIME_OK);
    if (atomic_load(&failures) != 0)
        fail_msg("op %d n %zu failed", (int)c->op, c->n);
    for (int r = 0; r < nd; r++) {
        int g = c->gsize[r];
        int p = position(c->group[r], g, r);
        uint64_t bytes = 0, peak = 0;
        if (p >= 0) {
            bytes = (uint64_t)c->repeat * predicted(c->op, c->n, g, p);
            assert_int_equal(predicted(c->op, c->n, g, p), by_hand(c->op, c->n, g, p));
            size_t scratch = g > 1 ? (c->n + (size_t)g - 1) / (size_t)g : 0;
            assert_int_equal(prime_collective_scratch(c->n, g), scratch);
            peak = (uint64_t)c->n * 4;
            if (c->op != OP_ALLGATHER)
                peak += (uint64_t)scratch * 4;
        }
        assert_int_equal(prime_world_bytes_sent(w, r, PRIME_BYTES_COLLECTIVE), bytes);
        assert_int_equal(prime_world_bytes_sent(w, r, PRIME_BYTES_SHIFT), 0);
        assert_int_equal(prime_world_peak_bytes(w, r), peak);
        assert_int_equal(prime_world_current_bytes(w, r), 0);
    }
}

static const size_t sizes[] = {1, 3, 7, 64, 1000};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* Whole-world groups of 1, 2, 3, 4 and 8, in rank order and reversed. */
static void test_whole_world_groups(void **state) {
    (void)state;
    static const int gs[] = {1, 2, 3, 4, 8};
    for (size_t gi = 0; gi < sizeof gs / sizeof gs[0]; gi++) {
        int g = gs[gi];
        PrimeWorld *w = NULL;
        assert_int_equal(prime_world_create(g, &w), PRIME_OK);
        int fwd[MAXDEV], rev[MAXDEV];
        for (int i = 0; i < g; i++) {
            fwd[i] = i;
            rev[i] = g - 1 - i;
        }
        for (int order = 0; order < 2; order++) {
            for (size_t ni = 0; ni < NSIZES; ni++) {
                for (int op = 0; op < OP_COUNT; op++) {
                    Case c = {(Op)op, sizes[ni], 11, {NULL}, {0}, 1};
                    for (int r = 0; r < g; r++) {
                        c.group[r] = order ? rev : fwd;
                        c.gsize[r] = g;
                    }
                    run_case(w, &c);
                }
            }
        }
        prime_world_destroy(w);
    }
}

/* Ranks {1, 3} of 4 and ring order {3, 0, 2} of 4, the rest idle. */
static void test_subgroups(void **state) {
    (void)state;
    static const int pair[] = {1, 3}, triple[] = {3, 0, 2};
    PrimeWorld *w = NULL;
    assert_int_equal(prime_world_create(4, &w), PRIME_OK);
    for (size_t ni = 0; ni < NSIZES; ni++) {
        for (int op = 0; op < OP_COUNT; op++) {
            Case c = {(Op)op, sizes[ni], 4, {NULL}, {0}, 1};
            c.group[1] = c.group[3] = pair;
            c.gsize[1] = c.gsize[3] = 2;
            run_case(w, &c);
            Case d = {(Op)op, sizes[ni], 4, {NULL}, {0}, 1};
            d.group[3] = d.group[0] = d.group[2] = triple;
            d.gsize[3] = d.gsize[0] = d.gsize[2] = 3;
            run_case(w, &d);
        }
    }
    prime_world_destroy(w);
}

/* Two disjoint groups at once on the same tag, repeated on that tag. */
static void test_concurrent_groups_repeated(void **state) {
    (void)state;
    static const int low[] = {0, 1, 2}, high[] = {5, 3, 4};
    PrimeWorld *w = NULL;
    assert_int_equal(prime_world_create(6, &w), PRIME_OK);
    for (int op = 0; op < OP_COUNT; op++) {
        Case c = {(Op)op, 1000, 0, {NULL}, {0}, 20};
        for (int r = 0; r < 3; r++) {
            c.group[r] = low;
            c.gsize[r] = 3;
            c.group[r + 3] = high;
            c.gsize[r + 3] = 3;
        }
        run_case(w, &c);
    }
    prime_world_destroy(w);
}

/* A user message and a collective on the same tag never match each other,
 * and collectives of different kinds follow each other on one tag. */
static void mixed_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    static const int group[] = {0, 1};
    int me = prime_dev_rank(dev);
    float msg[3] = {7, 8, 9}, got[3] = {0};
    float buf[5];
    PrimeReq req;
    if (me == 0)
        EXPECT(prime_isend(dev, 1, 1, msg, 3, PRIME_BYTES_SHIFT, &req) == PRIME_OK);
    for (int i = 0; i < 5; i++)
        buf[i] = (float)(me + 1);
    EXPECT(prime_allreduce_sum(dev, group, 2, buf, 5, 1) == PRIME_OK);
    for (int i = 0; i < 5; i++)
        EXPECT(buf[i] == 3.0f);
    EXPECT(prime_reduce_scatter_sum(dev, group, 2, buf, 5, 1) == PRIME_OK);
    /* Chunk 0 is [0, 2), chunk 1 is [2, 5). */
    for (int i = me ? 2 : 0; i < (me ? 5 : 2); i++)
        EXPECT(buf[i] == 6.0f);
    EXPECT(prime_allgather(dev, group, 2, buf, 5, 1) == PRIME_OK);
    for (int i = 0; i < 5; i++)
        EXPECT(buf[i] == 6.0f);
    if (me == 1) {
        EXPECT(prime_irecv(dev, 0, 1, got, 3, &req) == PRIME_OK);
        EXPECT(prime_wait(dev, &req) == PRIME_OK);
        EXPECT(memcmp(got, msg, sizeof msg) == 0);
    } else {
        EXPECT(prime_wait(dev, &req) == PRIME_OK);
    }
}

static void test_p2p_and_collectives_share_tag(void **state) {
    (void)state;
    PrimeWorld *w = NULL;
    assert_int_equal(prime_world_create(2, &w), PRIME_OK);
    atomic_store(&failures, 0);
    assert_int_equal(prime_world_run(w, mixed_fn, NULL), PRIME_OK);
    assert_int_equal(atomic_load(&failures), 0);
    for (int r = 0; r < 2; r++) {
        uint64_t want = prime_allreduce_bytes(5, 2, r) + prime_reduce_scatter_bytes(5, 2, r) +
                        prime_allgather_bytes(5, 2, r);
        assert_int_equal(prime_world_bytes_sent(w, r, PRIME_BYTES_COLLECTIVE), want);
    }
    assert_int_equal(prime_world_bytes_sent(w, 0, PRIME_BYTES_SHIFT), 12);
    prime_world_destroy(w);
}

static void test_prediction_values(void **state) {
    (void)state;
    /* n = 7, g = 3: chunks [0,2) [2,4) [4,7). */
    assert_int_equal(prime_reduce_scatter_bytes(7, 3, 0), 20);
    assert_int_equal(prime_reduce_scatter_bytes(7, 3, 2), 16);
    assert_int_equal(prime_allgather_bytes(7, 3, 1), 16);
    assert_int_equal(prime_allgather_bytes(7, 3, 2), 20);
    assert_int_equal(prime_allreduce_bytes(7, 3, 2), 36);
    assert_int_equal(prime_collective_scratch(7, 3), 3);
    /* n = 1, g = 3: only chunk 2 is non-empty. */
    assert_int_equal(prime_reduce_scatter_bytes(1, 3, 2), 0);
    assert_int_equal(prime_reduce_scatter_bytes(1, 3, 0), 4);
    assert_int_equal(prime_allgather_bytes(1, 3, 1), 0);
    assert_int_equal(prime_collective_scratch(1, 3), 1);
    /* Groups of one, positions outside the group. */
    assert_int_equal(prime_allreduce_bytes(1000, 1, 0), 0);
    assert_int_equal(prime_collective_scratch(1000, 1), 0);
    assert_int_equal(prime_allreduce_bytes(1000, 4, 4), 0);
    assert_int_equal(prime_allreduce_bytes(1000, 4, -1), 0);
    /* Divisible: 2 (g-1) n / g floats per member. */
    assert_int_equal(prime_allreduce_bytes(1024, 8, 5), 2 * 7 * 128 * 4);
}

static void bad_group_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    static const int dup[] = {0, 0}, without_me[] = {1, 2}, outside[] = {0, 9};
    float buf[4] = {0};
    if (prime_dev_rank(dev) != 0)
        return;
    EXPECT(prime_allreduce_sum(dev, dup, 2, buf, 4, 0) == PRIME_ERR_ARG);
    EXPECT(prime_allgather(dev, without_me, 2, buf, 4, 0) == PRIME_ERR_ARG);
    EXPECT(prime_reduce_scatter_sum(dev, outside, 2, buf, 4, 0) == PRIME_ERR_ARG);
    EXPECT(prime_allreduce_sum(dev, dup, 0, buf, 4, 0) == PRIME_ERR_ARG);
    EXPECT(prime_allreduce_sum(dev, NULL, 1, buf, 4, 0) == PRIME_ERR_ARG);
    EXPECT(prime_dev_status(dev) == PRIME_ERR_ARG);
}

static void test_bad_groups(void **state) {
    (void)state;
    PrimeWorld *w = NULL;
    assert_int_equal(prime_world_create(3, &w), PRIME_OK);
    atomic_store(&failures, 0);
    assert_int_equal(prime_world_run(w, bad_group_fn, NULL), PRIME_ERR_ARG);
    assert_int_equal(atomic_load(&failures), 0);
    assert_int_equal(prime_world_bytes_sent(w, 0, PRIME_BYTES_COLLECTIVE), 0);
    assert_int_equal(prime_world_peak_bytes(w, 0), 0);
    prime_world_destroy(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prediction_values),
        cmocka_unit_test(test_whole_world_groups),
        cmocka_unit_test(test_subgroups),
        cmocka_unit_test(test_concurrent_groups_repeated),
        cmocka_unit_test(test_p2p_and_collectives_share_tag),
        cmocka_unit_test(test_bad_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
