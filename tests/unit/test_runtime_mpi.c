/*
 * test_runtime_mpi.c — the MPI backend (prime_rt_mpi) under
 * `mpirun -np 4`: the process count check, ranks and the root, a ring
 * shift and a send to oneself with their byte counters, ring all-reduce,
 * reduce-scatter and all-gather on the whole world and on a two-member
 * group whose counters must equal the prediction formulas, counters
 * gathered so that every process reads every rank's, prime_world_share,
 * the barrier, the gathered trace, and errors: size mismatches and a bad
 * rank, reported by prime_world_run alike on every process.
 *
 * Plain checks rather than cmocka: every process runs the same checks,
 * counts its failures and prints each one; rank 0 prints one PASS or FAIL
 * line for all, and every process exits 1 on a failure anywhere. The test
 * initialises MPI itself, so it can create several worlds one after the
 * other (a world finalises MPI only when it initialised it).
 */
#define _POSIX_C_SOURCE 200809L

#include "prime_rt.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NDEV 4

static int failures;
static int checks;
static int my_rank;

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "rank %d: %s:%d: expectation failed: %s\n", my_rank, __FILE__,         \
                    __LINE__, #cond);                                                              \
        }                                                                                          \
    } while (0)

enum { SHIFT_BASE = 100, SELF_N = 10, COLL_N = 1001, PAIR_N = 37 };

/* The pair group of a rank: {0, 2} or {3, 1} (ring order as listed). */
static const int pair_even[2] = {0, 2};
static const int pair_odd[2] = {3, 1};
static const int everyone[NDEV] = {0, 1, 2, 3};

static const int *pair_of(int rank) {
    return rank % 2 == 0 ? pair_even : pair_odd;
}

static int pos_in(const int *group, int g, int rank) {
    for (int i = 0; i < g; i++)
        if (group[i] == rank)
            return i;
    return -1;
}

static float value(int rank, size_t i) {
    return (float)(rank * 1000 + (int)(i % 997));
}

/* Ring shift: rank r sends SHIFT_BASE + r floats to r + 1; and a copy to
 * itself counted as redistribution. */
static void p2p_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    int r = prime_dev_rank(dev), nd = prime_dev_count(dev);
    EXPECT(r == my_rank);
    EXPECT(nd == NDEV);
    int next = (r + 1) % nd, prev = (r + nd - 1) % nd;
    size_t sn = SHIFT_BASE + (size_t)r, rn = SHIFT_BASE + (size_t)prev;
    float *sbuf = malloc(sn * sizeof *sbuf), *rbuf = calloc(rn, sizeof *rbuf);
    float self_in[SELF_N], self_out[SELF_N] = {0};
    if (!sbuf || !rbuf) {
        EXPECT(!"out of memory");
        free(sbuf);
        free(rbuf);
        return;
    }
    for (size_t i = 0; i < sn; i++)
        sbuf[i] = value(r, i);
    for (int i = 0; i < SELF_N; i++)
        self_in[i] = (float)(r + i);
    PrimeReq rreq, sreq, self_r, self_s;
    /* Receive first, then send; the self message the other way round. */
    EXPECT(prime_irecv(dev, prev, 7, rbuf, rn, &rreq) == PRIME_OK);
    EXPECT(prime_isend(dev, next, 7, sbuf, sn, PRIME_BYTES_SHIFT, &sreq) == PRIME_OK);
    EXPECT(prime_isend(dev, r, 8, self_in, SELF_N, PRIME_BYTES_REDIST, &self_s) == PRIME_OK);
    EXPECT(prime_irecv(dev, r, 8, self_out, SELF_N, &self_r) == PRIME_OK);
    EXPECT(prime_wait(dev, &rreq) == PRIME_OK);
    EXPECT(prime_wait(dev, &sreq) == PRIME_OK);
    EXPECT(prime_wait(dev, &self_s) == PRIME_OK);
    EXPECT(prime_wait(dev, &self_r) == PRIME_OK);
    EXPECT(rreq.impl == NULL);
    int same = 1;
    for (size_t i = 0; i < rn; i++)
        same &= rbuf[i] == value(prev, i);
    EXPECT(same);
    EXPECT(memcmp(self_in, self_out, sizeof self_in) == 0);
    free(sbuf);
    free(rbuf);
}

/* Collectives on everyone and on a pair; data buffers from malloc, so the
 * only counted allocations are the collectives' scratch. */
