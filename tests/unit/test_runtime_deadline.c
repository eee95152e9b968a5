/*
 * test_runtime_deadline.c — deadlines of the threads backend: a receive,
 * a send, a barrier and a collective whose peer never answers end within
 * the world's timeout with PRIME_ERR_TIMEOUT on the waiter, a message
 * naming the rank, the peer and the context, and PRIME_ERR_ABORTED on the
 * devices stopped by the abort; an injected stall (PRIME_FAULT); a device
 * that never returns from its rank function; timeout validation; and a
 * timeout of 0 meaning none.
 *
 * cmocka's assertions must run on the main thread, so rank functions only
 * record failures (EXPECT) and each test asserts none were recorded.
 */
#define _POSIX_C_SOURCE 200809L

/* cmocka 1.1 wants these before <cmocka.h>. */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>
// clang-format on

#include "prime_rt.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int failures;

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            atomic_fetch_add(&failures, 1);                                                        \
            fprintf(stderr, "%s:%d: expectation failed: %s\n", __FILE__, __LINE__, #cond);         \
        }                                                                                          \
    } while (0)

/* The deadline of every test: short, so that the suite stays fast. */
#define TIMEOUT_S 0.3

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static PrimeWorld *make_world(int ndev, double timeout) {
    PrimeWorld *w = NULL;
    assert_int_equal(prime_world_create(ndev, &w), PRIME_OK);
    assert_int_equal(prime_world_set_timeout(w, timeout), PRIME_OK);
    atomic_store(&failures, 0);
    return w;
}

/* Runs fn and checks the run ends in PRIME_ERR_TIMEOUT within the
 * deadline plus a margin for the sanitizers. */
static void run_times_out(PrimeWorld *w, PrimeRankFn fn, void *arg, double limit) {
    double t0 = now_s();
    assert_int_equal(prime_world_run(w, fn, arg), PRIME_ERR_TIMEOUT);
    double took = now_s() - t0;
    fprintf(stderr, "  run ended after %.3f s (timeout %.3f s)\n", took, prime_world_timeout(w));
    assert_true(took >= prime_world_timeout(w) * 0.9);
    assert_true(took < limit);
    assert_int_equal(atomic_load(&failures), 0);
}

static void assert_contains(const char *text, const char *part) {
    if (!text || !strstr(text, part)) {
        fprintf(stderr, "expected \"%s\" in \"%s\"\n", part, text ? text : "(null)");
        fail();
    }
}

/* Rank 0 waits for a message rank 1 never sends. */
static void lonely_recv_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    if (prime_dev_rank(dev) != 0)
        return;
    float x = 0;
    PrimeReq req;
    prime_dev_set_context(dev, "forward y", 2, 5, "wait");
    EXPECT(prime_irecv(dev, 1, 7, &x, 1, &req) == PRIME_OK);
    EXPECT(prime_wait(dev, &req) == PRIME_ERR_TIMEOUT);
    EXPECT(prime_dev_status(dev) == PRIME_ERR_TIMEOUT);
}

static void test_recv_times_out(void **state) {
    (void)state;
    PrimeWorld *w = make_world(2, TIMEOUT_S);
    run_times_out(w, lonely_recv_fn, NULL, TIMEOUT_S + 2);
    const char *why = prime_world_failure(w, 0);
    assert_contains(why, "rank 0: no answer within 0.3 s in phase 'forward y', step 2, action 5 "
                         "(wait): receive from rank 1 (tag 7) not completed");
    assert_null(prime_world_failure(w, 1));
    /* A world that timed out only refuses further runs. */
    assert_int_equal(prime_world_run(w, lonely_recv_fn, NULL), PRIME_ERR_TIMEOUT);
    prime_world_destroy(w);
}

/* Rank 1 sends to rank 0, which never receives; rank 0 waits at a
 * barrier that rank 1 never reaches, so it is stopped by the abort. */
static void lonely_send_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    float x = 1;
    PrimeReq req;
    if (prime_dev_rank(dev) == 1) {
        EXPECT(prime_isend(dev, 0, 3, &x, 1, PRIME_BYTES_SHIFT, &req) == PRIME_OK);
        PrimeStatus st = prime_wait(dev, &req);
        EXPECT(st == PRIME_ERR_TIMEOUT || st == PRIME_ERR_ABORTED);
        /* After the abort nothing more is posted. */
        EXPECT(prime_isend(dev, 0, 4, &x, 1, PRIME_BYTES_SHIFT, &req) == PRIME_ERR_ABORTED);
        EXPECT(req.impl == NULL);
    } else {
        PrimeStatus st = prime_barrier(dev);
        EXPECT(st == PRIME_ERR_ABORTED || st == PRIME_ERR_TIMEOUT);
    }
}

