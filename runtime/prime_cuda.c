/*
 * prime_cuda.c — the CUDA runtime's table of device operations
 * (prime_devops.h) and prime_cuda_main (prime_cuda.h).
 *
 * cuda-local: the world is the threads backend's (a thread per device of
 * the mesh, world_threads.c), and every device is a virtual device on one
 * GPU (a PcuDev: a compute and a communication stream, a cuBLAS handle;
 * prime_cuda_dev.cu). The executor's operations become:
 *
 *   alloc / free   cudaMallocAsync / cudaFreeAsync on the compute stream,
 *                  counted as prime_alloc counts;
 *   kernel         the phase's function from M.cu on the compute stream;
 *   copy_box, add  kernels on the compute stream (these four, and
 *                  uploads and downloads, are prime_cuda_ops.c's, which
 *                  the NCCL table shares);
 *   send / recv    matched here, in posting order per (source,
 *                  destination, tag), as the threads transport matches;
 *                  the pair becomes one device-to-device copy on the
 *                  receiver's communication stream after the events that
 *                  say the sender's tile and the receiver's buffer are
 *                  ready on their compute streams; each side's wait makes
 *                  its compute stream wait for the copy's event;
 *   collectives    every member of the group meets here; member p reduces
 *                  chunk p of every member's buffer into a scratch of the
 *                  ring's size on its communication stream and writes it
 *                  back into every member's chunk p (all-reduce) or its
 *                  own (reduce-scatter); every member's compute stream
 *                  then waits for all of them. The bytes counted are the
 *                  ring's (prime_allreduce_bytes, ...), which the
 *                  compiler predicts; no bytes actually cross a link;
 *   finish         waits for both streams at the end of every phase and
 *                  reads the kernels' device time from their events.
 *
 * Without --local, prime_cuda_main runs the program in the NCCL world
 * instead (one process per GPU: prime_cuda_world_nccl.c, the table of
 * prime_cuda_nccl.c); it parses the options of both.
 *
 * Waits here poll the world's abort flag, so a device that failed (a
 * CUDA call: the world is aborted) or timed out releases every other.
 * Once the world is aborted nothing more is matched, and tiles are no
 * longer freed but kept until the world goes (a copy or a collective of
 * another device may still be reading them).
 */
#define _POSIX_C_SOURCE 200809L
#include "prime_cuda.h"

#include "prime_cuda_dev.h"
#include "prime_cuda_nccl.h"
#include "prime_cuda_ops.h"
#include "prime_cuda_world.h"
#include "prime_devops.h"
#include "threads_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_CAP 400
/* How often a wait looks at the world's abort flag. */
#define POLL_NS 20000000ull

typedef struct CudaWorld CudaWorld;

/* A posted send or receive until both sides waited for it. */
typedef struct Post {
    int send;
    int src, dst, tag;
    float *buf;
    size_t n;
    PcuEvent *ready; /* the buffer on the poster's compute stream */
    int matched;
    struct Post *partner; /* once matched */
    /* The send's: the copy, on the receiver's communication stream, or
     * why it could not be enqueued. */
    PcuEvent *done;
    char err[ERR_CAP];
    int refs;          /* a send: its own side and its receive's, until each waited */
    struct Post *next; /* unmatched: in the world's list */
} Post;

/* A collective while its members are in it. */
typedef struct Coll {
    int tag, gsize, combine, which;
    size_t n;
    int *ranks;
    int arrived, written, left, failed;
    float **bufs;
    PcuEvent **ready;
    PcuEvent **wrote;
    struct Coll *next;
} Coll;

/* Per device. */
typedef struct CudaDev {
    PcuOps ops; /* first: the table's state is a PcuOps */
    CudaWorld *cw;
    /* Tiles freed after the world aborted: another device's copy or
     * collective may still read them, so they go when the world does. */
    float **deferred;
    size_t ndeferred;
    size_t cap_deferred;
} CudaDev;

