/*
 * test_runtime_fill.c — new tiles and their fill (prime_rt.h,
 * PrimeTileFill): the schedule executor allocates a tile without its
 * identity and fills it only before a first use that reads it, and not
 * at all when its first writer writes every element (an overwriting
 * kernel, a receive of the whole tile, the driver's fill).
 *
 * Phases are written by hand here: a kernel out += 2 in with its
 * overwriting form out = 2 in, a sum and a maximum that read their new
 * tiles, a send and a receive. Under PRIME_TILE_FILL=nan every tile
 * allocated unfilled holds NaNs, so a read before the first write shows
 * in the results; each test checks the results exactly and counts the
 * fills and the kernels of each form.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include "prime_sched.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4

static atomic_int adds, sets;

static void twice_add(float *out, const float *const *in, const long *off) {
    (void)off;
    atomic_fetch_add(&adds, 1);
    for (int i = 0; i < N; ++i)
        out[i] += 2 * in[0][i];
}

static void twice_set(float *out, const float *const *in, const long *off) {
    (void)off;
    atomic_fetch_add(&sets, 1);
    for (int i = 0; i < N; ++i)
        out[i] = 2 * in[0][i];
}

static const PrimeKernelFn twice[] = {twice_add, twice_set};

enum { T_OUT, T_IN, T_SUM, T_MAX, NTENSORS };

/* Phase 1 allocates the input; the test writes it (as the driver fills
 * inputs). Phase 2: out = 2 in (twice), sum += out, max = max(-inf, in). */
static const PrimeAction alloc_in[] = {{.op = PRIME_ACT_ALLOC, .tensor = T_IN}};
static const PrimeAction compute[] = {
    {.op = PRIME_ACT_ALLOC, .tensor = T_OUT},
    {.op = PRIME_ACT_KERNEL, .tensor = T_OUT, .nin = 1, .in_tensor = {T_IN}},
    {.op = PRIME_ACT_ALLOC, .tensor = T_SUM},
    {.op = PRIME_ACT_ADD, .tensor = T_SUM, .nin = 1, .in_tensor = {T_OUT}},
    {.op = PRIME_ACT_ALLOC, .tensor = T_MAX, .kind = PRIME_COMBINE_MAX},
    {.op = PRIME_ACT_ADD,
     .tensor = T_MAX,
     .kind = PRIME_COMBINE_MAX,
     .nin = 1,
     .in_tensor = {T_IN}},
};
static const PrimeAction *const alloc_in_ranks[] = {alloc_in};
static const PrimeAction *const compute_ranks[] = {compute};
static const int alloc_in_n[] = {1};
static const int compute_n[] = {6};

typedef struct Case {
    int overwrites;         /* the phase's kernel_overwrites */
    float out[NTENSORS][N]; /* every tensor at the end */
    PrimeSchedStats stats;  /* of both phases */
    PrimeStatus status;
} Case;

static void compute_fn(PrimeDev *dev, void *arg) {
    Case *c = arg;
    const PrimePhase p1 = {.name = "alloc", .actions = alloc_in_ranks, .nactions = alloc_in_n};
    const PrimePhase p2 = {.name = "compute",
                           .actions = compute_ranks,
                           .nactions = compute_n,
                           .kernels = twice,
                           .kernel_overwrites = c->overwrites};
    const size_t elems[NTENSORS] = {N, N, N, N};
    const int slots[NTENSORS] = {1, 1, 1, 1};
    PrimeStore store;
    c->status = prime_store_init(&store, NTENSORS, elems, slots);
    if (c->status != PRIME_OK)
        return;
    c->status = prime_sched_run_timed(dev, &p1, &store, 0, 0, &c->stats);
    if (c->status == PRIME_OK) {
        for (int i = 0; i < N; ++i)
            store.slots[T_IN][0][i] = (float)(i + 1);
        prime_store_written(&store, T_IN, 0);
        c->status = prime_sched_run_timed(dev, &p2, &store, 0, 0, &c->stats);
    }
    for (int t = 0; t < NTENSORS && c->status == PRIME_OK; ++t) {
        const float *tile = prime_store_tile(dev, &store, t, 0);
        if (tile)
            memcpy(c->out[t], tile, sizeof c->out[t]);
    }
    prime_store_release(dev, &store);
}

static void run_case(Case *c, const char *fill) {
    setenv("PRIME_TILE_FILL", fill, 1);
    PrimeWorld *w = NULL;
    assert_int_equal(prime_world_create(1, &w), PRIME_OK);
    atomic_store(&adds, 0);
    atomic_store(&sets, 0);
    assert_int_equal(prime_world_run(w, compute_fn, c), PRIME_OK);
    assert_int_equal(c->status, PRIME_OK);
    assert_int_equal(prime_world_current_bytes(w, 0), 0);
    prime_world_destroy(w);
    unsetenv("PRIME_TILE_FILL");
    for (int i = 0; i < N; ++i) {
        assert_true(c->out[T_IN][i] == (float)(i + 1));
        assert_true(c->out[T_OUT][i] == 2.0f * (float)(i + 1));
        assert_true(c->out[T_SUM][i] == 2.0f * (float)(i + 1));
        assert_true(c->out[T_MAX][i] == (float)(i + 1));
    }
}

/* The kernel's overwriting form writes the new tile, unfilled; the sum
 * and the maximum read theirs, so they get 0 and -inf first: NaNs in
 * every unfilled tile change no result. */
static void test_overwriting_kernel_skips_the_fill(void **state) {
    (void)state;
    Case c = {.overwrites = 1};
    run_case(&c, "nan");
    assert_int_equal(atomic_load(&sets), 1);
    assert_int_equal(atomic_load(&adds), 0);
    assert_int_equal(c.stats.tiles_unfilled, 1);
    assert_int_equal(c.stats.tiles_filled, 2);
}

