/*
 * prime_rt.h — the public interface of the primec runtime.
 *
 * Programs emitted by primec include only this header. The runtime runs
 * one SPMD program on N devices and comes as two libraries with this one
 * interface, so the same program source links against either:
 *
 *   prime_rt      (`--target cpu`) every device is a thread of one process
 *                 and messages move through a threads transport in which a
 *                 communication thread per device performs the copy of each
 *                 posted send, so a transfer overlaps with the compute that
 *                 the device's own thread does meanwhile.
 *   prime_rt_mpi  (`--target mpi`) every device is an MPI process
 *                 (`mpirun -np N`); messages are MPI_Isend / MPI_Irecv. Each
 *                 process holds its own device only; after every run the
 *                 counters of all devices are copied to every process, so
 *                 the counter getters below answer for any rank anywhere.
 *                 Call the world functions from the main thread.
 *
 * Code that runs outside prime_world_run (a driver's report) sees, with
 * MPI, only what its own process computed: prime_world_share completes a
 * per-rank array on every process, and prime_world_is_root picks the one
 * process that prints.
 *
 * Ownership and errors: everything here has a create/destroy pair and
 * returns a PrimeStatus; the runtime never calls exit() and never prints
 * except where a function says so.
 *
 * Deadlines: every wait of the runtime (prime_wait, the collectives,
 * prime_barrier, the end of prime_world_run, and with MPI the exchanges
 * of world creation, of prime_world_share and after every run) gives up
 * once the world's timeout has passed without an answer: the device's
 * status becomes PRIME_ERR_TIMEOUT and prime_world_failure says which
 * rank waited for whom, where. With threads the other devices then stop
 * at their next wait with PRIME_ERR_ABORTED; with MPI the process's world
 * is broken: later waits, shares and runs fail at once and destroying it
 * leaves MPI unfinalised, so the process should exit (its launcher then
 * ends the others). A world that timed out can only be destroyed.
 *
 * Fault injection (testing only): PRIME_FAULT=stall:RANK[:N], read when a
 * world is created, makes device RANK stop answering at its N-th
 * communication call of the world's life (sends, receives and collectives
 * counted from 0; N defaults to 0): threads, its thread blocks until the
 * world aborts; MPI, its process sleeps until it is killed.
 *
 * Counters: every device counts the bytes it sends, per PrimeByteKind,
 * and the bytes it has allocated through prime_alloc (current and peak).
 * primec's `explain` predicts both; tests compare them exactly.
 */
#ifndef PRIME_RT_H
#define PRIME_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum PrimeStatus {
    PRIME_OK = 0,
    PRIME_ERR_ARG,       /* a bad argument (rank out of range, n mismatch) */
    PRIME_ERR_NOMEM,     /* an allocation failed */
    PRIME_ERR_TRANSPORT, /* the transport failed (thread creation, ...) */
    PRIME_ERR_IO,        /* a file could not be written */
    PRIME_ERR_TIMEOUT,   /* a peer did not answer within the world's deadline */
    PRIME_ERR_ABORTED,   /* the run was abandoned because another device timed out or failed */
    PRIME_ERR_DEVICE     /* a call of the device's own library failed (CUDA, cuBLAS) */
} PrimeStatus;

/* What a sent byte was for; counted separately per device. */
typedef enum PrimeByteKind {
    PRIME_BYTES_SHIFT = 0,  /* point-to-point moves between steps of a phase */
    PRIME_BYTES_COLLECTIVE, /* all-reduce, reduce-scatter, all-gather */
    PRIME_BYTES_REDIST,     /* redistribution at a phase boundary */
    PRIME_BYTES_KIND_COUNT
} PrimeByteKind;

const char *prime_status_name(PrimeStatus status);
const char *prime_byte_kind_name(PrimeByteKind kind);

typedef struct PrimeWorld PrimeWorld; /* all devices of one run */
typedef struct PrimeDev PrimeDev;     /* one device, seen from its thread */

/* Creates a world of `ndev` devices. Threads: ndev thread-devices. MPI:
 * initialises MPI unless the program did, and needs exactly ndev
 * processes; otherwise rank 0 prints why on stderr and the call returns
 * PRIME_ERR_ARG on every process. */
PrimeStatus prime_world_create(int ndev, PrimeWorld **out);
/* Frees the world; every device must have returned from prime_world_run.
 * MPI: finalises MPI if prime_world_create initialised it and this was
 * the last world. */
void prime_world_destroy(PrimeWorld *world);