struct CudaWorld {
    const PrimeProgram *prog;
    PrimeCudaRunPhaseFn run_phase;
    int gpu;
    int *sched_index; /* per entry of prog->phases: the schedule's phase index */
    CudaDev *devs;    /* per rank */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int sync_ready;
    Post *unmatched; /* in posting order */
    Coll *colls;
};

static CudaDev *cuda_dev(PrimeDev *dev) {
    return prime_dev_ops_state(dev);
}

static int world_aborted(const PrimeDev *dev) {
    return atomic_load(&dev->world->be->aborted);
}

/* Keeps p until the world goes; 0 when out of memory. */
static int defer_free(CudaDev *cd, float *p) {
    if (cd->ndeferred == cd->cap_deferred) {
        size_t ncap = cd->cap_deferred ? 2 * cd->cap_deferred : 64;
        float **grown = realloc(cd->deferred, sizeof *grown * ncap);
        if (!grown)
            return 0;
        cd->deferred = grown;
        cd->cap_deferred = ncap;
    }
    cd->deferred[cd->ndeferred++] = p;
    return 1;
}

static void cuda_free(PrimeDev *dev, float *p, size_t n) {
    char err[ERR_CAP];
    if (!p)
        return;
    CudaDev *cd = cuda_dev(dev);
    if (!(world_aborted(dev) && defer_free(cd, p)) && pcu_free(cd->ops.pcu, p, err, sizeof err))
        pcu_ops_fail(dev, err);
    prime_dev_count_free(dev, n);
}

/* Waits on the world's condition variable (its mutex held) until woken,
 * the deadline (0: none) passed, or a poll interval went by. Returns 1
 * once the deadline has passed. */
static int wait_a_while(CudaWorld *cw, uint64_t deadline) {
    uint64_t now = prime_rt_now_ns(), until = now + POLL_NS;
    if (deadline && deadline <= now)
        return 1;
    if (deadline && deadline < until)
        until = deadline;
    prime_rt_cond_wait_until(&cw->cv, &cw->mu, until);
    return deadline && prime_rt_now_ns() >= deadline;
}

static void post_release(Post *p) {
    if (--p->refs > 0)
        return;
    pcu_event_free(p->ready);
    pcu_event_free(p->done);
    free(p);
}

/* Matches a new post with the first unmatched one of the other side for
 * the same (source, destination, tag); mutex held. The copy goes on the
 * receiver's communication stream. */
static void post_match(CudaWorld *cw, Post *p) {
    Post **link = &cw->unmatched;
    for (; *link; link = &(*link)->next) {
        Post *q = *link;
        if (q->send != p->send && q->src == p->src && q->dst == p->dst && q->tag == p->tag)
            break;
    }
    if (!*link) {
        Post **tail = &cw->unmatched;
        while (*tail)
            tail = &(*tail)->next;
        *tail = p;
        return;
    }
    Post *q = *link;
    *link = q->next;
    Post *s = p->send ? p : q, *r = p->send ? q : p;
    PcuDev *rd = cw->devs[r->dst].ops.pcu;
    if (s->n != r->n)
        snprintf(s->err, sizeof s->err,
                 "a message of %zu floats from rank %d met a receive of %zu floats", s->n, s->src,
                 r->n);
    else if (!pcu_after(rd, PCU_COMM, s->ready, s->err, sizeof s->err) &&
             !pcu_after(rd, PCU_COMM, r->ready, s->err, sizeof s->err) &&
             !pcu_copy(rd, PCU_COMM, r->buf, s->buf, s->n, s->err, sizeof s->err))
        pcu_mark(rd, PCU_COMM, &s->done, s->err, sizeof s->err);
    s->refs++; /* the receive's hold on the send's event */
    s->partner = r;
    r->partner = s;
    s->matched = r->matched = 1;
    pthread_cond_broadcast(&cw->cv);
}