/* Without an overwriting form, the kernel adds to a tile filled first. */
static void test_accumulating_kernel_gets_zeros(void **state) {
    (void)state;
    Case c = {.overwrites = 0};
    run_case(&c, "nan");
    assert_int_equal(atomic_load(&sets), 0);
    assert_int_equal(atomic_load(&adds), 1);
    assert_int_equal(c.stats.tiles_unfilled, 0);
    assert_int_equal(c.stats.tiles_filled, 3);
}

/* PRIME_TILE_FILL=eager fills every tile at its allocation (the input's
 * too: four) and runs the accumulating kernel. */
static void test_eager(void **state) {
    (void)state;
    Case c = {.overwrites = 1};
    run_case(&c, "eager");
    assert_int_equal(atomic_load(&sets), 0);
    assert_int_equal(atomic_load(&adds), 1);
    assert_int_equal(c.stats.tiles_unfilled, 0);
    assert_int_equal(c.stats.tiles_filled, 4);
}

/* Lazy, the release default: the same counts as nan. */
static void test_lazy(void **state) {
    (void)state;
    Case c = {.overwrites = 1};
    run_case(&c, "lazy");
    assert_int_equal(atomic_load(&sets), 1);
    assert_int_equal(c.stats.tiles_unfilled, 1);
    assert_int_equal(c.stats.tiles_filled, 2);
}

/* prime_alloc_uninit under PRIME_TILE_FILL=nan: every float a NaN. */
static int uninit_nans;
static void uninit_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    float *p = prime_alloc_uninit(dev, 1000);
    uninit_nans = 0;
    for (int i = 0; p && i < 1000; ++i)
        uninit_nans += isnan(p[i]) != 0;
    prime_free(dev, p, 1000);
}

static void test_uninit_is_nan(void **state) {
    (void)state;
    setenv("PRIME_TILE_FILL", "nan", 1);
    PrimeWorld *w = NULL;
    assert_int_equal(prime_world_create(1, &w), PRIME_OK);
    assert_int_equal(prime_world_run(w, uninit_fn, NULL), PRIME_OK);
    assert_int_equal(uninit_nans, 1000);
    assert_int_equal(prime_world_peak_bytes(w, 0), 4000);
    prime_world_destroy(w);
    unsetenv("PRIME_TILE_FILL");
}

/* Rank 0 sends its input tile to rank 1, whose new tile the receive
 * writes whole: it is never filled, and holds rank 0's values. */
static const PrimeAction send0[] = {
    {.op = PRIME_ACT_SEND, .tensor = T_IN, .peer = 1, .tag = 5, .kind = PRIME_BYTES_SHIFT},
    {.op = PRIME_ACT_WAIT}};
static const PrimeAction recv1[] = {{.op = PRIME_ACT_ALLOC, .tensor = T_IN},
                                    {.op = PRIME_ACT_RECV, .tensor = T_IN, .peer = 0, .tag = 5},
                                    {.op = PRIME_ACT_WAIT}};
static const PrimeAction *const transfer_ranks[] = {send0, recv1};
static const int transfer_n[] = {2, 3};

typedef struct Transfer {
    float got[N];
    PrimeSchedStats stats[2];
    PrimeStatus status[2];
} Transfer;

static void transfer_fn(PrimeDev *dev, void *arg) {
    Transfer *x = arg;
    int r = prime_dev_rank(dev);
    const PrimePhase p = {.name = "transfer", .actions = transfer_ranks, .nactions = transfer_n};
    const size_t elems[NTENSORS] = {N, N, N, N};
    const int slots[NTENSORS] = {1, 1, 1, 1};
    PrimeStore store;
    x->status[r] = prime_store_init(&store, NTENSORS, elems, slots);
    if (x->status[r] != PRIME_OK)
        return;
    if (r == 0) {
        store.slots[T_IN][0] = prime_alloc(dev, N);
        for (int i = 0; store.slots[T_IN][0] && i < N; ++i)
            store.slots[T_IN][0][i] = (float)(10 + i);
    }
    x->status[r] = prime_sched_run_timed(dev, &p, &store, 0, 0, &x->stats[r]);
    const float *tile = prime_store_tile(dev, &store, T_IN, 0);
    if (r == 1 && tile)
        memcpy(x->got, tile, sizeof x->got);
    prime_store_release(dev, &store);
}

static void test_receive_writes_whole_tile(void **state) {
    (void)state;
    setenv("PRIME_TILE_FILL", "nan", 1);
    PrimeWorld *w = NULL;
    assert_int_equal(prime_world_create(2, &w), PRIME_OK);
    Transfer x;
    memset(&x, 0, sizeof x);
    assert_int_equal(prime_world_run(w, transfer_fn, &x), PRIME_OK);
    prime_world_destroy(w);
    unsetenv("PRIME_TILE_FILL");
    assert_int_equal(x.status[0], PRIME_OK);
    assert_int_equal(x.status[1], PRIME_OK);
    for (int i = 0; i < N; ++i)
        assert_true(x.got[i] == (float)(10 + i));
    assert_int_equal(x.stats[1].tiles_unfilled, 1);
    assert_int_equal(x.stats[1].tiles_filled, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_overwriting_kernel_skips_the_fill),
        cmocka_unit_test(test_accumulating_kernel_gets_zeros),
        cmocka_unit_test(test_eager),
        cmocka_unit_test(test_lazy),
        cmocka_unit_test(test_uninit_is_nan),
        cmocka_unit_test(test_receive_writes_whole_tile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