static void test_send_times_out(void **state) {
    (void)state;
    PrimeWorld *w = make_world(2, TIMEOUT_S);
    run_times_out(w, lonely_send_fn, NULL, TIMEOUT_S + 2);
    const char *why0 = prime_world_failure(w, 0), *why1 = prime_world_failure(w, 1);
    /* The wait that gave up first explains (both, when they give up at
     * once); the other was aborted. */
    assert_true(why0 || why1);
    if (why1)
        assert_contains(why1, "rank 1: no answer within 0.3 s: send to rank 0 (tag 3) not "
                              "completed");
    if (why0)
        assert_contains(why0, "rank 0: no answer within 0.3 s: barrier: 1 of 2 devices arrived");
    prime_world_destroy(w);
}

/* Ranks 0..2 of 4 all-reduce over all four; rank 3 never joins. */
static void missing_member_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    static const int group[4] = {0, 1, 2, 3};
    float buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    if (prime_dev_rank(dev) == 3)
        return;
    prime_dev_set_context(dev, "gradient w", -1, 9, "allreduce");
    PrimeStatus st = prime_allreduce_sum(dev, group, 4, buf, 8, 0);
    EXPECT(st == PRIME_ERR_TIMEOUT || st == PRIME_ERR_ABORTED);
}

static void test_collective_times_out(void **state) {
    (void)state;
    PrimeWorld *w = make_world(4, TIMEOUT_S);
    run_times_out(w, missing_member_fn, NULL, TIMEOUT_S + 2);
    int explained = 0;
    for (int r = 0; r < 4; r++) {
        const char *why = prime_world_failure(w, r);
        if (!why)
            continue;
        explained++;
        assert_contains(why, "in phase 'gradient w', action 9 (allreduce)");
        assert_contains(why, "collective) not completed");
        /* In shared memory (the default) the member that gave up names
         * the one missing; the ring (PRIME_COLLECTIVES=ring) names its
         * receive. */
        const char *ring = getenv("PRIME_COLLECTIVES");
        if (!ring || strcmp(ring, "ring") != 0)
            assert_contains(why,
                            "all-reduce of 4 devices (tag 0, collective) not completed: 3 of 4 "
                            "arrived, waiting for rank 3");
    }
    assert_true(explained >= 1);
    prime_world_destroy(w);
}

/* Ring 0 -> 1 -> 2 -> 0, three rounds; PRIME_FAULT stops one device. */
static void ring_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    int r = prime_dev_rank(dev), n = prime_dev_count(dev);
    float out = (float)r, in = 0;
    for (int round = 0; round < 3; round++) {
        PrimeReq s, q;
        prime_dev_set_context(dev, "ring", round, 0, "send");
        if (prime_isend(dev, (r + 1) % n, round, &out, 1, PRIME_BYTES_SHIFT, &s) != PRIME_OK)
            return;
        if (prime_irecv(dev, (r + n - 1) % n, round, &in, 1, &q) != PRIME_OK)
            return;
        prime_dev_set_context(dev, "ring", round, 2, "wait");
        PrimeStatus a = prime_wait(dev, &q), b = prime_wait(dev, &s);
        if (a != PRIME_OK || b != PRIME_OK)
            return;
    }
}

static void test_injected_stall(void **state) {
    (void)state;
    /* Device 1 posts its first three calls (two rounds minus one) and stops. */
    setenv("PRIME_FAULT", "stall:1:3", 1);
    PrimeWorld *w = make_world(3, TIMEOUT_S);
    unsetenv("PRIME_FAULT");
    run_times_out(w, ring_fn, NULL, TIMEOUT_S + 2);
    assert_contains(prime_world_failure(w, 1),
                    "rank 1: stopped answering in phase 'ring', step 1, action 0 (send) "
                    "(PRIME_FAULT=stall:1:3)");
    int explained = 0;
    for (int r = 0; r < 3; r++) {
        const char *why = prime_world_failure(w, r);
        if (r != 1 && why) {
            explained++;
            assert_contains(why, "no answer within 0.3 s in phase 'ring', step ");
            assert_contains(why, ", action 2 (wait): ");
        }
    }
    assert_true(explained >= 1);
    prime_world_destroy(w);
}

/* A malformed PRIME_FAULT is ignored. */
static void test_bad_fault_spec(void **state) {
    (void)state;
    static const char *const specs[] = {"stall",    "stall:",    "stall:x",     "stall:9",
                                        "stall:1:", "stall:1:x", "stall:1:2:3", "crash:1"};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        setenv("PRIME_FAULT", specs[i], 1);
        PrimeWorld *w = make_world(3, 5);
        unsetenv("PRIME_FAULT");
        assert_int_equal(prime_world_run(w, ring_fn, NULL), PRIME_OK);
        prime_world_destroy(w);
    }
}

