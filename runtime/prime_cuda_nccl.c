/*
 * prime_cuda_nccl.c — the CUDA table of device operations in the NCCL
 * world (prime_cuda_world_nccl.c): this process's device of the mesh on
 * its GPU (a PcuDev: a compute and a communication stream, a cuBLAS
 * handle; prime_cuda_dev.cu).
 *
 *   alloc .. combine  cuda-local's (prime_cuda_ops.c): stream-ordered
 *                     memory, the phase's kernel from M.cu (after the
 *                     batching point, below), box copies and combines on
 *                     the compute stream;
 *   isend / irecv     queued with an event that says the buffer is ready
 *                     on the compute stream, and counted (a send) when
 *                     posted. The queue is the batching point: at the
 *                     next kernel, wait, collective or end of phase,
 *                     every queued post becomes one NCCL group
 *                     (ncclGroupStart, ncclSend / ncclRecv, ncclGroupEnd)
 *                     on the communication stream after the posts'
 *                     events, so a step's shifts, posted before its
 *                     kernels, run on the communication stream while the
 *                     kernels run on the compute stream. Messages between
 *                     two ranks match in posting order (NCCL's), as the
 *                     schedule posts them; tags are not sent;
 *   wait              the compute stream waits for the group's event (no
 *                     host wait);
 *   collective        ncclAllReduce, ncclReduceScatter, ncclAllGather in
 *                     place on the communication stream, ordered by
 *                     events both ways: over the world's communicator
 *                     when the group is the whole world in rank order,
 *                     else over a communicator of the group's own, made
 *                     at its first collective (the group's first member
 *                     makes an id and sends it to the others over the
 *                     world's communicator). Chunks that do not divide
 *                     evenly: the reduce-scatter is an all-reduce and the
 *                     all-gather a group of broadcasts. The bytes and the
 *                     scratch counted are the ring's, as the compiler
 *                     predicts them;
 *   finish            polls both streams and the communicator's
 *                     asynchronous error until the phase is done (the
 *                     world's deadline; then ncclCommAbort), and reads
 *                     the kernels' device time.
 *
 * A failure names the rank and the call, breaks the world (its
 * communicator is aborted when it goes) and makes every later operation
 * fail at once.
 */
#define _POSIX_C_SOURCE 200809L
#include "prime_cuda_nccl.h"

#include "internal.h"
#include "prime_cuda_dev.h"
#include "prime_cuda_nccl_dev.h"
#include "prime_cuda_ops.h"
#include "prime_cuda_world.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_CAP 400

/* The event after one NCCL group, held by each of its posts. */
typedef struct Batch {
    PcuEvent *done;
    int refs;
} Batch;

typedef struct Post {
    int send, peer;
    float *buf;
    size_t n;
    PcuEvent *ready;
    Batch *batch;      /* once launched */
    struct Post *next; /* queued */
} Post;

/* A communicator of a group that is not the whole world. */
typedef struct SubComm {
    int gsize;
    int *ranks;
    PncComm *comm;
    struct SubComm *next;
} SubComm;

typedef struct NcclDev {
    PcuOps ops; /* first: the table's state is a PcuOps */
    int *sched_index;
    PncComm *world_comm;
    Post *queue, **tail;
    SubComm *subs;
} NcclDev;

static NcclDev *nccl_dev(PrimeDev *dev) {
    return prime_dev_ops_state(dev);
}

static double timeout_s(const PrimeDev *dev) {
    uint64_t ns = dev->world->timeout_ns;
    return ns ? (double)ns * 1e-9 : 600.0;
}

static void batch_release(Batch *b) {
    if (b && --b->refs == 0) {
        pcu_event_free(b->done);
        free(b);
    }
}

/* The batching point: every queued post as one NCCL group on the
 * communication stream, after the events of its buffers. */
