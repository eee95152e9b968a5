/*
 * internal.h — private structures shared by the runtime's modules and by
 * both of its backends.
 *
 * Nothing here is part of the public interface; emitted programs include
 * only prime_rt.h. The runtime is built twice from one set of common
 * objects (device.c, collective.c, trace.c, kernels.c, prime_sched.c,
 * prime_options.c, prime_program.c) and one backend each:
 *
 *   prime_rt      threads: world_threads.c, transport_threads.c
 *                 (private structures in threads_internal.h)
 *   prime_rt_mpi  MPI: world_mpi.c
 *   prime_rt_cuda threads with the CUDA table of operations (prime_cuda.c),
 *                 and with NCCL a second world, one process per GPU
 *                 (prime_cuda_world.h: the program chooses at start)
 *
 * The common objects touch only the fields declared here and reach the
 * transport only through prime_rt_post_send / prime_rt_post_recv /
 * prime_wait, so they are backend-neutral. A backend keeps its own state
 * behind the `be` pointers and implements the functions listed at the end
 * of this file, together with the public world, run, barrier, wait, root
 * and share functions of prime_rt.h.
 *
 * A world always holds one PrimeDev per rank. With threads every one of
 * them is a running device. With MPI only the process's own rank runs;
 * the others are mirrors whose counters (and, on the root, whose trace
 * events) the backend copies in at the end of every prime_world_run, so
 * the counter getters and the trace writer below are the same code for
 * both backends.
 */
#ifndef PRIME_RT_INTERNAL_H
#define PRIME_RT_INTERNAL_H

#include "prime_rt.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Longest trace name kept, without the terminating NUL. */
#define PRIME_RT_TRACE_NAME_MAX 63
/* Highest rank prime_copy_box supports. */
#define PRIME_RT_MAX_RANK 8
/* Longest failure message kept (see prime_world_failure), with its NUL. */
#define PRIME_RT_FAILURE_MAX 512

/* Matching namespaces: collectives never match user point-to-point
 * messages, whatever tags either side uses. */
typedef enum PrimeChannel {
    PRIME_RT_CHAN_P2P = 0,
    PRIME_RT_CHAN_COLLECTIVE,
    PRIME_RT_CHAN_COUNT
} PrimeChannel;

/* Plain data (no pointers), so the MPI backend can move events between
 * processes as bytes. */
typedef struct PrimeTraceEvent {
    char name[PRIME_RT_TRACE_NAME_MAX + 1];
    uint64_t begin_ns; /* since world creation */
    uint64_t end_ns;
    int closed;
    int row;   /* PrimeTraceRow */
    int split; /* kernel_ns and comm_ns are set (prime_trace_end_split) */
    uint64_t kernel_ns;
    uint64_t comm_ns;
    /* An interval of prime_trace_begin: the processor time of the
     * device's thread in it (CLOCK_THREAD_CPUTIME_ID), which does not count
     * the time the thread waited for a core. cpu_ns holds the start until
     * the interval ends. */
    int has_cpu;
    uint64_t cpu_ns;
} PrimeTraceEvent;

/* Per-device timeline (device thread only). `open` is the stack of
 * indices into `events` of intervals begun and not yet ended. */
typedef struct PrimeTrace {
    PrimeTraceEvent *events;
    size_t count;
    size_t cap;
    size_t *open;
    size_t depth;
    size_t open_cap;
} PrimeTrace;

/* Backend state, defined by each backend. */
typedef struct PrimeDevBackend PrimeDevBackend;
typedef struct PrimeWorldBackend PrimeWorldBackend;

struct PrimeDev {
    PrimeWorld *world;
    int rank;

    /* Written by the device's own thread during a run and read by the
     * world's owner after it (the backend orders the two). */
    PrimeStatus status; /* first error, sticky */
    uint64_t bytes_sent[PRIME_BYTES_KIND_COUNT];
    uint64_t cur_bytes;
    uint64_t peak_bytes;
    PrimeTrace trace;
    /* Freed tiles kept for the next allocation of the same size (a step
     * allocates the sizes the step before freed): device thread only.
     * Live and kept bytes together never exceed the most ever allocated
     * at once (high_bytes), so keeping costs no memory past the peak. */
    struct PrimeKept {
        size_t nfloats;
        float *p;
    } * kept;
    int nkept, kept_cap;
    uint64_t kept_bytes, high_bytes;

    /* What the device is doing (prime_dev_set_context), for the message of
     * a wait that times out: written by the device thread, and atomic
     * because the threads backend's owner reads it about a device that
     * does not return (prime_rt_context_text). Then, device thread only:
     * the communication calls it made, for fault injection, and that
     * message ("" when none), which the world's owner reads after the run. */
    _Atomic(const char *) ctx_phase;
    _Atomic(const char *) ctx_what;
    atomic_int ctx_step;
    atomic_int ctx_action;
    uint64_t comm_calls;
    char failure[PRIME_RT_FAILURE_MAX];
    /* Written by the world's owner about a device that did not return. */
    char note[PRIME_RT_FAILURE_MAX];

    PrimeDevBackend *be; /* NULL for an MPI mirror */

