/*
 * test_runtime_p2p.c — point-to-point messages of the threads transport:
 * matching by (source, tag) in posting order with either side first,
 * sends to oneself, completion and overlap semantics of prime_wait, byte
 * counters, size mismatches and bad arguments, and cleanup of requests a
 * program never waited for.
 *
 * cmocka's assertions must run on the main thread, so rank functions only
 * record failures (EXPECT) and each test asserts none were recorded.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include "prime_rt.h"

#include <pthread.h>
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

static PrimeWorld *make_world(int ndev) {
    PrimeWorld *w = NULL;
    assert_int_equal(prime_world_create(ndev, &w), PRIME_OK);
    assert_non_null(w);
    atomic_store(&failures, 0);
    return w;
}

static void run_ok(PrimeWorld *w, PrimeRankFn fn, void *arg) {
    assert_int_equal(prime_world_run(w, fn, arg), PRIME_OK);
    assert_int_equal(atomic_load(&failures), 0);
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Rank 0 sends to rank 1; `recv_first` orders the posts with a barrier. */
static void order_fn(PrimeDev *dev, void *arg) {
    int recv_first = *(int *)arg;
    float data[5] = {1, 2, 3, 4, 5}, got[5] = {0};
    PrimeReq req;
    int r = prime_dev_rank(dev);
    if (recv_first) {
        if (r == 1)
            EXPECT(prime_irecv(dev, 0, 9, got, 5, &req) == PRIME_OK);
        prime_barrier(dev);
        if (r == 0)
            EXPECT(prime_isend(dev, 1, 9, data, 5, PRIME_BYTES_SHIFT, &req) == PRIME_OK);
    } else {
        if (r == 0)
            EXPECT(prime_isend(dev, 1, 9, data, 5, PRIME_BYTES_SHIFT, &req) == PRIME_OK);
        prime_barrier(dev);
        if (r == 1)
            EXPECT(prime_irecv(dev, 0, 9, got, 5, &req) == PRIME_OK);
    }
    if (r < 2) {
        EXPECT(prime_wait(dev, &req) == PRIME_OK);
        EXPECT(req.impl == NULL);
    }
    if (r == 1)
        EXPECT(memcmp(got, data, sizeof data) == 0);
    EXPECT(prime_dev_status(dev) == PRIME_OK);
}

static void test_recv_before_send(void **state) {
    (void)state;
    PrimeWorld *w = make_world(3);
    int recv_first = 1;
    run_ok(w, order_fn, &recv_first);
    assert_int_equal(prime_world_bytes_sent(w, 0, PRIME_BYTES_SHIFT), 5 * sizeof(float));
    assert_int_equal(prime_world_bytes_sent(w, 1, PRIME_BYTES_SHIFT), 0);
    assert_int_equal(prime_world_bytes_sent(w, 2, PRIME_BYTES_SHIFT), 0);
    prime_world_destroy(w);
}

static void test_send_before_recv(void **state) {
    (void)state;
    PrimeWorld *w = make_world(3);
    int recv_first = 0;
    run_ok(w, order_fn, &recv_first);
    assert_int_equal(prime_world_bytes_sent(w, 0, PRIME_BYTES_SHIFT), 5 * sizeof(float));
    prime_world_destroy(w);
}

/* Twenty messages alternate between tags 5 and 7; the receiver takes all
 * of tag 7 first, then tag 5, and each tag must arrive in sending order. */
#define NMSG 20
static void tags_fn(PrimeDev *dev, void *arg) {
    int recv_first = *(int *)arg;
    int r = prime_dev_rank(dev);
    float out[NMSG][3], in[NMSG][3];
    PrimeReq reqs[NMSG];
    memset(in, 0, sizeof in);
    if (r == 1 && recv_first) {
        for (int i = 0; i < NMSG / 2; i++)
            EXPECT(prime_irecv(dev, 0, 7, in[i], 3, &reqs[i]) == PRIME_OK);
        for (int i = 0; i < NMSG / 2; i++)
            EXPECT(prime_irecv(dev, 0, 5, in[NMSG / 2 + i], 3, &reqs[NMSG / 2 + i]) == PRIME_OK);
    }
    prime_barrier(dev);
    if (r == 0) {
        for (int i = 0; i < NMSG; i++) {
            for (int j = 0; j < 3; j++)
                out[i][j] = (float)(100 * i + j);
            EXPECT(prime_isend(dev, 1, i % 2 ? 7 : 5, out[i], 3, PRIME_BYTES_SHIFT, &reqs[i]) ==
                   PRIME_OK);
        }
    }
    prime_barrier(dev);
    if (r == 1 && !recv_first) {
        for (int i = 0; i < NMSG / 2; i++)
            EXPECT(prime_irecv(dev, 0, 7, in[i], 3, &reqs[i]) == PRIME_OK);
        for (int i = 0; i < NMSG / 2; i++)
            EXPECT(prime_irecv(dev, 0, 5, in[NMSG / 2 + i], 3, &reqs[NMSG / 2 + i]) == PRIME_OK);
    }
    for (int i = 0; i < NMSG; i++)
        EXPECT(prime_wait(dev, &reqs[i]) == PRIME_OK);
    if (r == 1) {
        for (int i = 0; i < NMSG / 2; i++) {
            int odd = 2 * i + 1, even = 2 * i; /* the i-th message of tag 7 and of tag 5 */
            for (int j = 0; j < 3; j++) {
                EXPECT(in[i][j] == (float)(100 * odd + j));
                EXPECT(in[NMSG / 2 + i][j] == (float)(100 * even + j));
            }
        }
    }
}