typedef void (*PrimeRankFn)(PrimeDev *dev, void *arg);
/* Runs fn(dev, arg) on every device, one thread each, and joins them
 * (MPI: on this process's device, on the calling thread, then exchanges
 * the counters; every process must call it). Returns the first error of
 * the lowest-ranked device that has one, the same on every process.
 * Counters are not reset between runs (see prime_world_reset_counters). */
PrimeStatus prime_world_run(PrimeWorld *world, PrimeRankFn fn, void *arg);
void prime_world_reset_counters(PrimeWorld *world);
int prime_world_size(const PrimeWorld *world);

/* The deadline of every wait, in seconds (0: wait for ever). Worlds take
 * the process default when created: PRIME_RT_DEFAULT_TIMEOUT_S unless
 * prime_set_default_timeout changed it (with MPI the exchanges of world
 * creation already use it). Between runs only; PRIME_ERR_ARG for a
 * negative or non-finite value. */
#define PRIME_RT_DEFAULT_TIMEOUT_S 60.0
PrimeStatus prime_set_default_timeout(double seconds);
PrimeStatus prime_world_set_timeout(PrimeWorld *world, double seconds);
double prime_world_timeout(const PrimeWorld *world);
/* Why rank `rank` failed, when it timed out or stopped on an injected
 * fault: one line naming the rank, the peer or collective it waited for
 * and the context set by prime_dev_set_context; NULL when there is
 * nothing to say. With MPI only the process's own rank can have one. */
const char *prime_world_failure(const PrimeWorld *world, int rank);

/* 1 on the one process that reports for the world (threads: always;
 * MPI: rank 0), 0 elsewhere and for NULL. */
int prime_world_is_root(const PrimeWorld *world);
/* Between runs: `buf` holds prime_world_size(world) blocks of
 * `bytes_per_rank` bytes, block r written by (the process of) rank r;
 * afterwards every process holds every block. Threads: nothing to do, the
 * memory is shared. MPI: an in-place MPI_Allgather, so every process must
 * call it, and each contributes the block of its own rank only. */
PrimeStatus prime_world_share(PrimeWorld *world, void *buf, size_t bytes_per_rank);

int prime_dev_rank(const PrimeDev *dev);
int prime_dev_count(const PrimeDev *dev);
/* The first error a device hit (sticky); PRIME_OK if none. */
PrimeStatus prime_dev_status(const PrimeDev *dev);
/* Says what the device is doing, for the message of a wait that times
 * out: the phase's name, the step (-1: none), the index of the action in
 * the phase's list and the action's name. The strings are not copied and
 * must outlive the run; NULL names are allowed. Device thread only. */
void prime_dev_set_context(PrimeDev *dev, const char *phase, int step, int action,
                           const char *what);

/* Counted allocation: zero-filled floats; NULL on failure (and the
 * device's status becomes PRIME_ERR_NOMEM). prime_free takes the same n. */
float *prime_alloc(PrimeDev *dev, size_t nfloats);
void prime_free(PrimeDev *dev, float *p, size_t nfloats);
/* The same, counted alike, for a tile whose first writer writes every
 * element: its contents are undefined (with PRIME_TILE_FILL_NAN, every
 * float a quiet NaN, so that a read before the first write shows in the
 * results). */
float *prime_alloc_uninit(PrimeDev *dev, size_t nfloats);

/* How the schedule executor fills new tiles with their identity (the
 * environment's PRIME_TILE_FILL, read when a world is created):
 *   - LAZY ("lazy", the default of a release build): a tile is filled
 *     just before its first use reads it, and not at all when its first
 *     use overwrites it whole (a kernel that writes every element of its
 *     output, a receive of the whole tile, the driver's fill);
 *   - NAN ("nan", the default with assertions or AddressSanitizer): the
 *     same, and a tile allocated unfilled holds NaNs until then;
 *   - EAGER ("eager"): every tile is filled when it is allocated. */
typedef enum PrimeTileFill {
    PRIME_TILE_FILL_LAZY = 0,
    PRIME_TILE_FILL_NAN = 1,
    PRIME_TILE_FILL_EAGER = 2
} PrimeTileFill;
PrimeTileFill prime_dev_tile_fill(const PrimeDev *dev);

/* Counters, read after prime_world_run returns. */
uint64_t prime_world_bytes_sent(const PrimeWorld *world, int rank, PrimeByteKind kind);
uint64_t prime_world_peak_bytes(const PrimeWorld *world, int rank);
uint64_t prime_world_current_bytes(const PrimeWorld *world, int rank);