static PrimeStatus cuda_post(PrimeDev *dev, int send, int peer, int tag, float *buf, size_t n,
                             PrimeReq *req) {
    CudaDev *cd = cuda_dev(dev);
    req->impl = NULL;
    if (peer < 0 || peer >= dev->world->ndev)
        return prime_rt_fail(dev, PRIME_ERR_ARG);
    if (prime_rt_fault_point(dev) != PRIME_OK)
        return PRIME_ERR_ABORTED;
    if (world_aborted(dev))
        return prime_rt_fail(dev, PRIME_ERR_ABORTED);
    Post *p = calloc(1, sizeof *p);
    if (!p)
        return prime_rt_fail(dev, PRIME_ERR_NOMEM);
    p->send = send;
    p->src = send ? dev->rank : peer;
    p->dst = send ? peer : dev->rank;
    p->tag = tag;
    p->buf = buf;
    p->n = n;
    p->refs = 1;
    char err[ERR_CAP];
    if (pcu_mark(cd->ops.pcu, PCU_COMPUTE, &p->ready, err, sizeof err)) {
        free(p);
        return pcu_ops_fail(dev, err);
    }
    pthread_mutex_lock(&cd->cw->mu);
    int aborted = world_aborted(dev);
    if (!aborted)
        post_match(cd->cw, p);
    pthread_mutex_unlock(&cd->cw->mu);
    if (aborted) {
        pcu_event_free(p->ready);
        free(p);
        return prime_rt_fail(dev, PRIME_ERR_ABORTED);
    }
    req->impl = p;
    return PRIME_OK;
}

static PrimeStatus cuda_isend(PrimeDev *dev, int dst, int tag, const float *buf, size_t n,
                              PrimeByteKind kind, PrimeReq *req) {
    if ((int)kind < 0 || kind >= PRIME_BYTES_KIND_COUNT)
        return prime_rt_fail(dev, PRIME_ERR_ARG);
    PrimeStatus st = cuda_post(dev, 1, dst, tag, (float *)buf, n, req);
    if (st == PRIME_OK)
        prime_dev_count_sent(dev, n, kind);
    return st;
}

static PrimeStatus cuda_irecv(PrimeDev *dev, int src, int tag, float *buf, size_t n,
                              PrimeReq *req) {
    return cuda_post(dev, 0, src, tag, buf, n, req);
}

static PrimeStatus cuda_wait(PrimeDev *dev, PrimeReq *req) {
    Post *p = req->impl;
    if (!p)
        return prime_dev_status(dev) != PRIME_OK ? prime_dev_status(dev) : PRIME_ERR_ARG;
    CudaDev *cd = cuda_dev(dev);
    CudaWorld *cw = cd->cw;
    uint64_t deadline = prime_rt_deadline(dev->world->timeout_ns);
    PrimeStatus st = PRIME_OK;
    pthread_mutex_lock(&cw->mu);
    while (!p->matched && st == PRIME_OK) {
        if (world_aborted(dev))
            st = prime_rt_fail(dev, PRIME_ERR_ABORTED);
        else if (wait_a_while(cw, deadline))
            st = prime_rt_note_timeout(dev, "%s rank %d (tag %d, %zu floats)",
                                       p->send ? "sending to" : "receiving from",
                                       p->send ? p->dst : p->src, p->tag, p->n);
    }
    if (st != PRIME_OK) {
        /* Left unmatched: freed with the world. */
        pthread_mutex_unlock(&cw->mu);
        req->impl = NULL;
        if (st == PRIME_ERR_TIMEOUT)
            prime_rt_world_abort(dev->world);
        return st;
    }
    Post *send = p->send ? p : p->partner;
    char err[ERR_CAP];
    snprintf(err, sizeof err, "%s", send->err);
    int failed = !send->done || pcu_after(cd->ops.pcu, PCU_COMPUTE, send->done, err, sizeof err);
    if (!p->send)
        post_release(send);
    post_release(p);
    pthread_mutex_unlock(&cw->mu);
    req->impl = NULL;
    if (failed)
        return pcu_ops_fail(dev, err);
    return PRIME_OK;
}

/* The collective of this device's call: the one in progress for the
 * same tag and group in which its position is free, else a new one;
 * mutex held. NULL when out of memory. */
