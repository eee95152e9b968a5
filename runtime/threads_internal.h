/*
 * threads_internal.h — private structures of the threads backend
 * (world_threads.c, transport_threads.c): every device is a thread of one
 * process. Every field says which thread may touch it and which lock
 * guards it:
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
 *
 * Deadlines: every wait (prime_wait, prime_barrier, the join at the end of
 * prime_world_run) uses the world's timeout, on condition variables that
 * run on CLOCK_MONOTONIC. The first wait that times out aborts the world
 * (prime_rt_world_abort): `aborted` is set, every mailbox emptied and
 * every waiter woken; from then on nothing is matched, waits and posts
 * fail with PRIME_ERR_ABORTED, and a wait on a request already matched
 * still waits for its copy (a memcpy by a live communication thread), so
 * no buffer is written after its wait returned.
 */
#ifndef PRIME_RT_THREADS_INTERNAL_H
#define PRIME_RT_THREADS_INTERNAL_H

#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct PrimeCollSlot PrimeCollSlot;

typedef enum PrimeReqKind { PRIME_RT_REQ_SEND = 0, PRIME_RT_REQ_RECV } PrimeReqKind;

typedef struct PrimeReqImpl PrimeReqImpl;
struct PrimeReqImpl {
    /* Fixed when posted. */
    PrimeReqKind kind;
    int owner; /* rank that posted the request */
    int src;   /* sending rank */
    int dst;   /* receiving rank */
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
    int matched; /* met its partner (mbox_mu of dst) */

    /* Completion, guarded by done_mu of the owner; `done` is atomic so
     * that prime_wait can poll it without the lock. */
    atomic_int done;
    PrimeStatus result;

    /* The owner's list of requests not yet waited for (device thread). */
    PrimeReqImpl *live_prev;
    PrimeReqImpl *live_next;
};

/* One per device; PrimeDev.be points at it. */
struct PrimeDevBackend {
    /* Device thread only. */
    PrimeReqImpl *live; /* requests posted and not yet waited for */
    pthread_t thread;   /* compute thread of the current run */

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

struct PrimeWorldBackend {
    PrimeDevBackend *devs; /* one per rank */

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
    int running;  /* a run is in progress */
    int run_gate; /* 0 closed, 1 go, 2 abandon */
    PrimeRankFn run_fn;
    void *run_arg;
    int finished;            /* compute threads that returned (run_mu) */
    uint64_t last_finish_ns; /* when the latest of them did (run_mu) */
    unsigned char *returned; /* per rank: its compute thread returned (run_mu) */

    /* Messages of at most this many bytes are copied by the thread that
     * matches them (transport_threads.c); PRIME_INLINE_BYTES, read at
     * creation. */
    size_t inline_bytes;
    /* Polls of prime_wait before it sleeps (PRIME_POLLS). */
    int polls;
    /* Compute threads pinned to cores (PRIME_PIN, world_threads.c). */
    int pin;
    int ncpu;

    /* Collectives in shared memory (collective_threads.c): the slots where
     * the members of a group meet, guarded by coll_mu; coll_cv is
     * signalled when a slot is freed. coll_direct: 0 under
     * PRIME_COLLECTIVES=ring (read at creation), which sends the chunks of
     * a ring as messages instead (collective.c). */
    pthread_mutex_t coll_mu;
    pthread_cond_t coll_cv;
    PrimeCollSlot *coll_slots;
    int coll_direct;

    /* Set once by the first wait that times out; never cleared. */
    atomic_int aborted;
    /* Compute threads that did not return even after the abort were left
     * running (detached): the world's memory is then left to the process
     * exit. World's owner only. */
    int broken;
};

/* Waits on `cv` until signalled or until the monotonic `deadline_ns`
 * (0: no deadline); returns ETIMEDOUT once it has passed, else 0. */
int prime_rt_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ns);
/* Initialises a condition variable on CLOCK_MONOTONIC; 0 on success. */
int prime_rt_cond_init(pthread_cond_t *cv);
/* Aborts the world (see above); idempotent, any thread. */
void prime_rt_world_abort(PrimeWorld *world);

/* Collectives in shared memory (collective_threads.c): the slot list's
 * lock (1 on success), its release with every slot left, and the wake-up
 * of every member waiting in one (part of the abort). */
int prime_rt_coll_init(PrimeWorldBackend *w);
void prime_rt_coll_destroy(PrimeWorldBackend *w);
void prime_rt_coll_abort(PrimeWorldBackend *w);

/* Transport (transport_threads.c). */
/* Starts one communication thread per device; PRIME_ERR_TRANSPORT if one
 * cannot be created (those already started are stopped again). */
PrimeStatus prime_rt_transport_start(PrimeWorld *world);
/* Stops and joins every running communication thread. */
void prime_rt_transport_stop(PrimeWorld *world);
/* Frees every request the device posted and never waited for. Only after
 * prime_rt_transport_stop. */
void prime_rt_transport_free_requests(PrimeDevBackend *dev);
/* Empties every mailbox and wakes every prime_wait (part of the abort). */
void prime_rt_transport_abort(PrimeWorld *world);

#endif /* PRIME_RT_THREADS_INTERNAL_H */
