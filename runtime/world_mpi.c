/*
 * world_mpi.c — the MPI backend (library prime_rt_mpi): one device per MPI
 * process, the device's rank being the process's rank in MPI_COMM_WORLD.
 *
 * The same emitted program runs on either backend; only the library it is
 * linked against differs. Here:
 *
 *   - prime_world_create(ndev) initialises MPI (MPI_THREAD_FUNNELED) unless
 *     the program already did, and requires ndev == the number of
 *     processes; otherwise rank 0 says so on stderr (the one message this
 *     backend prints) and the call returns PRIME_ERR_ARG. The world duplicates
 *     MPI_COMM_WORLD once per matching namespace (user point-to-point,
 *     collective steps), so neither ever matches the other or messages of
 *     the program's own MPI code, whatever the tags. Tags must lie in
 *     [0, MPI_TAG_UB] (at least 32767).
 *   - prime_world_run calls fn once, for this process's device, on the
 *     calling thread. Every MPI call of the runtime therefore happens on
 *     the thread that created the world, which must be the main thread.
 *   - prime_isend / prime_irecv / prime_wait are MPI_Isend / MPI_Irecv /
 *     MPI_Wait, so a transfer progresses while the device computes (as far
 *     as the MPI library progresses it outside its own calls). Bytes are
 *     counted when a send is posted, as in the threads backend. A size
 *     mismatch is PRIME_ERR_ARG on the receiving side only: the sender's
 *     MPI_Wait cannot know. And, unlike the threads backend, a wait on a
 *     send may return as soon as MPI has buffered the data.
 *   - The ring collectives of collective.c run unchanged on top of these,
 *     so bytes, chunks and scratch are those of the threads backend.
 *   - After fn returns, prime_world_run all-gathers every rank's counters
 *     and status into the world's mirror devices (see internal.h), so
 *     prime_world_bytes_sent(world, r, kind) and friends, and the status
 *     prime_world_run returns, are the same on every process. Trace events
 *     are gathered to the root only (rank 0), whose prime_world_write_trace
 *     then writes the timeline of every device; on another process it
 *     writes only that process's device. Each process measures time from a
 *     barrier at world creation.
 *   - prime_world_destroy frees the communicators and calls MPI_Finalize
 *     when the runtime initialised MPI and no other world is left. MPI
 *     cannot be initialised twice, so a process that wants to create a
 *     world after that must initialise (and finalise) MPI itself.
 *
 * Trace events travel as bytes: every process must run the same binary on
 * the same kind of machine, as mpirun of one program does.
 *
 * Deadlines: no call here blocks in MPI. Every wait polls its request
 * (MPI_Test) until it completes or the world's timeout passes, and the
 * runtime's own collectives (world creation, the counter exchange after a
 * run, prime_world_share, prime_barrier, the barrier before
 * MPI_Finalize) are their non-blocking MPI-3 forms, polled the same way.
 * A wait that times out records who it waited for and breaks the world:
 * from then on posts, waits, shares and runs fail at once, and
 * prime_world_destroy frees only this process's memory and never calls
 * MPI_Finalize (which would wait for the missing peer). The process is
 * expected to exit with an error; its launcher then ends the others (Open
 * MPI's mpirun does so when a process exits non-zero) and removes their
 * shared-memory segments. A process of a job of several asks the kernel
 * to kill it when its parent, the launcher, dies (PR_SET_PDEATHSIG: a
 * stopped process cannot notice anything itself), and a polling wait
 * also gives up when its parent has changed. A process that dies with its
 * launcher leaves no daemon to remove its shared-memory segments, so a
 * watchdog (shm_watchdog.c) removes them then.
 */
#define _POSIX_C_SOURCE 200809L

#include "prime_rt.h"

#include "internal.h"

#include <cblas.h>
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

typedef struct MpiReq MpiReq;
struct MpiReq {
    MPI_Request req;
    int is_recv;
    int owner; /* rank that posted it */
    int peer;
    int tag;
    PrimeChannel channel;
    size_t n;
    MpiReq *live_prev; /* the owner's requests not yet waited for */
    MpiReq *live_next;
};

/* The state of this process's device. */
struct PrimeDevBackend {
    MpiReq *live;
};

