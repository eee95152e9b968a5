/*
 * internal.h — private structures shared by the runtime's modules.
 *
 * Nothing here is part of the public interface; emitted programs include
 * only prime_rt.h. Every field says which thread may touch it and which
 * lock guards it:
 *
 *   - "device thread": the compute thread running the rank function of
 *     that device during prime_world_run, and the caller of the world's
 *     functions between runs (thread creation and joining order the two).
 *   - "mbox_mu", "comm_mu", "done_mu": the per-device mutexes below.
 *
 * Requests (PrimeReqImpl) are heap objects owned by the device that posted
 * them. They sit on that device's `live` list from posting until
 * prime_wait frees them, so prime_world_destroy can free requests a
 * program never waited for. While unmatched a request also sits in the
 * destination's mailbox; once matched, the send sits in its source's
 * communication queue until the communication thread has copied it.
 */
#ifndef PRIME_RT_INTERNAL_H
#define PRIME_RT_INTERNAL_H

#include "prime_rt.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Longest trace name kept, without the terminating NUL. */
#define PRIME_RT_TRACE_NAME_MAX 63
/* Highest rank prime_copy_box supports. */
#define PRIME_RT_MAX_RANK 8

/* Matching namespaces: collectives never match user point-to-point
 * messages, whatever tags either side uses. */
typedef enum PrimeChannel { PRIME_RT_CHAN_P2P = 0, PRIME_RT_CHAN_COLLECTIVE } PrimeChannel;

typedef enum PrimeReqKind { PRIME_RT_REQ_SEND = 0, PRIME_RT_REQ_RECV } PrimeReqKind;

typedef struct PrimeReqImpl PrimeReqImpl;
struct PrimeReqImpl {
    /* Fixed when posted. */
    PrimeReqKind kind;
    int owner;   /* rank that posted the request */
    int src;     /* sending rank */
    int dst;     /* receiving rank */
    int tag;
    PrimeChannel channel;
    const float *sbuf; /* send: data to copy */
    float *rbuf;       /* receive: destination */
    size_t n;

    /* Unmatched: link in the destination's mailbox list (mbox_mu of dst). */
    PrimeReqImpl *mbox_next;
    /* Matched send: its receive, and its link in the source's communication
     * queue (comm_mu of src). Written under mbox_mu of dst before the send
     * is queued; read by the communication thread after dequeuing. */
    PrimeReqImpl *partner;
    PrimeReqImpl *work_next;

    /* Completion, guarded by done_mu of the owner. */
    int done;
    PrimeStatus result;

    /* The owner's list of requests not yet waited for (device thread). */
    PrimeReqImpl *live_prev;
    PrimeReqImpl *live_next;
};

typedef struct PrimeTraceEvent {
    char name[PRIME_RT_TRACE_NAME_MAX + 1];
    uint64_t begin_ns; /* since world creation */
    uint64_t end_ns;
    int closed;
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

struct PrimeDev {
    PrimeWorld *world;
    int rank;

    /* Device thread only. */
    PrimeStatus status; /* first error, sticky */
    uint64_t bytes_sent[PRIME_BYTES_KIND_COUNT];
    uint64_t cur_bytes;
    uint64_t peak_bytes;
    PrimeReqImpl *live; /* requests posted and not yet waited for */
    PrimeTrace trace;
    pthread_t thread; /* compute thread of the current run */

    /* Mailbox, guarded by mbox_mu: sends addressed to this device and
     * receives posted by it that have not met their partner yet, each
     * list in posting order. For one (src, tag, channel) at most one of
     * the two lists holds entries. */
    pthread_mutex_t mbox_mu;
    PrimeReqImpl *sends_head;
    PrimeReqImpl *sends_tail;
    PrimeReqImpl *recvs_head;
    PrimeReqImpl *recvs_tail;

    /* Communication thread, guarded by comm_mu: matched sends from this
     * device, in matching order, waiting to be copied. */
    pthread_mutex_t comm_mu;
    pthread_cond_t comm_cv;
    PrimeReqImpl *work_head;
    PrimeReqImpl *work_tail;
    int comm_stop;
    pthread_t comm_thread;
    int comm_running; /* set and read by the world's owner only */

    /* Completion of this device's requests: done_mu guards their `done`
     * and `result`; done_cv is signalled whenever one completes. */
    pthread_mutex_t done_mu;
    pthread_cond_t done_cv;
    int sync_ready; /* all mutexes and condition variables initialised */
};

struct PrimeWorld {
    int ndev;
    PrimeDev *devs;
    uint64_t t0_ns; /* monotonic clock at creation */
    int trace_on;   /* set between runs only */

    /* prime_barrier: generation counting barrier over all devices. */
    pthread_mutex_t bar_mu;
    pthread_cond_t bar_cv;
    int bar_count;
    unsigned long bar_gen;

    /* prime_world_run: the start gate keeps every compute thread from
     * running the rank function until all of them exist, so a failed
     * thread creation never leaves the others blocked on a missing peer. */
    pthread_mutex_t run_mu;
    pthread_cond_t run_cv;
    int running;   /* a run is in progress */
    int run_gate;  /* 0 closed, 1 go, 2 abandon */
    PrimeRankFn run_fn;
    void *run_arg;
};

/* Records `status` as the device's error unless it already has one;
 * returns `status` so callers can `return prime_rt_fail(dev, ...)`. */
PrimeStatus prime_rt_fail(PrimeDev *dev, PrimeStatus status);

/* Monotonic clock in nanoseconds. */
uint64_t prime_rt_now_ns(void);

/* Transport (transport_threads.c). */
/* Starts one communication thread per device; PRIME_ERR_TRANSPORT if one
 * cannot be created (those already started are stopped again). */
PrimeStatus prime_rt_transport_start(PrimeWorld *world);
/* Stops and joins every running communication thread. */
void prime_rt_transport_stop(PrimeWorld *world);
/* Frees every request the device posted and never waited for. Only after
 * prime_rt_transport_stop. */
void prime_rt_transport_free_requests(PrimeDev *dev);
/* Posts a send or receive in the given matching namespace. A send counts
 * n floats under `kind`; receives ignore `kind`. */
PrimeStatus prime_rt_post_send(PrimeDev *dev, int dst, int tag, PrimeChannel channel,
                               const float *buf, size_t n, PrimeByteKind kind, PrimeReq *req);
PrimeStatus prime_rt_post_recv(PrimeDev *dev, int src, int tag, PrimeChannel channel, float *buf,
                               size_t n, PrimeReq *req);

/* Trace (trace.c): frees a device's recorded events. */
void prime_rt_trace_free(PrimeTrace *trace);

#endif /* PRIME_RT_INTERNAL_H */
