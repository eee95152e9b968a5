/*
 * world.c — worlds, devices, runs, counters, counted allocation, barrier.
 *
 * A PrimeWorld owns an array of PrimeDev, one per thread-device, and one
 * communication thread per device that lives as long as the world (so
 * messages may even be matched across runs). prime_world_run starts one
 * compute thread per device behind a start gate and joins them all.
 *
 * Counters and the sticky status of a device are written only by its own
 * compute thread during a run and read by the caller after the join, so
 * they need no lock. Device threads must not share one PrimeDev.
 *
 * OpenBLAS: a device is one thread and stands for one accelerator, so the
 * world asks OpenBLAS for one thread per GEMM call; otherwise N devices
 * would each fan out over every core.
 */
#define _POSIX_C_SOURCE 200809L

#include "prime_rt.h"

#include "internal.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *prime_status_name(PrimeStatus status)
{
    switch (status) {
    case PRIME_OK:
        return "ok";
    case PRIME_ERR_ARG:
        return "invalid argument";
    case PRIME_ERR_NOMEM:
        return "out of memory";
    case PRIME_ERR_TRANSPORT:
        return "transport failure";
    case PRIME_ERR_IO:
        return "i/o error";
    }
    return "unknown status";
}

const char *prime_byte_kind_name(PrimeByteKind kind)
{
    switch (kind) {
    case PRIME_BYTES_SHIFT:
        return "shift";
    case PRIME_BYTES_COLLECTIVE:
        return "collective";
    case PRIME_BYTES_REDIST:
        return "redist";
    case PRIME_BYTES_KIND_COUNT:
        break;
    }
    return "unknown";
}

uint64_t prime_rt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

PrimeStatus prime_rt_fail(PrimeDev *dev, PrimeStatus status)
{
    if (dev && status != PRIME_OK && dev->status == PRIME_OK)
        dev->status = status;
    return status;
}

/* Initialises the device's mutexes and condition variables; on failure
 * destroys whatever was initialised and leaves sync_ready at 0. */
static int dev_sync_init(PrimeDev *dev)
{
    int ok_mbox = pthread_mutex_init(&dev->mbox_mu, NULL) == 0;
    int ok_comm = pthread_mutex_init(&dev->comm_mu, NULL) == 0;
    int ok_comm_cv = pthread_cond_init(&dev->comm_cv, NULL) == 0;
    int ok_done = pthread_mutex_init(&dev->done_mu, NULL) == 0;
    int ok_done_cv = pthread_cond_init(&dev->done_cv, NULL) == 0;
    if (ok_mbox && ok_comm && ok_comm_cv && ok_done && ok_done_cv) {
        dev->sync_ready = 1;
        return 1;
    }
    if (ok_mbox)
        pthread_mutex_destroy(&dev->mbox_mu);
    if (ok_comm)
        pthread_mutex_destroy(&dev->comm_mu);
    if (ok_comm_cv)
        pthread_cond_destroy(&dev->comm_cv);
    if (ok_done)
        pthread_mutex_destroy(&dev->done_mu);
    if (ok_done_cv)
        pthread_cond_destroy(&dev->done_cv);
    return 0;
}

static void dev_sync_destroy(PrimeDev *dev)
{
    if (!dev->sync_ready)
        return;
    pthread_mutex_destroy(&dev->mbox_mu);
    pthread_mutex_destroy(&dev->comm_mu);
    pthread_cond_destroy(&dev->comm_cv);
    pthread_mutex_destroy(&dev->done_mu);
    pthread_cond_destroy(&dev->done_cv);
    dev->sync_ready = 0;
}

static int world_sync_init(PrimeWorld *w)
{
    int ok_bar = pthread_mutex_init(&w->bar_mu, NULL) == 0;
    int ok_bar_cv = pthread_cond_init(&w->bar_cv, NULL) == 0;
    int ok_run = pthread_mutex_init(&w->run_mu, NULL) == 0;
    int ok_run_cv = pthread_cond_init(&w->run_cv, NULL) == 0;
    if (ok_bar && ok_bar_cv && ok_run && ok_run_cv)
        return 1;
    if (ok_bar)
        pthread_mutex_destroy(&w->bar_mu);
    if (ok_bar_cv)
        pthread_cond_destroy(&w->bar_cv);
    if (ok_run)
        pthread_mutex_destroy(&w->run_mu);
    if (ok_run_cv)
        pthread_cond_destroy(&w->run_cv);
    return 0;
}

