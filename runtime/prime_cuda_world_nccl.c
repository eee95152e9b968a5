/*
 * prime_cuda_world_nccl.c — the NCCL world of the CUDA runtime: one
 * process per GPU, started by any launcher (torchrun, srun, a shell
 * loop) with the rendezvous of rendezvous.h; MPI is not needed.
 *
 * prime_world_create(ndev) requires ndev == the world size, opens the
 * rendezvous (rank 0 listens, the others connect; with an id file only,
 * no socket is opened), brings NCCL's unique id to every rank (over the
 * sockets, or rank 0 writes the file and the others read it) and creates
 * the communicator over all ranks on this process's GPU
 * (pnc_comm_init: non-blocking, with the world's deadline). The world
 * holds one PrimeDev per rank; only this process's runs, the others are
 * mirrors whose counters, status and failure text are copied in after
 * every prime_world_run, as the MPI backend does (internal.h), so the
 * driver's report and --check read every rank's counters anywhere; with
 * --trace, every rank's trace events reach rank 0's mirrors too, so rank
 * 0 writes the whole world's trace.
 *
 * The host-side exchanges (the counters, prime_world_share, the barrier)
 * are all-gathers over the rendezvous sockets, or, where the id came
 * from a file and there are no sockets, over NCCL through the GPU
 * (pnc_host_allgather). Every one has the world's deadline, and one that
 * fails breaks the world: later exchanges and runs fail at once. A
 * device call that failed (nccl_world_break) leaves the sockets usable,
 * so the counters' exchange still tells every process every rank's
 * status and failure. Either way the communicator is aborted
 * (ncclCommAbort) when the world goes, never destroyed.
 *
 * The transfers and collectives of the schedule are the NCCL table's
 * (prime_cuda_nccl.c); the transport functions here are for the host
 * table, which this world never installs, and refuse.
 */
#define _POSIX_C_SOURCE 200809L
#include "prime_cuda_nccl_dev.h"
#include "prime_cuda_world.h"
#include "prime_devops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* This process's device (the mirrors have none). */
struct PrimeDevBackend {
    int here;
};

struct PrimeWorldBackend {
    PrimeDevBackend local;
    int rank, gpu;
    int running;
    int broken;            /* a host exchange failed: no more of them */
    PrimeStatus broken_st; /* why: PRIME_ERR_TIMEOUT at a deadline, else PRIME_ERR_TRANSPORT */
    int comm_failed;       /* a device call failed: the communicator is aborted */
    PrimeRdv *rdv;         /* NULL: the id came from a file */
    PncComm *comm;
};

static PrimeRdvConfig nccl_cfg;
static int nccl_gpu;
static const char *nccl_name = "prime";

void nccl_world_configure(const PrimeRdvConfig *cfg, int gpu, const char *name);
void nccl_world_configure(const PrimeRdvConfig *cfg, int gpu, const char *name) {
    nccl_cfg = *cfg;
    nccl_gpu = gpu;
    nccl_name = name;
}

PncComm *nccl_world_comm(const PrimeWorld *world) {
    return world->be->comm;
}

int nccl_world_rank(const PrimeWorld *world) {
    return world->be->rank;
}

int nccl_world_gpu(const PrimeWorld *world) {
    return world->be->gpu;
}

void nccl_world_break(PrimeWorld *world) {
    world->be->comm_failed = 1;
}

int nccl_world_failed(const PrimeWorld *world) {
    return world->be->comm_failed || world->be->broken;
}

/* The deadline of the world's host-side waits, in seconds. */
static double timeout_s(const PrimeWorld *w) {
    uint64_t ns = w ? w->timeout_ns : prime_rt_default_timeout_ns();
    return ns ? (double)ns * 1e-9 : nccl_cfg.timeout_s;
}

/* The NCCL id on every rank: rank 0 makes it, the sockets or the file
 * bring it to the others. */