/* Point-to-point, asynchronous. A send and a receive match on
 * (source, destination, tag) in posting order. The buffer of a posted
 * send must stay unchanged, and that of a receive unread, until
 * prime_wait returns for it. A send counts n * sizeof(float) bytes under
 * `kind` when posted, a send to oneself (a copy) included. */
typedef struct PrimeReq {
    void *impl; /* owned by the runtime until prime_wait */
} PrimeReq;

PrimeStatus prime_isend(PrimeDev *dev, int dst, int tag, const float *buf, size_t n,
                        PrimeByteKind kind, PrimeReq *req);
PrimeStatus prime_irecv(PrimeDev *dev, int src, int tag, float *buf, size_t n, PrimeReq *req);
PrimeStatus prime_wait(PrimeDev *dev, PrimeReq *req);

/* Collectives over a group: `group` lists gsize distinct ranks in ring
 * order, the calling device among them; every member calls with the same
 * group, n and tag. All use the same chunking: chunk c of n elements is
 * [c*n/g, (c+1)*n/g) in integer arithmetic, g = gsize; and a ring over
 * the group's order. Bytes sent are counted as PRIME_BYTES_COLLECTIVE.
 *
 * allreduce: ring reduce-scatter then ring all-gather; each member sends
 *   2(g-1) chunks; scratch of the largest chunk is taken from prime_alloc
 *   for the duration of the call.
 * reduce_scatter: member at position p ends with the sum of chunk p in
 *   buf[chunk p] (other parts of buf are clobbered); g-1 chunks sent;
 *   same scratch.
 * allgather: member p contributes buf[chunk p]; all end with all chunks;
 *   g-1 chunks sent; no scratch.
 * A group of one does nothing and sends nothing. */
PrimeStatus prime_allreduce_sum(PrimeDev *dev, const int *group, int gsize, float *buf, size_t n,
                                int tag);
PrimeStatus prime_reduce_scatter_sum(PrimeDev *dev, const int *group, int gsize, float *buf,
                                     size_t n, int tag);
PrimeStatus prime_allgather(PrimeDev *dev, const int *group, int gsize, float *buf, size_t n,
                            int tag);
/* The same as allreduce and reduce_scatter with the maximum in place of
 * the sum: the same ring, messages and bytes. */
PrimeStatus prime_allreduce_max(PrimeDev *dev, const int *group, int gsize, float *buf, size_t n,
                                int tag);
PrimeStatus prime_reduce_scatter_max(PrimeDev *dev, const int *group, int gsize, float *buf,
                                     size_t n, int tag);
/* Predicted bytes a member at position p sends in each collective; the
 * compiler uses the same formulas, tests compare both with the counters. */
uint64_t prime_allreduce_bytes(size_t n, int gsize, int pos);
uint64_t prime_reduce_scatter_bytes(size_t n, int gsize, int pos);
uint64_t prime_allgather_bytes(size_t n, int gsize, int pos);
/* Scratch floats the collective takes from prime_alloc (0 for a group of one). */
size_t prime_collective_scratch(size_t n, int gsize);

PrimeStatus prime_barrier(PrimeDev *dev);

/* Dense kernels. Row-major, C = alpha * op(A) op(B) + beta * C, where
 * op(A) is m x k and op(B) is k x n; lda/ldb/ldc are row strides. GEMMs go
 * through OpenBLAS's cblas. */
void prime_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc);
/* The same in fp64 (the dense reference of --check). */
void prime_dgemm(int trans_a, int trans_b, int m, int n, int k, double alpha, const double *a,
                 int lda, const double *b, int ldb, double beta, double *c, int ldc);
/* Strided-batched GEMM: for b in [0, batch), C_b = alpha * op(A_b) op(B_b)
 * + beta * C_b, where X_b starts at x + b * stride_x. One GEMM when the
 * batch folds into M (B shared, A untransposed and A and C batches
 * contiguous rows), else a loop of GEMMs. */
void prime_gemm_batched(int trans_a, int trans_b, int batch, int m, int n, int k, float alpha,
                        const float *a, int lda, long stride_a, const float *b, int ldb,
                        long stride_b, float beta, float *c, int ldc, long stride_c);
void prime_dgemm_batched(int trans_a, int trans_b, int batch, int m, int n, int k, double alpha,
                         const double *a, int lda, long stride_a, const double *b, int ldb,
                         long stride_b, double beta, double *c, int ldc, long stride_c);
/* Limits the BLAS library's own threads (devices are threads already;
 * prime_world_create sets 1). Programs that only plan or compile call it
 * to keep idle BLAS threads from spinning. */