static Coll *coll_join(CudaWorld *cw, const int *group, int gsize, int pos, int tag, size_t n,
                       int which, int combine) {
    for (Coll *c = cw->colls; c; c = c->next) {
        if (c->tag != tag || c->gsize != gsize || c->n != n || c->bufs[pos] || c->which != which ||
            c->combine != combine)
            continue;
        if (memcmp(c->ranks, group, sizeof(int) * (size_t)gsize) == 0)
            return c;
    }
    Coll *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ranks = malloc(sizeof(int) * (size_t)gsize);
    c->bufs = calloc((size_t)gsize, sizeof(float *));
    c->ready = calloc((size_t)gsize, sizeof(PcuEvent *));
    c->wrote = calloc((size_t)gsize, sizeof(PcuEvent *));
    if (!c->ranks || !c->bufs || !c->ready || !c->wrote) {
        free(c->ranks);
        free(c->bufs);
        free(c->ready);
        free(c->wrote);
        free(c);
        return NULL;
    }
    memcpy(c->ranks, group, sizeof(int) * (size_t)gsize);
    c->tag = tag;
    c->gsize = gsize;
    c->n = n;
    c->which = which;
    c->combine = combine;
    c->next = cw->colls;
    cw->colls = c;
    return c;
}

static void coll_free(CudaWorld *cw, Coll *c) {
    for (Coll **link = &cw->colls; *link; link = &(*link)->next)
        if (*link == c) {
            *link = c->next;
            break;
        }
    for (int i = 0; i < c->gsize; ++i) {
        pcu_event_free(c->ready[i]);
        pcu_event_free(c->wrote[i]);
    }
    free(c->ranks);
    free(c->bufs);
    free(c->ready);
    free(c->wrote);
    free(c);
}

/* Waits, mutex held, until *count reaches the group's size. */
static PrimeStatus coll_meet(PrimeDev *dev, CudaWorld *cw, const Coll *c, const int *count,
                             uint64_t deadline, const char *what) {
    while (*count < c->gsize) {
        if (world_aborted(dev))
            return prime_rt_fail(dev, PRIME_ERR_ABORTED);
        if (wait_a_while(cw, deadline))
            return prime_rt_note_timeout(dev, "in a collective of %d devices (tag %d): %d %s",
                                         c->gsize, c->tag, *count, what);
    }
    return PRIME_OK;
}

/* Member `pos`'s part on its communication stream: chunk pos of every
 * member's buffer combined into scratch (in position order) and written
 * back where the collective puts it. */
static int coll_reduce(CudaDev *cd, Coll *c, int pos, float *scratch, char *err, size_t cap) {
    size_t lo = prime_chunk_lo(c->n, c->gsize, pos), len = prime_chunk_len(c->n, c->gsize, pos);
    PcuDev *d = cd->ops.pcu;
    int max = c->combine == PRIME_COMBINE_MAX;
    for (int q = 0; q < c->gsize; ++q)
        if (pcu_after(d, PCU_COMM, c->ready[q], err, cap))
            return 1;
    if (c->which == PRIME_COLL_ALLGATHER) {
        /* An all-gather: this member's chunk into every other member's buffer. */
        for (int q = 0; q < c->gsize; ++q)
            if (q != pos &&
                pcu_copy(d, PCU_COMM, c->bufs[q] + lo, c->bufs[pos] + lo, len, err, cap))
                return 1;
        return pcu_mark(d, PCU_COMM, &c->wrote[pos], err, cap);
    }
    if (pcu_copy(d, PCU_COMM, scratch, c->bufs[0] + lo, len, err, cap))
        return 1;
    for (int q = 1; q < c->gsize; ++q)
        if (pcu_combine(d, PCU_COMM, scratch, c->bufs[q] + lo, len, max, err, cap))
            return 1;
    for (int q = 0; q < c->gsize; ++q)
        if ((c->which != PRIME_COLL_REDUCE_SCATTER || q == pos) &&
            pcu_copy(d, PCU_COMM, c->bufs[q] + lo, scratch, len, err, cap))
            return 1;
    return pcu_mark(d, PCU_COMM, &c->wrote[pos], err, cap);
}

