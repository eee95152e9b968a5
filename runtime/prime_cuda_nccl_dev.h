/*
 * prime_cuda_nccl_dev.h — the NCCL calls of the one-process-per-GPU CUDA
 * runtime, behind a C interface (prime_cuda_nccl_dev.cu, compiled by
 * nvcc), as prime_cuda_dev.h is for the CUDA calls.
 *
 * Communicators are created non-blocking (ncclConfig_t.blocking = 0), so
 * that no call here waits without a deadline: creation, a group's end and
 * pnc_sync poll ncclCommGetAsyncError until the communicator is ready,
 * has failed, or the deadline has passed; a failure or a deadline aborts
 * the communicator (ncclCommAbort), which ends every operation of this
 * process on it.
 *
 * Every function returns 0, or non-zero after writing into err (cap
 * bytes) the call and NCCL's or CUDA's word for why:
 * "ncclSend to rank 3: remote process exited or there was a network error
 * (ncclRemoteError)". Operations are enqueued on a stream of a PcuDev
 * (PCU_COMPUTE or PCU_COMM) and return once enqueued.
 */
#ifndef PRIME_CUDA_NCCL_DEV_H
#define PRIME_CUDA_NCCL_DEV_H

#include "prime_cuda_dev.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* sizeof(ncclUniqueId). */
#define PNC_ID_BYTES 128

typedef struct PncComm PncComm;

/* A new unique id (ncclGetUniqueId), on rank 0 of a communicator. */
int pnc_unique_id(void *id, char *err, size_t cap);
/* Rank `rank` of `nranks` on GPU `gpu` (cudaSetDevice first), from the
 * id every rank got; waits at most timeout_s for the others. */
int pnc_comm_init(PncComm **out, int nranks, const void *id, int rank, int gpu, double timeout_s,
                  char *err, size_t cap);
/* Ends every operation of this process on c (ncclCommAbort) and frees
 * it; for a communicator that failed or timed out. */
void pnc_comm_abort(PncComm *c);
/* Frees a communicator whose operations have completed. */
void pnc_comm_destroy(PncComm *c);

/* The batching point of point-to-point transfers: every pnc_send and
 * pnc_recv between pnc_group_start and pnc_group_end is one NCCL group,
 * whose transfers progress together (so that a ring's sends and receives
 * cannot wait for each other). pnc_group_end waits at most timeout_s for
 * the group to be enqueued. */
int pnc_group_start(char *err, size_t cap);
int pnc_group_end(PncComm *c, double timeout_s, char *err, size_t cap);
int pnc_send(PncComm *c, PcuDev *d, int stream, const float *buf, size_t n, int peer, char *err,
             size_t cap);
int pnc_recv(PncComm *c, PcuDev *d, int stream, float *buf, size_t n, int peer, char *err,
             size_t cap);

/* Collectives in place on n floats of buf, on `stream`, sum or (max)
 * maximum. The reduce-scatter and all-gather take equal chunks
 * (chunk = n / nranks) at position pos. */
int pnc_allreduce(PncComm *c, PcuDev *d, int stream, float *buf, size_t n, int max,
                  double timeout_s, char *err, size_t cap);
int pnc_reduce_scatter(PncComm *c, PcuDev *d, int stream, float *buf, size_t chunk, int pos,
                       int max, double timeout_s, char *err, size_t cap);
int pnc_allgather(PncComm *c, PcuDev *d, int stream, float *buf, size_t chunk, int pos,
                  double timeout_s, char *err, size_t cap);
/* n floats from position root's buf to every member's, on `stream`;
 * called between pnc_group_start and pnc_group_end, which waits. */
int pnc_bcast(PncComm *c, PcuDev *d, int stream, float *buf, size_t n, int root, double timeout_s,
              char *err, size_t cap);

/* Waits until both streams of d have run out, polling the streams and
 * c's asynchronous error; a failure or timeout_s going by aborts c
 * (which then must not be used) and says which. */
int pnc_sync(PncComm *c, PcuDev *d, double timeout_s, char *err, size_t cap);

/* An all-gather of host bytes through the GPU: buf holds nranks *
 * per_rank bytes, this rank's at rank * per_rank; on return all of it is
 * every rank's. For a world whose ranks have no socket to each other
 * (the id came from a file). */
int pnc_host_allgather(PncComm *c, int rank, int nranks, void *buf, size_t per_rank,
                       double timeout_s, char *err, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