/* Frees the devices and the world itself; the world's own mutexes are
 * destroyed by the caller when they were initialised. */
static void world_free_devices(PrimeWorld *w)
{
    for (int i = 0; i < w->ndev; i++) {
        PrimeDev *dev = &w->devs[i];
        prime_rt_transport_free_requests(dev);
        prime_rt_trace_free(&dev->trace);
        dev_sync_destroy(dev);
    }
    free(w->devs);
    free(w);
}

PrimeStatus prime_world_create(int ndev, PrimeWorld **out)
{
    if (!out)
        return PRIME_ERR_ARG;
    *out = NULL;
    if (ndev < 1)
        return PRIME_ERR_ARG;
    PrimeWorld *w = calloc(1, sizeof *w);
    if (!w)
        return PRIME_ERR_NOMEM;
    w->devs = calloc((size_t)ndev, sizeof *w->devs);
    if (!w->devs) {
        free(w);
        return PRIME_ERR_NOMEM;
    }
    w->ndev = ndev;
    w->t0_ns = prime_rt_now_ns();
    for (int i = 0; i < ndev; i++) {
        PrimeDev *dev = &w->devs[i];
        dev->world = w;
        dev->rank = i;
        if (!dev_sync_init(dev)) {
            world_free_devices(w);
            return PRIME_ERR_TRANSPORT;
        }
    }
    if (!world_sync_init(w)) {
        world_free_devices(w);
        return PRIME_ERR_TRANSPORT;
    }
    PrimeStatus st = prime_rt_transport_start(w);
    if (st != PRIME_OK) {
        pthread_mutex_destroy(&w->bar_mu);
        pthread_cond_destroy(&w->bar_cv);
        pthread_mutex_destroy(&w->run_mu);
        pthread_cond_destroy(&w->run_cv);
        world_free_devices(w);
        return st;
    }
    openblas_set_num_threads(1);
    *out = w;
    return PRIME_OK;
}

void prime_world_destroy(PrimeWorld *world)
{
    if (!world)
        return;
    prime_rt_transport_stop(world);
    pthread_mutex_destroy(&world->bar_mu);
    pthread_cond_destroy(&world->bar_cv);
    pthread_mutex_destroy(&world->run_mu);
    pthread_cond_destroy(&world->run_cv);
    world_free_devices(world);
}

static void *compute_main(void *p)
{
    PrimeDev *dev = p;
    PrimeWorld *w = dev->world;
    pthread_mutex_lock(&w->run_mu);
    while (w->run_gate == 0)
        pthread_cond_wait(&w->run_cv, &w->run_mu);
    int go = w->run_gate == 1;
    PrimeRankFn fn = w->run_fn;
    void *arg = w->run_arg;
    pthread_mutex_unlock(&w->run_mu);
    if (go)
        fn(dev, arg);
    return NULL;
}

/* Returns PRIME_ERR_ARG for a bad call or a run already in progress,
 * PRIME_ERR_TRANSPORT when a thread cannot be created (then no device runs
 * fn), and otherwise the sticky status of the lowest-ranked device that
 * has one, PRIME_OK if none. */
PrimeStatus prime_world_run(PrimeWorld *world, PrimeRankFn fn, void *arg)
{
    if (!world || !fn)
        return PRIME_ERR_ARG;
    pthread_mutex_lock(&world->run_mu);
    if (world->running) {
        pthread_mutex_unlock(&world->run_mu);
        return PRIME_ERR_ARG;
    }
    world->running = 1;
    world->run_gate = 0;
    world->run_fn = fn;
    world->run_arg = arg;
    pthread_mutex_unlock(&world->run_mu);

    int started = 0;
    while (started < world->ndev) {
        PrimeDev *dev = &world->devs[started];
        if (pthread_create(&dev->thread, NULL, compute_main, dev) != 0)
            break;
        started++;
    }
    int all = started == world->ndev;

    pthread_mutex_lock(&world->run_mu);
    world->run_gate = all ? 1 : 2;
    pthread_cond_broadcast(&world->run_cv);
    pthread_mutex_unlock(&world->run_mu);

    for (int i = 0; i < started; i++)
        pthread_join(world->devs[i].thread, NULL);

    pthread_mutex_lock(&world->run_mu);
    world->running = 0;
    world->run_fn = NULL;
    world->run_arg = NULL;
    pthread_mutex_unlock(&world->run_mu);

    if (!all)
        return PRIME_ERR_TRANSPORT;
    for (int i = 0; i < world->ndev; i++) {
        if (world->devs[i].status != PRIME_OK)
            return world->devs[i].status;
    }
    return PRIME_OK;
}

