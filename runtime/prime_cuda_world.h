/*
 * prime_cuda_world.h — the two worlds of the CUDA runtime behind the one
 * world interface of prime_rt.h (prime_cuda_world.c chooses):
 *
 *   cuda-local  the threads world (world_threads.c, transport_threads.c,
 *               collective_threads.c, compiled for this library with
 *               every public function named threads_*): a thread per
 *               device of the mesh, all on one GPU (prime_cuda.c);
 *   nccl        one process per GPU (prime_cuda_world_nccl.c, its
 *               functions named nccl_*): the world holds one device per
 *               rank, and only this process's runs; its transfers and
 *               collectives are NCCL's (prime_cuda_nccl.c).
 *
 * prime_cuda_main chooses before the driver creates a world.
 */
#ifndef PRIME_CUDA_WORLD_H
#define PRIME_CUDA_WORLD_H

#include "internal.h"
#include "rendezvous.h"

struct PcuDev;
struct PncComm;

/* The world of every later prime_world_create: 0 the threads world, 1
 * the NCCL world with this rendezvous and GPU (`name`: the program's, to
 * begin its messages). */
void prime_cuda_world_select(int nccl, const PrimeRdvConfig *cfg, int gpu, const char *name);

/* The NCCL world of a world the NCCL world created: its communicator
 * over every rank, and this process's rank and GPU. */
struct PncComm *nccl_world_comm(const PrimeWorld *world);
int nccl_world_rank(const PrimeWorld *world);
int nccl_world_gpu(const PrimeWorld *world);
/* Says that a device call failed or timed out: NCCL may be left waiting
 * for a peer, so the communicators are aborted when the world goes, not
 * destroyed (the host exchanges over sockets still run, so that every
 * process learns every rank's status). */
void nccl_world_break(PrimeWorld *world);
int nccl_world_failed(const PrimeWorld *world);

#define PRIME_CUDA_WORLD_DECLARE(prefix)                                                           \
    PrimeStatus prefix##prime_world_create(int ndev, PrimeWorld **out);                            \
    void prefix##prime_world_destroy(PrimeWorld *world);                                           \
    PrimeStatus prefix##prime_world_run(PrimeWorld *world, PrimeRankFn fn, void *arg);             \
    int prefix##prime_world_is_root(const PrimeWorld *world);                                      \
    int prefix##prime_local_devices(int ndev);                                                     \
    PrimeStatus prefix##prime_world_share(PrimeWorld *world, void *buf, size_t bytes_per_rank);    \
    PrimeStatus prefix##prime_barrier(PrimeDev *dev);                                              \
    void prefix##prime_rt_stall(PrimeDev *dev);                                                    \
    PrimeStatus prefix##prime_rt_post_send(PrimeDev *dev, int dst, int tag, PrimeChannel channel,  \
                                           const float *buf, size_t n, PrimeByteKind kind,         \
                                           PrimeReq *req);                                         \
    PrimeStatus prefix##prime_rt_post_recv(PrimeDev *dev, int src, int tag, PrimeChannel channel,  \
                                           float *buf, size_t n, PrimeReq *req);                   \
    PrimeStatus prefix##prime_wait(PrimeDev *dev, PrimeReq *req);                                  \
    PrimeStatus prefix##prime_rt_collective_direct(PrimeDev *dev, int kind, int max,               \
                                                   const int *group, int g, int pos, float *buf,   \
                                                   size_t n, int tag, float *scratch, int *done);

PRIME_CUDA_WORLD_DECLARE(threads_)
PRIME_CUDA_WORLD_DECLARE(nccl_)

#endif
