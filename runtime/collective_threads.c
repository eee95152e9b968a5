/*
 * collective_threads.c — reduce-scatter, all-gather and all-reduce of the
 * threads backend, in shared memory.
 *
 * Every device of a threads world is a thread of one process, so a
 * collective needs no messages: the members of the group meet at a slot
 * (keyed by the group's ranks and the tag; a key is used by one
 * collective at a time), each leaves its buffer's address there,
 * and then each member works on its own chunk (the chunking of
 * collective.c) straight from the others' buffers:
 *
 *   reduce-scatter: member p sums chunk p of every member's buffer, in the
 *                   ring's order (collective.c: chunk p of member p+1, plus
 *                   member p+2's, ..., plus member p's last, in the
 *                   caller's scratch), into chunk p of its own, so that the
 *                   sums are the ring's to the bit; nobody else reads or
 *                   writes chunk p of p's buffer meanwhile (member q reads
 *                   chunk q only);
 *   all-gather:     member p copies chunk q of member q's buffer into its
 *                   own, for every q != p; chunk q of q's buffer is no
 *                   longer written, and nobody reads p's other chunks;
 *   all-reduce:     reduce-scatter, then all-gather.
 *
 * A barrier of the slot's members separates the phases, and one more ends
 * the collective, so that no member returns (and frees or rewrites its
 * buffer) while another still reads it. Each member counts the bytes the
 * ring of collective.c would have sent from it (n - |chunk p| for a
 * reduce-scatter, n - |chunk p+1| for an all-gather): the volume that
 * leaves its buffer is the same, and the counters (its scratch included)
 * keep equalling the compiler's prediction. No communication thread runs, and a device
 * waits only at the barriers, for the slowest member.
 *
 * Deadlines and aborts are the world's: a barrier gives up at the world's
 * timeout (prime_rt_note_timeout, then the world aborts), and an abort
 * wakes every waiter. A member that fails still waits, before it returns,
 * until no member of its slot is inside a phase (reading or writing
 * buffers): that work is bounded, so no buffer is touched after its owner
 * returned. A slot is freed by its last member to leave; slots a failed
 * run left behind are freed with the world.
 */
#define _POSIX_C_SOURCE 200809L

#include "prime_rt.h"

#include "threads_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct PrimeCollSlot {
    PrimeCollSlot *next;
    int g, tag, *group; /* the key: the group's ranks in order, the tag */
    pthread_cond_t cv;
    int arrived;      /* at the current barrier */
    atomic_ulong gen; /* barriers passed (read unlocked by the polls) */
    int busy;         /* members inside a phase */
    int left;         /* members that returned */
    int closed;       /* the last barrier passed: the key is being released */
    float **bufs;     /* per position */
    int *reached;     /* per position: barriers it arrived at */
};

int prime_rt_coll_init(PrimeWorldBackend *w) {
    w->coll_slots = NULL;
    if (pthread_mutex_init(&w->coll_mu, NULL) != 0)
        return 0;
    if (prime_rt_cond_init(&w->coll_cv) != 0) {
        pthread_mutex_destroy(&w->coll_mu);
        return 0;
    }
    return 1;
}

static void slot_free(PrimeCollSlot *s) {
    pthread_cond_destroy(&s->cv);
    free(s->bufs);
    free(s->group);
    free(s->reached);
    free(s);
}

void prime_rt_coll_destroy(PrimeWorldBackend *w) {
    while (w->coll_slots) {
        PrimeCollSlot *s = w->coll_slots;
        w->coll_slots = s->next;
        slot_free(s);
    }
    pthread_cond_destroy(&w->coll_cv);
    pthread_mutex_destroy(&w->coll_mu);
}

void prime_rt_coll_abort(PrimeWorldBackend *w) {
    pthread_mutex_lock(&w->coll_mu);
    for (PrimeCollSlot *s = w->coll_slots; s; s = s->next)
        pthread_cond_broadcast(&s->cv);
    pthread_cond_broadcast(&w->coll_cv);
    pthread_mutex_unlock(&w->coll_mu);
}

static PrimeCollSlot *slot_find(PrimeWorldBackend *w, const int *group, int g, int tag) {
    for (PrimeCollSlot *s = w->coll_slots; s; s = s->next)
        if (s->g == g && s->tag == tag && memcmp(s->group, group, (size_t)g * sizeof *group) == 0)
            return s;
    return NULL;
}