static PrimeStatus flush(PrimeDev *dev) {
    NcclDev *nd = nccl_dev(dev);
    if (!nd->queue)
        return PRIME_OK;
    char err[ERR_CAP], why[ERR_CAP];
    Batch *b = calloc(1, sizeof *b);
    if (!b)
        return prime_rt_fail(dev, PRIME_ERR_NOMEM);
    int failed = 0, started = 0;
    for (Post *p = nd->queue; p && !failed; p = p->next)
        failed = pcu_after(nd->ops.pcu, PCU_COMM, p->ready, err, sizeof err);
    if (!failed)
        started = !(failed = pnc_group_start(err, sizeof err));
    for (Post *p = nd->queue; p && !failed; p = p->next)
        failed = p->send ? pnc_send(nd->world_comm, nd->ops.pcu, PCU_COMM, p->buf, p->n, p->peer,
                                    err, sizeof err)
                         : pnc_recv(nd->world_comm, nd->ops.pcu, PCU_COMM, p->buf, p->n, p->peer,
                                    err, sizeof err);
    /* A group once started is always ended, whatever failed inside. */
    if (started && pnc_group_end(nd->world_comm, timeout_s(dev), why, sizeof why) && !failed) {
        snprintf(err, sizeof err, "%s", why);
        failed = 1;
    }
    if (!failed)
        failed = pcu_mark(nd->ops.pcu, PCU_COMM, &b->done, err, sizeof err);
    for (Post *p = nd->queue, *next; p; p = next) {
        next = p->next;
        p->next = NULL;
        p->batch = b;
        b->refs++;
    }
    nd->queue = NULL;
    nd->tail = &nd->queue;
    if (failed)
        return pcu_ops_fail(dev, err);
    return PRIME_OK;
}

static PrimeStatus nccl_post(PrimeDev *dev, int send, int peer, float *buf, size_t n,
                             PrimeReq *req) {
    NcclDev *nd = nccl_dev(dev);
    req->impl = NULL;
    if (peer < 0 || peer >= dev->world->ndev)
        return prime_rt_fail(dev, PRIME_ERR_ARG);
    if (prime_rt_fault_point(dev) != PRIME_OK)
        return PRIME_ERR_ABORTED;
    Post *p = calloc(1, sizeof *p);
    if (!p)
        return prime_rt_fail(dev, PRIME_ERR_NOMEM);
    p->send = send;
    p->peer = peer;
    p->buf = buf;
    p->n = n;
    char err[ERR_CAP];
    if (pcu_mark(nd->ops.pcu, PCU_COMPUTE, &p->ready, err, sizeof err)) {
        free(p);
        return pcu_ops_fail(dev, err);
    }
    *nd->tail = p;
    nd->tail = &p->next;
    req->impl = p;
    return PRIME_OK;
}

static PrimeStatus nccl_isend(PrimeDev *dev, int dst, int tag, const float *buf, size_t n,
                              PrimeByteKind kind, PrimeReq *req) {
    (void)tag;
    if ((int)kind < 0 || kind >= PRIME_BYTES_KIND_COUNT)
        return prime_rt_fail(dev, PRIME_ERR_ARG);
    PrimeStatus st = nccl_post(dev, 1, dst, (float *)buf, n, req);
    if (st == PRIME_OK)
        prime_dev_count_sent(dev, n, kind);
    return st;
}

static PrimeStatus nccl_irecv(PrimeDev *dev, int src, int tag, float *buf, size_t n,
                              PrimeReq *req) {
    (void)tag;
    return nccl_post(dev, 0, src, buf, n, req);
}

