/*
 * test_runtime_world.c — worlds and runs: creation arguments, ranks,
 * repeated runs, the barrier, counted allocation (current, peak, reset),
 * sticky statuses and what prime_world_run returns, names of statuses and
 * byte kinds, the root and prime_world_share (trivial with threads), and
 * the Chrome trace writer, and the placement of device threads
 * (PRIME_PIN).
 */
#define _GNU_SOURCE

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include "prime_rt.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

static void test_create_arguments(void **state) {
    (void)state;
    PrimeWorld *w = (PrimeWorld *)&w;
    assert_int_equal(prime_world_create(0, &w), PRIME_ERR_ARG);
    assert_null(w);
    assert_int_equal(prime_world_create(-3, &w), PRIME_ERR_ARG);
    assert_int_equal(prime_world_create(2, NULL), PRIME_ERR_ARG);
    w = make_world(5);
    assert_int_equal(prime_world_size(w), 5);
    assert_int_equal(prime_world_run(w, NULL, NULL), PRIME_ERR_ARG);
    assert_int_equal(prime_world_bytes_sent(w, 5, PRIME_BYTES_SHIFT), 0);
    assert_int_equal(prime_world_peak_bytes(w, -1), 0);
    prime_world_destroy(w);
    prime_world_destroy(NULL);
}

/* Threads: one process reports, and its memory already holds every
 * rank's block, so sharing moves nothing. */
static void test_root_and_share(void **state) {
    (void)state;
    assert_int_equal(prime_world_is_root(NULL), 0);
    PrimeWorld *w = make_world(3);
    assert_int_equal(prime_world_is_root(w), 1);
    int blocks[3] = {10, 11, 12};
    assert_int_equal(prime_world_share(w, blocks, sizeof blocks[0]), PRIME_OK);
    assert_int_equal(blocks[0], 10);
    assert_int_equal(blocks[1], 11);
    assert_int_equal(blocks[2], 12);
    assert_int_equal(prime_world_share(w, NULL, 0), PRIME_OK);
    assert_int_equal(prime_world_share(w, NULL, 4), PRIME_ERR_ARG);
    assert_int_equal(prime_world_share(NULL, blocks, 4), PRIME_ERR_ARG);
    prime_world_destroy(w);
}

static void test_names(void **state) {
    (void)state;
    assert_string_equal(prime_status_name(PRIME_OK), "ok");
    assert_string_equal(prime_status_name(PRIME_ERR_ARG), "invalid argument");
    assert_string_equal(prime_status_name(PRIME_ERR_NOMEM), "out of memory");
    assert_string_equal(prime_status_name(PRIME_ERR_TRANSPORT), "transport failure");
    assert_string_equal(prime_status_name(PRIME_ERR_IO), "i/o error");
    assert_string_equal(prime_byte_kind_name(PRIME_BYTES_SHIFT), "shift");
    assert_string_equal(prime_byte_kind_name(PRIME_BYTES_COLLECTIVE), "collective");
    assert_string_equal(prime_byte_kind_name(PRIME_BYTES_REDIST), "redist");
    assert_string_equal(prime_byte_kind_name(PRIME_BYTES_KIND_COUNT), "unknown");
}

/* Each rank marks its slot; every rank sees all marks, exactly once. */
typedef struct Ranks {
    atomic_int seen[8];
    atomic_int runs;
} Ranks;

static void ranks_fn(PrimeDev *dev, void *arg) {
    Ranks *r = arg;
    EXPECT(prime_dev_count(dev) == 8);
    EXPECT(prime_dev_status(dev) == PRIME_OK);
    atomic_fetch_add(&r->seen[prime_dev_rank(dev)], 1);
}

static void test_every_rank_runs_once(void **state) {
    (void)state;
    PrimeWorld *w = make_world(8);
    static Ranks r;
    for (int run = 0; run < 3; run++)
        assert_int_equal(prime_world_run(w, ranks_fn, &r), PRIME_OK);
    for (int i = 0; i < 8; i++)
        assert_int_equal(atomic_load(&r.seen[i]), 3);
    assert_int_equal(atomic_load(&failures), 0);
    prime_world_destroy(w);
}