/* Rank 1 computes (spins) until released; nobody waits for it. */
static atomic_int release_spinner;

static void spin_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    if (prime_dev_rank(dev) != 1)
        return;
    prime_dev_set_context(dev, "forward y", 0, 4, "kernel");
    while (!atomic_load(&release_spinner)) {
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
}

/* A world whose device never returned is left to the process exit; kept
 * here so that it stays reachable. */
static PrimeWorld *broken_world;

static void test_device_never_returns(void **state) {
    (void)state;
    PrimeWorld *w = make_world(2, 0.2);
    double t0 = now_s();
    /* Twice the timeout after rank 0 returned, then the abort's grace. */
    assert_int_equal(prime_world_run(w, spin_fn, NULL), PRIME_ERR_TIMEOUT);
    double took = now_s() - t0;
    fprintf(stderr, "  run ended after %.3f s\n", took);
    assert_true(took >= 0.4 && took < 5);
    assert_contains(prime_world_failure(w, 1),
                    "rank 1: did not return within 0.4 s after the last device finished (last "
                    "seen in phase 'forward y', step 0, action 4 (kernel))");
    atomic_store(&release_spinner, 1);
    broken_world = w;
    prime_world_destroy(w);
}

static void test_timeout_values(void **state) {
    (void)state;
    PrimeWorld *w = make_world(1, 1);
    assert_int_equal(prime_world_set_timeout(w, -1), PRIME_ERR_ARG);
    assert_int_equal(prime_world_set_timeout(w, NAN), PRIME_ERR_ARG);
    assert_int_equal(prime_world_set_timeout(w, INFINITY), PRIME_ERR_ARG);
    assert_int_equal(prime_world_set_timeout(NULL, 1), PRIME_ERR_ARG);
    assert_true(fabs(prime_world_timeout(w) - 1) < 1e-9);
    assert_int_equal(prime_world_set_timeout(w, 0), PRIME_OK);
    assert_true(prime_world_timeout(w) == 0);
    prime_world_destroy(w);
    assert_int_equal(prime_set_default_timeout(-0.5), PRIME_ERR_ARG);
    assert_int_equal(prime_set_default_timeout(2.5), PRIME_OK);
    assert_int_equal(prime_world_create(1, &w), PRIME_OK);
    assert_true(fabs(prime_world_timeout(w) - 2.5) < 1e-9);
    prime_world_destroy(w);
    assert_int_equal(prime_set_default_timeout(PRIME_RT_DEFAULT_TIMEOUT_S), PRIME_OK);
    assert_string_equal(prime_status_name(PRIME_ERR_TIMEOUT), "timed out waiting for a peer");
    assert_string_equal(prime_status_name(PRIME_ERR_ABORTED),
                        "aborted after another device timed out");
}

/* Rank 1 answers late, after longer than a short timeout would allow:
 * with no timeout (0) the run succeeds. */
static void late_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    float x = 5, y = 0;
    PrimeReq req;
    if (prime_dev_rank(dev) == 1) {
        struct timespec nap = {0, 400000000};
        nanosleep(&nap, NULL);
        EXPECT(prime_isend(dev, 0, 0, &x, 1, PRIME_BYTES_SHIFT, &req) == PRIME_OK);
    } else {
        EXPECT(prime_irecv(dev, 1, 0, &y, 1, &req) == PRIME_OK);
    }
    EXPECT(prime_wait(dev, &req) == PRIME_OK);
    EXPECT(prime_barrier(dev) == PRIME_OK);
    if (prime_dev_rank(dev) == 0)
        EXPECT(y == 5);
}

static void test_no_timeout(void **state) {
    (void)state;
    PrimeWorld *w = make_world(2, 0);
    assert_int_equal(prime_world_run(w, late_fn, NULL), PRIME_OK);
    assert_int_equal(atomic_load(&failures), 0);
    assert_null(prime_world_failure(w, 0));
    /* A deadline longer than the delay changes nothing either. */
    assert_int_equal(prime_world_set_timeout(w, 5), PRIME_OK);
    assert_int_equal(prime_world_run(w, late_fn, NULL), PRIME_OK);
    assert_int_equal(atomic_load(&failures), 0);
    prime_world_destroy(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recv_times_out),       cmocka_unit_test(test_send_times_out),
        cmocka_unit_test(test_collective_times_out), cmocka_unit_test(test_injected_stall),
        cmocka_unit_test(test_bad_fault_spec),       cmocka_unit_test(test_device_never_returns),
        cmocka_unit_test(test_timeout_values),       cmocka_unit_test(test_no_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