static PrimeStatus nccl_wait(PrimeDev *dev, PrimeReq *req) {
    Post *p = req->impl;
    if (!p)
        return prime_dev_status(dev) != PRIME_OK ? prime_dev_status(dev) : PRIME_ERR_ARG;
    NcclDev *nd = nccl_dev(dev);
    PrimeStatus st = p->batch ? PRIME_OK : flush(dev);
    char err[ERR_CAP];
    /* A group that failed has no event: its failure is the device's. */
    if (st == PRIME_OK && (!p->batch || !p->batch->done))
        st = prime_dev_status(dev) != PRIME_OK ? prime_dev_status(dev) : PRIME_ERR_ABORTED;
    else if (st == PRIME_OK && pcu_after(nd->ops.pcu, PCU_COMPUTE, p->batch->done, err, sizeof err))
        st = pcu_ops_fail(dev, err);
    batch_release(p->batch);
    pcu_event_free(p->ready);
    free(p);
    req->impl = NULL;
    return st;
}

/* Member 0 of a group makes an id; it reaches the other members over the
 * world's communicator (as 32 floats through the GPU). */
static int group_id(PrimeDev *dev, const int *group, int gsize, int pos, unsigned char *id,
                    char *err, size_t cap) {
    NcclDev *nd = nccl_dev(dev);
    enum { NF = PNC_ID_BYTES / sizeof(float) };
    float host[NF], *dbuf = NULL;
    memset(host, 0, sizeof host);
    if (pos == 0 && pnc_unique_id(host, err, cap))
        return 1;
    if (pcu_alloc(nd->ops.pcu, &dbuf, NF, 0, err, cap))
        return 1;
    int failed = pcu_upload(nd->ops.pcu, dbuf, host, NF, err, cap), started = 0;
    if (!failed)
        started = !(failed = pnc_group_start(err, cap));
    for (int q = 1; !failed && q < gsize; ++q)
        if (pos == 0)
            failed = pnc_send(nd->world_comm, nd->ops.pcu, PCU_COMM, dbuf, NF, group[q], err, cap);
    if (!failed && pos != 0)
        failed = pnc_recv(nd->world_comm, nd->ops.pcu, PCU_COMM, dbuf, NF, group[0], err, cap);
    char why[ERR_CAP];
    if (started && pnc_group_end(nd->world_comm, timeout_s(dev), why, sizeof why) && !failed) {
        snprintf(err, cap, "%s", why);
        failed = 1;
    }
    failed = failed || pnc_sync(nd->world_comm, nd->ops.pcu, timeout_s(dev), err, cap) ||
             pcu_download(nd->ops.pcu, host, dbuf, NF, err, cap);
    (void)pcu_free(nd->ops.pcu, dbuf, why, sizeof why);
    memcpy(id, host, PNC_ID_BYTES);
    return failed;
}

/* The communicator of a group: the world's for the whole world in rank
 * order, else the group's own (made at its first use); NULL on failure
 * (the device's status says why). */
static PncComm *group_comm(PrimeDev *dev, const int *group, int gsize, int pos) {
    NcclDev *nd = nccl_dev(dev);
    int whole = gsize == dev->world->ndev;
    for (int i = 0; whole && i < gsize; ++i)
        whole = group[i] == i;
    if (whole)
        return nd->world_comm;
    for (SubComm *s = nd->subs; s; s = s->next)
        if (s->gsize == gsize && memcmp(s->ranks, group, sizeof(int) * (size_t)gsize) == 0)
            return s->comm;
    SubComm *s = calloc(1, sizeof *s);
    int *ranks = malloc(sizeof(int) * (size_t)gsize);
    if (!s || !ranks) {
        free(s);
        free(ranks);
        prime_rt_fail(dev, PRIME_ERR_NOMEM);
        return NULL;
    }
    unsigned char id[PNC_ID_BYTES];
    char err[ERR_CAP + 100], why[ERR_CAP];
    if (group_id(dev, group, gsize, pos, id, why, sizeof why) ||
        pnc_comm_init(&s->comm, gsize, id, pos, nccl_world_gpu(dev->world), timeout_s(dev), why,
                      sizeof why)) {
        snprintf(err, sizeof err, "the communicator of a group of %d ranks from rank %d: %s", gsize,
                 group[0], why);
        free(s);
        free(ranks);
        pcu_ops_fail(dev, err);
        return NULL;
    }
    memcpy(ranks, group, sizeof(int) * (size_t)gsize);
    s->ranks = ranks;
    s->gsize = gsize;
    s->next = nd->subs;
    nd->subs = s;
    return s->comm;
}