static PrimeStatus cuda_collective(PrimeDev *dev, int which, int combine, const int *group,
                                   int gsize, float *buf, size_t n, int tag) {
    int pos = -1;
    for (int i = 0; group && i < gsize; ++i) {
        if (group[i] < 0 || group[i] >= dev->world->ndev)
            return prime_rt_fail(dev, PRIME_ERR_ARG);
        if (group[i] == dev->rank)
            pos = i;
    }
    if (pos < 0 || !buf)
        return prime_rt_fail(dev, PRIME_ERR_ARG);
    if (gsize == 1 || n == 0)
        return PRIME_OK;
    if (prime_rt_fault_point(dev) != PRIME_OK)
        return PRIME_ERR_ABORTED;
    CudaDev *cd = cuda_dev(dev);
    CudaWorld *cw = cd->cw;
    char err[ERR_CAP] = "";
    /* The ring's scratch, counted as the ring counts it. */
    size_t nscratch = which == PRIME_COLL_ALLGATHER ? 0 : prime_collective_scratch(n, gsize);
    float *scratch = nscratch ? pcu_ops_alloc(dev, nscratch, PRIME_COMBINE_SUM) : NULL;
    if (nscratch && !scratch)
        return prime_dev_status(dev);
    PcuEvent *ready = NULL;
    if (pcu_mark(cd->ops.pcu, PCU_COMPUTE, &ready, err, sizeof err)) {
        cuda_free(dev, scratch, nscratch);
        return pcu_ops_fail(dev, err);
    }
    uint64_t deadline = prime_rt_deadline(dev->world->timeout_ns);
    pthread_mutex_lock(&cw->mu);
    Coll *c = coll_join(cw, group, gsize, pos, tag, n, which, combine);
    PrimeStatus st = c ? PRIME_OK : prime_rt_fail(dev, PRIME_ERR_NOMEM);
    if (c) {
        c->bufs[pos] = buf;
        c->ready[pos] = ready;
        c->arrived++;
        pthread_cond_broadcast(&cw->cv);
        st = coll_meet(dev, cw, c, &c->arrived, deadline, "arrived");
    } else {
        pcu_event_free(ready);
    }
    if (st == PRIME_OK) {
        /* Enqueued outside the lock: only this member's chunk is touched. */
        pthread_mutex_unlock(&cw->mu);
        int failed = coll_reduce(cd, c, pos, scratch, err, sizeof err);
        pthread_mutex_lock(&cw->mu);
        c->failed |= failed;
        c->written++;
        pthread_cond_broadcast(&cw->cv);
        st = failed ? pcu_ops_fail(dev, err)
                    : coll_meet(dev, cw, c, &c->written, deadline, "finished reducing");
    }
    /* Every member's part, even in a reduce-scatter: the others read this
     * member's buffer, which its compute stream must not change before. */
    for (int q = 0; st == PRIME_OK && q < gsize; ++q) {
        if (c->failed || !c->wrote[q])
            st = prime_rt_fail(dev, PRIME_ERR_ABORTED);
        else if (pcu_after(cd->ops.pcu, PCU_COMPUTE, c->wrote[q], err, sizeof err))
            st = pcu_ops_fail(dev, err);
    }
    /* The last member out frees the events every member waited on. */
    if (c && st == PRIME_OK && ++c->left == gsize)
        coll_free(cw, c);
    pthread_mutex_unlock(&cw->mu);
    if (st == PRIME_ERR_TIMEOUT)
        prime_rt_world_abort(dev->world);
    if (st == PRIME_OK && scratch) {
        if (pcu_free(cd->ops.pcu, scratch, err, sizeof err))
            st = pcu_ops_fail(dev, err);
        prime_dev_count_free(dev, nscratch);
    } else if (st != PRIME_OK) {
        cuda_free(dev, scratch, nscratch);
    }
    uint64_t bytes = which == PRIME_COLL_ALLGATHER ? prime_allgather_bytes(n, gsize, pos)
                     : which == PRIME_COLL_REDUCE_SCATTER
                         ? prime_reduce_scatter_bytes(n, gsize, pos)
                         : prime_allreduce_bytes(n, gsize, pos);
    if (st == PRIME_OK)
        dev->bytes_sent[PRIME_BYTES_COLLECTIVE] += bytes;
    return st;
}