struct PrimeWorldBackend {
    int rank;
    MPI_Comm comm[PRIME_RT_CHAN_COUNT]; /* one duplicate of MPI_COMM_WORLD each */
    int ncomm;                          /* duplicates made so far */
    int tag_ub;
    int running;
    int broken; /* a wait timed out: see the header */
    PrimeDevBackend local;
};

/* MPI is per process, and so is the knowledge that the runtime started it:
 * main thread only, like every MPI call here. */
static int runtime_owns_mpi;
static int live_worlds;
/* A world broke: MPI must never be finalised by this process. */
static int mpi_broken;
/* The launcher that started this process, watched by polling waits; 0
 * when not watched (a job of one process). */
static pid_t launcher_pid;

/* How a polled request ended. */
typedef enum PollEnd { POLL_DONE = 0, POLL_TIMEOUT, POLL_ORPHAN } PollEnd;

/* Polls `req` until it completes (POLL_DONE, *rc the MPI return code),
 * `timeout_ns` passes (POLL_TIMEOUT; 0: never) or the launcher is gone
 * (POLL_ORPHAN). Spins first, then yields the core, then sleeps briefly,
 * so that a long wait on an oversubscribed node leaves the CPU to its
 * peers while short waits keep MPI_Wait's latency. */
static PollEnd poll_request(MPI_Request *req, MPI_Status *status, uint64_t timeout_ns, int *rc) {
    if (timeout_ns == 0 && launcher_pid == 0) {
        *rc = MPI_Wait(req, status);
        return POLL_DONE;
    }
    uint64_t start = prime_rt_now_ns();
    for (unsigned long spin = 0;; spin++) {
        int flag = 0;
        *rc = MPI_Test(req, &flag, status);
        if (*rc != MPI_SUCCESS || flag)
            return POLL_DONE;
        uint64_t waited = prime_rt_now_ns() - start;
        if (timeout_ns && waited >= timeout_ns)
            return POLL_TIMEOUT;
        if ((spin & 255) == 0 && launcher_pid && getppid() != launcher_pid)
            return POLL_ORPHAN;
        if (waited > 100000000u) {
            struct timespec nap = {0, 100000};
            nanosleep(&nap, NULL);
        } else if (waited > 1000000u) {
            sched_yield();
        }
    }
}

/* The explanation of a poll that did not complete, on this process's
 * device; returns the status the waiter fails with. */
static PrimeStatus poll_failure(PrimeWorld *w, PollEnd end, const char *detail) {
    PrimeDev *dev = &w->devs[w->be->rank];
    w->be->broken = 1;
    mpi_broken = 1;
    if (end == POLL_ORPHAN) {
        if (!dev->failure[0])
            snprintf(dev->failure, sizeof dev->failure,
                     "rank %d: its launcher (process %ld) is gone", dev->rank, (long)launcher_pid);
        return prime_rt_fail(dev, PRIME_ERR_ABORTED);
    }
    return prime_rt_note_timeout(dev, "%s", detail);
}

/* Waits for one of the runtime's own non-blocking collectives. */
static PrimeStatus coll_wait(PrimeWorld *w, MPI_Request *req, const char *what) {
    int rc = MPI_SUCCESS;
    PollEnd end = poll_request(req, MPI_STATUS_IGNORE, w->timeout_ns, &rc);
    if (end != POLL_DONE) {
        PrimeDev *dev = &w->devs[w->be->rank];
        char detail[128];
        snprintf(detail, sizeof detail, "%s: not every process took part", what);
        prime_dev_set_context(dev, NULL, -1, -1, NULL);
        return poll_failure(w, end, detail);
    }
    return rc == MPI_SUCCESS ? PRIME_OK : PRIME_ERR_TRANSPORT;
}

/* The same before a world exists (creation): says why on stderr. */
static PrimeStatus create_wait(int rank, MPI_Request *req, const char *what) {
    int rc = MPI_SUCCESS;
    uint64_t timeout_ns = prime_rt_default_timeout_ns();
    PollEnd end = poll_request(req, MPI_STATUS_IGNORE, timeout_ns, &rc);
    if (end == POLL_DONE)
        return rc == MPI_SUCCESS ? PRIME_OK : PRIME_ERR_TRANSPORT;
    mpi_broken = 1;
    if (end == POLL_ORPHAN)
        fprintf(stderr, "prime_rt: rank %d: its launcher (process %ld) is gone\n", rank,
                (long)launcher_pid);
    else
        fprintf(stderr,
                "prime_rt: rank %d: no answer within %g s while creating the world (%s): "
                "not every process took part\n",
                rank, (double)timeout_ns / 1e9, what);
    return end == POLL_ORPHAN ? PRIME_ERR_ABORTED : PRIME_ERR_TIMEOUT;
}