/* The collective itself on the communication stream. */
static int run_collective(PrimeDev *dev, PncComm *comm, int which, int combine, int gsize, int pos,
                          float *buf, size_t n, char *err, size_t cap) {
    NcclDev *nd = nccl_dev(dev);
    double t = timeout_s(dev);
    int max = combine == PRIME_COMBINE_MAX, even = n % (size_t)gsize == 0;
    if (which == PRIME_COLL_ALLREDUCE || (which == PRIME_COLL_REDUCE_SCATTER && !even))
        return pnc_allreduce(comm, nd->ops.pcu, PCU_COMM, buf, n, max, t, err, cap);
    if (which == PRIME_COLL_REDUCE_SCATTER)
        return pnc_reduce_scatter(comm, nd->ops.pcu, PCU_COMM, buf, n / (size_t)gsize, pos, max, t,
                                  err, cap);
    if (even)
        return pnc_allgather(comm, nd->ops.pcu, PCU_COMM, buf, n / (size_t)gsize, pos, t, err, cap);
    /* Uneven chunks: member c broadcasts chunk c. */
    if (pnc_group_start(err, cap))
        return 1;
    int failed = 0;
    for (int c = 0; !failed && c < gsize; ++c)
        failed = pnc_bcast(comm, nd->ops.pcu, PCU_COMM, buf + prime_chunk_lo(n, gsize, c),
                           prime_chunk_len(n, gsize, c), c, t, err, cap);
    char why[ERR_CAP];
    if (pnc_group_end(comm, t, why, sizeof why) && !failed) {
        snprintf(err, cap, "%s", why);
        failed = 1;
    }
    return failed;
}

static PrimeStatus nccl_collective(PrimeDev *dev, int which, int combine, const int *group,
                                   int gsize, float *buf, size_t n, int tag) {
    (void)tag;
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
    PrimeStatus st = flush(dev);
    if (st != PRIME_OK)
        return st;
    PncComm *comm = group_comm(dev, group, gsize, pos);
    if (!comm)
        return prime_dev_status(dev);
    NcclDev *nd = nccl_dev(dev);
    /* The ring's scratch, counted as the ring counts it (NCCL needs none
     * of the runtime's). */
    size_t nscratch = which == PRIME_COLL_ALLGATHER ? 0 : prime_collective_scratch(n, gsize);
    prime_dev_count_alloc(dev, nscratch);
    char err[ERR_CAP + 100], call[ERR_CAP];
    PcuEvent *ready = NULL, *done = NULL;
    int failed = pcu_mark(nd->ops.pcu, PCU_COMPUTE, &ready, err, sizeof err) ||
                 pcu_after(nd->ops.pcu, PCU_COMM, ready, err, sizeof err);
    if (!failed &&
        run_collective(dev, comm, which, combine, gsize, pos, buf, n, call, sizeof call)) {
        snprintf(err, sizeof err, "%s (a group of %d from rank %d, %zu floats)", call, gsize,
                 group[0], n);
        failed = 1;
    }
    failed = failed || pcu_mark(nd->ops.pcu, PCU_COMM, &done, err, sizeof err) ||
             pcu_after(nd->ops.pcu, PCU_COMPUTE, done, err, sizeof err);
    pcu_event_free(ready);
    pcu_event_free(done);
    prime_dev_count_free(dev, nscratch);
    if (failed)
        return pcu_ops_fail(dev, err);
    uint64_t bytes = which == PRIME_COLL_ALLGATHER ? prime_allgather_bytes(n, gsize, pos)
                     : which == PRIME_COLL_REDUCE_SCATTER
                         ? prime_reduce_scatter_bytes(n, gsize, pos)
                         : prime_allreduce_bytes(n, gsize, pos);
    dev->bytes_sent[PRIME_BYTES_COLLECTIVE] += bytes;
    return PRIME_OK;
}