static void coll_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    int r = prime_dev_rank(dev);
    float *a = malloc(COLL_N * sizeof *a), *b = malloc(COLL_N * sizeof *b);
    float p[PAIR_N], mine[PAIR_N], got[PAIR_N];
    if (!a || !b) {
        EXPECT(!"out of memory");
        free(a);
        free(b);
        return;
    }
    for (size_t i = 0; i < COLL_N; i++) {
        a[i] = value(r, i);
        b[i] = 0;
    }
    EXPECT(prime_allreduce_sum(dev, everyone, NDEV, a, COLL_N, 3) == PRIME_OK);
    int sums = 1;
    for (size_t i = 0; i < COLL_N; i++)
        sums &= a[i] == value(0, i) + value(1, i) + value(2, i) + value(3, i);
    EXPECT(sums);

    /* Reduce-scatter then all-gather is an all-reduce too. */
    for (size_t i = 0; i < COLL_N; i++)
        a[i] = value(r, i);
    EXPECT(prime_reduce_scatter_sum(dev, everyone, NDEV, a, COLL_N, 4) == PRIME_OK);
    EXPECT(prime_allgather(dev, everyone, NDEV, a, COLL_N, 4) == PRIME_OK);
    sums = 1;
    for (size_t i = 0; i < COLL_N; i++)
        sums &= a[i] == value(0, i) + value(1, i) + value(2, i) + value(3, i);
    EXPECT(sums);

    /* Same tag as the user message below: the namespaces are apart. */
    const int *pair = pair_of(r);
    int other = pair[0] == r ? pair[1] : pair[0];
    for (int i = 0; i < PAIR_N; i++)
        p[i] = mine[i] = (float)(r + i);
    PrimeReq s, q;
    EXPECT(prime_isend(dev, other, 5, mine, PAIR_N, PRIME_BYTES_SHIFT, &s) == PRIME_OK);
    EXPECT(prime_irecv(dev, other, 5, got, PAIR_N, &q) == PRIME_OK);
    EXPECT(prime_allreduce_sum(dev, pair, 2, p, PAIR_N, 5) == PRIME_OK);
    EXPECT(prime_wait(dev, &s) == PRIME_OK);
    EXPECT(prime_wait(dev, &q) == PRIME_OK);
    int pairs = 1;
    for (int i = 0; i < PAIR_N; i++)
        pairs &= p[i] == (float)(r + other + 2 * i) && got[i] == (float)(other + i);
    EXPECT(pairs);
    EXPECT(prime_barrier(dev) == PRIME_OK);
    free(a);
    free(b);
}

static uint64_t expected_bytes(int rank, PrimeByteKind kind, int phase) {
    if (phase == 0) {
        if (kind == PRIME_BYTES_SHIFT)
            return (SHIFT_BASE + (uint64_t)rank) * sizeof(float);
        if (kind == PRIME_BYTES_REDIST)
            return SELF_N * sizeof(float);
        return 0;
    }
    if (kind == PRIME_BYTES_SHIFT)
        return PAIR_N * sizeof(float);
    if (kind == PRIME_BYTES_REDIST)
        return 0;
    int p = pos_in(everyone, NDEV, rank);
    return prime_allreduce_bytes(COLL_N, NDEV, p) + prime_reduce_scatter_bytes(COLL_N, NDEV, p) +
           prime_allgather_bytes(COLL_N, NDEV, p) +
           prime_allreduce_bytes(PAIR_N, 2, pos_in(pair_of(rank), 2, rank));
}

static void check_counters(PrimeWorld *w, int phase) {
    /* Every process checks every rank: the counters were gathered. */
    for (int r = 0; r < NDEV; r++) {
        for (int k = 0; k < PRIME_BYTES_KIND_COUNT; k++) {
            uint64_t got = prime_world_bytes_sent(w, r, (PrimeByteKind)k);
            uint64_t want = expected_bytes(r, (PrimeByteKind)k, phase);
            if (got != want)
                fprintf(stderr, "rank %d: rank %d %s bytes %llu, expected %llu\n", my_rank, r,
                        prime_byte_kind_name((PrimeByteKind)k), (unsigned long long)got,
                        (unsigned long long)want);
            EXPECT(got == want);
        }
        uint64_t peak =
            phase == 0 ? 0 : (uint64_t)prime_collective_scratch(COLL_N, NDEV) * sizeof(float);
        EXPECT(prime_world_peak_bytes(w, r) == peak);
        EXPECT(prime_world_current_bytes(w, r) == 0);
    }
}

static void trace_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    prime_trace_begin(dev, "step");
    prime_trace_begin(dev, "kernel");
    prime_trace_end(dev);
    prime_trace_end(dev);
}