/* Nobody leaves a barrier before everybody has arrived. */
#define ROUNDS 100
static void barrier_fn(PrimeDev *dev, void *arg) {
    atomic_int *arrived = arg;
    int nd = prime_dev_count(dev);
    for (int round = 0; round < ROUNDS; round++) {
        atomic_fetch_add(arrived, 1);
        EXPECT(prime_barrier(dev) == PRIME_OK);
        EXPECT(atomic_load(arrived) == (round + 1) * nd);
        EXPECT(prime_barrier(dev) == PRIME_OK);
    }
}

static void test_barrier(void **state) {
    (void)state;
    PrimeWorld *w = make_world(6);
    atomic_int arrived;
    atomic_init(&arrived, 0);
    assert_int_equal(prime_world_run(w, barrier_fn, &arrived), PRIME_OK);
    assert_int_equal(atomic_load(&failures), 0);
    prime_world_destroy(w);
}

/* Rank r takes (r+1)*100 floats, then 50 more, frees the first block and
 * keeps the second across runs. */
static float *kept[4];
static void alloc_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    int r = prime_dev_rank(dev);
    size_t n = (size_t)(r + 1) * 100;
    float *a = prime_alloc(dev, n);
    EXPECT(a != NULL);
    if (!a)
        return;
    int zero = 1;
    for (size_t i = 0; i < n; i++)
        zero &= a[i] == 0.0f;
    EXPECT(zero);
    kept[r] = prime_alloc(dev, 50);
    EXPECT(kept[r] != NULL);
    prime_free(dev, a, n);
}

static void free_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    prime_free(dev, kept[prime_dev_rank(dev)], 50);
    /* Zero floats still give a pointer, and count nothing. */
    float *none = prime_alloc(dev, 0);
    EXPECT(none != NULL);
    prime_free(dev, none, 0);
}

static void test_counted_allocation(void **state) {
    (void)state;
    PrimeWorld *w = make_world(4);
    assert_int_equal(prime_world_run(w, alloc_fn, NULL), PRIME_OK);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(prime_world_peak_bytes(w, r), ((uint64_t)(r + 1) * 100 + 50) * 4);
        assert_int_equal(prime_world_current_bytes(w, r), 50 * 4);
    }
    prime_world_reset_counters(w);
    for (int r = 0; r < 4; r++)
        assert_int_equal(prime_world_peak_bytes(w, r), 50 * 4);
    assert_int_equal(prime_world_run(w, free_fn, NULL), PRIME_OK);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(prime_world_peak_bytes(w, r), 50 * 4);
        assert_int_equal(prime_world_current_bytes(w, r), 0);
    }
    assert_int_equal(atomic_load(&failures), 0);
    prime_world_destroy(w);
}

/* A freed tile is kept for the next allocation of its size: the same
 * memory comes back, zeroed again, without faulting in a new page, and
 * the counters stay the logical ones. (Under AddressSanitizer, as in CI,
 * malloc alone would hand out new memory: freed memory waits in its
 * quarantine. glibc alone often returns the same block too.) */
#define KEPT_FLOATS (9L << 20)
static long faults_kept;
static void reuse_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    float *a = prime_alloc(dev, KEPT_FLOATS);
    EXPECT(a != NULL);
    if (!a)
        return;
    for (long i = 0; i < KEPT_FLOATS; i += 1024)
        a[i] = 1.0f;
    prime_free(dev, a, KEPT_FLOATS);
    struct rusage before, after;
    getrusage(RUSAGE_THREAD, &before);
    float *again = prime_alloc(dev, KEPT_FLOATS);
    getrusage(RUSAGE_THREAD, &after);
    faults_kept = after.ru_minflt - before.ru_minflt;
    EXPECT(again == a);
    int zero = again != NULL;
    for (long i = 0; zero && i < KEPT_FLOATS; i += 1024)
        zero = again[i] == 0.0f;
    EXPECT(zero);
    prime_free(dev, again, KEPT_FLOATS);
}