static int share_id(PrimeRdv *rdv, const PrimeRdvConfig *cfg, unsigned char *id, char *err,
                    size_t cap) {
    char why[400];
    if (cfg->rank == 0 && pnc_unique_id(id, why, sizeof why)) {
        snprintf(err, cap, "rank 0: %s", why);
        return -1;
    }
    if (cfg->world_size == 1)
        return 0;
    if (rdv)
        return prime_rdv_bcast(rdv, id, PNC_ID_BYTES, err, cap);
    if (cfg->rank == 0)
        return prime_rdv_id_write(cfg->id_file, 0, id, PNC_ID_BYTES, err, cap);
    return prime_rdv_id_read(cfg->id_file, cfg->rank, id, PNC_ID_BYTES, cfg->timeout_s, err, cap);
}

static void world_free(PrimeWorld *w) {
    PrimeWorldBackend *be = w->be;
    if (be) {
        if (be->broken || be->comm_failed)
            pnc_comm_abort(be->comm);
        else
            pnc_comm_destroy(be->comm);
        prime_rdv_close(be->rdv);
        free(be);
        w->be = NULL;
    }
    prime_rt_world_delete(w);
}

PrimeStatus nccl_prime_world_create(int ndev, PrimeWorld **out) {
    if (!out || ndev < 1)
        return PRIME_ERR_ARG;
    *out = NULL;
    PrimeRdvConfig cfg = nccl_cfg;
    if (cfg.world_size < 1)
        cfg.world_size = 1;
    if (cfg.rank < 0)
        cfg.rank = 0;
    cfg.timeout_s = timeout_s(NULL);
    char err[600];
    if (ndev != cfg.world_size) {
        fprintf(stderr, "%s: the mesh has %d devices, but the world size is %d\n", nccl_name, ndev,
                cfg.world_size);
        return PRIME_ERR_ARG;
    }
    PrimeWorld *w = prime_rt_world_new(ndev);
    PrimeWorldBackend *be = w ? calloc(1, sizeof *be) : NULL;
    if (!be) {
        free(be);
        if (w)
            prime_rt_world_delete(w);
        return PRIME_ERR_NOMEM;
    }
    w->be = be;
    be->rank = cfg.rank;
    be->gpu = nccl_gpu;
    unsigned char id[PNC_ID_BYTES];
    memset(id, 0, sizeof id);
    int use_sockets = cfg.world_size > 1 && cfg.host[0] && cfg.port > 0;
    int rc = use_sockets ? prime_rdv_open(&cfg, &be->rdv, err, sizeof err) : 0;
    if (!rc)
        rc = share_id(be->rdv, &cfg, id, err, sizeof err);
    PrimeStatus st = rc == PRIME_RDV_TIMEOUT ? PRIME_ERR_TIMEOUT
                     : rc                    ? PRIME_ERR_TRANSPORT
                                             : PRIME_OK;
    if (st == PRIME_OK) {
        char why[400];
        if (pnc_comm_init(&be->comm, cfg.world_size, id, cfg.rank, be->gpu, cfg.timeout_s, why,
                          sizeof why)) {
            snprintf(err, sizeof err, "rank %d: %s", cfg.rank, why);
            st = PRIME_ERR_DEVICE;
        }
    }
    if (st != PRIME_OK) {
        fprintf(stderr, "%s: %s\n", nccl_name, err);
        world_free(w);
        return st;
    }
    be->local.here = 1;
    w->devs[cfg.rank].be = &be->local;
    w->t0_ns = prime_rt_now_ns();
    prime_rt_tune_memory();
    *out = w;
    return PRIME_OK;
}

void nccl_prime_world_destroy(PrimeWorld *world) {
    if (world)
        world_free(world);
}

/* An all-gather of host bytes over the sockets or through NCCL; breaks
 * the world and says why (on stderr) when it fails: PRIME_ERR_TIMEOUT
 * when a deadline passed (exit 4), else PRIME_ERR_TRANSPORT (a peer that
 * went away; exit 3), then and at every later exchange. */
