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
 *
 * Placement: PRIME_PIN=1 pins device r's compute thread to the r-th core
 * this process may run on (modulo their number), PRIME_PIN=auto does so
 * only when there are at least as many cores as devices, and PRIME_PIN=0
 * (the default; docs/timing.md has the measurements) leaves placement to
 * the kernel. PRIME_INLINE_BYTES sets the largest message the matching
 * thread copies itself, PRIME_POLLS how often a wait polls before it
 * sleeps (transport_threads.c), PRIME_COLLECTIVES=ring runs collectives as
 * rings of messages instead of in shared memory (collective_threads.c).
 *
 * Deadlines: the barrier and the join of a run wait at most the world's
 * timeout. The join starts counting when a device returns: a device that
 * has not returned twice the timeout after the latest one did is taken
 * for stuck (twice, so that a device waiting for a stuck peer reports
 * that peer first); the world is aborted, and compute threads that do
 * not return within ABORT_GRACE_NS after an abort are left running,
 * detached, with the world's memory (see `broken`).
 */
#define _GNU_SOURCE

#include "prime_rt.h"

#include "threads_internal.h"

#include <cblas.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ABORT_GRACE_NS 2000000000u
#define INLINE_BYTES_DEFAULT 65536u
#define POLLS_DEFAULT 10
#define POLLS_MAX 1000000

/* The process's cores, in order; their number, 0 when unknown. */
static int allowed_cpus(cpu_set_t *set) {
    CPU_ZERO(set);
    if (sched_getaffinity(0, sizeof *set, set) != 0)
        return 0;
    return CPU_COUNT(set);
}

/* Reads PRIME_PIN, PRIME_INLINE_BYTES, PRIME_POLLS and PRIME_COLLECTIVES; a
 * value it cannot read keeps the default. */
static void read_placement(PrimeWorld *w) {
    PrimeWorldBackend *be = w->be;
    cpu_set_t set;
    be->ncpu = allowed_cpus(&set);
    be->inline_bytes = INLINE_BYTES_DEFAULT;
    const char *v = getenv("PRIME_INLINE_BYTES");
    if (v && *v) {
        char *end;
        unsigned long long n = strtoull(v, &end, 10);
        if (*end == '\0' && v[0] != '-')
            be->inline_bytes = (size_t)n;
    }
    be->polls = POLLS_DEFAULT;
    v = getenv("PRIME_POLLS");
    if (v && *v) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*end == '\0' && n >= 0 && n <= POLLS_MAX)
            be->polls = (int)n;
    }
    v = getenv("PRIME_COLLECTIVES");
    be->coll_direct = !(v && strcmp(v, "ring") == 0);
    const char *pin = getenv("PRIME_PIN");
    be->pin = 0;
    if (pin && strcmp(pin, "1") == 0)
        be->pin = be->ncpu > 0;
    else if (pin && strcmp(pin, "auto") == 0)
        be->pin = be->ncpu >= w->ndev;
}

/* Pins the calling compute thread of `rank` (see the top of the file). */
static void pin_self(int rank) {
    cpu_set_t set, one;
    int n = allowed_cpus(&set);
    if (n == 0)
        return;
    int want = rank % n;
    for (int c = 0, seen = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        if (seen++ == want) {
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            return;
        }
    }
}

/* Initialises the device's mutexes and condition variables; on failure
 * destroys whatever was initialised and leaves sync_ready at 0. */