static void test_kept_tiles(void **state) {
    (void)state;
    PrimeWorld *w = make_world(1);
    assert_int_equal(prime_world_run(w, reuse_fn, NULL), PRIME_OK);
    /* 36 MiB is 9,216 pages: a handful of faults at most. */
    fprintf(stderr, "  %ld page faults for the second tile\n", faults_kept);
    assert_true(faults_kept < 100);
    assert_int_equal(prime_world_peak_bytes(w, 0), (uint64_t)KEPT_FLOATS * 4);
    assert_int_equal(prime_world_current_bytes(w, 0), 0);
    assert_int_equal(atomic_load(&failures), 0);
    prime_world_destroy(w);
}

/* Errors are sticky per device; the run reports the lowest rank's. */
static void errors_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    float x = 0;
    PrimeReq req;
    int r = prime_dev_rank(dev);
    if (r == 2) {
        EXPECT(prime_isend(dev, 7, 0, &x, 1, PRIME_BYTES_SHIFT, &req) == PRIME_ERR_ARG);
        float *huge = prime_alloc(dev, SIZE_MAX / 2);
        EXPECT(huge == NULL);
        /* The first error stays. */
        EXPECT(prime_dev_status(dev) == PRIME_ERR_ARG);
    }
    if (r == 3) {
        EXPECT(prime_alloc(dev, SIZE_MAX / 2) == NULL);
        EXPECT(prime_dev_status(dev) == PRIME_ERR_NOMEM);
    }
    if (r < 2)
        EXPECT(prime_dev_status(dev) == PRIME_OK);
}

static void test_sticky_errors(void **state) {
    (void)state;
    PrimeWorld *w = make_world(4);
    assert_int_equal(prime_world_run(w, errors_fn, NULL), PRIME_ERR_ARG);
    assert_int_equal(atomic_load(&failures), 0);
    assert_int_equal(prime_world_current_bytes(w, 3), 0);
    prime_world_destroy(w);
}

/* A rank function may not start another run of its own world. */
static void nested_fn(PrimeDev *dev, void *arg) {
    if (prime_dev_rank(dev) == 0)
        EXPECT(prime_world_run(arg, ranks_fn, NULL) == PRIME_ERR_ARG);
}

static void test_nested_run_refused(void **state) {
    (void)state;
    PrimeWorld *w = make_world(2);
    assert_int_equal(prime_world_run(w, nested_fn, w), PRIME_OK);
    assert_int_equal(atomic_load(&failures), 0);
    prime_world_destroy(w);
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    return text;
}

static int count(const char *text, const char *what) {
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

static void trace_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    char longname[100];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    prime_trace_begin(dev, "step");
    prime_trace_begin(dev, "gemm \"q\\k\"\n");
    /* A kernel that takes 1 ms of its thread's processor time. */
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 1000000L);
    prime_trace_end(dev);
    prime_trace_begin(dev, longname);
    longname[0] = 'X'; /* the name was copied */
    prime_trace_end(dev);
    /* The step with its split: 1 us of kernels, 0.5 us exposed. */
    prime_trace_end_split(dev, 1000, 500);
    prime_trace_begin(dev, "left open");
    /* Closed spans on the communication row; an end before the begin is
     * clamped to the begin. */
    uint64_t now = prime_clock_ns();
    prime_trace_span(dev, "send shift to 1", PRIME_TRACE_COMM, now, now + 2000);
    prime_trace_span(dev, "recv from 2", PRIME_TRACE_COMM, now + 5000, now);
    EXPECT(prime_dev_status(dev) == PRIME_OK);
}