static PrimeCollSlot *slot_new(PrimeWorldBackend *w, const int *group, int g, int tag) {
    PrimeCollSlot *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->bufs = calloc((size_t)g, sizeof *s->bufs);
    s->group = malloc((size_t)g * sizeof *s->group);
    s->reached = calloc((size_t)g, sizeof *s->reached);
    if (!s->bufs || !s->group || !s->reached || prime_rt_cond_init(&s->cv) != 0) {
        free(s->bufs);
        free(s->group);
        free(s->reached);
        free(s);
        return NULL;
    }
    memcpy(s->group, group, (size_t)g * sizeof *group);
    s->g = g;
    s->tag = tag;
    s->next = w->coll_slots;
    w->coll_slots = s;
    return s;
}

static void slot_unlink(PrimeWorldBackend *w, PrimeCollSlot *s) {
    for (PrimeCollSlot **p = &w->coll_slots; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            return;
        }
}

/* A barrier of the slot's members, under coll_mu; `last` marks the
 * collective's final one. */
static PrimeStatus slot_barrier(PrimeWorldBackend *w, PrimeCollSlot *s, int pos, uint64_t deadline,
                                int last) {
    unsigned long gen = atomic_load(&s->gen);
    if (atomic_load(&w->aborted))
        return PRIME_ERR_ABORTED;
    s->reached[pos]++;
    if (++s->arrived == s->g) {
        s->arrived = 0;
        s->closed = last;
        atomic_fetch_add(&s->gen, 1);
        pthread_cond_broadcast(&s->cv);
        return PRIME_OK;
    }
    /* Poll first, as prime_wait does (PRIME_POLLS): the last member
     * usually arrives within the next time slice. */
    pthread_mutex_unlock(&w->coll_mu);
    for (int i = 0; i < w->polls && atomic_load(&s->gen) == gen; ++i)
        sched_yield();
    pthread_mutex_lock(&w->coll_mu);
    while (gen == atomic_load(&s->gen)) {
        if (atomic_load(&w->aborted))
            return PRIME_ERR_ABORTED;
        if (prime_rt_cond_wait_until(&s->cv, &w->coll_mu, deadline) == ETIMEDOUT &&
            gen == atomic_load(&s->gen))
            return PRIME_ERR_TIMEOUT;
    }
    return PRIME_OK;
}

static const char *kind_name(int kind) {
    return kind == PRIME_RT_COLL_ALLGATHER        ? "all-gather"
           : kind == PRIME_RT_COLL_REDUCE_SCATTER ? "reduce-scatter"
                                                  : "all-reduce";
}

/* "K of G arrived, waiting for rank R, ..." at the barrier member pos
 * gave up at; under coll_mu. */
static void missing_text(const PrimeCollSlot *s, int pos, char *buf, size_t cap) {
    int at = s->reached[pos], here = 0;
    for (int q = 0; q < s->g; ++q)
        here += s->reached[q] >= at;
    size_t len = (size_t)snprintf(buf, cap, "%d of %d arrived", here, s->g);
    int listed = 0;
    for (int q = 0; q < s->g && len < cap; ++q) {
        if (s->reached[q] >= at)
            continue;
        if (listed == 8) {
            len += (size_t)snprintf(buf + len, cap - len, ", ...");
            break;
        }
        len += (size_t)snprintf(buf + len, cap - len, "%s%d", listed ? ", " : ", waiting for rank ",
                                s->group[q]);
        listed++;
    }
}

/* Member pos's work of one phase, outside the lock. */
static void reduce_chunk(PrimeCollSlot *s, int pos, size_t n, int max, float *scratch) {
    size_t lo = prime_chunk_lo(n, s->g, pos), len = prime_chunk_len(n, s->g, pos);
    void (*combine)(float *, const float *, size_t) = max ? prime_max : prime_add;
    float *mine = s->bufs[pos] + lo;
    if (len == 0)
        return;
    if (s->g == 2) {
        combine(mine, s->bufs[(pos + 1) % 2] + lo, len);
        return;
    }
    memcpy(scratch, s->bufs[(pos + 1) % s->g] + lo, len * sizeof(float));
    for (int j = 2; j < s->g; ++j)
        combine(scratch, s->bufs[(pos + j) % s->g] + lo, len);
    combine(mine, scratch, len);
}