static PrimeStatus exchange(PrimeWorld *w, void *buf, size_t per_rank, const char *what) {
    PrimeWorldBackend *be = w->be;
    if (be->broken)
        return be->broken_st;
    if (!be->rdv && be->comm_failed)
        return PRIME_ERR_TRANSPORT;
    if (w->ndev == 1 || per_rank == 0)
        return PRIME_OK;
    char err[600], why[500];
    int failed = 0;
    if (be->rdv) {
        prime_rdv_set_timeout(be->rdv, timeout_s(w));
        failed = prime_rdv_allgather(be->rdv, buf, per_rank, why, sizeof why);
        if (failed)
            snprintf(err, sizeof err, "%s (%s)", why, what);
    } else {
        failed = pnc_host_allgather(be->comm, be->rank, w->ndev, buf, per_rank, timeout_s(w), why,
                                    sizeof why);
        if (failed)
            snprintf(err, sizeof err, "rank %d: %s (%s)", be->rank, why, what);
    }
    if (!failed)
        return PRIME_OK;
    fprintf(stderr, "%s: %s\n", nccl_name, err);
    be->broken = 1;
    be->broken_st = failed == PRIME_RDV_TIMEOUT ? PRIME_ERR_TIMEOUT : PRIME_ERR_TRANSPORT;
    return be->broken_st;
}

/* What a rank tells the others after a run. */
typedef struct Record {
    uint64_t bytes[PRIME_BYTES_KIND_COUNT];
    uint64_t cur, peak;
    uint64_t events; /* trace events recorded */
    int32_t status;
    char failure[PRIME_RT_FAILURE_MAX];
} Record;

/* Every rank's trace events to rank 0's mirrors (each rank's whole
 * timeline since the world began, as with MPI): an all-gather of as many
 * events per rank as the most any rank recorded. Their times are each
 * process's own, from its world's creation. */
static PrimeStatus gather_traces(PrimeWorld *w, const Record *recs) {
    uint64_t most = 0;
    for (int r = 0; r < w->ndev; ++r)
        most = recs[r].events > most ? recs[r].events : most;
    if (most == 0)
        return PRIME_OK;
    size_t per = (size_t)most * sizeof(PrimeTraceEvent);
    char *all = calloc((size_t)w->ndev, per);
    if (!all)
        return PRIME_ERR_NOMEM;
    int me = w->be->rank;
    const PrimeTrace *mine = &w->devs[me].trace;
    if (mine->count)
        memcpy(all + (size_t)me * per, mine->events, mine->count * sizeof(PrimeTraceEvent));
    PrimeStatus st = exchange(w, all, per, "the trace after the run");
    for (int r = 0; st == PRIME_OK && me == 0 && r < w->ndev; ++r) {
        PrimeTrace *t = &w->devs[r].trace;
        size_t n = (size_t)recs[r].events;
        if (r == me)
            continue;
        if (n > t->cap) {
            void *p = realloc(t->events, n * sizeof *t->events);
            if (!p) {
                st = PRIME_ERR_NOMEM;
                break;
            }
            t->events = p;
            t->cap = n;
        }
        if (n)
            memcpy(t->events, all + (size_t)r * per, n * sizeof *t->events);
        t->count = n;
    }
    free(all);
    return st;
}

static PrimeStatus gather_counters(PrimeWorld *w) {
    int me = w->be->rank;
    Record *recs = calloc((size_t)w->ndev, sizeof *recs);
    if (!recs)
        return PRIME_ERR_NOMEM;
    const PrimeDev *dev = &w->devs[me];
    Record *mine = &recs[me];
    memcpy(mine->bytes, dev->bytes_sent, sizeof mine->bytes);
    mine->cur = dev->cur_bytes;
    mine->peak = dev->peak_bytes;
    mine->events = dev->trace.count;
    mine->status = (int32_t)dev->status;
    snprintf(mine->failure, sizeof mine->failure, "%s", dev->failure);
    PrimeStatus st = exchange(w, recs, sizeof *recs, "the counters after the run");
    for (int r = 0; st == PRIME_OK && r < w->ndev; ++r) {
        if (r == me)
            continue;
        PrimeDev *mirror = &w->devs[r];
        memcpy(mirror->bytes_sent, recs[r].bytes, sizeof recs[r].bytes);
        mirror->cur_bytes = recs[r].cur;
        mirror->peak_bytes = recs[r].peak;
        mirror->status = (PrimeStatus)recs[r].status;
        memcpy(mirror->failure, recs[r].failure, sizeof mirror->failure);
        mirror->failure[sizeof mirror->failure - 1] = '\0';
    }
    if (st == PRIME_OK && w->trace_on)
        st = gather_traces(w, recs);
    free(recs);
    return st;
}

