/*
 * collective.c — ring reduce-scatter, all-gather and all-reduce, built on
 * the point-to-point transport, and the formulas that predict their bytes.
 *
 * Chunk c of n elements is [c*n/g, (c+1)*n/g). Member at position p sends
 * to position p+1 and receives from p-1 (mod g). Step s = 0 .. g-2:
 *
 *   reduce-scatter: send chunk (p-s-1), receive chunk (p-s-2) into scratch
 *                   and add it into buf. Chunk c starts at position c+1
 *                   and travels the ring, so after g-1 steps position p
 *                   holds the full sum of chunk p. It sends every chunk
 *                   but its own: n - |chunk p| floats.
 *   all-gather:     send chunk (p-s), receive chunk (p-s-1) into buf.
 *                   Position p starts with its own chunk p and sends
 *                   every chunk but chunk p+1: n - |chunk p+1| floats.
 *   all-reduce:     reduce-scatter then all-gather, one scratch for both.
 *
 * The _max variants combine received chunks by maximum instead of sum:
 * the same ring, messages and bytes.
 *
 * Empty chunks (n < g) are skipped on both sides, which changes no byte
 * count. A step waits for its receive, adds it, then waits for its send,
 * so the chunk a step sends is never written by the same step, and the
 * scratch is free again before the next step posts its receive. Messages
 * travel on the collective channel under the caller's tag, and the FIFO
 * order per (source, destination, tag) keeps successive steps apart.
 *
 * A backend may do the collective itself instead (the threads backend
 * does, in shared memory: collective_threads.c); MPI runs this ring.
 *
 * Every wait has the world's deadline (prime_wait). A step that timed out
 * or was aborted ends the collective: the peers are gone, so the later
 * steps would only wait out the deadline again.
 */
#define _POSIX_C_SOURCE 200809L

#include "prime_rt.h"

#include "internal.h"
#include "prime_devops.h"

static int ring_mod(int x, int g) {
    int r = x % g;
    return r < 0 ? r + g : r;
}

/* The caller's position in a valid group, or -1. */
static int group_position(const PrimeDev *dev, const int *group, int gsize, const float *buf,
                          size_t n) {
    if (!group || gsize < 1 || gsize > dev->world->ndev || (!buf && n > 0))
        return -1;
    int pos = -1;
    for (int i = 0; i < gsize; i++) {
        if (group[i] < 0 || group[i] >= dev->world->ndev)
            return -1;
        for (int j = 0; j < i; j++) {
            if (group[j] == group[i])
                return -1;
        }
        if (group[i] == dev->rank)
            pos = i;
    }
    return pos;
}

/* Ring neighbours and chunking of one collective call. */
typedef struct Ring {
    PrimeDev *dev;
    const int *group;
    int g;
    int pos;
    float *buf;
    size_t n;
    int tag;
    int max; /* combine by maximum instead of sum */
} Ring;

/* One ring step: sends chunk sc to the next member and receives chunk rc
 * from the previous one into `into` (or, when `into` is NULL, straight
 * into buf), adding it into buf when `add` is set. Always waits for
 * whatever it posted. */
static PrimeStatus ring_step(const Ring *ring, int sc, int rc, float *into, int add) {
    PrimeDev *dev = ring->dev;
    int next = ring->group[(ring->pos + 1) % ring->g];
    int prev = ring->group[(ring->pos + ring->g - 1) % ring->g];
    size_t slen = prime_chunk_len(ring->n, ring->g, sc);
    size_t rlen = prime_chunk_len(ring->n, ring->g, rc);
    float *rchunk = ring->buf + prime_chunk_lo(ring->n, ring->g, rc);
    PrimeReq sreq = {NULL}, rreq = {NULL};
    PrimeStatus st = PRIME_OK, st2;

    if (slen > 0)
        st = prime_rt_post_send(dev, next, ring->tag, PRIME_RT_CHAN_COLLECTIVE,
                                ring->buf + prime_chunk_lo(ring->n, ring->g, sc), slen,
                                PRIME_BYTES_COLLECTIVE, &sreq);
    if (rlen > 0) {
        st2 = prime_rt_post_recv(dev, prev, ring->tag, PRIME_RT_CHAN_COLLECTIVE,
                                 into ? into : rchunk, rlen, &rreq);
        if (st == PRIME_OK)
            st = st2;
    }
    if (rreq.impl) {
        st2 = prime_wait(dev, &rreq);
        if (st == PRIME_OK)
            st = st2;
        if (st2 == PRIME_OK && add && ring->max)
            prime_max(rchunk, into, rlen);
        else if (st2 == PRIME_OK && add)
            prime_add(rchunk, into, rlen);
    }
    if (sreq.impl) {
        st2 = prime_wait(dev, &sreq);
        if (st == PRIME_OK)
            st = st2;
    }
    return st;
}