static void test_tag_matching_fifo(void **state) {
    (void)state;
    PrimeWorld *w = make_world(2);
    for (int recv_first = 0; recv_first < 2; recv_first++)
        run_ok(w, tags_fn, &recv_first);
    assert_int_equal(prime_world_bytes_sent(w, 0, PRIME_BYTES_SHIFT), 2 * NMSG * 3 * sizeof(float));
    assert_int_equal(prime_world_bytes_sent(w, 1, PRIME_BYTES_SHIFT), 0);
    prime_world_destroy(w);
}

/* Every rank sends to every rank, itself included, n = 8 + src floats;
 * even destinations count as REDIST, odd ones as SHIFT. */
static void all_to_all_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    int me = prime_dev_rank(dev), nd = prime_dev_count(dev);
    float out[4][16], in[4][16];
    PrimeReq sreq[4], rreq[4];
    for (int d = 0; d < nd; d++) {
        size_t n = (size_t)(8 + me);
        for (size_t i = 0; i < n; i++)
            out[d][i] = (float)(me * 1000 + d * 100 + (int)i);
        PrimeByteKind kind = d % 2 ? PRIME_BYTES_SHIFT : PRIME_BYTES_REDIST;
        EXPECT(prime_isend(dev, d, me * 10 + d, out[d], n, kind, &sreq[d]) == PRIME_OK);
    }
    for (int s = nd - 1; s >= 0; s--)
        EXPECT(prime_irecv(dev, s, s * 10 + me, in[s], (size_t)(8 + s), &rreq[s]) == PRIME_OK);
    for (int s = 0; s < nd; s++) {
        EXPECT(prime_wait(dev, &rreq[s]) == PRIME_OK);
        for (int i = 0; i < 8 + s; i++)
            EXPECT(in[s][i] == (float)(s * 1000 + me * 100 + i));
    }
    for (int d = 0; d < nd; d++)
        EXPECT(prime_wait(dev, &sreq[d]) == PRIME_OK);
}

static void test_all_to_all_and_self(void **state) {
    (void)state;
    PrimeWorld *w = make_world(4);
    run_ok(w, all_to_all_fn, NULL);
    for (int r = 0; r < 4; r++) {
        uint64_t per_msg = (uint64_t)(8 + r) * sizeof(float);
        /* A send to oneself counts too: two even and two odd destinations. */
        assert_int_equal(prime_world_bytes_sent(w, r, PRIME_BYTES_SHIFT), 2 * per_msg);
        assert_int_equal(prime_world_bytes_sent(w, r, PRIME_BYTES_REDIST), 2 * per_msg);
        assert_int_equal(prime_world_bytes_sent(w, r, PRIME_BYTES_COLLECTIVE), 0);
    }
    prime_world_reset_counters(w);
    assert_int_equal(prime_world_bytes_sent(w, 3, PRIME_BYTES_SHIFT), 0);
    prime_world_destroy(w);
}

/* A send's wait returns only once the receive was posted and the data has
 * landed in the receiver's buffer. */
typedef struct LateRecv {
    atomic_int posted;
    float got[64];
} LateRecv;

static void late_recv_fn(PrimeDev *dev, void *arg) {
    LateRecv *lr = arg;
    float data[64];
    PrimeReq req;
    for (int i = 0; i < 64; i++)
        data[i] = (float)(i * 3);
    if (prime_dev_rank(dev) == 0) {
        EXPECT(prime_isend(dev, 1, 0, data, 64, PRIME_BYTES_SHIFT, &req) == PRIME_OK);
        EXPECT(prime_wait(dev, &req) == PRIME_OK);
        EXPECT(atomic_load(&lr->posted) == 1);
        /* The receiver writes nothing to got until it waits. */
        EXPECT(memcmp(lr->got, data, sizeof data) == 0);
    } else {
        sleep_ms(40);
        atomic_store(&lr->posted, 1);
        EXPECT(prime_irecv(dev, 0, 0, lr->got, 64, &req) == PRIME_OK);
        EXPECT(prime_wait(dev, &req) == PRIME_OK);
    }
}