/* A job of several processes dies with its launcher (see the header). */
static void watch_launcher(int size) {
    if (size < 2 || launcher_pid)
        return;
    pid_t parent = getppid();
    if (parent <= 1)
        return;
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* The launcher may have died before the call. */
    if (getppid() != parent)
        raise(SIGKILL);
#endif
    launcher_pid = parent;
    prime_rt_watch_shm(parent);
}

void prime_rt_stall(PrimeDev *dev) {
    (void)dev;
    for (;;) {
        struct timespec nap = {1, 0};
        nanosleep(&nap, NULL);
    }
}

/* Counters one rank contributes after a run. */
enum { REC_BYTES = 0, REC_CUR = PRIME_BYTES_KIND_COUNT, REC_PEAK, REC_STATUS, REC_EVENTS, REC_LEN };

/* Finalises MPI when the runtime initialised it and no world is left. */
static void release_mpi(void) {
    if (runtime_owns_mpi && live_worlds == 0 && !mpi_broken) {
        MPI_Finalize();
        runtime_owns_mpi = 0;
    }
}

static void free_requests(PrimeDevBackend *dev) {
    MpiReq *r = dev->live;
    while (r) {
        MpiReq *next = r->live_next;
        if (r->is_recv) {
            MPI_Cancel(&r->req);
            MPI_Wait(&r->req, MPI_STATUS_IGNORE);
        } else {
            MPI_Request_free(&r->req);
        }
        free(r);
        r = next;
    }
    dev->live = NULL;
}

/* A broken world's requests may never complete: they are left to MPI. */
static void forget_requests(PrimeDevBackend *dev) {
    MpiReq *r = dev->live;
    while (r) {
        MpiReq *next = r->live_next;
        free(r);
        r = next;
    }
    dev->live = NULL;
}

static void world_free(PrimeWorld *w) {
    if (w->be) {
        if (w->be->broken) {
            forget_requests(&w->be->local);
        } else {
            free_requests(&w->be->local);
            for (int c = 0; c < w->be->ncomm; c++)
                MPI_Comm_free(&w->be->comm[c]);
        }
        free(w->be);
        w->be = NULL;
    }
    prime_rt_world_delete(w);
}