static void test_trace_json(void **state) {
    (void)state;
    const char *path = "test_runtime_world_trace.json";
    PrimeWorld *w = make_world(3);
    /* Off by default: nothing recorded. */
    assert_int_equal(prime_world_run(w, trace_fn, NULL), PRIME_OK);
    assert_int_equal(prime_world_write_trace(w, path), PRIME_OK);
    assert_string_equal(read_file(path), "{\"traceEvents\":[\n]}\n");

    prime_world_enable_trace(w, 1);
    assert_int_equal(prime_world_run(w, trace_fn, NULL), PRIME_OK);
    assert_int_equal(atomic_load(&failures), 0);
    assert_int_equal(prime_world_write_trace(w, path), PRIME_OK);
    const char *text = read_file(path);
    assert_true(strncmp(text, "{\"traceEvents\":[", 16) == 0);
    assert_non_null(strstr(text, "]}"));
    assert_int_equal(count(text, "\"ph\":\"X\""), 3 * 5);
    /* Per device: its name and its two rows named, three intervals on the
     * compute row (the step with its split) and two spans on the
     * communication row. */
    assert_int_equal(count(text, "\"ph\":\"M\""), 3 * 3);
    for (int r = 0; r < 3; r++) {
        char tid[64];
        snprintf(tid, sizeof tid, "\"pid\":%d,\"tid\":0,\"args\":{\"cpu_us\":", r);
        assert_int_equal(count(text, tid), 2);
        snprintf(tid, sizeof tid, "\"pid\":%d,\"tid\":0,\"args\":{\"kernel_us\"", r);
        assert_int_equal(count(text, tid), 1);
        snprintf(tid, sizeof tid, "\"pid\":%d,\"tid\":1}", r);
        assert_int_equal(count(text, tid), 2);
        snprintf(tid, sizeof tid, "\"pid\":%d,\"args\":{\"name\":\"device %d\"}", r, r);
        assert_int_equal(count(text, tid), 1);
    }
    assert_int_equal(count(text, "\"args\":{\"name\":\"communication\"}"), 3);
    assert_int_equal(count(text, "{\"name\":\"send shift to 1\",\"ph\":\"X\",\"ts\":"), 3);
    assert_int_equal(count(text, "\"dur\":2.000,\"pid\""), 3);
    assert_int_equal(count(text, "\"dur\":0.000,\"pid\""), 3);
    assert_int_equal(count(text, "{\"name\":\"step\",\"ph\":\"X\",\"ts\":"), 3);
    assert_int_equal(
        count(text, ",\"args\":{\"kernel_us\":1.000,\"exposed_comm_us\":0.500,\"overhead_us\":"),
        3);
    assert_int_equal(count(text, "\"kernel_us\""), 3);
    /* The processor time of every interval begun on the compute row (the
     * two kernels and the step), none on the communication row. */
    assert_int_equal(count(text, "\"cpu_us\":"), 3 * 3);
    assert_int_equal(count(text, "\"overhead_us\":"), 3);
    assert_null(strstr(text, "\"tid\":1,\"args\":{\"cpu_us\""));
    /* The busy kernel's processor time: at least its 1 ms, at most its
     * span. */
    for (const char *at = text; (at = strstr(at, "{\"name\":\"gemm ")) != NULL; at++) {
        double dur = -1, cpu = -1;
        const char *d = strstr(at, "\"dur\":"), *c = strstr(at, "\"cpu_us\":");
        assert_non_null(d);
        assert_non_null(c);
        assert_int_equal(sscanf(d, "\"dur\":%lf", &dur), 1);
        assert_int_equal(sscanf(c, "\"cpu_us\":%lf", &cpu), 1);
        assert_true(cpu >= 1000.0);
        assert_true(cpu <= dur + 1.0);
    }
    assert_int_equal(count(text, "\"name\":\"gemm \\\"q\\\\k\\\"\\u000a\""), 3);
    /* 63 characters kept, copied before the caller changed its buffer. */
    char name63[80] = "\"name\":\"";
    memset(name63 + 8, 'a', 63);
    strcpy(name63 + 8 + 63, "\"");
    assert_int_equal(count(text, name63), 3);
    assert_null(strstr(text, "left open"));
    assert_null(strstr(text, "\"name\":\"X"));
    assert_int_equal(count(text, "\"dur\":"), 15);
    remove(path);

    assert_int_equal(prime_world_write_trace(w, "/nonexistent-dir/trace.json"), PRIME_ERR_IO);
    assert_int_equal(prime_world_write_trace(w, NULL), PRIME_ERR_ARG);
    prime_world_destroy(w);
}