static int dev_sync_init(PrimeDevBackend *dev) {
    int ok_mbox = pthread_mutex_init(&dev->mbox_mu, NULL) == 0;
    int ok_comm = pthread_mutex_init(&dev->comm_mu, NULL) == 0;
    int ok_comm_cv = pthread_cond_init(&dev->comm_cv, NULL) == 0;
    int ok_done = pthread_mutex_init(&dev->done_mu, NULL) == 0;
    int ok_done_cv = prime_rt_cond_init(&dev->done_cv) == 0;
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
    int ok_bar_cv = prime_rt_cond_init(&w->bar_cv) == 0;
    int ok_run = pthread_mutex_init(&w->run_mu, NULL) == 0;
    int ok_run_cv = prime_rt_cond_init(&w->run_cv) == 0;
    if (ok_bar && ok_bar_cv && ok_run && ok_run_cv && prime_rt_coll_init(w))
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
    prime_rt_coll_destroy(w);
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
    if (w->be)
        free(w->be->returned);
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
    if (w->be) {
        w->be->devs = calloc((size_t)ndev, sizeof *w->be->devs);
        w->be->returned = calloc((size_t)ndev, 1);
        atomic_init(&w->be->aborted, 0);
    }
    if (!w->be || !w->be->devs || !w->be->returned) {
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
    read_placement(w);
    openblas_set_num_threads(1);
    prime_rt_tune_memory();
    *out = w;
    return PRIME_OK;
}

void prime_world_destroy(PrimeWorld *world) {
    if (!world)
        return;
    /* Stuck compute threads may still use every part of the world. */
    if (world->be->broken)
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
    if (go && w->pin)
        pin_self(dev->rank);
    if (go)
        fn(dev, arg);
    pthread_mutex_lock(&w->run_mu);
    w->finished++;
    w->returned[dev->rank] = 1;
    w->last_finish_ns = prime_rt_now_ns();
    pthread_cond_broadcast(&w->run_cv);
    pthread_mutex_unlock(&w->run_mu);
    return NULL;
}

void prime_rt_world_abort(PrimeWorld *world) {
    PrimeWorldBackend *be = world->be;
    if (atomic_exchange(&be->aborted, 1))
        return;
    prime_rt_transport_abort(world);
    prime_rt_coll_abort(be);
    pthread_mutex_lock(&be->bar_mu);
    pthread_cond_broadcast(&be->bar_cv);
    pthread_mutex_unlock(&be->bar_mu);
    pthread_mutex_lock(&be->run_mu);
    pthread_cond_broadcast(&be->run_cv);
    pthread_mutex_unlock(&be->run_mu);
}

void prime_rt_stall(PrimeDev *dev) {
    PrimeWorldBackend *be = dev->world->be;
    pthread_mutex_lock(&be->run_mu);
    while (!atomic_load(&be->aborted))
        pthread_cond_wait(&be->run_cv, &be->run_mu);
    pthread_mutex_unlock(&be->run_mu);
}

/* Joins the `started` compute threads within the deadlines above; 1 when
 * every one of them returned. Devices found stuck get a note. */
static int join_devices(PrimeWorld *world, int started) {
    PrimeWorldBackend *be = world->be;
    uint64_t abort_ns = 0;
    int gave_up = 0;
    pthread_mutex_lock(&be->run_mu);
    while (be->finished < started && !gave_up) {
        uint64_t deadline = 0;
        int aborted = atomic_load(&be->aborted);
        if (aborted) {
            if (!abort_ns)
                abort_ns = prime_rt_now_ns();
            deadline = abort_ns + ABORT_GRACE_NS;
        } else if (be->finished > 0 && world->timeout_ns) {
            deadline = be->last_finish_ns + 2 * world->timeout_ns;
        }
        if (prime_rt_cond_wait_until(&be->run_cv, &be->run_mu, deadline) != ETIMEDOUT ||
            be->finished == started)
            continue;
        if (aborted) {
            gave_up = 1;
            continue;
        }
        for (int r = 0; r < started; r++) {
            PrimeDev *d = &world->devs[r];
            if (be->returned[r])
                continue;
            char ctx[200];
            prime_rt_context_text(d, ctx, sizeof ctx);
            snprintf(d->note, sizeof d->note,
                     "rank %d: did not return within %g s after the last device finished "
                     "(last seen%s)",
                     r, 2 * (double)world->timeout_ns / 1e9, ctx[0] ? ctx : " nowhere");
        }
        pthread_mutex_unlock(&be->run_mu);
        prime_rt_world_abort(world);
        pthread_mutex_lock(&be->run_mu);
    }
    for (int r = 0; r < started; r++) {
        if (be->returned[r])
            pthread_join(world->devs[r].be->thread, NULL);
        else
            pthread_detach(world->devs[r].be->thread);
    }
    pthread_mutex_unlock(&be->run_mu);
    return !gave_up;
}

/* Returns PRIME_ERR_ARG for a bad call or a run already in progress,
 * PRIME_ERR_TRANSPORT when a thread cannot be created (then no device runs
 * fn), and otherwise the sticky status of the lowest-ranked device that
 * has one, PRIME_OK if none. */
PrimeStatus prime_world_run(PrimeWorld *world, PrimeRankFn fn, void *arg) {
    if (!world || !fn)
        return PRIME_ERR_ARG;
    PrimeWorldBackend *be = world->be;
    if (atomic_load(&be->aborted))
        return PRIME_ERR_TIMEOUT;
    pthread_mutex_lock(&be->run_mu);
    if (be->running) {
        pthread_mutex_unlock(&be->run_mu);
        return PRIME_ERR_ARG;
    }
    be->running = 1;
    be->run_gate = 0;
    be->run_fn = fn;
    be->run_arg = arg;
    be->finished = 0;
    memset(be->returned, 0, (size_t)world->ndev);
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

    if (!join_devices(world, started)) {
        be->broken = 1;
        return PRIME_ERR_TIMEOUT;
    }

    pthread_mutex_lock(&be->run_mu);
    be->running = 0;
    be->run_fn = NULL;
    be->run_arg = NULL;
    pthread_mutex_unlock(&be->run_mu);

    if (!all)
        return PRIME_ERR_TRANSPORT;
    if (atomic_load(&be->aborted))
        return PRIME_ERR_TIMEOUT;
    for (int i = 0; i < world->ndev; i++) {
        if (world->devs[i].status != PRIME_OK)
            return world->devs[i].status;
    }
    return PRIME_OK;
}

int prime_world_is_root(const PrimeWorld *world) {
    return world != NULL;
}

int prime_local_devices(int ndev) {
    return ndev;
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
    uint64_t deadline = prime_rt_deadline(dev->world->timeout_ns);
    PrimeStatus st = PRIME_OK;
    int arrived = 0;
    pthread_mutex_lock(&w->bar_mu);
    unsigned long gen = w->bar_gen;
    if (atomic_load(&w->aborted)) {
        st = PRIME_ERR_ABORTED;
    } else if (++w->bar_count == dev->world->ndev) {
        w->bar_count = 0;
        w->bar_gen++;
        pthread_cond_broadcast(&w->bar_cv);
    } else {
        while (gen == w->bar_gen && st == PRIME_OK) {
            if (atomic_load(&w->aborted))
                st = PRIME_ERR_ABORTED;
            else if (prime_rt_cond_wait_until(&w->bar_cv, &w->bar_mu, deadline) == ETIMEDOUT &&
                     gen == w->bar_gen)
                st = PRIME_ERR_TIMEOUT;
        }
        arrived = w->bar_count;
    }
    pthread_mutex_unlock(&w->bar_mu);
    if (st == PRIME_ERR_TIMEOUT) {
        prime_rt_note_timeout(dev, "barrier: %d of %d devices arrived", arrived, dev->world->ndev);
        prime_rt_world_abort(dev->world);
    }
    return prime_rt_fail(dev, st);
}