static PrimeStatus cuda_finish(PrimeDev *dev, uint64_t *kernel_ns, int *measured) {
    PrimeStatus st = pcu_ops_finish(dev, kernel_ns);
    if (st != PRIME_OK)
        return st;
    *measured = 1;
    return PRIME_OK;
}

static const PrimeDevOps cuda_ops = {
    .name = "cuda",
    .alloc = pcu_ops_alloc,
    .free = cuda_free,
    .upload = pcu_ops_upload,
    .download = pcu_ops_download,
    .copy_box = pcu_ops_copy_box,
    .kernel = pcu_ops_kernel,
    .kernel_fused = pcu_ops_kernel_fused,
    .combine = pcu_ops_combine,
    .isend = cuda_isend,
    .irecv = cuda_irecv,
    .wait = cuda_wait,
    .collective = cuda_collective,
    .finish = cuda_finish,
};

static void cuda_detach(PrimeWorld *world, void *arg) {
    CudaWorld *cw = arg;
    for (int r = 0; r < world->ndev; ++r)
        prime_dev_set_ops(&world->devs[r], NULL, NULL);
    for (int r = 0; cw->devs && r < world->ndev; ++r) {
        CudaDev *cd = &cw->devs[r];
        char err[ERR_CAP];
        for (size_t i = 0; i < cd->ndeferred; ++i)
            (void)pcu_free(cd->ops.pcu, cd->deferred[i], err, sizeof err);
        free(cd->deferred);
        pcu_close(cd->ops.pcu);
    }
    while (cw->unmatched) {
        Post *p = cw->unmatched;
        cw->unmatched = p->next;
        pcu_event_free(p->ready);
        free(p);
    }
    while (cw->colls)
        coll_free(cw, cw->colls);
    free(cw->devs);
    free(cw->sched_index);
    cw->devs = NULL;
    cw->sched_index = NULL;
    if (cw->sync_ready) {
        pthread_cond_destroy(&cw->cv);
        pthread_mutex_destroy(&cw->mu);
        cw->sync_ready = 0;
    }
}

/* One virtual device per rank, every one on cw->gpu. */
static PrimeStatus cuda_attach(PrimeWorld *world, void *arg) {
    CudaWorld *cw = arg;
    const char *name = cw->prog->name;
    cw->devs = calloc((size_t)world->ndev, sizeof *cw->devs);
    cw->sched_index = prime_cuda_schedule_indices(cw->prog);
    if (!cw->devs || !cw->sched_index || pthread_mutex_init(&cw->mu, NULL) != 0) {
        fprintf(stderr, "%s: out of memory\n", name);
        free(cw->devs);
        free(cw->sched_index);
        cw->devs = NULL;
        cw->sched_index = NULL;
        return PRIME_ERR_NOMEM;
    }
    if (prime_rt_cond_init(&cw->cv) != 0) {
        pthread_mutex_destroy(&cw->mu);
        fprintf(stderr, "%s: cannot create a condition variable\n", name);
        free(cw->devs);
        free(cw->sched_index);
        cw->devs = NULL;
        cw->sched_index = NULL;
        return PRIME_ERR_TRANSPORT;
    }
    cw->sync_ready = 1;
    for (int r = 0; r < world->ndev; ++r) {
        char err[ERR_CAP];
        CudaDev *cd = &cw->devs[r];
        cd->cw = cw;
        cd->ops.prog = cw->prog;
        cd->ops.run_phase = cw->run_phase;
        cd->ops.sched_index = cw->sched_index;
        cd->ops.fail_world = prime_rt_world_abort;
        if (pcu_open(cw->gpu, &cd->ops.pcu, err, sizeof err)) {
            fprintf(stderr, "%s: rank %d on GPU %d: %s\n", name, r, cw->gpu, err);
            cuda_detach(world, cw);
            return PRIME_ERR_DEVICE;
        }
        prime_dev_set_ops(&world->devs[r], &cuda_ops, cd);
    }
    return PRIME_OK;
}