PrimeStatus prime_world_create(int ndev, PrimeWorld **out) {
    if (!out)
        return PRIME_ERR_ARG;
    *out = NULL;
    if (ndev < 1)
        return PRIME_ERR_ARG;
    int finalized = 0, initialized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
        return PRIME_ERR_TRANSPORT;
    MPI_Initialized(&initialized);
    if (!initialized) {
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return PRIME_ERR_TRANSPORT;
        runtime_owns_mpi = 1;
    }
    if (mpi_broken)
        return PRIME_ERR_TRANSPORT;
    int size = 0, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    watch_launcher(size);
    if (ndev != size) {
        if (rank == 0)
            fprintf(stderr,
                    "prime_rt: this program runs on %d devices, one MPI process each, but "
                    "MPI started %d process%s (run it as: mpirun -np %d ...)\n",
                    ndev, size, size == 1 ? "" : "es", ndev);
        release_mpi();
        return PRIME_ERR_ARG;
    }

    PrimeWorld *w = prime_rt_world_new(ndev);
    if (w)
        w->be = calloc(1, sizeof *w->be);
    /* Every process must take part in the duplications below, so a
     * failed allocation is only acted upon once all have agreed. */
    int ok = w && w->be, all_ok = 0;
    PrimeStatus st = PRIME_OK;
    MPI_Request req;
    if (MPI_Iallreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
        st = PRIME_ERR_TRANSPORT;
    else
        st = create_wait(rank, &req, "MPI_Iallreduce");
    if (st == PRIME_OK && !all_ok)
        st = PRIME_ERR_NOMEM;
    for (int c = 0; c < PRIME_RT_CHAN_COUNT && st == PRIME_OK; c++) {
        if (MPI_Comm_idup(MPI_COMM_WORLD, &w->be->comm[c], &req) != MPI_SUCCESS) {
            st = PRIME_ERR_TRANSPORT;
            break;
        }
        st = create_wait(rank, &req, "MPI_Comm_idup");
        if (st != PRIME_OK)
            break;
        w->be->ncomm = c + 1;
        if (MPI_Comm_set_errhandler(w->be->comm[c], MPI_ERRORS_RETURN) != MPI_SUCCESS)
            st = PRIME_ERR_TRANSPORT;
    }
    if (st == PRIME_OK) {
        int *tag_ub = NULL, flag = 0;
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
        w->be->tag_ub = flag && tag_ub ? *tag_ub : 32767;
        w->be->rank = rank;
        w->devs[rank].be = &w->be->local;
        /* A common origin for every process's timeline. */
        if (MPI_Ibarrier(w->be->comm[PRIME_RT_CHAN_P2P], &req) != MPI_SUCCESS)
            st = PRIME_ERR_TRANSPORT;
        else
            st = create_wait(rank, &req, "MPI_Ibarrier");
        w->t0_ns = prime_rt_now_ns();
    }
    if (st != PRIME_OK) {
        if (w && w->be && mpi_broken)
            w->be->broken = 1;
        if (w)
            world_free(w);
        release_mpi();
        return st;
    }
    live_worlds++;
    /* One device stands for one accelerator: one BLAS thread each. */
    openblas_set_num_threads(1);
    prime_rt_tune_memory();
    *out = w;
    return PRIME_OK;
}

void prime_world_destroy(PrimeWorld *world) {
    if (!world)
        return;
    /* MPI_Finalize waits for every process: only once all are here. */
    if (!world->be->broken && runtime_owns_mpi && live_worlds == 1) {
        MPI_Request req;
        if (MPI_Ibarrier(world->be->comm[PRIME_RT_CHAN_P2P], &req) != MPI_SUCCESS ||
            coll_wait(world, &req, "barrier before MPI_Finalize") != PRIME_OK)
            mpi_broken = 1;
    }
    world_free(world);
    live_worlds--;
    release_mpi();
}

/* Replaces mirror r's timeline on the root with `n` events from `src`. */
static int mirror_trace(PrimeTrace *t, const PrimeTraceEvent *src, size_t n) {
    if (n > t->cap) {
        void *p = realloc(t->events, n * sizeof *t->events);
        if (!p)
            return 0;
        t->events = p;
        t->cap = n;
    }
    if (n > 0)
        memcpy(t->events, src, n * sizeof *src);
    t->count = n;
    return 1;
}

/* Gathers every rank's trace events to the root's mirrors. Every process
 * knows every rank's event count from the counter exchange, so all of them
 * take the same branches. */
static PrimeStatus gather_traces(PrimeWorld *w, const uint64_t *recs) {
    PrimeWorldBackend *be = w->be;
    MPI_Comm comm = be->comm[PRIME_RT_CHAN_P2P];
    uint64_t total = 0;
    for (int r = 1; r < w->ndev; r++) {
        total += recs[(size_t)r * REC_LEN + REC_EVENTS] * sizeof(PrimeTraceEvent);
        if (total > INT_MAX)
            return PRIME_ERR_NOMEM; /* more than one MPI call can carry */
    }
    if (total == 0)
        return PRIME_OK;
    int *counts = NULL, *displs = NULL;
    char *all = NULL;
    int ok = 1;
    if (be->rank == 0) {
        counts = calloc((size_t)w->ndev, sizeof *counts);
        displs = calloc((size_t)w->ndev, sizeof *displs);
        all = malloc((size_t)total);
        ok = counts && displs && all;
        for (int r = 1, at = 0; r < w->ndev && ok; r++) {
            counts[r] = (int)(recs[(size_t)r * REC_LEN + REC_EVENTS] * sizeof(PrimeTraceEvent));
            displs[r] = at;
            at += counts[r];
        }
    }
    /* The root says whether it has room before anyone sends. */
    PrimeStatus st = PRIME_OK;
    MPI_Request req;
    if (MPI_Ibcast(&ok, 1, MPI_INT, 0, comm, &req) != MPI_SUCCESS)
        st = PRIME_ERR_TRANSPORT;
    else
        st = coll_wait(w, &req, "trace exchange after the run (MPI_Ibcast)");
    if (st == PRIME_OK && !ok)
        st = PRIME_ERR_NOMEM;
    if (st == PRIME_OK) {
        const PrimeTrace *mine = &w->devs[be->rank].trace;
        int mine_bytes = be->rank == 0 ? 0 : (int)(mine->count * sizeof(PrimeTraceEvent));
        if (MPI_Igatherv(mine->events, mine_bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, comm,
                         &req) != MPI_SUCCESS)
            st = PRIME_ERR_TRANSPORT;
        else
            st = coll_wait(w, &req, "trace exchange after the run (MPI_Igatherv)");
    }
    for (int r = 1; r < w->ndev && st == PRIME_OK && be->rank == 0; r++) {
        size_t n = (size_t)counts[r] / sizeof(PrimeTraceEvent);
        if (!mirror_trace(&w->devs[r].trace, (const PrimeTraceEvent *)(all + displs[r]), n))
            st = PRIME_ERR_NOMEM;
    }
    free(counts);
    free(displs);
    free(all);
    return st;
}

/* Copies every rank's counters and status into the mirrors, on every
 * process, and every rank's trace events to the root. */
static PrimeStatus gather_counters(PrimeWorld *w) {
    PrimeWorldBackend *be = w->be;
    const PrimeDev *me = &w->devs[be->rank];
    uint64_t mine[REC_LEN];
    for (int k = 0; k < PRIME_BYTES_KIND_COUNT; k++)
        mine[REC_BYTES + k] = me->bytes_sent[k];
    mine[REC_CUR] = me->cur_bytes;
    mine[REC_PEAK] = me->peak_bytes;
    mine[REC_STATUS] = (uint64_t)me->status;
    mine[REC_EVENTS] = me->trace.count;
    uint64_t *recs = malloc((size_t)w->ndev * REC_LEN * sizeof *recs);
    int ok = recs != NULL, all_ok = 0;
    /* A process without room for the records still takes part, so that
     * the others are not left waiting, and then everyone gives up. */
    MPI_Request req;
    PrimeStatus st = PRIME_OK;
    if (MPI_Iallreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, be->comm[PRIME_RT_CHAN_P2P], &req) !=
        MPI_SUCCESS)
        st = PRIME_ERR_TRANSPORT;
    else
        st = coll_wait(w, &req, "counter exchange after the run (MPI_Iallreduce)");
    if (st == PRIME_OK && !all_ok)
        st = PRIME_ERR_NOMEM;
    if (st == PRIME_OK) {
        if (MPI_Iallgather(mine, REC_LEN, MPI_UINT64_T, recs, REC_LEN, MPI_UINT64_T,
                           be->comm[PRIME_RT_CHAN_P2P], &req) != MPI_SUCCESS)
            st = PRIME_ERR_TRANSPORT;
        else
            st = coll_wait(w, &req, "counter exchange after the run (MPI_Iallgather)");
    }
    if (st != PRIME_OK) {
        free(recs);
        return st;
    }
    for (int r = 0; r < w->ndev; r++) {
        if (r == be->rank)
            continue;
        PrimeDev *mirror = &w->devs[r];
        const uint64_t *rec = &recs[(size_t)r * REC_LEN];
        for (int k = 0; k < PRIME_BYTES_KIND_COUNT; k++)
            mirror->bytes_sent[k] = rec[REC_BYTES + k];
        mirror->cur_bytes = rec[REC_CUR];
        mirror->peak_bytes = rec[REC_PEAK];
        mirror->status = (PrimeStatus)rec[REC_STATUS];
    }
    st = gather_traces(w, recs);
    free(recs);
    return st;
}

