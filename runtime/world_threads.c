/*
 * world_threads.c — the threads backend's worlds, runs and barrier: every
 * device is a thread of this process.
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

#include "threads_internal.h"

#include <cblas.h>
#include <stdlib.h>

/* Initialises the device's mutexes and condition variables; on failure
 * destroys whatever was initialised and leaves sync_ready at 0. */
static int dev_sync_init(PrimeDevBackend *dev) {
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

static void dev_sync_destroy(PrimeDevBackend *dev) {
    if (!dev->sync_ready)
        return;
    pthread_mutex_destroy(&dev->mbox_mu);
    pthread_mutex_destroy(&dev->comm_mu);
    pthread_cond_destroy(&dev->comm_cv);
    pthread_mutex_destroy(&dev->done_mu);
    pthread_cond_destroy(&dev->done_cv);
    dev->sync_ready = 0;
}

static int world_sync_init(PrimeWorldBackend *w) {
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

static void world_sync_destroy(PrimeWorldBackend *w) {
    pthread_mutex_destroy(&w->bar_mu);
    pthread_cond_destroy(&w->bar_cv);
    pthread_mutex_destroy(&w->run_mu);
    pthread_cond_destroy(&w->run_cv);
}

/* Frees the devices' backend state and the world itself; the world's own
 * mutexes are destroyed by the caller when they were initialised. */
static void world_free(PrimeWorld *w) {
    if (w->be && w->be->devs) {
        for (int i = 0; i < w->ndev; i++) {
            prime_rt_transport_free_requests(&w->be->devs[i]);
            dev_sync_destroy(&w->be->devs[i]);
        }
        free(w->be->devs);
    }
    free(w->be);
    w->be = NULL;
    prime_rt_world_delete(w);
}

PrimeStatus prime_world_create(int ndev, PrimeWorld **out) {
    if (!out)
        return PRIME_ERR_ARG;
    *out = NULL;
    if (ndev < 1)
        return PRIME_ERR_ARG;
    PrimeWorld *w = prime_rt_world_new(ndev);
    if (!w)
        return PRIME_ERR_NOMEM;
    w->be = calloc(1, sizeof *w->be);
    if (w->be)
        w->be->devs = calloc((size_t)ndev, sizeof *w->be->devs);
    if (!w->be || !w->be->devs) {
        world_free(w);
        return PRIME_ERR_NOMEM;
    }
    w->t0_ns = prime_rt_now_ns();
    for (int i = 0; i < ndev; i++) {
        w->devs[i].be = &w->be->devs[i];
        if (!dev_sync_init(w->devs[i].be)) {
            world_free(w);
            return PRIME_ERR_TRANSPORT;
        }
    }
    if (!world_sync_init(w->be)) {
        world_free(w);
        return PRIME_ERR_TRANSPORT;
    }
    PrimeStatus st = prime_rt_transport_start(w);
    if (st != PRIME_OK) {
        world_sync_destroy(w->be);
        world_free(w);
        return st;
    }
    openblas_set_num_threads(1);
    *out = w;
    return PRIME_OK;
}

void prime_world_destroy(PrimeWorld *world) {
    if (!world)
        return;
    prime_rt_transport_stop(world);
    world_sync_destroy(world->be);
    world_free(world);
}

static void *compute_main(void *p) {
    PrimeDev *dev = p;
    PrimeWorldBackend *w = dev->world->be;
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
PrimeStatus prime_world_run(PrimeWorld *world, PrimeRankFn fn, void *arg) {
    if (!world || !fn)
        return PRIME_ERR_ARG;
    PrimeWorldBackend *be = world->be;
    pthread_mutex_lock(&be->run_mu);
    if (be->running) {
        pthread_mutex_unlock(&be->run_mu);
        return PRIME_ERR_ARG;
    }
    be->running = 1;
    be->run_gate = 0;
    be->run_fn = fn;
    be->run_arg = arg;
    pthread_mutex_unlock(&be->run_mu);

    int started = 0;
    while (started < world->ndev) {
        PrimeDev *dev = &world->devs[started];
        if (pthread_create(&dev->be->thread, NULL, compute_main, dev) != 0)
            break;
        started++;
    }
    int all = started == world->ndev;

    pthread_mutex_lock(&be->run_mu);
    be->run_gate = all ? 1 : 2;
    pthread_cond_broadcast(&be->run_cv);
    pthread_mutex_unlock(&be->run_mu);

    for (int i = 0; i < started; i++)
        pthread_join(world->devs[i].be->thread, NULL);

    pthread_mutex_lock(&be->run_mu);
    be->running = 0;
    be->run_fn = NULL;
    be->run_arg = NULL;
    pthread_mutex_unlock(&be->run_mu);

    if (!all)
        return PRIME_ERR_TRANSPORT;
    for (int i = 0; i < world->ndev; i++) {
        if (world->devs[i].status != PRIME_OK)
            return world->devs[i].status;
    }
    return PRIME_OK;
}

int prime_world_is_root(const PrimeWorld *world) {
    return world != NULL;
}

/* Every device's memory is this process's memory: nothing to move. */
PrimeStatus prime_world_share(PrimeWorld *world, void *buf, size_t bytes_per_rank) {
    if (!world || (!buf && bytes_per_rank > 0))
        return PRIME_ERR_ARG;
    return PRIME_OK;
}

/* Every device of the world must call it the same number of times. */
PrimeStatus prime_barrier(PrimeDev *dev) {
    if (!dev)
        return PRIME_ERR_ARG;
    PrimeWorldBackend *w = dev->world->be;
    pthread_mutex_lock(&w->bar_mu);
    unsigned long gen = w->bar_gen;
    if (++w->bar_count == dev->world->ndev) {
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