static void unbalanced_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    prime_trace_end(dev);
    EXPECT(prime_dev_status(dev) == PRIME_ERR_ARG);
}

static void test_trace_unbalanced_end(void **state) {
    (void)state;
    PrimeWorld *w = make_world(2);
    prime_world_enable_trace(w, 1);
    assert_int_equal(prime_world_run(w, unbalanced_fn, NULL), PRIME_ERR_ARG);
    assert_int_equal(atomic_load(&failures), 0);
    prime_world_destroy(w);
}

/* Per rank: the cores its compute thread may run on, and the first. */
#define PIN_MAX_DEV 64
static int pin_count[PIN_MAX_DEV];
static int pin_first[PIN_MAX_DEV];

static void pin_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    EXPECT(pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0);
    int r = prime_dev_rank(dev);
    pin_count[r] = CPU_COUNT(&set);
    pin_first[r] = -1;
    for (int c = 0; c < CPU_SETSIZE && pin_first[r] < 0; c++)
        if (CPU_ISSET(c, &set))
            pin_first[r] = c;
}

/* PRIME_PIN=1: device r on the r-th core of the process (modulo their
 * number); PRIME_PIN=0: every core; PRIME_PIN=auto: pinned when there are
 * at least as many cores as devices. Read when the world is created. */
static void test_pinning(void **state) {
    (void)state;
    cpu_set_t all;
    CPU_ZERO(&all);
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    int n = CPU_COUNT(&all);
    int cpu[CPU_SETSIZE], k = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all))
            cpu[k++] = c;
    const char *old = getenv("PRIME_PIN");
    char *saved = old ? strdup(old) : NULL;

    setenv("PRIME_PIN", "1", 1);
    PrimeWorld *w = make_world(4);
    assert_int_equal(prime_world_run(w, pin_fn, NULL), PRIME_OK);
    assert_int_equal(atomic_load(&failures), 0);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(pin_count[r], 1);
        assert_int_equal(pin_first[r], cpu[r % n]);
    }
    prime_world_destroy(w);

    setenv("PRIME_PIN", "0", 1);
    w = make_world(4);
    assert_int_equal(prime_world_run(w, pin_fn, NULL), PRIME_OK);
    for (int r = 0; r < 4; r++)
        assert_int_equal(pin_count[r], n);
    prime_world_destroy(w);

    /* auto: pinned only when there are at least as many cores as
     * devices. */
    if (n + 1 <= PIN_MAX_DEV) {
        setenv("PRIME_PIN", "auto", 1);
        w = make_world(n + 1);
        assert_int_equal(prime_world_run(w, pin_fn, NULL), PRIME_OK);
        for (int r = 0; r < n + 1; r++)
            assert_int_equal(pin_count[r], n);
        prime_world_destroy(w);
        w = make_world(n);
        assert_int_equal(prime_world_run(w, pin_fn, NULL), PRIME_OK);
        for (int r = 0; r < n; r++)
            assert_int_equal(pin_first[r], cpu[r]);
        for (int r = 0; r < n && n > 1; r++)
            assert_int_equal(pin_count[r], 1);
        prime_world_destroy(w);
    }

    if (saved)
        setenv("PRIME_PIN", saved, 1);
    else
        unsetenv("PRIME_PIN");
    free(saved);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_arguments),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_root_and_share),
        cmocka_unit_test(test_every_rank_runs_once),
        cmocka_unit_test(test_barrier),
        cmocka_unit_test(test_counted_allocation),
        cmocka_unit_test(test_kept_tiles),
        cmocka_unit_test(test_sticky_errors),
        cmocka_unit_test(test_nested_run_refused),
        cmocka_unit_test(test_trace_json),
        cmocka_unit_test(test_trace_unbalanced_end),
        cmocka_unit_test(test_pinning),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