/* Returns PRIME_ERR_ARG for a bad call or a run already in progress,
 * PRIME_ERR_TRANSPORT or PRIME_ERR_NOMEM when the counters cannot be
 * gathered, and otherwise, on every process alike, the sticky status of
 * the lowest-ranked device that has one, PRIME_OK if none. */
PrimeStatus prime_world_run(PrimeWorld *world, PrimeRankFn fn, void *arg) {
    if (!world || !fn)
        return PRIME_ERR_ARG;
    PrimeWorldBackend *be = world->be;
    if (be->running)
        return PRIME_ERR_ARG;
    if (be->broken)
        return PRIME_ERR_TIMEOUT;
    be->running = 1;
    fn(&world->devs[be->rank], arg);
    be->running = 0;
    /* The peers this process gave up on would never join the exchange. */
    if (be->broken)
        return PRIME_ERR_TIMEOUT;
    PrimeStatus st = gather_counters(world);
    if (st != PRIME_OK)
        return st;
    for (int i = 0; i < world->ndev; i++) {
        if (world->devs[i].status != PRIME_OK)
            return world->devs[i].status;
    }
    return PRIME_OK;
}

int prime_world_is_root(const PrimeWorld *world) {
    return world && world->be->rank == 0;
}

int prime_local_devices(int ndev) {
    (void)ndev;
    return 1;
}

