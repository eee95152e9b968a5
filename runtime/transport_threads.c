/*
 * transport_threads.c — point-to-point messages between thread-devices.
 *
 * Matching happens in the destination's mailbox (its mbox_mu): a send
 * (src -> dst, tag) takes the oldest receive dst posted for (src, tag),
 * and a receive takes the oldest send; whichever comes second finds the
 * first. Both lists keep posting order, so matching is FIFO per
 * (src, dst, tag) and either side may be posted first. Collectives use a
 * separate channel, so they never match user messages.
 *
 * Whoever matches delivers: a message of at most the world's inline
 * limit (PRIME_INLINE_BYTES, default 64 KiB; threads_internal.h) is
 * copied at once by the thread that posted the second half, with no lock
 * held, which then completes the receive and the send. The peer that
 * waits is woken directly by that thread: no third thread runs between
 * the two devices, which on a machine with fewer cores than threads is
 * what a message costs. A larger message is queued to its source's
 * communication thread, which copies it and completes both the same way,
 * so a device's compute thread keeps running while its large sends are
 * copied. Either way, prime_wait on a send returns only after the data is
 * in the receiver's buffer.
 *
 * Completion sets `done` under the owner's done_mu and signals its
 * done_cv after releasing the mutex, so the woken owner does not at once
 * block on a mutex its waker still holds (the owner may free the request
 * then, so only the device's own condition variable is touched after).
 *
 * A send to oneself is an ordinary message: matched in one's own mailbox,
 * copied by one's own communication thread, and counted in bytes sent.
 * Sizes are compared when copying: a mismatch copies nothing and both
 * requests complete with PRIME_ERR_ARG, which prime_wait records.
 *
 * prime_wait first polls the request's `done` (atomic) up to the world's
 * PRIME_POLLS times (default 10), yielding the core after each poll, and
 * only then sleeps on its device's done_cv: on a machine with fewer cores
 * than devices a peer usually answers within the next time slice, and a
 * wake-up through the condition variable costs more than a yield (the
 * measurements are in docs/timing.md). PRIME_POLLS=0 sleeps at once.
 *
 * prime_wait gives up at the world's deadline: it records who it waited
 * for (prime_rt_note_timeout) and aborts the world (threads_internal.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "prime_rt.h"

#include "threads_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int prime_rt_cond_init(pthread_cond_t *cv) {
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        return -1;
    int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

int prime_rt_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ns) {
    if (deadline_ns == 0) {
        pthread_cond_wait(cv, mu);
        return 0;
    }
    if (prime_rt_now_ns() >= deadline_ns)
        return ETIMEDOUT;
    struct timespec ts;
    ts.tv_sec = (time_t)(deadline_ns / 1000000000u);
    ts.tv_nsec = (long)(deadline_ns % 1000000000u);
    int rc = pthread_cond_timedwait(cv, mu, &ts);
    return rc == ETIMEDOUT ? ETIMEDOUT : 0;
}

static int world_aborted(const PrimeWorld *w) {
    return atomic_load(&w->be->aborted);
}

static int same_key(const PrimeReqImpl *a, const PrimeReqImpl *b) {
    return a->src == b->src && a->tag == b->tag && a->channel == b->channel;
}

/* Removes and returns the oldest request of the list matching `key`. */
static PrimeReqImpl *mbox_take(PrimeReqImpl **head, PrimeReqImpl **tail, const PrimeReqImpl *key) {
    PrimeReqImpl *prev = NULL;
    for (PrimeReqImpl *r = *head; r; prev = r, r = r->mbox_next) {
        if (!same_key(r, key))
            continue;
        if (prev)
            prev->mbox_next = r->mbox_next;
        else
            *head = r->mbox_next;
        if (*tail == r)
            *tail = prev;
        r->mbox_next = NULL;
        return r;
    }
    return NULL;
}