static void gather_chunks(PrimeCollSlot *s, int pos, size_t n) {
    for (int j = 1; j < s->g; ++j) {
        int q = (pos + j) % s->g;
        size_t lo = prime_chunk_lo(n, s->g, q), len = prime_chunk_len(n, s->g, q);
        if (len > 0)
            memcpy(s->bufs[pos] + lo, s->bufs[q] + lo, len * sizeof(float));
    }
}

/* Joins the slot of (group, tag), waiting while a collective of the
 * same key is still being left; under coll_mu. */
static PrimeStatus slot_join(PrimeWorldBackend *w, const int *group, int g, int tag,
                             uint64_t deadline, PrimeCollSlot **out) {
    for (;;) {
        PrimeCollSlot *s = slot_find(w, group, g, tag);
        if (atomic_load(&w->aborted))
            return PRIME_ERR_ABORTED;
        if (s && !s->closed) {
            *out = s;
            return PRIME_OK;
        }
        if (!s) {
            *out = slot_new(w, group, g, tag);
            return *out ? PRIME_OK : PRIME_ERR_NOMEM;
        }
        if (prime_rt_cond_wait_until(&w->coll_cv, &w->coll_mu, deadline) == ETIMEDOUT)
            return PRIME_ERR_TIMEOUT;
    }
}

PrimeStatus prime_rt_collective_direct(PrimeDev *dev, int kind, int max, const int *group, int g,
                                       int pos, float *buf, size_t n, int tag, float *scratch,
                                       int *done) {
    PrimeWorldBackend *w = dev->world->be;
    *done = w->coll_direct;
    if (!*done)
        return PRIME_OK;
    uint64_t deadline = prime_rt_deadline(dev->world->timeout_ns);
    const int reduce = kind != PRIME_RT_COLL_ALLGATHER,
              gather = kind != PRIME_RT_COLL_REDUCE_SCATTER;
    PrimeCollSlot *s = NULL;
    PrimeStatus st;
    pthread_mutex_lock(&w->coll_mu);
    st = slot_join(w, group, g, tag, deadline, &s);
    if (st == PRIME_OK) {
        s->bufs[pos] = buf;
        st = slot_barrier(w, s, pos, deadline, 0);
    }
    for (int phase = 0; phase < 2 && st == PRIME_OK; ++phase) {
        if (!(phase == 0 ? reduce : gather))
            continue;
        s->busy++;
        pthread_mutex_unlock(&w->coll_mu);
        if (phase == 0)
            reduce_chunk(s, pos, n, max, scratch);
        else
            gather_chunks(s, pos, n);
        pthread_mutex_lock(&w->coll_mu);
        if (--s->busy == 0)
            pthread_cond_broadcast(&s->cv);
        st = slot_barrier(w, s, pos, deadline, phase == 1 || !gather);
    }
    char missing[160] = "";
    if (s && st == PRIME_ERR_TIMEOUT)
        missing_text(s, pos, missing, sizeof missing);
    if (s && st != PRIME_OK)
        while (s->busy > 0)
            pthread_cond_wait(&s->cv, &w->coll_mu);
    if (s && ++s->left == g) {
        slot_unlink(w, s);
        slot_free(s);
        pthread_cond_broadcast(&w->coll_cv);
    }
    pthread_mutex_unlock(&w->coll_mu);
    if (st == PRIME_OK) {
        size_t sent = 0;
        if (reduce)
            sent += n - prime_chunk_len(n, g, pos);
        if (gather)
            sent += n - prime_chunk_len(n, g, (pos + 1) % g);
        dev->bytes_sent[PRIME_BYTES_COLLECTIVE] += (uint64_t)sent * sizeof(float);
    } else if (st == PRIME_ERR_TIMEOUT) {
        prime_rt_note_timeout(dev, "%s of %d devices (tag %d, collective) not completed: %s",
                              kind_name(kind), g, tag, missing);
        prime_rt_world_abort(dev->world);
    }
    return prime_rt_fail(dev, st);
}
