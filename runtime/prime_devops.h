/*
 * prime_devops.h — the device seam: what the schedule executor
 * (prime_sched.c) and the driver (prime_program.c) do to a device's
 * memory, in one table of operations per kind of device.
 *
 * The host table (devops_host.c) is what every device did before the
 * table existed: tiles are prime_alloc'ed host memory, kernels are the
 * emitted C functions (GEMMs through cblas), transfers and collectives
 * are the backend's prime_isend / prime_irecv / prime_wait and rings.
 * The threads and MPI backends use it unchanged. The CUDA runtime
 * (prime_cuda.c) installs its own table on every device of a world:
 * tiles in GPU memory, kernels and GEMMs on a compute stream, transfers
 * on a communication stream, ordered by events.
 *
 * Contract of every table, the host one included:
 *   - tiles are only touched through the table; the host reaches a
 *     device tile through upload / download (NULL in the host table:
 *     there a tile is host memory already);
 *   - every allocation counts in the device's current and peak bytes
 *     exactly as prime_alloc counts it, and every send (the packed
 *     buffer of a box send included) counts its bytes under its kind when
 *     posted, so the counters equal the compiler's prediction whatever
 *     the table;
 *   - a posted send reads its buffer after everything the device did to
 *     it before the post; once its wait returned, a receive's data is
 *     seen by everything the device does after the wait (a table with
 *     streams orders them with events; the host is in order anyway);
 *   - the GEMM of a kernel runs inside `kernel` (the CUDA table hands the
 *     phase's function its cuBLAS handle and compute stream);
 *   - `finish` (may be NULL) ends a phase: every operation of the phase
 *     has completed; a table that measures its kernels on the device says
 *     how long they took;
 *   - a failure returns a status other than PRIME_OK and records it on
 *     the device (prime_rt_fail), with a message naming the rank and the
 *     call in the device's failure text where there is one to give.
 */
#ifndef PRIME_DEVOPS_H
#define PRIME_DEVOPS_H

#include "prime_program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The collectives of the table's `collective`. */
typedef enum PrimeCollKind {
    PRIME_COLL_ALLREDUCE = 0,
    PRIME_COLL_REDUCE_SCATTER = 1,
    PRIME_COLL_ALLGATHER = 2,
} PrimeCollKind;