static void mbox_append(PrimeReqImpl **head, PrimeReqImpl **tail, PrimeReqImpl *r) {
    r->mbox_next = NULL;
    if (*tail)
        (*tail)->mbox_next = r;
    else
        *head = r;
    *tail = r;
}

/* Hands a matched send to its source's communication thread. */
static void comm_enqueue(PrimeWorld *w, PrimeReqImpl *send) {
    PrimeDevBackend *src = w->devs[send->src].be;
    pthread_mutex_lock(&src->comm_mu);
    send->work_next = NULL;
    if (src->work_tail)
        src->work_tail->work_next = send;
    else
        src->work_head = send;
    src->work_tail = send;
    pthread_cond_signal(&src->comm_cv);
    pthread_mutex_unlock(&src->comm_mu);
}

/* Marks a request complete. The owner may free it as soon as done_mu is
 * released, so the caller must not touch it afterwards. */
static void complete(PrimeWorld *w, PrimeReqImpl *r, PrimeStatus result) {
    PrimeDevBackend *owner = w->devs[r->owner].be;
    pthread_mutex_lock(&owner->done_mu);
    r->result = result;
    atomic_store_explicit(&r->done, 1, memory_order_release);
    pthread_mutex_unlock(&owner->done_mu);
    pthread_cond_broadcast(&owner->done_cv);
}

/* Copies a matched send into its receive and completes both (receive
 * first). No lock held. */
static void deliver(PrimeWorld *w, PrimeReqImpl *send) {
    PrimeReqImpl *recv = send->partner;
    PrimeStatus result = PRIME_OK;
    if (send->n != recv->n)
        result = PRIME_ERR_ARG;
    else if (send->n > 0)
        memcpy(recv->rbuf, send->sbuf, send->n * sizeof(float));
    complete(w, recv, result);
    complete(w, send, result);
}

/* A matched send: delivered now when small, else by its source's
 * communication thread. */
static void matched(PrimeWorld *w, PrimeReqImpl *send) {
    if (send->n * sizeof(float) <= w->be->inline_bytes)
        deliver(w, send);
    else
        comm_enqueue(w, send);
}

static void *comm_main(void *p) {
    PrimeDev *d = p;
    PrimeWorld *w = d->world;
    PrimeDevBackend *dev = d->be;
    for (;;) {
        pthread_mutex_lock(&dev->comm_mu);
        while (!dev->work_head && !dev->comm_stop)
            pthread_cond_wait(&dev->comm_cv, &dev->comm_mu);
        if (dev->comm_stop) {
            pthread_mutex_unlock(&dev->comm_mu);
            return NULL;
        }
        PrimeReqImpl *send = dev->work_head;
        dev->work_head = send->work_next;
        if (!dev->work_head)
            dev->work_tail = NULL;
        pthread_mutex_unlock(&dev->comm_mu);
        deliver(w, send);
    }
}

PrimeStatus prime_rt_transport_start(PrimeWorld *world) {
    for (int i = 0; i < world->ndev; i++) {
        PrimeDevBackend *dev = world->devs[i].be;
        dev->comm_stop = 0;
        if (pthread_create(&dev->comm_thread, NULL, comm_main, &world->devs[i]) != 0) {
            prime_rt_transport_stop(world);
            return PRIME_ERR_TRANSPORT;
        }
        dev->comm_running = 1;
    }
    return PRIME_OK;
}

void prime_rt_transport_stop(PrimeWorld *world) {
    for (int i = 0; i < world->ndev; i++) {
        PrimeDevBackend *dev = world->devs[i].be;
        if (!dev->comm_running)
            continue;
        pthread_mutex_lock(&dev->comm_mu);
        dev->comm_stop = 1;
        pthread_cond_signal(&dev->comm_cv);
        pthread_mutex_unlock(&dev->comm_mu);
        pthread_join(dev->comm_thread, NULL);
        dev->comm_running = 0;
    }
}

