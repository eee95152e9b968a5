/*
 * prime_cuda_nccl_dev.cu — the NCCL calls of the one-process-per-GPU
 * CUDA runtime (see prime_cuda_nccl_dev.h).
 *
 * Every communicator is non-blocking: a call may return ncclInProgress,
 * and the communicator is ready for the next call once
 * ncclCommGetAsyncError says ncclSuccess. wait_ready polls that with a
 * deadline; a failure or the deadline aborts the communicator.
 */
#include "prime_cuda_nccl_dev.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static_assert(sizeof(ncclUniqueId) == PNC_ID_BYTES, "NCCL's unique id is 128 bytes");

struct PncComm {
    ncclComm_t comm;
    int aborted;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap(void) {
    struct timespec ts = {0, 200000L};
    nanosleep(&ts, NULL);
}

static int fail_nccl(char *err, size_t cap, const char *call, ncclResult_t r, ncclComm_t comm) {
    const char *last = comm ? ncclGetLastError(comm) : NULL;
    if (last && *last)
        snprintf(err, cap, "%s: %s (%s)", call, ncclGetErrorString(r), last);
    else
        snprintf(err, cap, "%s: %s", call, ncclGetErrorString(r));
    return 1;
}

static int fail_cuda(char *err, size_t cap, const char *call, cudaError_t e) {
    snprintf(err, cap, "%s: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
    return 1;
}

/* A communicator once aborted is gone: every later call says so. */
#define PNC_LIVE(c)                                                                                \
    do {                                                                                           \
        if ((c)->aborted) {                                                                        \
            snprintf(err, cap, "NCCL: the communicator was aborted after an earlier failure");     \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static void abort_comm(PncComm *c) {
    if (c && !c->aborted) {
        (void)ncclCommAbort(c->comm);
        c->aborted = 1;
    }
}

/* Polls c until its last call has completed on the host (r was that
 * call's result); aborts c when it failed or timeout_s passed. */
static int wait_ready(PncComm *c, ncclResult_t r, double timeout_s, const char *call, char *err,
                      size_t cap) {
    double deadline = now_s() + timeout_s;
    while (r == ncclInProgress) {
        if (now_s() > deadline) {
            snprintf(err, cap, "%s: not done within %g s; the communicator was aborted", call,
                     timeout_s);
            abort_comm(c);
            return 1;
        }
        nap();
        ncclResult_t q = ncclCommGetAsyncError(c->comm, &r);
        if (q != ncclSuccess)
            r = q;
    }
    if (r != ncclSuccess) {
        fail_nccl(err, cap, call, r, c->comm);
        abort_comm(c);
        return 1;
    }
    return 0;
}

extern "C" int pnc_unique_id(void *id, char *err, size_t cap) {
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r != ncclSuccess)
        return fail_nccl(err, cap, "ncclGetUniqueId", r, NULL);
    memcpy(id, &u, sizeof u);
    return 0;
}

extern "C" int pnc_comm_init(PncComm **out, int nranks, const void *id, int rank, int gpu,
                             double timeout_s, char *err, size_t cap) {
    *out = NULL;
    cudaError_t e = cudaSetDevice(gpu);
    if (e != cudaSuccess)
        return fail_cuda(err, cap, "cudaSetDevice", e);
    PncComm *c = (PncComm *)calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, cap, "out of host memory");
        return 1;
    }
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&c->comm, nranks, u, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
        fail_nccl(err, cap, "ncclCommInitRankConfig", r, NULL);
        free(c);
        return 1;
    }
    if (wait_ready(c, r, timeout_s, "ncclCommInitRankConfig", err, cap)) {
        free(c);
        return 1;
    }
    *out = c;
    return 0;
}

extern "C" void pnc_comm_abort(PncComm *c) {
    if (!c)
        return;
    abort_comm(c);
    free(c);
}

extern "C" void pnc_comm_destroy(PncComm *c) {
    if (!c)
        return;
    if (!c->aborted)
        (void)ncclCommDestroy(c->comm);
    free(c);
}

extern "C" int pnc_group_start(char *err, size_t cap) {
    ncclResult_t r = ncclGroupStart();
    return r == ncclSuccess ? 0 : fail_nccl(err, cap, "ncclGroupStart", r, NULL);
}

extern "C" int pnc_group_end(PncComm *c, double timeout_s, char *err, size_t cap) {
    /* Ended even on an aborted communicator: the group must close. */
    ncclResult_t r = ncclGroupEnd();
    PNC_LIVE(c);
    if (r != ncclSuccess && r != ncclInProgress) {
        fail_nccl(err, cap, "ncclGroupEnd", r, c->comm);
        abort_comm(c);
        return 1;
    }
    return wait_ready(c, r, timeout_s, "ncclGroupEnd", err, cap);
}

static cudaStream_t stream_of(PcuDev *d, int stream) {
    return (cudaStream_t)pcu_stream(d, stream);
}

extern "C" int pnc_send(PncComm *c, PcuDev *d, int stream, const float *buf, size_t n, int peer,
                        char *err, size_t cap) {
    PNC_LIVE(c);
    ncclResult_t r = ncclSend(buf, n, ncclFloat32, peer, c->comm, stream_of(d, stream));
    if (r == ncclSuccess || r == ncclInProgress)
        return 0;
    char call[48];
    snprintf(call, sizeof call, "ncclSend to rank %d", peer);
    return fail_nccl(err, cap, call, r, c->comm);
}