void prime_set_blas_threads(int n);
/* The threads a GEMM of the calling thread runs on (OpenBLAS's own). */
int prime_blas_threads(void);
/* The BLAS kernels this processor runs best (an OPENBLAS_CORETYPE name:
 * "SkylakeX" with AVX-512, "Haswell" with AVX2 and FMA) where they are
 * newer than those the library chose when it loaded and OPENBLAS_CORETYPE
 * is not set; otherwise NULL. And the kernels in use. */
const char *prime_blas_better_core(void);
const char *prime_blas_core(void);
/* Executes the program again (argv, through /proc/self/exe) with
 * OPENBLAS_CORETYPE set to prime_blas_better_core(); returns at once
 * where that is NULL (or the execution fails). Programs call
 * it first thing in main. */
void prime_blas_choose_core(char **argv);
/* The address space OpenBLAS takes for each thread that runs a GEMM. */
size_t prime_blas_buffer_bytes(void);
/* Whether `callers` threads' GEMM buffers, and extra_bytes more, still
 * fit under the process's address-space and data limits (RLIMIT_AS,
 * RLIMIT_DATA: `ulimit -v`, `ulimit -d`), probed by mapping them and
 * unmapping them again: 1 when they fit or no limit is set, 0 when not. *limit_bytes (may be
 * NULL) gets the lower limit, 0 when none. Call it before the first GEMM
 * of those threads: OpenBLAS (Debian's 0.3.21) hangs when it cannot map
 * its buffer. */
int prime_blas_room(int callers, size_t extra_bytes, unsigned long long *limit_bytes);
/* How many of a world's `ndev` devices run in this process: all with
 * threads, one with MPI. */
int prime_local_devices(int ndev);

/* dst[i] += src[i] */
void prime_add(float *dst, const float *src, size_t n);
/* dst[i] = max(dst[i], src[i]) (fmaxf: a NaN loses to a number) */
void prime_max(float *dst, const float *src, size_t n);
/* dst[i] = -inf, the identity of the maximum */
void prime_fill_neg_inf(float *dst, size_t n);

/* Copies a box between two row-major arrays of `rank` dimensions:
 * dst[dst_off + x] = src[src_off + x] for x in [0, extent). */
void prime_copy_box(int rank, const long *extent, const float *src, const long *src_shape,
                    const long *src_off, float *dst, const long *dst_shape, const long *dst_off);

/* Deterministic pseudo-random values in [-1, 1) from a seed (splitmix64). */
void prime_fill_random(float *p, size_t n, uint64_t seed);
/* Element i of prime_fill_random's values from `seed`, alone: a device
 * fills its own tiles without the whole array. */
float prime_random_at(uint64_t seed, uint64_t i);
/* max_i |a_i - b_i| / max(max_i |b_i|, tiny): the relative error of a
 * against the reference b, in the max norm. */
double prime_max_rel_error(const float *a, const float *b, size_t n);

/* Chrome trace-event timeline: a device records named intervals on two
 * rows, compute (steps, kernels) and communication (every transfer and
 * collective); the world writes them as JSON ("X" events, pid = rank,
 * tid = row, microseconds since world creation, with "M" events naming
 * each device and row). Recording is off unless enabled. MPI: events
 * reach the root at the end of each run, so write the trace there; on
 * another process it holds that process's device only. */
/* Rows: the host's view of the compute and communication (every
 * backend), and the kernels' intervals as the device timed them (the
 * CUDA backends, from events, after each run). */
typedef enum PrimeTraceRow {
    PRIME_TRACE_COMPUTE = 0,
    PRIME_TRACE_COMM = 1,
    PRIME_TRACE_DEVICE = 2,
    PRIME_TRACE_ROWS
} PrimeTraceRow;
void prime_world_enable_trace(PrimeWorld *world, int on);
/* Nested intervals on the compute row. */
void prime_trace_begin(PrimeDev *dev, const char *name);
void prime_trace_end(PrimeDev *dev);
/* prime_trace_end for an interval that held `kernel_ns` of kernels and
 * `comm_ns` of exposed communication: the trace gives them, and the rest
 * of the interval as the schedule's overhead, in the event's args. */
void prime_trace_end_split(PrimeDev *dev, uint64_t kernel_ns, uint64_t comm_ns);
/* A closed interval on `row`, times from prime_clock_ns (intervals of
 * one row may overlap: transfers in flight together). */
void prime_trace_span(PrimeDev *dev, const char *name, PrimeTraceRow row, uint64_t begin_ns,
                      uint64_t end_ns);
/* The monotonic clock in nanoseconds. */
uint64_t prime_clock_ns(void);
PrimeStatus prime_world_write_trace(const PrimeWorld *world, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* PRIME_RT_H */