PrimeStatus nccl_prime_world_run(PrimeWorld *world, PrimeRankFn fn, void *arg) {
    if (!world || !fn || world->be->running)
        return PRIME_ERR_ARG;
    PrimeWorldBackend *be = world->be;
    if (be->broken)
        return be->broken_st;
    be->running = 1;
    fn(&world->devs[be->rank], arg);
    be->running = 0;
    /* A device call that failed or timed out may have left the peers
     * waiting in NCCL: the communicator goes with the world. */
    PrimeStatus st = gather_counters(world);
    if (st != PRIME_OK)
        return world->devs[be->rank].status != PRIME_OK ? world->devs[be->rank].status : st;
    for (int i = 0; i < world->ndev; i++)
        if (world->devs[i].status != PRIME_OK)
            return world->devs[i].status;
    return PRIME_OK;
}

int nccl_prime_world_is_root(const PrimeWorld *world) {
    return world && world->be->rank == 0;
}

int nccl_prime_local_devices(int ndev) {
    (void)ndev;
    return 1;
}

PrimeStatus nccl_prime_world_share(PrimeWorld *world, void *buf, size_t bytes_per_rank) {
    if (!world || (!buf && bytes_per_rank > 0) || world->be->running)
        return PRIME_ERR_ARG;
    return exchange(world, buf, bytes_per_rank, "prime_world_share");
}

PrimeStatus nccl_prime_barrier(PrimeDev *dev) {
    if (!dev || !dev->be)
        return PRIME_ERR_ARG;
    PrimeWorld *w = dev->world;
    unsigned char *all = calloc((size_t)w->ndev, 1);
    if (!all)
        return prime_rt_fail(dev, PRIME_ERR_NOMEM);
    PrimeStatus st = exchange(w, all, 1, "barrier");
    free(all);
    return st == PRIME_OK ? PRIME_OK : prime_rt_fail(dev, st);
}

/* An injected stall: this process stops answering until the launcher
 * ends it (the peers time out). */
void nccl_prime_rt_stall(PrimeDev *dev) {
    (void)dev;
    for (;;) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
}

/* The host table's transport: never installed in this world. */
PrimeStatus nccl_prime_rt_post_send(PrimeDev *dev, int dst, int tag, PrimeChannel channel,
                                    const float *buf, size_t n, PrimeByteKind kind, PrimeReq *req) {
    (void)dst, (void)tag, (void)channel, (void)buf, (void)n, (void)kind;
    req->impl = NULL;
    return prime_dev_fail_text(dev, PRIME_ERR_ARG, "host transfers are not part of the NCCL world");
}

PrimeStatus nccl_prime_rt_post_recv(PrimeDev *dev, int src, int tag, PrimeChannel channel,
                                    float *buf, size_t n, PrimeReq *req) {
    (void)src, (void)tag, (void)channel, (void)buf, (void)n;
    req->impl = NULL;
    return prime_dev_fail_text(dev, PRIME_ERR_ARG, "host transfers are not part of the NCCL world");
}

PrimeStatus nccl_prime_wait(PrimeDev *dev, PrimeReq *req) {
    (void)req;
    return prime_rt_fail(dev, PRIME_ERR_ARG);
}

PrimeStatus nccl_prime_rt_collective_direct(PrimeDev *dev, int kind, int max, const int *group,
                                            int g, int pos, float *buf, size_t n, int tag,
                                            float *scratch, int *done) {
    (void)kind, (void)max, (void)group, (void)g, (void)pos, (void)buf, (void)n, (void)tag,
        (void)scratch;
    *done = 1;
    return prime_dev_fail_text(dev, PRIME_ERR_ARG,
                               "host collectives are not part of the NCCL world");
}