/* A failure after which no peer can be expected to answer. */
static int gone(PrimeStatus st) {
    return st == PRIME_ERR_TIMEOUT || st == PRIME_ERR_ABORTED;
}

static PrimeStatus ring_reduce_scatter(const Ring *ring, float *scratch) {
    PrimeStatus st = PRIME_OK;
    for (int s = 0; s + 1 < ring->g && !gone(st); s++) {
        PrimeStatus st2 = ring_step(ring, ring_mod(ring->pos - s - 1, ring->g),
                                    ring_mod(ring->pos - s - 2, ring->g), scratch, 1);
        if (st == PRIME_OK)
            st = st2;
    }
    return st;
}

static PrimeStatus ring_allgather(const Ring *ring) {
    PrimeStatus st = PRIME_OK;
    for (int s = 0; s + 1 < ring->g && !gone(st); s++) {
        PrimeStatus st2 = ring_step(ring, ring_mod(ring->pos - s, ring->g),
                                    ring_mod(ring->pos - s - 1, ring->g), NULL, 0);
        if (st == PRIME_OK)
            st = st2;
    }
    return st;
}

typedef enum CollKind {
    COLL_ALLREDUCE = PRIME_RT_COLL_ALLREDUCE,
    COLL_REDUCE_SCATTER = PRIME_RT_COLL_REDUCE_SCATTER,
    COLL_ALLGATHER = PRIME_RT_COLL_ALLGATHER
} CollKind;

/* Steps keep going after a failed one, so every member posts the same
 * messages and no peer is left waiting for one that never comes. Only a
 * failed scratch allocation returns early (PRIME_ERR_NOMEM); the peers
 * of that member then wait for it, as they would for any missing member. */
static PrimeStatus collective(CollKind kind, int max, PrimeDev *dev, const int *group, int gsize,
                              float *buf, size_t n, int tag) {
    if (!dev)
        return PRIME_ERR_ARG;
    int pos = group_position(dev, group, gsize, buf, n);
    if (pos < 0)
        return prime_rt_fail(dev, PRIME_ERR_ARG);
    if (gsize == 1 || n == 0)
        return PRIME_OK;
    if (prime_rt_fault_point(dev) != PRIME_OK)
        return PRIME_ERR_ABORTED;
    /* One chunk of scratch for a reduction, whichever runs it: the ring
     * receives into it, the backend's own collective sums in it. */
    size_t nscratch = kind == COLL_ALLGATHER ? 0 : prime_collective_scratch(n, gsize);
    float *scratch = nscratch ? prime_alloc(dev, nscratch) : NULL;
    if (nscratch && !scratch)
        return PRIME_ERR_NOMEM;
    int done = 0;
    PrimeStatus st = prime_rt_collective_direct(dev, (int)kind, max, group, gsize, pos, buf, n, tag,
                                                scratch, &done);
    Ring ring = {dev, group, gsize, pos, buf, n, tag, max};
    if (!done && kind == COLL_ALLGATHER) {
        st = ring_allgather(&ring);
    } else if (!done) {
        st = ring_reduce_scatter(&ring, scratch);
        if (kind == COLL_ALLREDUCE && !gone(st)) {
            PrimeStatus st2 = ring_allgather(&ring);
            if (st == PRIME_OK)
                st = st2;
        }
    }
    prime_free(dev, scratch, nscratch);
    return st;
}

PrimeStatus prime_allreduce_sum(PrimeDev *dev, const int *group, int gsize, float *buf, size_t n,
                                int tag) {
    return collective(COLL_ALLREDUCE, 0, dev, group, gsize, buf, n, tag);
}

PrimeStatus prime_reduce_scatter_sum(PrimeDev *dev, const int *group, int gsize, float *buf,
                                     size_t n, int tag) {
    return collective(COLL_REDUCE_SCATTER, 0, dev, group, gsize, buf, n, tag);
}

PrimeStatus prime_allgather(PrimeDev *dev, const int *group, int gsize, float *buf, size_t n,
                            int tag) {
    return collective(COLL_ALLGATHER, 0, dev, group, gsize, buf, n, tag);
}

PrimeStatus prime_allreduce_max(PrimeDev *dev, const int *group, int gsize, float *buf, size_t n,
                                int tag) {
    return collective(COLL_ALLREDUCE, 1, dev, group, gsize, buf, n, tag);
}

PrimeStatus prime_reduce_scatter_max(PrimeDev *dev, const int *group, int gsize, float *buf,
                                     size_t n, int tag) {
    return collective(COLL_REDUCE_SCATTER, 1, dev, group, gsize, buf, n, tag);
}
