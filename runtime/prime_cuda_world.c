/*
 * prime_cuda_world.c — the world interface of prime_rt.h in the CUDA
 * runtime: every call goes to the threads world (cuda-local) or the NCCL
 * world (one process per GPU), whichever prime_cuda_world_select chose
 * (prime_cuda_world.h).
 */
#include "prime_cuda_world.h"

static int use_nccl;

/* Set in prime_cuda_world_nccl.c. */
void nccl_world_configure(const PrimeRdvConfig *cfg, int gpu, const char *name);

void prime_cuda_world_select(int nccl, const PrimeRdvConfig *cfg, int gpu, const char *name) {
    use_nccl = nccl;
    if (nccl)
        nccl_world_configure(cfg, gpu, name);
}

PrimeStatus prime_world_create(int ndev, PrimeWorld **out) {
    return use_nccl ? nccl_prime_world_create(ndev, out) : threads_prime_world_create(ndev, out);
}

void prime_world_destroy(PrimeWorld *world) {
    if (use_nccl)
        nccl_prime_world_destroy(world);
    else
        threads_prime_world_destroy(world);
}

PrimeStatus prime_world_run(PrimeWorld *world, PrimeRankFn fn, void *arg) {
    return use_nccl ? nccl_prime_world_run(world, fn, arg)
                    : threads_prime_world_run(world, fn, arg);
}

int prime_world_is_root(const PrimeWorld *world) {
    return use_nccl ? nccl_prime_world_is_root(world) : threads_prime_world_is_root(world);
}

int prime_local_devices(int ndev) {
    return use_nccl ? nccl_prime_local_devices(ndev) : threads_prime_local_devices(ndev);
}

PrimeStatus prime_world_share(PrimeWorld *world, void *buf, size_t bytes_per_rank) {
    return use_nccl ? nccl_prime_world_share(world, buf, bytes_per_rank)
                    : threads_prime_world_share(world, buf, bytes_per_rank);
}

PrimeStatus prime_barrier(PrimeDev *dev) {
    return use_nccl ? nccl_prime_barrier(dev) : threads_prime_barrier(dev);
}

void prime_rt_stall(PrimeDev *dev) {
    if (use_nccl)
        nccl_prime_rt_stall(dev);
    else
        threads_prime_rt_stall(dev);
}

PrimeStatus prime_rt_post_send(PrimeDev *dev, int dst, int tag, PrimeChannel channel,
                               const float *buf, size_t n, PrimeByteKind kind, PrimeReq *req) {
    return use_nccl ? nccl_prime_rt_post_send(dev, dst, tag, channel, buf, n, kind, req)
                    : threads_prime_rt_post_send(dev, dst, tag, channel, buf, n, kind, req);
}

PrimeStatus prime_rt_post_recv(PrimeDev *dev, int src, int tag, PrimeChannel channel, float *buf,
                               size_t n, PrimeReq *req) {
    return use_nccl ? nccl_prime_rt_post_recv(dev, src, tag, channel, buf, n, req)
                    : threads_prime_rt_post_recv(dev, src, tag, channel, buf, n, req);
}

PrimeStatus prime_wait(PrimeDev *dev, PrimeReq *req) {
    return use_nccl ? nccl_prime_wait(dev, req) : threads_prime_wait(dev, req);
}

PrimeStatus prime_rt_collective_direct(PrimeDev *dev, int kind, int max, const int *group, int g,
                                       int pos, float *buf, size_t n, int tag, float *scratch,
                                       int *done) {
    return use_nccl ? nccl_prime_rt_collective_direct(dev, kind, max, group, g, pos, buf, n, tag,
                                                      scratch, done)
                    : threads_prime_rt_collective_direct(dev, kind, max, group, g, pos, buf, n, tag,
                                                         scratch, done);
}