PrimeStatus prime_world_share(PrimeWorld *world, void *buf, size_t bytes_per_rank) {
    if (!world || (!buf && bytes_per_rank > 0) || bytes_per_rank > INT_MAX || world->be->running)
        return PRIME_ERR_ARG;
    if (world->be->broken)
        return PRIME_ERR_TIMEOUT;
    if (bytes_per_rank == 0)
        return PRIME_OK;
    MPI_Request req;
    if (MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, (int)bytes_per_rank, MPI_BYTE,
                       world->be->comm[PRIME_RT_CHAN_P2P], &req) != MPI_SUCCESS)
        return PRIME_ERR_TRANSPORT;
    return coll_wait(world, &req, "prime_world_share (MPI_Iallgather)");
}

PrimeStatus prime_barrier(PrimeDev *dev) {
    if (!dev || !dev->be)
        return PRIME_ERR_ARG;
    PrimeWorld *w = dev->world;
    if (w->be->broken)
        return prime_rt_fail(dev, PRIME_ERR_ABORTED);
    MPI_Request req;
    if (MPI_Ibarrier(w->be->comm[PRIME_RT_CHAN_P2P], &req) != MPI_SUCCESS)
        return prime_rt_fail(dev, PRIME_ERR_TRANSPORT);
    int rc = MPI_SUCCESS;
    PollEnd end = poll_request(&req, MPI_STATUS_IGNORE, w->timeout_ns, &rc);
    if (end != POLL_DONE)
        return poll_failure(w, end, "barrier: not every device arrived");
    if (rc != MPI_SUCCESS)
        return prime_rt_fail(dev, PRIME_ERR_TRANSPORT);
    return PRIME_OK;
}

static void live_push(PrimeDevBackend *dev, MpiReq *r) {
    r->live_prev = NULL;
    r->live_next = dev->live;
    if (dev->live)
        dev->live->live_prev = r;
    dev->live = r;
}

static void live_remove(PrimeDevBackend *dev, MpiReq *r) {
    if (r->live_prev)
        r->live_prev->live_next = r->live_next;
    else
        dev->live = r->live_next;
    if (r->live_next)
        r->live_next->live_prev = r->live_prev;
}

/* Checks what both kinds of post share; NULL (with the error recorded in
 * *st) when the arguments are bad or no request can be allocated. */
static MpiReq *req_new(PrimeDev *dev, int peer, int tag, PrimeChannel channel, const void *buf,
                       size_t n, PrimeReq *req, PrimeStatus *st) {
    PrimeWorld *w = dev->world;
    if (!req || !dev->be || peer < 0 || peer >= w->ndev || (!buf && n > 0) || n > INT_MAX ||
        tag < 0 || tag > w->be->tag_ub || (int)channel < 0 || channel >= PRIME_RT_CHAN_COUNT) {
        *st = prime_rt_fail(dev, PRIME_ERR_ARG);
        return NULL;
    }
    if (w->be->broken) {
        *st = prime_rt_fail(dev, PRIME_ERR_ABORTED);
        return NULL;
    }
    MpiReq *r = calloc(1, sizeof *r);
    if (!r) {
        *st = prime_rt_fail(dev, PRIME_ERR_NOMEM);
        return NULL;
    }
    r->owner = dev->rank;
    r->peer = peer;
    r->tag = tag;
    r->channel = channel;
    r->n = n;
    return r;
}