void prime_rt_transport_abort(PrimeWorld *world) {
    for (int i = 0; i < world->ndev; i++) {
        PrimeDevBackend *dev = world->devs[i].be;
        pthread_mutex_lock(&dev->mbox_mu);
        dev->sends_head = dev->sends_tail = NULL;
        dev->recvs_head = dev->recvs_tail = NULL;
        pthread_mutex_unlock(&dev->mbox_mu);
    }
    for (int i = 0; i < world->ndev; i++) {
        PrimeDevBackend *dev = world->devs[i].be;
        pthread_mutex_lock(&dev->done_mu);
        pthread_cond_broadcast(&dev->done_cv);
        pthread_mutex_unlock(&dev->done_mu);
    }
}

void prime_rt_transport_free_requests(PrimeDevBackend *dev) {
    PrimeReqImpl *r = dev->live;
    while (r) {
        PrimeReqImpl *next = r->live_next;
        free(r);
        r = next;
    }
    dev->live = NULL;
}

static void live_push(PrimeDevBackend *dev, PrimeReqImpl *r) {
    r->live_prev = NULL;
    r->live_next = dev->live;
    if (dev->live)
        dev->live->live_prev = r;
    dev->live = r;
}

static void live_remove(PrimeDevBackend *dev, PrimeReqImpl *r) {
    if (r->live_prev)
        r->live_prev->live_next = r->live_next;
    else
        dev->live = r->live_next;
    if (r->live_next)
        r->live_next->live_prev = r->live_prev;
}

/* Allocates a request and registers it with its owner. */
static PrimeReqImpl *req_new(PrimeDev *dev, PrimeReqKind kind, int src, int dst, int tag,
                             PrimeChannel channel, size_t n) {
    PrimeReqImpl *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->kind = kind;
    r->owner = dev->rank;
    r->src = src;
    r->dst = dst;
    r->tag = tag;
    r->channel = channel;
    r->n = n;
    r->result = PRIME_OK;
    live_push(dev->be, r);
    return r;
}

/* A post after the world aborted: the request is dropped unmatched. */
static PrimeStatus refuse(PrimeDev *dev, PrimeReqImpl *r, PrimeReq *req) {
    live_remove(dev->be, r);
    free(r);
    req->impl = NULL;
    return prime_rt_fail(dev, PRIME_ERR_ABORTED);
}

PrimeStatus prime_rt_post_send(PrimeDev *dev, int dst, int tag, PrimeChannel channel,
                               const float *buf, size_t n, PrimeByteKind kind, PrimeReq *req) {
    if (!dev)
        return PRIME_ERR_ARG;
    if (req)
        req->impl = NULL;
    PrimeWorld *w = dev->world;
    if (!req || dst < 0 || dst >= w->ndev || (int)kind < 0 || kind >= PRIME_BYTES_KIND_COUNT ||
        (!buf && n > 0))
        return prime_rt_fail(dev, PRIME_ERR_ARG);
    PrimeReqImpl *s = req_new(dev, PRIME_RT_REQ_SEND, dev->rank, dst, tag, channel, n);
    if (!s)
        return prime_rt_fail(dev, PRIME_ERR_NOMEM);
    s->sbuf = buf;
    dev->bytes_sent[kind] += (uint64_t)n * sizeof(float);
    req->impl = s;

    PrimeDevBackend *to = w->devs[dst].be;
    pthread_mutex_lock(&to->mbox_mu);
    if (world_aborted(w)) {
        pthread_mutex_unlock(&to->mbox_mu);
        return refuse(dev, s, req);
    }
    PrimeReqImpl *r = mbox_take(&to->recvs_head, &to->recvs_tail, s);
    if (r) {
        s->partner = r;
        s->matched = r->matched = 1;
    } else {
        mbox_append(&to->sends_head, &to->sends_tail, s);
    }
    pthread_mutex_unlock(&to->mbox_mu);
    if (r)
        matched(w, s);
    return PRIME_OK;
}