extern "C" int pnc_recv(PncComm *c, PcuDev *d, int stream, float *buf, size_t n, int peer,
                        char *err, size_t cap) {
    PNC_LIVE(c);
    ncclResult_t r = ncclRecv(buf, n, ncclFloat32, peer, c->comm, stream_of(d, stream));
    if (r == ncclSuccess || r == ncclInProgress)
        return 0;
    char call[48];
    snprintf(call, sizeof call, "ncclRecv from rank %d", peer);
    return fail_nccl(err, cap, call, r, c->comm);
}

extern "C" int pnc_allreduce(PncComm *c, PcuDev *d, int stream, float *buf, size_t n, int max,
                             double timeout_s, char *err, size_t cap) {
    PNC_LIVE(c);
    ncclResult_t r = ncclAllReduce(buf, buf, n, ncclFloat32, max ? ncclMax : ncclSum, c->comm,
                                   stream_of(d, stream));
    return wait_ready(c, r, timeout_s, "ncclAllReduce", err, cap);
}

extern "C" int pnc_reduce_scatter(PncComm *c, PcuDev *d, int stream, float *buf, size_t chunk,
                                  int pos, int max, double timeout_s, char *err, size_t cap) {
    PNC_LIVE(c);
    ncclResult_t r = ncclReduceScatter(buf, buf + (size_t)pos * chunk, chunk, ncclFloat32,
                                       max ? ncclMax : ncclSum, c->comm, stream_of(d, stream));
    return wait_ready(c, r, timeout_s, "ncclReduceScatter", err, cap);
}

extern "C" int pnc_allgather(PncComm *c, PcuDev *d, int stream, float *buf, size_t chunk, int pos,
                             double timeout_s, char *err, size_t cap) {
    PNC_LIVE(c);
    ncclResult_t r = ncclAllGather(buf + (size_t)pos * chunk, buf, chunk, ncclFloat32, c->comm,
                                   stream_of(d, stream));
    return wait_ready(c, r, timeout_s, "ncclAllGather", err, cap);
}

extern "C" int pnc_bcast(PncComm *c, PcuDev *d, int stream, float *buf, size_t n, int root,
                         double timeout_s, char *err, size_t cap) {
    (void)timeout_s;
    PNC_LIVE(c);
    /* Inside a group: enqueued at its end, which pnc_group_end waits for. */
    ncclResult_t r = ncclBroadcast(buf, buf, n, ncclFloat32, root, c->comm, stream_of(d, stream));
    return r == ncclSuccess || r == ncclInProgress
               ? 0
               : fail_nccl(err, cap, "ncclBroadcast", r, c->comm);
}

/* Polls a stream until it ran out, c failed or the deadline passed. */
static int sync_stream(PncComm *c, cudaStream_t s, double deadline, double timeout_s,
                       const char *what, char *err, size_t cap) {
    for (;;) {
        cudaError_t e = cudaStreamQuery(s);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady) {
            abort_comm(c);
            return fail_cuda(err, cap, what, e);
        }
        ncclResult_t r = ncclSuccess;
        ncclResult_t q = ncclCommGetAsyncError(c->comm, &r);
        if (q != ncclSuccess || (r != ncclSuccess && r != ncclInProgress)) {
            fail_nccl(err, cap, what, q != ncclSuccess ? q : r, c->comm);
            abort_comm(c);
            return 1;
        }
        if (now_s() > deadline) {
            snprintf(err, cap, "%s: not done within %g s; the communicator was aborted", what,
                     timeout_s);
            abort_comm(c);
            return 1;
        }
        nap();
    }
}

extern "C" int pnc_sync(PncComm *c, PcuDev *d, double timeout_s, char *err, size_t cap) {
    PNC_LIVE(c);
    double deadline = now_s() + timeout_s;
    return sync_stream(c, stream_of(d, PCU_COMM), deadline, timeout_s,
                       "the communication stream (NCCL transfers)", err, cap) ||
           sync_stream(c, stream_of(d, PCU_COMPUTE), deadline, timeout_s,
                       "the compute stream (kernels)", err, cap);
}

extern "C" int pnc_host_allgather(PncComm *c, int rank, int nranks, void *buf, size_t per_rank,
                                  double timeout_s, char *err, size_t cap) {
    PNC_LIVE(c);
    size_t total = (size_t)nranks * per_rank;
    char *dbuf = NULL;
    cudaStream_t s = NULL;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return fail_cuda(err, cap, "cudaStreamCreateWithFlags", e);
    int rc = 0;
    double deadline = now_s() + timeout_s;
    if ((e = cudaMalloc((void **)&dbuf, total ? total : 1)) != cudaSuccess)
        rc = fail_cuda(err, cap, "cudaMalloc", e);
    else if ((e = cudaMemcpy(dbuf + (size_t)rank * per_rank, (char *)buf + (size_t)rank * per_rank,
                             per_rank, cudaMemcpyHostToDevice)) != cudaSuccess)
        rc = fail_cuda(err, cap, "cudaMemcpy", e);
    else
        rc = wait_ready(c,
                        ncclAllGather(dbuf + (size_t)rank * per_rank, dbuf, per_rank, ncclInt8,
                                      c->comm, s),
                        timeout_s, "ncclAllGather (host exchange)", err, cap) ||
             sync_stream(c, s, deadline, timeout_s, "ncclAllGather (host exchange)", err, cap);
    if (!rc && (e = cudaMemcpy(buf, dbuf, total, cudaMemcpyDeviceToHost)) != cudaSuccess)
        rc = fail_cuda(err, cap, "cudaMemcpy", e);
    if (dbuf)
        (void)cudaFree(dbuf);
    (void)cudaStreamDestroy(s);
    return rc;
}