static void test_send_wait_needs_receiver(void **state) {
    (void)state;
    PrimeWorld *w = make_world(2);
    static LateRecv lr;
    atomic_store(&lr.posted, 0);
    run_ok(w, late_recv_fn, &lr);
    prime_world_destroy(w);
}

/* Overlap: the receiver posts its receive and then stays busy, not in
 * prime_wait, until the sender's wait has returned. The communication
 * thread must have moved all the data meanwhile. */
#define BIG (1u << 20)
typedef struct Overlap {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int sent;
    float *src;
    float *dst;
} Overlap;

static void overlap_fn(PrimeDev *dev, void *arg) {
    Overlap *ov = arg;
    PrimeReq req;
    if (prime_dev_rank(dev) == 0) {
        EXPECT(prime_isend(dev, 1, 3, ov->src, BIG, PRIME_BYTES_SHIFT, &req) == PRIME_OK);
        EXPECT(prime_wait(dev, &req) == PRIME_OK);
        pthread_mutex_lock(&ov->mu);
        ov->sent = 1;
        pthread_cond_signal(&ov->cv);
        pthread_mutex_unlock(&ov->mu);
    } else {
        EXPECT(prime_irecv(dev, 0, 3, ov->dst, BIG, &req) == PRIME_OK);
        pthread_mutex_lock(&ov->mu);
        while (!ov->sent)
            pthread_cond_wait(&ov->cv, &ov->mu);
        pthread_mutex_unlock(&ov->mu);
        EXPECT(ov->dst[0] == ov->src[0] && ov->dst[BIG - 1] == ov->src[BIG - 1]);
        EXPECT(memcmp(ov->dst, ov->src, BIG * sizeof(float)) == 0);
        EXPECT(prime_wait(dev, &req) == PRIME_OK);
    }
}

static void test_transfer_overlaps_compute(void **state) {
    (void)state;
    PrimeWorld *w = make_world(2);
    Overlap ov = {.sent = 0};
    pthread_mutex_init(&ov.mu, NULL);
    pthread_cond_init(&ov.cv, NULL);
    ov.src = malloc(BIG * sizeof(float));
    ov.dst = calloc(BIG, sizeof(float));
    assert_non_null(ov.src);
    assert_non_null(ov.dst);
    prime_fill_random(ov.src, BIG, 42);
    run_ok(w, overlap_fn, &ov);
    assert_int_equal(prime_world_bytes_sent(w, 0, PRIME_BYTES_SHIFT), BIG * sizeof(float));
    free(ov.src);
    free(ov.dst);
    pthread_mutex_destroy(&ov.mu);
    pthread_cond_destroy(&ov.cv);
    prime_world_destroy(w);
}

/* The schedule of generated code: ring shifts into a spare buffer while
 * computing on the current one, then wait and swap. */
#define RING_STEPS 200
#define RING_N 257
static void ring_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    int me = prime_dev_rank(dev), nd = prime_dev_count(dev);
    float *cur = prime_alloc(dev, RING_N), *next = prime_alloc(dev, RING_N);
    double acc = 0.0;
    EXPECT(cur && next);
    if (!cur || !next)
        return;
    for (int i = 0; i < RING_N; i++)
        cur[i] = (float)(me + i);
    for (int t = 0; t < RING_STEPS; t++) {
        PrimeReq s, r;
        EXPECT(prime_isend(dev, (me + 1) % nd, t, cur, RING_N, PRIME_BYTES_SHIFT, &s) == PRIME_OK);
        EXPECT(prime_irecv(dev, (me + nd - 1) % nd, t, next, RING_N, &r) == PRIME_OK);
        acc += cur[0];
        EXPECT(prime_wait(dev, &r) == PRIME_OK);
        EXPECT(prime_wait(dev, &s) == PRIME_OK);
        float *tmp = cur;
        cur = next;
        next = tmp;
    }
    /* After t shifts we hold what rank me - t started with. */
    int origin = ((me - RING_STEPS) % nd + nd) % nd;
    EXPECT(cur[0] == (float)origin && cur[RING_N - 1] == (float)(origin + RING_N - 1));
    double want = 0.0;
    for (int t = 0; t < RING_STEPS; t++)
        want += (double)(((me - t) % nd + nd) % nd);
    EXPECT(acc == want);
    prime_free(dev, cur, RING_N);
    prime_free(dev, next, RING_N);
}

static void test_ring_shift_schedule(void **state) {
    (void)state;
    PrimeWorld *w = make_world(4);
    run_ok(w, ring_fn, NULL);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(prime_world_bytes_sent(w, r, PRIME_BYTES_SHIFT),
                         (uint64_t)RING_STEPS * RING_N * sizeof(float));
        assert_int_equal(prime_world_peak_bytes(w, r), 2 * RING_N * sizeof(float));
        assert_int_equal(prime_world_current_bytes(w, r), 0);
    }
    prime_world_destroy(w);
}