PrimeStatus prime_rt_post_send(PrimeDev *dev, int dst, int tag, PrimeChannel channel,
                               const float *buf, size_t n, PrimeByteKind kind, PrimeReq *req) {
    if (!dev)
        return PRIME_ERR_ARG;
    if (req)
        req->impl = NULL;
    if ((int)kind < 0 || kind >= PRIME_BYTES_KIND_COUNT)
        return prime_rt_fail(dev, PRIME_ERR_ARG);
    PrimeStatus st = PRIME_OK;
    MpiReq *r = req_new(dev, dst, tag, channel, buf, n, req, &st);
    if (!r)
        return st;
    if (MPI_Isend(buf, (int)n, MPI_FLOAT, dst, tag, dev->world->be->comm[channel], &r->req) !=
        MPI_SUCCESS) {
        free(r);
        return prime_rt_fail(dev, PRIME_ERR_TRANSPORT);
    }
    dev->bytes_sent[kind] += (uint64_t)n * sizeof(float);
    live_push(dev->be, r);
    req->impl = r;
    return PRIME_OK;
}

PrimeStatus prime_rt_post_recv(PrimeDev *dev, int src, int tag, PrimeChannel channel, float *buf,
                               size_t n, PrimeReq *req) {
    if (!dev)
        return PRIME_ERR_ARG;
    if (req)
        req->impl = NULL;
    PrimeStatus st = PRIME_OK;
    MpiReq *r = req_new(dev, src, tag, channel, buf, n, req, &st);
    if (!r)
        return st;
    r->is_recv = 1;
    if (MPI_Irecv(buf, (int)n, MPI_FLOAT, src, tag, dev->world->be->comm[channel], &r->req) !=
        MPI_SUCCESS) {
        free(r);
        return prime_rt_fail(dev, PRIME_ERR_TRANSPORT);
    }
    live_push(dev->be, r);
    req->impl = r;
    return PRIME_OK;
}

/* Waiting for a request that failed to post (impl NULL), was already
 * waited for, or belongs to another device is PRIME_ERR_ARG; so is a
 * receive whose message had another size. */
PrimeStatus prime_wait(PrimeDev *dev, PrimeReq *req) {
    if (!dev)
        return PRIME_ERR_ARG;
    if (!req || !req->impl || !dev->be)
        return prime_rt_fail(dev, PRIME_ERR_ARG);
    MpiReq *r = req->impl;
    if (r->owner != dev->rank)
        return prime_rt_fail(dev, PRIME_ERR_ARG);
    MPI_Status status;
    PrimeStatus result = PRIME_OK;
    PrimeWorldBackend *be = dev->world->be;
    int rc = MPI_SUCCESS;
    PollEnd end = POLL_TIMEOUT;
    if (!be->broken)
        end = poll_request(&r->req, &status, dev->world->timeout_ns, &rc);
    if (end != POLL_DONE) {
        if (be->broken)
            result = prime_rt_fail(dev, PRIME_ERR_ABORTED);
        else {
            char detail[128];
            snprintf(detail, sizeof detail, "%s rank %d (tag %d%s) not completed",
                     r->is_recv ? "receive from" : "send to", r->peer, r->tag,
                     r->channel == PRIME_RT_CHAN_COLLECTIVE ? ", collective" : "");
            result = poll_failure(dev->world, end, detail);
        }
        /* Left to MPI: a receive that cannot be cancelled may still land. */
        if (r->is_recv)
            MPI_Cancel(&r->req);
        MPI_Request_free(&r->req);
    } else if (rc != MPI_SUCCESS) {
        int cls = MPI_ERR_OTHER;
        MPI_Error_class(rc, &cls);
        result = cls == MPI_ERR_TRUNCATE ? PRIME_ERR_ARG : PRIME_ERR_TRANSPORT;
    } else if (r->is_recv) {
        int count = 0;
        MPI_Get_count(&status, MPI_FLOAT, &count);
        if (count == MPI_UNDEFINED || (size_t)count != r->n)
            result = PRIME_ERR_ARG;
    }
    live_remove(dev->be, r);
    free(r);
    req->impl = NULL;
    return prime_rt_fail(dev, result);
}

/* Collectives run as rings of messages (collective.c). */
PrimeStatus prime_rt_collective_direct(PrimeDev *dev, int kind, int max, const int *group, int g,
                                       int pos, float *buf, size_t n, int tag, float *scratch,
                                       int *done) {
    (void)dev, (void)kind, (void)max, (void)group, (void)g, (void)pos, (void)buf, (void)n,
        (void)tag, (void)scratch;
    *done = 0;
    return PRIME_OK;
}