/* Zeroes the bytes sent and lowers each peak to the current allocation;
 * neither statuses nor traces are touched. Between runs only. */
void prime_world_reset_counters(PrimeWorld *world)
{
    if (!world)
        return;
    for (int i = 0; i < world->ndev; i++) {
        PrimeDev *dev = &world->devs[i];
        memset(dev->bytes_sent, 0, sizeof dev->bytes_sent);
        dev->peak_bytes = dev->cur_bytes;
    }
}

int prime_world_size(const PrimeWorld *world)
{
    return world ? world->ndev : 0;
}

int prime_dev_rank(const PrimeDev *dev)
{
    return dev ? dev->rank : -1;
}

int prime_dev_count(const PrimeDev *dev)
{
    return dev ? dev->world->ndev : 0;
}

PrimeStatus prime_dev_status(const PrimeDev *dev)
{
    return dev ? dev->status : PRIME_ERR_ARG;
}

/* A request for zero floats still returns a distinct pointer (and counts
 * nothing), so NULL always means failure. */
float *prime_alloc(PrimeDev *dev, size_t nfloats)
{
    if (!dev)
        return NULL;
    if (nfloats > SIZE_MAX / sizeof(float)) {
        prime_rt_fail(dev, PRIME_ERR_NOMEM);
        return NULL;
    }
    float *p = calloc(nfloats ? nfloats : 1, sizeof(float));
    if (!p) {
        prime_rt_fail(dev, PRIME_ERR_NOMEM);
        return NULL;
    }
    dev->cur_bytes += (uint64_t)nfloats * sizeof(float);
    if (dev->cur_bytes > dev->peak_bytes)
        dev->peak_bytes = dev->cur_bytes;
    return p;
}

/* Freeing more than is allocated is recorded as PRIME_ERR_ARG and leaves
 * the current count at zero. */
void prime_free(PrimeDev *dev, float *p, size_t nfloats)
{
    if (!p)
        return;
    free(p);
    if (!dev)
        return;
    uint64_t bytes = (uint64_t)nfloats * sizeof(float);
    if (bytes > dev->cur_bytes) {
        prime_rt_fail(dev, PRIME_ERR_ARG);
        dev->cur_bytes = 0;
        return;
    }
    dev->cur_bytes -= bytes;
}

uint64_t prime_world_bytes_sent(const PrimeWorld *world, int rank, PrimeByteKind kind)
{
    if (!world || rank < 0 || rank >= world->ndev || (int)kind < 0 ||
        kind >= PRIME_BYTES_KIND_COUNT)
        return 0;
    return world->devs[rank].bytes_sent[kind];
}

uint64_t prime_world_peak_bytes(const PrimeWorld *world, int rank)
{
    if (!world || rank < 0 || rank >= world->ndev)
        return 0;
    return world->devs[rank].peak_bytes;
}

uint64_t prime_world_current_bytes(const PrimeWorld *world, int rank)
{
    if (!world || rank < 0 || rank >= world->ndev)
        return 0;
    return world->devs[rank].cur_bytes;
}

/* Every device of the world must call it the same number of times. */
PrimeStatus prime_barrier(PrimeDev *dev)
{
    if (!dev)
        return PRIME_ERR_ARG;
    PrimeWorld *w = dev->world;
    pthread_mutex_lock(&w->bar_mu);
    unsigned long gen = w->bar_gen;
    if (++w->bar_count == w->ndev) {
        w->bar_count = 0;
        w->bar_gen++;
        pthread_cond_broadcast(&w->bar_cv);
    } else {
        while (gen == w->bar_gen)
            pthread_cond_wait(&w->bar_cv, &w->bar_mu);
    }
    pthread_mutex_unlock(&w->bar_mu);
    return PRIME_OK;
}