static void cuda_usage(const char *argv0) {
    fprintf(stderr,
            "CUDA options of %s (docs/cuda.md):\n"
            "  --local              every device of the mesh on one GPU\n"
            "  --gpu N              the GPU to use (default: LOCAL_RANK, else the rank modulo "
            "the GPUs)\n"
            "  one process per GPU over NCCL (without --local), each process given\n"
            "  --rank N             its rank (or RANK)\n"
            "  --world-size N       the number of processes, the mesh's devices (or "
            "WORLD_SIZE)\n"
            "  --master ADDR:PORT   where rank 0 listens (or MASTER_ADDR, MASTER_PORT)\n"
            "  --nccl-id-file PATH  or a file through which rank 0 passes NCCL's id\n",
            argv0);
}

/* The CUDA program's own options, taken out of argv. */
typedef struct CudaOpts {
    int local, gpu, help;
    PrimeRdvConfig rdv;
    char env_err[300]; /* a bad rendezvous variable, for a run without --local */
} CudaOpts;

/* Takes the CUDA options out of argv into o and the rest into rest;
 * returns 0, or 2 after saying what is wrong. */
static int cuda_options(const PrimeProgram *prog, int argc, char **argv, CudaOpts *o, char **rest,
                        int *nrest) {
    memset(o, 0, sizeof *o);
    o->gpu = -1;
    prime_rdv_config_init(&o->rdv);
    (void)prime_rdv_config_env(&o->rdv, o->env_err, sizeof o->env_err);
    char err[300];
    for (int i = 0; i < argc; ++i) {
        const char *a = argv[i];
        int took = i > 0 ? prime_rdv_config_option(&o->rdv, argc, argv, &i, err, sizeof err) : 0;
        if (took < 0) {
            fprintf(stderr, "%s: %s\n", prog->name, err);
            return 2;
        }
        if (took)
            continue;
        if (i > 0 && strcmp(a, "--local") == 0) {
            o->local = 1;
        } else if (i > 0 && strcmp(a, "--gpu") == 0) {
            char *end = NULL;
            long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
            if (i + 1 >= argc || !end || *end || end == argv[i + 1] || v < 0 || v > 1023) {
                fprintf(stderr, "%s: --gpu needs a GPU number from 0 to 1023\n", prog->name);
                return 2;
            }
            o->gpu = (int)v;
            ++i;
        } else {
            o->help |= i > 0 && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0);
            rest[(*nrest)++] = argv[i];
        }
    }
    return 0;
}

/* A run without --local: the world it names must be the mesh's; 0, or 2
 * after saying why not. */