PrimeStatus prime_rt_post_recv(PrimeDev *dev, int src, int tag, PrimeChannel channel, float *buf,
                               size_t n, PrimeReq *req) {
    if (!dev)
        return PRIME_ERR_ARG;
    if (req)
        req->impl = NULL;
    PrimeWorld *w = dev->world;
    if (!req || src < 0 || src >= w->ndev || (!buf && n > 0))
        return prime_rt_fail(dev, PRIME_ERR_ARG);
    PrimeReqImpl *r = req_new(dev, PRIME_RT_REQ_RECV, src, dev->rank, tag, channel, n);
    if (!r)
        return prime_rt_fail(dev, PRIME_ERR_NOMEM);
    r->rbuf = buf;
    req->impl = r;

    PrimeDevBackend *me = dev->be;
    pthread_mutex_lock(&me->mbox_mu);
    if (world_aborted(w)) {
        pthread_mutex_unlock(&me->mbox_mu);
        return refuse(dev, r, req);
    }
    PrimeReqImpl *s = mbox_take(&me->sends_head, &me->sends_tail, r);
    if (s) {
        s->partner = r;
        s->matched = r->matched = 1;
    } else {
        mbox_append(&me->recvs_head, &me->recvs_tail, r);
    }
    pthread_mutex_unlock(&me->mbox_mu);
    if (s)
        matched(w, s);
    return PRIME_OK;
}

/* Waiting for a request that failed to post (impl NULL), was already
 * waited for, or belongs to another device is PRIME_ERR_ARG. */
PrimeStatus prime_wait(PrimeDev *dev, PrimeReq *req) {
    if (!dev)
        return PRIME_ERR_ARG;
    if (!req || !req->impl)
        return prime_rt_fail(dev, PRIME_ERR_ARG);
    PrimeReqImpl *r = req->impl;
    if (r->owner != dev->rank)
        return prime_rt_fail(dev, PRIME_ERR_ARG);
    PrimeDevBackend *me = dev->be;
    PrimeWorld *w = dev->world;
    uint64_t deadline = prime_rt_deadline(w->timeout_ns);
    int timed_out = 0;
    /* A few polls, each giving the core away, before sleeping: the peer
     * often completes the request within its next time slice. */
    for (int i = 0; i < w->be->polls && !atomic_load_explicit(&r->done, memory_order_acquire); i++)
        sched_yield();
    pthread_mutex_lock(&me->done_mu);
    while (!r->done && !world_aborted(w)) {
        if (prime_rt_cond_wait_until(&me->done_cv, &me->done_mu, deadline) == ETIMEDOUT &&
            !r->done) {
            timed_out = 1;
            break;
        }
    }
    int done = r->done;
    PrimeStatus result = r->result;
    pthread_mutex_unlock(&me->done_mu);
    if (!done) {
        if (timed_out) {
            int peer = r->kind == PRIME_RT_REQ_SEND ? r->dst : r->src;
            prime_rt_note_timeout(dev, "%s rank %d (tag %d%s) not completed",
                                  r->kind == PRIME_RT_REQ_SEND ? "send to" : "receive from", peer,
                                  r->tag,
                                  r->channel == PRIME_RT_CHAN_COLLECTIVE ? ", collective" : "");
            prime_rt_world_abort(w);
        }
        result = timed_out ? PRIME_ERR_TIMEOUT : PRIME_ERR_ABORTED;
        /* Nothing is matched any more; a request that was is being copied. */
        PrimeDevBackend *dst = w->devs[r->dst].be;
        pthread_mutex_lock(&dst->mbox_mu);
        int matched = r->matched;
        pthread_mutex_unlock(&dst->mbox_mu);
        if (matched) {
            pthread_mutex_lock(&me->done_mu);
            while (!r->done)
                pthread_cond_wait(&me->done_cv, &me->done_mu);
            pthread_mutex_unlock(&me->done_mu);
        }
    }
    live_remove(me, r);
    free(r);
    req->impl = NULL;
    return prime_rt_fail(dev, result);
}