static int count(const char *text, const char *what) {
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

static void check_trace(PrimeWorld *w) {
    const char *path = "test_runtime_mpi_trace.json";
    prime_world_enable_trace(w, 1);
    EXPECT(prime_world_run(w, trace_fn, NULL) == PRIME_OK);
    if (!prime_world_is_root(w))
        return;
    EXPECT(prime_world_write_trace(w, path) == PRIME_OK);
    static char text[1 << 14];
    FILE *f = fopen(path, "rb");
    EXPECT(f != NULL);
    if (!f)
        return;
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    remove(path);
    EXPECT(count(text, "\"ph\":\"X\"") == 2 * NDEV);
    for (int r = 0; r < NDEV; r++) {
        /* Both intervals with their processor time, gathered from the
         * rank that recorded them. */
        char tid[64];
        snprintf(tid, sizeof tid, "\"pid\":%d,\"tid\":0,\"args\":{\"cpu_us\":", r);
        EXPECT(count(text, tid) == 2);
    }
}

/* Errors: rank 1 receives 5 floats into 8, rank 3 receives 5 into 3,
 * rank 2 names a rank that does not exist and a negative tag. */
static void errors_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    int r = prime_dev_rank(dev);
    float buf[8] = {0};
    PrimeReq req;
    if (r == 0 || r == 2) {
        EXPECT(prime_isend(dev, r + 1, 1, buf, 5, PRIME_BYTES_SHIFT, &req) == PRIME_OK);
        EXPECT(prime_wait(dev, &req) == PRIME_OK);
    }
    if (r == 1) {
        EXPECT(prime_irecv(dev, 0, 1, buf, 8, &req) == PRIME_OK);
        EXPECT(prime_wait(dev, &req) == PRIME_ERR_ARG);
        /* A request already waited for. */
        EXPECT(prime_wait(dev, &req) == PRIME_ERR_ARG);
    }
    if (r == 3) {
        EXPECT(prime_irecv(dev, 2, 1, buf, 3, &req) == PRIME_OK);
        EXPECT(prime_wait(dev, &req) == PRIME_ERR_ARG);
    }
    if (r == 2) {
        EXPECT(prime_isend(dev, 7, 0, buf, 1, PRIME_BYTES_SHIFT, &req) == PRIME_ERR_ARG);
        EXPECT(req.impl == NULL);
        EXPECT(prime_isend(dev, 0, -1, buf, 1, PRIME_BYTES_SHIFT, &req) == PRIME_ERR_ARG);
    }
    EXPECT(prime_dev_status(dev) == (r % 2 == 1 || r == 2 ? PRIME_ERR_ARG : PRIME_OK));
}

int main(void) {
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return 1;
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != NDEV) {
        if (my_rank == 0)
            printf("FAIL: test_runtime_mpi needs mpirun -np %d\n", NDEV);
        MPI_Finalize();
        return 1;
    }

    PrimeWorld *w = (PrimeWorld *)&w;
    /* The wrong number of processes: every process refuses alike. */
    if (my_rank == 0)
        fprintf(stderr, "test_runtime_mpi: a message about 3 devices and 4 processes follows\n");
    EXPECT(prime_world_create(NDEV - 1, &w) == PRIME_ERR_ARG);
    EXPECT(w == NULL);
    EXPECT(prime_world_create(0, &w) == PRIME_ERR_ARG);

    EXPECT(prime_world_create(NDEV, &w) == PRIME_OK);
    if (w) {
        EXPECT(prime_world_size(w) == NDEV);
        EXPECT(prime_world_is_root(w) == (my_rank == 0));
        EXPECT(prime_world_run(w, p2p_fn, NULL) == PRIME_OK);
        check_counters(w, 0);
        prime_world_reset_counters(w);
        EXPECT(prime_world_run(w, coll_fn, NULL) == PRIME_OK);
        check_counters(w, 1);

        /* Share: each process fills only its own block. */
        int blocks[NDEV][2];
        memset(blocks, 0xff, sizeof blocks);
        blocks[my_rank][0] = my_rank;
        blocks[my_rank][1] = my_rank * my_rank;
        EXPECT(prime_world_share(w, blocks, sizeof blocks[0]) == PRIME_OK);
        for (int r = 0; r < NDEV; r++)
            EXPECT(blocks[r][0] == r && blocks[r][1] == r * r);
        EXPECT(prime_world_share(w, NULL, 4) == PRIME_ERR_ARG);
        EXPECT(prime_world_share(w, NULL, 0) == PRIME_OK);

        check_trace(w);
        prime_world_destroy(w);
    }

    w = NULL;
    EXPECT(prime_world_create(NDEV, &w) == PRIME_OK);
    if (w) {
        /* Rank 1 has the lowest-ranked error; every process hears of it. */
        EXPECT(prime_world_run(w, errors_fn, NULL) == PRIME_ERR_ARG);
        prime_world_destroy(w);
    }

    int all_failures = 0, all_checks = 0;
    MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&checks, &all_checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (my_rank == 0) {
        if (all_failures == 0)
            printf("PASS: test_runtime_mpi: %d checks on %d processes\n", all_checks, NDEV);
        else
            printf("FAIL: test_runtime_mpi: %d of %d checks failed\n", all_failures, all_checks);
    }
    MPI_Finalize();
    return all_failures == 0 ? 0 : 1;
}