static PrimeStatus nccl_finish(PrimeDev *dev, uint64_t *kernel_ns, int *measured) {
    NcclDev *nd = nccl_dev(dev);
    PrimeStatus st = flush(dev);
    if (st != PRIME_OK)
        return st;
    char err[ERR_CAP];
    /* Polled with the deadline, so that a peer that went away aborts the
     * communicator rather than leaving the streams waiting. */
    if (pnc_sync(nd->world_comm, nd->ops.pcu, timeout_s(dev), err, sizeof err))
        return pcu_ops_fail(dev, err);
    st = pcu_ops_finish(dev, kernel_ns);
    if (st != PRIME_OK)
        return st;
    *measured = 1;
    return PRIME_OK;
}

static const PrimeDevOps nccl_ops = {
    .name = "cuda-nccl",
    .alloc = pcu_ops_alloc,
    .free = pcu_ops_free,
    .upload = pcu_ops_upload,
    .download = pcu_ops_download,
    .copy_box = pcu_ops_copy_box,
    .kernel = pcu_ops_kernel,
    .kernel_fused = pcu_ops_kernel_fused,
    .combine = pcu_ops_combine,
    .isend = nccl_isend,
    .irecv = nccl_irecv,
    .wait = nccl_wait,
    .collective = nccl_collective,
    .finish = nccl_finish,
};

void prime_cuda_nccl_detach(PrimeWorld *world, void *arg) {
    PrimeCudaNccl *cn = arg;
    NcclDev *nd = cn->state;
    int me = nccl_world_rank(world);
    prime_dev_set_ops(&world->devs[me], NULL, NULL);
    if (!nd)
        return;
    while (nd->queue) {
        Post *p = nd->queue;
        nd->queue = p->next;
        pcu_event_free(p->ready);
        free(p);
    }
    int failed = nccl_world_failed(world);
    while (nd->subs) {
        SubComm *s = nd->subs;
        nd->subs = s->next;
        if (failed)
            pnc_comm_abort(s->comm);
        else
            pnc_comm_destroy(s->comm);
        free(s->ranks);
        free(s);
    }
    pcu_close(nd->ops.pcu);
    free(nd->sched_index);
    free(nd);
    cn->state = NULL;
}

PrimeStatus prime_cuda_nccl_attach(PrimeWorld *world, void *arg) {
    PrimeCudaNccl *cn = arg;
    const char *name = cn->prog->name;
    int me = nccl_world_rank(world), gpu = nccl_world_gpu(world);
    NcclDev *nd = calloc(1, sizeof *nd);
    if (!nd || !(nd->sched_index = prime_cuda_schedule_indices(cn->prog))) {
        free(nd);
        fprintf(stderr, "%s: rank %d: out of memory\n", name, me);
        return PRIME_ERR_NOMEM;
    }
    nd->ops.prog = cn->prog;
    nd->ops.run_phase = cn->run_phase;
    nd->ops.sched_index = nd->sched_index;
    nd->ops.fail_world = nccl_world_break;
    nd->ops.before_kernel = flush;
    nd->world_comm = nccl_world_comm(world);
    nd->tail = &nd->queue;
    char err[ERR_CAP];
    if (pcu_open(gpu, &nd->ops.pcu, err, sizeof err)) {
        fprintf(stderr, "%s: rank %d on GPU %d: %s\n", name, me, gpu, err);
        free(nd->sched_index);
        free(nd);
        return PRIME_ERR_DEVICE;
    }
    cn->state = nd;
    prime_dev_set_ops(&world->devs[me], &nccl_ops, nd);
    return PRIME_OK;
}