/* A size mismatch fails both sides with PRIME_ERR_ARG and copies nothing. */
static void mismatch_fn(PrimeDev *dev, void *arg) {
    float *got = arg;
    float data[4] = {1, 2, 3, 4};
    PrimeReq req;
    if (prime_dev_rank(dev) == 0) {
        EXPECT(prime_isend(dev, 1, 0, data, 4, PRIME_BYTES_SHIFT, &req) == PRIME_OK);
        EXPECT(prime_wait(dev, &req) == PRIME_ERR_ARG);
    } else {
        EXPECT(prime_irecv(dev, 0, 0, got, 5, &req) == PRIME_OK);
        EXPECT(prime_wait(dev, &req) == PRIME_ERR_ARG);
    }
    EXPECT(prime_dev_status(dev) == PRIME_ERR_ARG);
}

static void test_size_mismatch(void **state) {
    (void)state;
    PrimeWorld *w = make_world(2);
    float got[5] = {-1, -1, -1, -1, -1};
    assert_int_equal(prime_world_run(w, mismatch_fn, got), PRIME_ERR_ARG);
    assert_int_equal(atomic_load(&failures), 0);
    for (int i = 0; i < 5; i++)
        assert_true(got[i] == -1.0f);
    prime_world_destroy(w);
}

static void bad_args_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    float x = 0;
    PrimeReq req = {&x};
    if (prime_dev_rank(dev) == 0) {
        EXPECT(prime_isend(dev, 2, 0, &x, 1, PRIME_BYTES_SHIFT, &req) == PRIME_ERR_ARG);
        EXPECT(req.impl == NULL);
        EXPECT(prime_wait(dev, &req) == PRIME_ERR_ARG);
        EXPECT(prime_isend(dev, -1, 0, &x, 1, PRIME_BYTES_SHIFT, &req) == PRIME_ERR_ARG);
        EXPECT(prime_isend(dev, 1, 0, &x, 1, PRIME_BYTES_KIND_COUNT, &req) == PRIME_ERR_ARG);
        EXPECT(prime_isend(dev, 1, 0, NULL, 1, PRIME_BYTES_SHIFT, &req) == PRIME_ERR_ARG);
        EXPECT(prime_dev_status(dev) == PRIME_ERR_ARG);
    } else {
        EXPECT(prime_irecv(dev, 5, 0, &x, 1, &req) == PRIME_ERR_ARG);
        EXPECT(prime_dev_status(dev) == PRIME_ERR_ARG);
    }
}

static void test_bad_arguments(void **state) {
    (void)state;
    PrimeWorld *w = make_world(2);
    assert_int_equal(prime_world_run(w, bad_args_fn, NULL), PRIME_ERR_ARG);
    assert_int_equal(atomic_load(&failures), 0);
    /* Failed posts count no bytes. */
    assert_int_equal(prime_world_bytes_sent(w, 0, PRIME_BYTES_SHIFT), 0);
    prime_world_destroy(w);
}

/* Requests never waited for, matched or not, are freed by
 * prime_world_destroy (LeakSanitizer checks this under PRIMEC_SANITIZE). */
static float unwaited_bufs[4][32];
static void unwaited_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    PrimeReq req;
    if (prime_dev_rank(dev) == 0) {
        EXPECT(prime_isend(dev, 1, 1, unwaited_bufs[0], 32, PRIME_BYTES_SHIFT, &req) == PRIME_OK);
        EXPECT(prime_isend(dev, 1, 2, unwaited_bufs[1], 32, PRIME_BYTES_SHIFT, &req) == PRIME_OK);
    } else {
        EXPECT(prime_irecv(dev, 0, 1, unwaited_bufs[2], 32, &req) == PRIME_OK);
        EXPECT(prime_irecv(dev, 0, 3, unwaited_bufs[3], 32, &req) == PRIME_OK);
    }
}

static void test_unwaited_requests_freed(void **state) {
    (void)state;
    PrimeWorld *w = make_world(2);
    run_ok(w, unwaited_fn, NULL);
    prime_world_destroy(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recv_before_send),
        cmocka_unit_test(test_send_before_recv),
        cmocka_unit_test(test_tag_matching_fifo),
        cmocka_unit_test(test_all_to_all_and_self),
        cmocka_unit_test(test_send_wait_needs_receiver),
        cmocka_unit_test(test_transfer_overlaps_compute),
        cmocka_unit_test(test_ring_shift_schedule),
        cmocka_unit_test(test_size_mismatch),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_unwaited_requests_freed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