    /* The device's table of operations (prime_devops.h; NULL: the host's)
     * and that table's state; set between runs. */
    const struct PrimeDevOps *ops;
    void *ops_state;
};

struct PrimeWorld {
    int ndev;
    PrimeDev *devs;      /* one per rank */
    uint64_t t0_ns;      /* monotonic clock at creation */
    int trace_on;        /* set between runs only */
    uint64_t timeout_ns; /* deadline of every wait, 0: none; between runs only */
    /* PRIME_FAULT=stall:RANK:N, read at creation: fault_rank -1 when unset. */
    int fault_rank;
    uint64_t fault_after;
    PrimeTileFill tile_fill; /* PRIME_TILE_FILL, read at creation */
    PrimeWorldBackend *be;
};

/* Frees the device's kept tiles (prime_alloc's cache). */
void prime_rt_kept_free(PrimeDev *dev);
/* Keeps freed memory in the process (malloc's thresholds); world setup. */
void prime_rt_tune_memory(void);

/* Common helpers (device.c). */

/* Records `status` as the device's error unless it already has one;
 * returns `status` so callers can `return prime_rt_fail(dev, ...)`. */
PrimeStatus prime_rt_fail(PrimeDev *dev, PrimeStatus status);

/* Monotonic clock in nanoseconds. */
uint64_t prime_rt_now_ns(void);

/* A zeroed world of `ndev` devices with `world` and `rank` set, the
 * process's default timeout, PRIME_FAULT read, and no backend; NULL when
 * out of memory. */
PrimeWorld *prime_rt_world_new(int ndev);

/* Deadlines (device.c). The process default in nanoseconds (0: none). */
uint64_t prime_rt_default_timeout_ns(void);
/* The absolute monotonic time at which a wait that starts now gives up,
 * or 0 when `timeout_ns` is 0. */
uint64_t prime_rt_deadline(uint64_t timeout_ns);
/* Records, unless the device has a failure message already, "rank R: no
 * answer within T s" with the device's context and `detail` (printf
 * format), and returns prime_rt_fail(dev, PRIME_ERR_TIMEOUT). */
PrimeStatus prime_rt_note_timeout(PrimeDev *dev, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* " in phase 'P', step S, action A (WHAT)" for the device's context, ""
 * without one; any thread. */
void prime_rt_context_text(const PrimeDev *dev, char *buf, size_t cap);

/* Fault injection (device.c): counts one communication call of the
 * device and, when PRIME_FAULT names this call, records the fault as the
 * device's failure and stops answering through prime_rt_stall; returns
 * PRIME_ERR_ABORTED then (the call must do nothing), PRIME_OK otherwise. */
PrimeStatus prime_rt_fault_point(PrimeDev *dev);
/* Backend: stop answering. Threads: block until the world aborts. MPI:
 * sleep until the process is killed. */
void prime_rt_stall(PrimeDev *dev);
/* MPI (shm_watchdog.c): forks a watchdog that removes this process's
 * /dev/shm files should the process die after its launcher `launcher`
 * (whose daemon would otherwise remove them). */
void prime_rt_watch_shm(pid_t launcher);
/* Frees every device's trace, the devices and the world; the backend
 * state must be gone already. */
void prime_rt_world_delete(PrimeWorld *world);

/* Trace (trace.c): frees a device's recorded events. */
void prime_rt_trace_free(PrimeTrace *trace);

/* Transport, implemented by each backend. */

/* Posts a send or receive in the given matching namespace. A send counts
 * n floats under `kind` when posted; receives ignore `kind`. A failure to
 * post leaves req->impl NULL and is recorded on the device. */
PrimeStatus prime_rt_post_send(PrimeDev *dev, int dst, int tag, PrimeChannel channel,
                               const float *buf, size_t n, PrimeByteKind kind, PrimeReq *req);
PrimeStatus prime_rt_post_recv(PrimeDev *dev, int src, int tag, PrimeChannel channel, float *buf,
                               size_t n, PrimeReq *req);

/* A collective done by the backend itself, without the ring's messages
 * (collective.c calls it first): sets *done and returns the collective's
 * status where the backend did it (threads: in shared memory,
 * collective_threads.c), leaves *done 0 otherwise (MPI). The caller has
 * checked the group (pos is the caller's position), g > 1 and n > 0, and
 * gives a reduction prime_collective_scratch(n, g) floats of scratch. */
typedef enum PrimeRtColl {
    PRIME_RT_COLL_ALLREDUCE,
    PRIME_RT_COLL_REDUCE_SCATTER,
    PRIME_RT_COLL_ALLGATHER
} PrimeRtColl;
PrimeStatus prime_rt_collective_direct(PrimeDev *dev, int kind, int max, const int *group, int g,
                                       int pos, float *buf, size_t n, int tag, float *scratch,
                                       int *done);

/* Chunk c of n elements over a group of g: [lo(c), lo(c+1)) with
 * lo(c) = c*n/g (abi.c, shared with the byte formulas). */
size_t prime_chunk_lo(size_t n, int g, int c);
size_t prime_chunk_len(size_t n, int g, int c);

#endif /* PRIME_RT_INTERNAL_H */