static int nccl_world_check(const PrimeProgram *prog, CudaOpts *o) {
    PrimeRdvConfig *cfg = &o->rdv;
    char err[400];
    if (o->env_err[0]) {
        fprintf(stderr, "%s: %s\n", prog->name, o->env_err);
        return 2;
    }
    if (cfg->world_size < 0 && prog->ndev == 1)
        cfg->world_size = 1; /* one device: a world of one process */
    if (cfg->world_size < 0 && cfg->rank < 0) {
        fprintf(
            stderr,
            "%s: the mesh has %d devices: run one process per GPU, each with its RANK and "
            "WORLD_SIZE=%d (or --rank, --world-size) and rank 0's address (MASTER_ADDR and "
            "MASTER_PORT, --master or --nccl-id-file), or all of them on one GPU with --local\n",
            prog->name, prog->ndev, prog->ndev);
        return 2;
    }
    if (prime_rdv_config_check(cfg, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", prog->name, err);
        return 2;
    }
    if (cfg->world_size != prog->ndev) {
        fprintf(stderr, "%s: the mesh has %d devices, but the world size is %d\n", prog->name,
                prog->ndev, cfg->world_size);
        return 2;
    }
    if (cfg->rank < 0)
        cfg->rank = 0;
#ifndef PRIME_CUDA_HAVE_NCCL
    fprintf(stderr,
            "%s: one process per GPU needs NCCL, and this runtime was built without it: run "
            "with --local (all %d devices of the mesh on one GPU)\n",
            prog->name, prog->ndev);
    return 2;
#else
    return 0;
#endif
}

/* The GPU: --gpu, else LOCAL_RANK, else the rank modulo the GPUs
 * (cuda-local: 0); 0, or 2 without a CUDA device. */
static int choose_gpu(const PrimeProgram *prog, CudaOpts *o) {
    int count = 0;
    char err[ERR_CAP];
    if (pcu_device_count(&count, err, sizeof err)) {
        fprintf(stderr, "%s: no CUDA device: %s\n", prog->name, err);
        return 2;
    }
    int gpu = o->gpu;
    if (gpu < 0)
        gpu = o->local ? 0 : o->rdv.local_rank >= 0 ? o->rdv.local_rank : o->rdv.rank % count;
    if (gpu >= count) {
        fprintf(stderr, "%s: no CUDA device: %s %d, but %d GPU%s\n", prog->name,
                o->gpu >= 0 ? "--gpu" : "LOCAL_RANK", gpu, count, count == 1 ? "" : "s");
        return 2;
    }
    o->gpu = gpu;
    return 0;
}

int prime_cuda_main(const PrimeProgram *prog, PrimeCudaRunPhaseFn run_phase, int argc,
                    char **argv) {
    return prime_cuda_main_dtype(prog, run_phase, NULL, argc, argv);
}

int prime_cuda_main_dtype(const PrimeProgram *prog, PrimeCudaRunPhaseFn run_phase,
                          const char *gemm_dtype, int argc, char **argv) {
    prime_blas_choose_core(argv); /* with every option, before they are taken out */
    /* The CUDA options come out; the rest goes to the driver. */
    char **rest = calloc((size_t)argc + 1, sizeof(char *));
    if (!rest) {
        fprintf(stderr, "%s: out of memory\n", prog->name);
        return 3;
    }
    int nrest = 0;
    CudaOpts o;
    int rc = cuda_options(prog, argc, argv, &o, rest, &nrest);
    if (o.help)
        cuda_usage(argv[0]);
    if (rc == 0 && !o.help && !o.local)
        rc = nccl_world_check(prog, &o);
    if (rc == 0 && !o.help)
        rc = choose_gpu(prog, &o);
    if (rc == 0 && (o.local || o.help)) {
        CudaWorld cw;
        memset(&cw, 0, sizeof cw);
        cw.prog = prog;
        cw.run_phase = run_phase;
        cw.gpu = o.gpu < 0 ? 0 : o.gpu;
#ifdef PRIME_CUDA_HAVE_NCCL
        prime_cuda_world_select(0, NULL, 0, prog->name);
#endif
        PrimeProgramDevice device = {"cuda", cuda_attach, cuda_detach, &cw, gemm_dtype};
        rc = prime_program_main_device(prog, &device, nrest, rest);
    }
#ifdef PRIME_CUDA_HAVE_NCCL
    else if (rc == 0) {
        PrimeCudaNccl cn = {prog, run_phase, NULL};
        prime_cuda_world_select(1, &o.rdv, o.gpu, prog->name);
        PrimeProgramDevice device = {"cuda", prime_cuda_nccl_attach, prime_cuda_nccl_detach, &cn,
                                     gemm_dtype};
        rc = prime_program_main_device(prog, &device, nrest, rest);
    }
#endif
    free(rest);
    return rc;
}