typedef struct PrimeDevOps {
    const char *name;
    /* n floats, each the identity of `combine` (PrimeCombine: 0 or -inf),
     * counted; NULL on failure (the device's status says why). */
    float *(*alloc)(PrimeDev *dev, size_t n, int combine);
    void (*free)(PrimeDev *dev, float *p, size_t n);
    /* Optional (NULL: every tile comes from alloc, filled): n floats,
     * counted as alloc counts them, that the executor fills with `fill`
     * only where their first use reads them (prime_rt.h, PrimeTileFill).
     * *filled = 1 when the tile holds the identity of `combine` already. */
    float *(*alloc_lazy)(PrimeDev *dev, size_t n, int combine, int *filled);
    PrimeStatus (*fill)(PrimeDev *dev, float *p, size_t n, int combine);
    /* n floats from host memory into a tile, and back; NULL when tiles
     * are host memory. */
    PrimeStatus (*upload)(PrimeDev *dev, float *dst, const float *host, size_t n);
    PrimeStatus (*download)(PrimeDev *dev, float *host, const float *src, size_t n);
    /* prime_copy_box between two tiles of the device. */
    PrimeStatus (*copy_box)(PrimeDev *dev, int rank, const long *extent, const float *src,
                            const long *src_shape, const long *src_off, float *dst,
                            const long *dst_shape, const long *dst_off);
    /* The tile kernel of `phase`: out += f(in...) (prime_sched.h). */
    PrimeStatus (*kernel)(PrimeDev *dev, const PrimePhase *phase, float *out,
                          const float *const *in, const long *off);
    /* Optional: the same kernel writing out = f(in...) without reading
     * out, for a phase that has one (PrimePhase.kernel_overwrites). */
    PrimeStatus (*kernel_set)(PrimeDev *dev, const PrimePhase *phase, float *out,
                              const float *const *in, const long *off);
    /* dst[i] = dst[i] + src[i], or the maximum (PrimeCombine). */
    PrimeStatus (*combine)(PrimeDev *dev, float *dst, const float *src, size_t n, int combine);
    /* Point-to-point transfers, as prime_isend / prime_irecv / prime_wait. */
    PrimeStatus (*isend)(PrimeDev *dev, int dst, int tag, const float *buf, size_t n,
                         PrimeByteKind kind, PrimeReq *req);
    PrimeStatus (*irecv)(PrimeDev *dev, int src, int tag, float *buf, size_t n, PrimeReq *req);
    PrimeStatus (*wait)(PrimeDev *dev, PrimeReq *req);
    /* A collective of kind `which` (PrimeCollKind) by `combine` with the
     * semantics, bytes and scratch of prime_allreduce_sum,
     * prime_reduce_scatter_sum and prime_allgather (which ignores
     * `combine`). */
    PrimeStatus (*collective)(PrimeDev *dev, int which, int combine, const int *group, int gsize,
                              float *buf, size_t n, int tag);
    /* Ends a phase (may be NULL). *kernel_ns: the device time of the
     * phase's kernels, set with *measured = 1 when the table measured it
     * (else the executor's host timing around `kernel` stands). */
    PrimeStatus (*finish)(PrimeDev *dev, uint64_t *kernel_ns, int *measured);
    /* Optional: the fused kernel of `phase` (PrimePhase.fused) on its
     * members' tiles; a table without it runs no fused phase. */
    PrimeStatus (*kernel_fused)(PrimeDev *dev, const PrimePhase *phase, float *const *out,
                                const float *const *const *in, const long *off);
} PrimeDevOps;

/* Host memory, the emitted C kernels, the backend's transport. */
extern const PrimeDevOps prime_host_ops;

/* The table of a device: the one installed on it, else the host's. */
const PrimeDevOps *prime_dev_ops(const PrimeDev *dev);
/* Installs `ops` (NULL: the host's) and the table's per-device state on
 * a device; between runs only. */
void prime_dev_set_ops(PrimeDev *dev, const PrimeDevOps *ops, void *state);
/* The state given with prime_dev_set_ops. */
void *prime_dev_ops_state(const PrimeDev *dev);

/* Counting without allocating, for tables whose memory is not
 * prime_alloc's: adds n floats to the device's current bytes (and peak),
 * and takes them off again (more than is counted: PRIME_ERR_ARG, as
 * prime_free). */
void prime_dev_count_alloc(PrimeDev *dev, size_t n);
void prime_dev_count_free(PrimeDev *dev, size_t n);
/* Counts n floats sent under `kind`, as a posted send does. */
void prime_dev_count_sent(PrimeDev *dev, size_t n, PrimeByteKind kind);
/* Records "rank R: MESSAGE" as the device's failure text (unless it has
 * one) and `status` as its error; returns `status`. */
PrimeStatus prime_dev_fail_text(PrimeDev *dev, PrimeStatus status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* How a driver runs a program on a kind of device other than the host:
 * `attach` installs its table on every device of a new world (and says
 * why not on stderr), `detach` takes it off before the world goes.
 * gemm_dtype: the GEMM operand type of a CUDA program built with --dtype
 * ("bf16", "f16"; NULL: fp32), whose dense fp32 reference rounds its
 * GEMMs' operands the same way (prime_cuda_gemm.h): --check names it as
 * its yardstick (docs/cuda.md). */
typedef struct PrimeProgramDevice {
    const char *name;
    PrimeStatus (*attach)(PrimeWorld *world, void *arg);
    void (*detach)(PrimeWorld *world, void *arg);
    void *arg;
    const char *gemm_dtype;
} PrimeProgramDevice;

/* prime_program_main on a device (NULL: the host). */
int prime_program_main_device(const PrimeProgram *program, const PrimeProgramDevice *device,
                              int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif
