/*
 * schedule.c — per-phase, per-device lowering of one operator instance
 * (see schedule.h for what and why).
 *
 * The builder keeps a model of the machine: for every tensor and device,
 * the tiles the device holds and the slot of each. A phase is simulated
 * step by step, appending to every rank's action list what the emitted
 * program will do. Backward and gradient orders are chosen by a dry run
 * of both on a copy of the machine, which also yields each phase's
 * required initial residency. Accumulators remember which reduction
 * slices they received, which is how double counting and missed slices
 * are found.
 */
#include "schedule.h"

#include "autodiff.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS 1024
#define SLOT_WORDS (MAX_SLOTS / 64)

const char *phase_name(PhaseKind kind) {
    static const char *const names[] = {"init", "forward", "dy-in", "backward", "gradient"};
    return kind < PHASE_KIND_COUNT ? names[kind] : "?";
}

const char *move_kind_name(MoveKind kind) {
    static const char *const names[] = {"shift", "permutation", "exchange", "conversion"};
    return kind < MOVE_KIND_COUNT ? names[kind] : "?";
}

/* ------------------------------------------------------------------ */
/* The machine model                                                   */

typedef struct Held {
    long tile;
    int slot;
} Held;

typedef struct Store {
    Held *items;
    int count;
    int cap;
} Store;

typedef struct Acc {
    long tile;
    int slot;
    int dev;
    unsigned char *red; /* times each reduction slice was added */
    long *red_step;     /* the step that first added it */
    long first_dup;     /* first reduction slice added twice, or -1 */
    long dup_steps[2];
} Acc;

typedef struct Machine {
    int ntensors;
    int ndev;
    Store *stores[SCHED_MAX_TENSORS];       /* [dev] */
    uint64_t *slot_used[SCHED_MAX_TENSORS]; /* bitmap: [dev * SLOT_WORDS + slot / 64] */
} Machine;

/* Moves of trial runs are discarded: their reasons are not written out. */
#define TRIAL_REASON "(trial run)"

typedef struct Builder {
    Arena *arena;
    DiagSink *sink;
    Schedule *s;
    const SliceTable *st;
    int ndev;
    long steps;
    int dry; /* a trial run: no diagnostics, actions discarded */
    int failed;
    int next_tag;
    PhaseSched *ph;
    const Instance *inst; /* of the current phase */
    int nsums;            /* storage tensors made for summing gradients (names) */
    /* Partial sums of a gradient that more contributions will be added
     * to are all-reduced once, after the last: finish_accumulators puts
     * the phase's all-reduces in `deferred` instead of emitting them, and
     * pending[model tensor] holds those of the gradient summed so far. */
    int defer;
    PtrVec deferred;
    PtrVec *pending;
    /* The collectives that last produced each storage tensor's tiles and
     * the phase index they ran in (a conversion right after may turn an
     * all-reduce into a reduce-scatter). */
    PtrVec *reduced;
    int *reduced_phase;
    int phase_index; /* of the phase being built */
    /* The layout in which a forward phase first consumed each storage
     * tensor: where that value's gradient is wanted next (the producer's
     * backward phase reads it there in an aligned plan). */
    Layout *consumed;
    /* Per storage tensor, initialised when its id is handed out (below
     * this point the Builder starts zeroed). */
    Machine m;
    /* Filled by a run: tiles a device needed that nobody held. */
    Layout need[SCHED_MAX_TENSORS];
    int track_need[SCHED_MAX_TENSORS];
} Builder;

static Store *store_of(Builder *b, int tensor, int dev) {
    return &b->m.stores[tensor][dev];
}

static int store_find(const Store *st, long tile) {
    for (int i = 0; i < st->count; ++i)
        if (st->items[i].tile == tile)
            return i;
    return -1;
}

static void store_add(Builder *b, Store *st, long tile, int slot) {
    if (st->count == st->cap) {
        int cap = st->cap ? st->cap * 2 : 4;
        Held *items = ARENA_ARRAY_UNINIT(b->arena, Held, cap);
        if (st->count)
            memcpy(items, st->items, sizeof(Held) * (size_t)st->count);
        st->items = items;
        st->cap = cap;
    }
    st->items[st->count].tile = tile;
    st->items[st->count].slot = slot;
    st->count++;
}

static void store_remove(Store *st, int index) {
    st->items[index] = st->items[st->count - 1];
    st->count--;
}

/* Gives the machine stores for every storage tensor defined so far. */
static void machine_init(Builder *b) {
    b->m.ndev = b->ndev;
    for (int t = b->m.ntensors; t < b->s->ntensors; ++t) {
        b->m.stores[t] = ARENA_ARRAY(b->arena, Store, b->ndev);
        b->m.slot_used[t] = arena_alloc(b->arena, sizeof(uint64_t) * (size_t)b->ndev * SLOT_WORDS);
    }
    b->m.ntensors = b->s->ntensors;
}

static void machine_copy(Builder *b, Machine *dst, const Machine *src) {
    dst->ntensors = src->ntensors;
    dst->ndev = src->ndev;
    /* One block for every store, held tile and slot bitmap. */
    size_t words = sizeof(uint64_t) * (size_t)src->ndev * SLOT_WORDS, total = 0;
    for (int t = 0; t < src->ntensors; ++t) {
        total += sizeof(Store) * (size_t)src->ndev + words;
        for (int d = 0; d < src->ndev; ++d)
            total += sizeof(Held) * (size_t)src->stores[t][d].count;
    }
    char *at = arena_alloc_uninit(b->arena, total ? total : 1);
    for (int t = 0; t < src->ntensors; ++t) {
        dst->stores[t] = (Store *)at;
        at += sizeof(Store) * (size_t)src->ndev;
        dst->slot_used[t] = (uint64_t *)at;
        at += words;
        memcpy(dst->slot_used[t], src->slot_used[t], words);
        for (int d = 0; d < src->ndev; ++d) {
            const Store *s = &src->stores[t][d];
            Store *o = &dst->stores[t][d];
            o->count = o->cap = s->count;
            o->items = NULL;
            if (s->count) {
                o->items = (Held *)at;
                at += sizeof(Held) * (size_t)s->count;
                memcpy(o->items, s->items, sizeof(Held) * (size_t)s->count);
            }
        }
    }
}

/* Copies the stores of the listed tensors only (a trial run of one phase
 * touches its own operands and nothing else). */
static void machine_copy_some(Builder *b, Machine *dst, const Machine *src, const int *tensors,
                              int n) {
    size_t words = sizeof(uint64_t) * (size_t)src->ndev * SLOT_WORDS;
    for (int k = 0; k < n; ++k) {
        int t = tensors[k];
        dst->stores[t] = ARENA_ARRAY_UNINIT(b->arena, Store, src->ndev);
        dst->slot_used[t] = arena_alloc_uninit(b->arena, words);
        memcpy(dst->slot_used[t], src->slot_used[t], words);
        for (int d = 0; d < src->ndev; ++d) {
            const Store *s = &src->stores[t][d];
            Store *o = &dst->stores[t][d];
            o->count = o->cap = s->count;
            o->items = s->count ? ARENA_ARRAY_UNINIT(b->arena, Held, s->count) : NULL;
            if (s->count)
                memcpy(o->items, s->items, sizeof(Held) * (size_t)s->count);
        }
    }
}

/* ------------------------------------------------------------------ */
/* Actions                                                             */

static PrimeAction *act(Builder *b, int dev, int op) {
    static PrimeAction scratch;
    if (b->dry || !b->ph) {
        memset(&scratch, 0, sizeof scratch);
        return &scratch;
    }
    PhaseSched *ph = b->ph;
    if (ph->nactions[dev] == ph->action_cap[dev]) {
        int cap = ph->action_cap[dev] ? ph->action_cap[dev] * 2 : 16;
        PrimeAction *a = ARENA_ARRAY_UNINIT(b->arena, PrimeAction, cap);
        if (ph->nactions[dev])
            memcpy(a, ph->actions[dev], sizeof(PrimeAction) * (size_t)ph->nactions[dev]);
        ph->actions[dev] = a;
        ph->action_cap[dev] = cap;
    }
    PrimeAction *a = &ph->actions[dev][ph->nactions[dev]++];
    memset(a, 0, sizeof *a);
    a->op = op;
    return a;
}

static int slot_alloc(Builder *b, int tensor, int dev) {
    uint64_t *used = b->m.slot_used[tensor] + (size_t)dev * SLOT_WORDS;
    for (int w = 0; w < SLOT_WORDS; ++w) {
        if (used[w] == ~(uint64_t)0)
            continue;
        int bit = 0;
        while (used[w] & ((uint64_t)1 << bit))
            bit++;
        used[w] |= (uint64_t)1 << bit;
        int s = w * 64 + bit;
        if (!b->dry && s + 1 > b->s->tensors[tensor].max_slots)
            b->s->tensors[tensor].max_slots = s + 1;
        return s;
    }
    ICE("more than %d live tiles of one tensor on one device", MAX_SLOTS);
}

/* Allocates a zeroed tile and returns its slot. */
static int emit_alloc(Builder *b, int tensor, int dev) {
    int slot = slot_alloc(b, tensor, dev);
    PrimeAction *a = act(b, dev, PRIME_ACT_ALLOC);
    a->tensor = tensor;
    a->slot = slot;
    return slot;
}

static void emit_free(Builder *b, int tensor, int dev, int slot) {
    b->m.slot_used[tensor][(size_t)dev * SLOT_WORDS + slot / 64] &= ~((uint64_t)1 << (slot % 64));
    PrimeAction *a = act(b, dev, PRIME_ACT_FREE);
    a->tensor = tensor;
    a->slot = slot;
}

static void emit_send(Builder *b, int tensor, int dev, int slot, int peer, int tag, int kind) {
    PrimeAction *a = act(b, dev, PRIME_ACT_SEND);
    a->tensor = tensor;
    a->slot = slot;
    a->peer = peer;
    a->tag = tag;
    a->kind = kind;
}

static void emit_recv(Builder *b, int tensor, int dev, int slot, int peer, int tag) {
    PrimeAction *a = act(b, dev, PRIME_ACT_RECV);
    a->tensor = tensor;
    a->slot = slot;
    a->peer = peer;
    a->tag = tag;
}

static void emit_wait_all(Builder *b) {
    for (int d = 0; d < b->ndev; ++d)
        act(b, d, PRIME_ACT_WAIT);
}

/* ------------------------------------------------------------------ */
/* Tiles and layouts                                                   */

long sched_tile_coord(const SchedTensor *t, long tile, int x) {
    for (int y = t->ndims - 1; y > x; --y)
        tile /= t->nslices[y];
    return tile % t->nslices[x];
}

const char *sched_tile_name(Arena *arena, const Schedule *s, int tensor, long tile) {
    const SchedTensor *t = &s->tensors[tensor];
    char buf[256];
    size_t n = 0;
    buf[n++] = '(';
    for (int x = 0; x < t->ndims && n < sizeof buf - 40; ++x) {
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s=%ld", x ? ", " : "", t->dimnames[x],
                              sched_tile_coord(t, tile, x));
    }
    snprintf(buf + n, sizeof buf - n, ")");
    return arena_strdup(arena, buf);
}

long sched_operand_tile(const Schedule *s, const PhaseSched *ph, const Operand *o, int dev,
                        long t) {
    const SchedTensor *ts = &s->tensors[o->tensor];
    const SliceTable *st = &s->slices[ph->inst];
    long id = 0;
    for (int x = 0; x < o->ndims; ++x)
        id = id * ts->nslices[x] + slice_at(st, o->opdims[x], dev, t);
    return id;
}

long sched_op_step(const Schedule *s, const PhaseSched *ph, long step) {
    return ph->reversed ? s->model->instances[ph->inst].steps - 1 - step : step;
}

/* Tile of an operand at device dev and operator step t (not phase step). */
static long tile_at(const Builder *b, const Operand *o, int dev, long t) {
    return sched_operand_tile(b->s, b->ph, o, dev, t);
}

static long op_step(const Builder *b, const PhaseSched *ph, long s) {
    return sched_op_step(b->s, ph, s);
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Snapshot of which tiles (and slots) every device holds. */
static Layout layout_of(Builder *b, int tensor) {
    Layout l;
    l.ndev = b->ndev;
    l.count = ARENA_ARRAY_UNINIT(b->arena, int, b->ndev);
    l.tiles = ARENA_ARRAY_UNINIT(b->arena, long *, b->ndev);
    l.slots = ARENA_ARRAY_UNINIT(b->arena, int *, b->ndev);
    for (int d = 0; d < b->ndev; ++d) {
        const Store *st = store_of(b, tensor, d);
        l.count[d] = st->count;
        l.tiles[d] = ARENA_ARRAY_UNINIT(b->arena, long, st->count + 1);
        l.slots[d] = ARENA_ARRAY_UNINIT(b->arena, int, st->count + 1);
        for (int i = 0; i < st->count; ++i)
            l.tiles[d][i] = st->items[i].tile;
        qsort(l.tiles[d], (size_t)st->count, sizeof(long), cmp_long);
        for (int i = 0; i < st->count; ++i)
            l.slots[d][i] = st->items[store_find(st, l.tiles[d][i])].slot;
    }
    return l;
}

static Layout layout_empty(Builder *b) {
    Layout l;
    l.ndev = b->ndev;
    l.count = ARENA_ARRAY(b->arena, int, b->ndev);
    l.tiles = ARENA_ARRAY(b->arena, long *, b->ndev);
    l.slots = ARENA_ARRAY(b->arena, int *, b->ndev);
    return l;
}

static int layout_has(const Layout *l, int dev, long tile) {
    for (int i = 0; i < l->count[dev]; ++i)
        if (l->tiles[dev][i] == tile)
            return 1;
    return 0;
}

static void layout_add(Builder *b, Layout *l, int dev, long tile) {
    if (layout_has(l, dev, tile))
        return;
    long *tiles = ARENA_ARRAY(b->arena, long, l->count[dev] + 1);
    if (l->count[dev])
        memcpy(tiles, l->tiles[dev], sizeof(long) * (size_t)l->count[dev]);
    tiles[l->count[dev]++] = tile;
    qsort(tiles, (size_t)l->count[dev], sizeof(long), cmp_long);
    l->tiles[dev] = tiles;
}

/* ------------------------------------------------------------------ */
/* Choosing where a tile comes from                                    */

typedef int (*CandidateFn)(Builder *b, int tensor, int src, int dst, long tile, void *ctx);

static long axis_distance(const Mesh *mesh, const long *delta) {
    long dist = 0;
    for (int a = 0; a < mesh->naxes; ++a) {
        long d = delta[a], back = mesh->sizes[a] - delta[a];
        dist += d < back ? d : back;
    }
    return dist;
}

static int shifted(const Builder *b, int dev, const long *delta) {
    long c[IR_MAX_AXES];
    mesh_coords(&b->s->model->mesh, dev, c);
    for (int a = 0; a < b->s->model->mesh.naxes; ++a)
        c[a] = (c[a] + delta[a]) % b->s->model->mesh.sizes[a];
    return mesh_rank(&b->s->model->mesh, c);
}

static void delta_between(const Builder *b, int dst, int src, long *delta) {
    long cd[IR_MAX_AXES], cs[IR_MAX_AXES];
    mesh_coords(&b->s->model->mesh, dst, cd);
    mesh_coords(&b->s->model->mesh, src, cs);
    const Mesh *mesh = &b->s->model->mesh;
    for (int a = 0; a < mesh->naxes; ++a)
        delta[a] = ((cs[a] - cd[a]) % mesh->sizes[a] + mesh->sizes[a]) % mesh->sizes[a];
}

/* Picks a source for every receiver: one uniform mesh offset if one
 * serves all of them (the nearest such), else the nearest candidate per
 * receiver. Fills src[] and classifies the move. `exclusive`: a source
 * can serve one receiver only (accumulators). */
static MoveKind choose_sources(Builder *b, int tensor, int nrecv, const int *dst, const long *tile,
                               CandidateFn cand, void *ctx, int exclusive, int *src,
                               long *delta_out) {
    long best_delta[IR_MAX_AXES];
    long best_dist = -1;
    for (int c = 0; c < b->ndev; ++c) {
        if (!cand(b, tensor, c, dst[0], tile[0], ctx))
            continue;
        long delta[IR_MAX_AXES];
        delta_between(b, dst[0], c, delta);
        long dist = axis_distance(&b->s->model->mesh, delta);
        if (best_dist >= 0 && dist >= best_dist)
            continue;
        int ok = 1;
        for (int r = 1; r < nrecv && ok; ++r)
            ok = cand(b, tensor, shifted(b, dst[r], delta), dst[r], tile[r], ctx);
        if (ok) {
            best_dist = dist;
            memcpy(best_delta, delta, sizeof delta);
        }
    }
    if (best_dist >= 0) {
        for (int r = 0; r < nrecv; ++r)
            src[r] = shifted(b, dst[r], best_delta);
        memcpy(delta_out, best_delta, sizeof best_delta);
        return MOVE_SHIFT;
    }
    unsigned char *taken = arena_alloc(b->arena, (size_t)b->ndev);
    int distinct = 1;
    for (int r = 0; r < nrecv; ++r) {
        long bd = -1;
        src[r] = -1;
        for (int c = 0; c < b->ndev; ++c) {
            if ((exclusive && taken[c]) || !cand(b, tensor, c, dst[r], tile[r], ctx))
                continue;
            long delta[IR_MAX_AXES];
            delta_between(b, dst[r], c, delta);
            long dist = axis_distance(&b->s->model->mesh, delta);
            if (bd < 0 || dist < bd) {
                bd = dist;
                src[r] = c;
            }
        }
        if (src[r] >= 0) {
            if (taken[src[r]])
                distinct = 0;
            taken[src[r]] = 1;
        }
    }
    return distinct ? MOVE_PERMUTATION : MOVE_EXCHANGE;
}

static int holds_tile(Builder *b, int tensor, int src, int dst, long tile, void *ctx) {
    (void)ctx;
    (void)dst;
    return store_find(store_of(b, tensor, src), tile) >= 0;
}

static Move *new_move(Builder *b, int tensor, long step, MoveKind kind, const long *delta, int n,
                      const int *dst, const int *src, const long *tile) {
    Move *mv = ARENA_NEW(b->arena, Move);
    mv->tensor = tensor;
    mv->step = step;
    mv->kind = kind;
    if (kind == MOVE_SHIFT)
        memcpy(mv->delta, delta, sizeof(long) * IR_MAX_AXES);
    mv->ntransfers = n;
    mv->transfers = ARENA_ARRAY(b->arena, Transfer, n);
    for (int i = 0; i < n; ++i) {
        mv->transfers[i].src = src[i];
        mv->transfers[i].dst = dst[i];
        mv->transfers[i].tile = tile[i];
    }
    mv->bytes = (long)n * b->s->tensors[tensor].tile_elems * (long)sizeof(float);
    return mv;
}

/* ------------------------------------------------------------------ */
/* Redistribution to a target layout                                   */

/* Brings every tile of `target` to its device from a holder, then (with
 * drop) frees tiles a device holds outside the target. Returns the bytes
 * moved; records the move in ph->boundary unless nothing moved. */
static long redistribute(Builder *b, PhaseSched *ph, int tensor, const Layout *target, int drop,
                         const char *reason) {
    int n = 0, cap = 0;
    for (int d = 0; d < b->ndev; ++d)
        cap += target->count[d];
    int *dst = ARENA_ARRAY(b->arena, int, cap + 1);
    int *src = ARENA_ARRAY(b->arena, int, cap + 1);
    long *tile = ARENA_ARRAY(b->arena, long, cap + 1);
    for (int d = 0; d < b->ndev; ++d) {
        for (int i = 0; i < target->count[d]; ++i) {
            if (store_find(store_of(b, tensor, d), target->tiles[d][i]) < 0) {
                dst[n] = d;
                tile[n] = target->tiles[d][i];
                n++;
            }
        }
    }
    Layout have = layout_of(b, tensor);
    long bytes = 0;
    if (n > 0) {
        long delta[IR_MAX_AXES] = {0};
        MoveKind kind = choose_sources(b, tensor, n, dst, tile, holds_tile, NULL, 0, src, delta);
        for (int r = 0; r < n; ++r) {
            if (src[r] < 0) {
                if (!b->dry)
                    ICE("tile %s of %s is held by no device",
                        sched_tile_name(b->arena, b->s, tensor, tile[r]),
                        b->s->tensors[tensor].name);
                b->failed = 1;
                return 0;
            }
        }
        int tag = b->next_tag++;
        int *slots = ARENA_ARRAY(b->arena, int, n);
        for (int r = 0; r < n; ++r) {
            slots[r] = emit_alloc(b, tensor, dst[r]);
            emit_recv(b, tensor, dst[r], slots[r], src[r], tag);
        }
        for (int r = 0; r < n; ++r) {
            const Store *ss = store_of(b, tensor, src[r]);
            int slot = ss->items[store_find(ss, tile[r])].slot;
            emit_send(b, tensor, src[r], slot, dst[r], tag, PRIME_BYTES_REDIST);
        }
        emit_wait_all(b);
        for (int r = 0; r < n; ++r)
            store_add(b, store_of(b, tensor, dst[r]), tile[r], slots[r]);
        Move *mv = new_move(b, tensor, -1, kind, delta, n, dst, src, tile);
        mv->reason = reason;
        mv->have = have;
        mv->need = *target;
        bytes = mv->bytes;
        if (!b->dry)
            ptrvec_push(b->arena, &ph->boundary, mv);
    }
    if (drop) {
        for (int d = 0; d < b->ndev; ++d) {
            Store *st = store_of(b, tensor, d);
            for (int i = st->count - 1; i >= 0; --i) {
                if (!layout_has(target, d, st->items[i].tile)) {
                    emit_free(b, tensor, d, st->items[i].slot);
                    store_remove(st, i);
                }
            }
        }
    }
    return bytes;
}

/* ------------------------------------------------------------------ */
/* One phase                                                           */

typedef struct AccState {
    Acc **active;   /* per device: the accumulator the device works on */
    Acc **incoming; /* per device: an accumulator arriving for the next step */
    int *incoming_slot;
    int *sent_slot;  /* per device: an accumulator being sent, freed at the next wait */
    PtrVec *retired; /* per device: Acc* kept on the device */
    long nred;
    int red_dims[IR_MAX_DIMS];
    int nred_dims;
    unsigned char *claimed; /* per device, while choosing travel sources */
    long *next_tile;        /* per device */
    long step;              /* the phase step being simulated */
} AccState;

static long red_id(const Builder *b, const AccState *as, int dev, long t) {
    long id = 0;
    for (int x = 0; x < as->nred_dims; ++x)
        id = id * b->st->nslices[as->red_dims[x]] + slice_at(b->st, as->red_dims[x], dev, t);
    return id;
}

static Acc *acc_new(Builder *b, const AccState *as, int dev, long tile, int slot) {
    Acc *a = ARENA_NEW(b->arena, Acc);
    a->dev = dev;
    a->tile = tile;
    a->slot = slot;
    a->red = arena_alloc(b->arena, (size_t)as->nred);
    a->red_step = ARENA_ARRAY(b->arena, long, as->nred);
    a->first_dup = -1;
    return a;
}

static void acc_add(Acc *a, long r, long step) {
    if (a->red[r] && a->first_dup < 0) {
        a->first_dup = r;
        a->dup_steps[0] = a->red_step[r];
        a->dup_steps[1] = step;
    }
    if (!a->red[r])
        a->red_step[r] = step;
    if (a->red[r] < 255)
        a->red[r]++;
}

/* Merges what an arriving accumulator carried into the local partial. */
static void acc_merge(Acc *into, const Acc *from, long nred) {
    for (long r = 0; r < nred; ++r) {
        if (from->red[r] && into->red[r] && into->first_dup < 0) {
            into->first_dup = r;
            into->dup_steps[0] = from->red_step[r];
            into->dup_steps[1] = into->red_step[r];
        }
        if (from->red[r] && !into->red[r])
            into->red_step[r] = from->red_step[r];
        unsigned v = (unsigned)into->red[r] + from->red[r];
        into->red[r] = (unsigned char)(v > 255 ? 255 : v);
    }
    if (from->first_dup >= 0 && into->first_dup < 0) {
        into->first_dup = from->first_dup;
        into->dup_steps[0] = from->dup_steps[0];
        into->dup_steps[1] = from->dup_steps[1];
    }
}

/* Can the accumulator of src travel to dst for the next step? Only if
 * src moves off the tile and dst's next contribution is a reduction
 * slice the accumulator lacks (else it would be counted twice: dst keeps
 * its own accumulator, a replica). */
static int acc_available(Builder *b, int tensor, int src, int dst, long tile, void *ctx) {
    (void)tensor;
    AccState *as = ctx;
    const Acc *a = as->active[src];
    if (!a || a->tile != tile || as->next_tile[src] == tile || as->claimed[src])
        return 0;
    return !a->red[red_id(b, as, dst, op_step(b, b->ph, as->step + 1))];
}

static int retired_find(const AccState *as, int dev, long tile) {
    for (int i = 0; i < as->retired[dev].count; ++i)
        if (((Acc *)as->retired[dev].items[i])->tile == tile)
            return i;
    return -1;
}

static const char *red_name(Builder *b, const AccState *as, long r) {
    char buf[256];
    size_t n = 0;
    buf[0] = 0;
    long rest = r;
    long vals[IR_MAX_DIMS];
    for (int x = as->nred_dims - 1; x >= 0; --x) {
        vals[x] = rest % b->st->nslices[as->red_dims[x]];
        rest /= b->st->nslices[as->red_dims[x]];
    }
    for (int x = 0; x < as->nred_dims && n < sizeof buf - 40; ++x)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s=%ld", x ? ", " : "",
                              b->inst->op->dims[as->red_dims[x]], vals[x]);
    return arena_strdup(b->arena, buf);
}

/* The DSI of a reduction dimension, or failing that the partition, for
 * pointing at in diagnostics. */
static Span red_span(const Builder *b, const AccState *as) {
    const Partition *p = b->inst->partition;
    for (int x = 0; x < as->nred_dims; ++x)
        if (p->dsi[as->red_dims[x]])
            return p->dsi[as->red_dims[x]]->span;
    return p->decl->name.span;
}

static void phase_error_note(Builder *b) {
    diag_note(b->sink, b->inst->use_span, "partition '%s' applied to '%s' here",
              b->inst->partition->name, b->inst->name);
}

/* Emits an all-reduce in phase ph: every member, in group order. */
static void emit_collective(Builder *b, PhaseSched *ph, Collective *col) {
    int tag = b->next_tag++;
    if (!b->dry) {
        ptrvec_push(b->arena, &ph->collectives, col);
        ptrvec_push(b->arena, &ph->groups, col);
    }
    int gindex = ph->groups.count - 1;
    col->phase = ph;
    col->action = ARENA_ARRAY(b->arena, int, col->gsize);
    for (int p = 0; p < col->gsize; ++p) {
        col->action[p] = ph->nactions[col->group[p]];
        PrimeAction *a = act(b, col->group[p], PRIME_ACT_ALLREDUCE);
        a->tensor = col->tensor;
        a->slot = col->slots[p];
        a->tag = tag;
        a->arg = gindex;
    }
    if (!b->dry && b->reduced) {
        if (b->reduced_phase[col->tensor] != b->phase_index) {
            b->reduced[col->tensor].count = 0;
            b->reduced_phase[col->tensor] = b->phase_index;
        }
        ptrvec_push(b->arena, &b->reduced[col->tensor], col);
    }
}

/* Checks coverage of the output and all-reduces partial sums. */
static void finish_accumulators(Builder *b, PhaseSched *ph, AccState *as) {
    const SchedTensor *out = &b->s->tensors[ph->out.tensor];
    PtrVec *by_tile = ARENA_ARRAY(b->arena, PtrVec, out->ntiles);
    for (int d = 0; d < b->ndev; ++d) {
        for (int i = 0; i < as->retired[d].count; ++i) {
            Acc *a = as->retired[d].items[i];
            if (a->first_dup >= 0 && !b->failed) {
                if (!b->dry) {
                    diag_error(b->sink, red_span(b, as),
                               "%s phase double counts: reduction slice (%s) is added twice into "
                               "tile %s of '%s' on device %d (steps %ld and %ld)",
                               phase_name(ph->kind), red_name(b, as, a->first_dup),
                               sched_tile_name(b->arena, b->s, ph->out.tensor, a->tile), out->name,
                               d, a->dup_steps[0], a->dup_steps[1]);
                    phase_error_note(b);
                }
                b->failed = 1;
            }
            ptrvec_push(b->arena, &by_tile[a->tile], a);
        }
    }
    if (b->failed)
        return;
    long replication = 0;
    long *counts = ARENA_ARRAY(b->arena, long, as->nred);
    for (long tile = 0; tile < out->ntiles; ++tile) {
        PtrVec *accs = &by_tile[tile];
        if (accs->count == 0) {
            if (!b->dry) {
                diag_error(b->sink, b->inst->partition->decl->name.span,
                           "%s phase misses tile %s of '%s': no device computes it",
                           phase_name(ph->kind),
                           sched_tile_name(b->arena, b->s, ph->out.tensor, tile), out->name);
                phase_error_note(b);
            }
            b->failed = 1;
            return;
        }
        memset(counts, 0, sizeof(long) * (size_t)as->nred);
        for (int i = 0; i < accs->count; ++i) {
            const Acc *a = accs->items[i];
            for (long r = 0; r < as->nred; ++r)
                counts[r] += a->red[r];
        }
        long c = counts[0];
        for (long r = 0; r < as->nred; ++r) {
            if (counts[r] == 0 || counts[r] != c) {
                long missing = r;
                if (counts[r] != 0)
                    for (long q = 0; q < as->nred; ++q)
                        if (counts[q] < c)
                            missing = q;
                if (!b->dry) {
                    diag_error(b->sink, red_span(b, as),
                               "%s phase misses voxels: tile %s of '%s' never receives reduction "
                               "slice (%s)%s",
                               phase_name(ph->kind),
                               sched_tile_name(b->arena, b->s, ph->out.tensor, tile), out->name,
                               red_name(b, as, missing),
                               counts[r] != 0 ? " as often as the others" : "");
                    phase_error_note(b);
                }
                b->failed = 1;
                return;
            }
        }
        if (c > replication)
            replication = c;
        /* Group partial sums: each group receives every slice once. */
        int nacc = accs->count;
        int *group_of = ARENA_ARRAY(b->arena, int, nacc);
        unsigned char **gred = ARENA_ARRAY(b->arena, unsigned char *, c);
        for (long g = 0; g < c; ++g)
            gred[g] = arena_alloc(b->arena, (size_t)as->nred);
        for (int i = 0; i < nacc; ++i) {
            const Acc *a = accs->items[i];
            group_of[i] = -1;
            for (long g = 0; g < c && group_of[i] < 0; ++g) {
                int clash = 0;
                for (long r = 0; r < as->nred && !clash; ++r)
                    clash = a->red[r] && gred[g][r];
                if (!clash) {
                    group_of[i] = (int)g;
                    for (long r = 0; r < as->nred; ++r)
                        gred[g][r] = (unsigned char)(gred[g][r] | a->red[r]);
                }
            }
            if (group_of[i] < 0) {
                if (!b->dry) {
                    diag_error(b->sink, red_span(b, as),
                               "%s phase double counts: the partial sums of tile %s of '%s' cannot "
                               "be split into complete sums",
                               phase_name(ph->kind),
                               sched_tile_name(b->arena, b->s, ph->out.tensor, tile), out->name);
                    phase_error_note(b);
                }
                b->failed = 1;
                return;
            }
        }
        for (long g = 0; g < c; ++g) {
            int members[4096];
            int slots[4096];
            int gs = 0;
            for (int i = 0; i < nacc && gs < 4096; ++i) {
                if (group_of[i] == g) {
                    const Acc *a = accs->items[i];
                    members[gs] = a->dev;
                    slots[gs] = a->slot;
                    gs++;
                }
            }
            if (gs < 2)
                continue;
            /* Ring order = rank order, so every member derives the same ring. */
            for (int x = 1; x < gs; ++x)
                for (int y = x; y > 0 && members[y - 1] > members[y]; --y) {
                    int tm = members[y], ts = slots[y];
                    members[y] = members[y - 1];
                    slots[y] = slots[y - 1];
                    members[y - 1] = tm;
                    slots[y - 1] = ts;
                }
            Collective *col = ARENA_NEW(b->arena, Collective);
            col->tensor = ph->out.tensor;
            col->tile = tile;
            col->gsize = gs;
            col->group = ARENA_ARRAY(b->arena, int, gs);
            col->slots = ARENA_ARRAY(b->arena, int, gs);
            memcpy(col->group, members, sizeof(int) * (size_t)gs);
            memcpy(col->slots, slots, sizeof(int) * (size_t)gs);
            col->elems = out->tile_elems;
            for (int p = 0; p < gs; ++p)
                col->bytes += (long)prime_allreduce_bytes((size_t)col->elems, gs, p);
            if (b->defer) {
                if (!b->dry)
                    ptrvec_push(b->arena, &b->deferred, col);
            } else {
                emit_collective(b, ph, col);
            }
        }
    }
    ph->replication = replication;
}

/* The index of the offsets row (global origin of every operator
 * dimension's slice) of the sub-operator at (dev, t). */
static int kernel_offsets(Builder *b, PhaseSched *ph, int dev, long t) {
    if (b->dry)
        return 0;
    long row[8] = {0};
    for (int d = 0; d < b->st->ndims && d < 8; ++d)
        row[d] = slice_at(b->st, d, dev, t) * b->st->extent[d];
    unsigned long h = 1469598103934665603ul;
    for (int x = 0; x < 8; ++x)
        h = (h ^ (unsigned long)row[x]) * 1099511628211ul;
    if (ph->noffsets * 2 >= ph->offset_hash_cap) {
        /* Grow the rows and rebuild the hash (open addressing). */
        int cap = ph->offset_cap ? ph->offset_cap * 2 : 16;
        long(*n)[8] = arena_alloc(b->arena, sizeof(long[8]) * (size_t)cap);
        if (ph->noffsets)
            memcpy(n, ph->offsets, sizeof(long[8]) * (size_t)ph->noffsets);
        ph->offsets = n;
        ph->offset_cap = cap;
        ph->offset_hash_cap = cap * 2;
        ph->offset_hash = ARENA_ARRAY(b->arena, int, ph->offset_hash_cap);
        for (int i = 0; i < ph->offset_hash_cap; ++i)
            ph->offset_hash[i] = -1;
        for (int i = 0; i < ph->noffsets; ++i) {
            unsigned long g = 1469598103934665603ul;
            for (int x = 0; x < 8; ++x)
                g = (g ^ (unsigned long)ph->offsets[i][x]) * 1099511628211ul;
            int k = (int)(g % (unsigned long)ph->offset_hash_cap);
            while (ph->offset_hash[k] >= 0)
                k = (k + 1) % ph->offset_hash_cap;
            ph->offset_hash[k] = i;
        }
    }
    int k = (int)(h % (unsigned long)ph->offset_hash_cap);
    while (ph->offset_hash[k] >= 0) {
        if (memcmp(ph->offsets[ph->offset_hash[k]], row, sizeof row) == 0)
            return ph->offset_hash[k];
        k = (k + 1) % ph->offset_hash_cap;
    }
    memcpy(ph->offsets[ph->noffsets], row, sizeof row);
    ph->offset_hash[k] = ph->noffsets;
    return ph->noffsets++;
}

/* An input operand that an earlier operand already brings (the same
 * storage tensor indexed the same way, e.g. Y * Y). */
static int operand_repeats(const PhaseSched *ph, int i) {
    for (int j = 0; j < i; ++j) {
        if (ph->in[j].tensor != ph->in[i].tensor)
            continue;
        if (ph->in[j].ndims == ph->in[i].ndims &&
            memcmp(ph->in[j].opdims, ph->in[i].opdims, sizeof(int) * (size_t)ph->in[i].ndims) == 0)
            return 1;
        ICE("operand '%s' is used with two different index orders", ph->in[i].name);
    }
    return 0;
}

static void run_phase(Builder *b, PhaseSched *ph) {
    const long T = b->steps;
    const int ndev = b->ndev;
    AccState as;
    memset(&as, 0, sizeof as);
    Acc **active = ARENA_ARRAY(b->arena, Acc *, ndev);
    Acc **incoming = ARENA_ARRAY(b->arena, Acc *, ndev);
    as.active = active;
    as.incoming = incoming;
    as.incoming_slot = ARENA_ARRAY(b->arena, int, ndev);
    as.sent_slot = ARENA_ARRAY(b->arena, int, ndev);
    as.retired = ARENA_ARRAY(b->arena, PtrVec, ndev);
    as.claimed = arena_alloc(b->arena, (size_t)ndev);
    as.next_tile = ARENA_ARRAY(b->arena, long, ndev);
    /* Reduction dimensions: operator dims absent from the output. */
    as.nred = 1;
    for (int d = 0; d < b->st->ndims; ++d) {
        int in_out = 0;
        for (int x = 0; x < ph->out.ndims; ++x)
            in_out |= ph->out.opdims[x] == d;
        if (!in_out) {
            as.red_dims[as.nred_dims++] = d;
            as.nred *= b->st->nslices[d];
        }
    }
    for (int d = 0; d < ndev; ++d)
        as.sent_slot[d] = -1;
    /* Steps at which each device last needs each input tile. */
    long *last_need[SCHED_MAX_OPERANDS];
    for (int i = 0; i < ph->nin; ++i) {
        const SchedTensor *ts = &b->s->tensors[ph->in[i].tensor];
        last_need[i] = arena_alloc_uninit(b->arena, sizeof(long) * (size_t)ndev * ts->ntiles);
        for (long x = 0; x < (long)ndev * ts->ntiles; ++x)
            last_need[i][x] = -1;
        for (long s = 0; s < T; ++s)
            for (int d = 0; d < ndev; ++d)
                last_need[i][(long)d * ts->ntiles + tile_at(b, &ph->in[i], d, op_step(b, ph, s))] =
                    s;
        for (int j = 0; j < i; ++j)
            if (ph->in[j].tensor == ph->in[i].tensor)
                for (long x = 0; x < (long)ndev * ts->ntiles; ++x)
                    if (last_need[j][x] > last_need[i][x])
                        last_need[i][x] = last_need[j][x];
    }
    int *dst = ARENA_ARRAY(b->arena, int, ndev);
    int *src = ARENA_ARRAY(b->arena, int, ndev);
    long *tiles = ARENA_ARRAY(b->arena, long, ndev);
    int *pending_free_slot = ARENA_ARRAY(b->arena, int, ndev *SCHED_MAX_OPERANDS);

    for (long s = 0; s < T; ++s) {
        const long t = op_step(b, ph, s);
        as.step = s;
        for (int d = 0; d < ndev; ++d)
            act(b, d, PRIME_ACT_STEP)->arg = (int)s;
        /* Inputs needed now must be here (first step: from the initial
         * residency; later: they arrived or were resident). */
        for (int i = 0; i < ph->nin; ++i) {
            int tensor = ph->in[i].tensor;
            if (operand_repeats(ph, i))
                continue;
            for (int d = 0; d < ndev; ++d) {
                long tile = tile_at(b, &ph->in[i], d, t);
                if (store_find(store_of(b, tensor, d), tile) < 0) {
                    if (!b->dry || !b->track_need[tensor])
                        ICE("tile %s of %s missing on device %d at step %ld",
                            sched_tile_name(b->arena, b->s, tensor, tile),
                            b->s->tensors[tensor].name, d, s);
                    /* A dry run learns the initial residency. */
                    layout_add(b, &b->need[tensor], d, tile);
                    store_add(b, store_of(b, tensor, d), tile, slot_alloc(b, tensor, d));
                }
            }
        }
        /* 1. Post the moves that bring the next step's input tiles. */
        for (int d = 0; d < ndev * SCHED_MAX_OPERANDS; ++d)
            pending_free_slot[d] = -1;
        int nadd[SCHED_MAX_OPERANDS] = {0};
        int *add_dev[SCHED_MAX_OPERANDS];
        int *add_slot[SCHED_MAX_OPERANDS];
        long *add_tile[SCHED_MAX_OPERANDS];
        if (s + 1 < T) {
            const long tn = op_step(b, ph, s + 1);
            for (int i = 0; i < ph->nin; ++i) {
                int tensor = ph->in[i].tensor;
                const SchedTensor *ts = &b->s->tensors[tensor];
                int n = 0;
                add_dev[i] = add_slot[i] = NULL;
                add_tile[i] = NULL;
                if (operand_repeats(ph, i))
                    continue;
                for (int d = 0; d < ndev; ++d) {
                    long tile = tile_at(b, &ph->in[i], d, tn);
                    if (store_find(store_of(b, tensor, d), tile) >= 0)
                        continue;
                    int any = 0;
                    for (int c = 0; c < ndev && !any; ++c)
                        any = store_find(store_of(b, tensor, c), tile) >= 0;
                    if (!any)
                        continue; /* must be resident: learnt at the next step */
                    dst[n] = d;
                    tiles[n] = tile;
                    n++;
                }
                add_dev[i] = ARENA_ARRAY(b->arena, int, n + 1);
                add_slot[i] = ARENA_ARRAY(b->arena, int, n + 1);
                add_tile[i] = ARENA_ARRAY(b->arena, long, n + 1);
                if (n == 0)
                    continue;
                long delta[IR_MAX_AXES] = {0};
                MoveKind kind =
                    choose_sources(b, tensor, n, dst, tiles, holds_tile, NULL, 0, src, delta);
                int tag = b->next_tag++;
                for (int r = 0; r < n; ++r) {
                    int slot = emit_alloc(b, tensor, dst[r]);
                    emit_recv(b, tensor, dst[r], slot, src[r], tag);
                    add_dev[i][nadd[i]] = dst[r];
                    add_slot[i][nadd[i]] = slot;
                    add_tile[i][nadd[i]] = tiles[r];
                    nadd[i]++;
                }
                for (int r = 0; r < n; ++r) {
                    const Store *ss = store_of(b, tensor, src[r]);
                    int idx = store_find(ss, tiles[r]);
                    emit_send(b, tensor, src[r], ss->items[idx].slot, dst[r], tag,
                              PRIME_BYTES_SHIFT);
                    /* The source gives the tile up unless it needs it again. */
                    if (last_need[i][(long)src[r] * ts->ntiles + tiles[r]] <= s)
                        pending_free_slot[src[r] * SCHED_MAX_OPERANDS + i] = ss->items[idx].slot;
                }
                Move *mv = new_move(b, tensor, s, kind, delta, n, dst, src, tiles);
                if (!b->dry)
                    ptrvec_push(b->arena, &ph->moves, mv);
            }
        }
        /* 2. Compute. */
        for (int d = 0; d < ndev; ++d) {
            long otile = tile_at(b, &ph->out, d, t);
            Acc *a = active[d];
            int into_slot;
            Acc *partial = NULL;
            if (a && a->tile == otile) {
                into_slot = a->slot;
            } else if (incoming[d]) {
                /* Compute into a fresh partial while the accumulator arrives. */
                into_slot = emit_alloc(b, ph->out.tensor, d);
                partial = acc_new(b, &as, d, otile, into_slot);
            } else {
                int ri = retired_find(&as, d, otile);
                if (ri >= 0) {
                    a = as.retired[d].items[ri];
                    as.retired[d].items[ri] = as.retired[d].items[--as.retired[d].count];
                } else {
                    a = acc_new(b, &as, d, otile, emit_alloc(b, ph->out.tensor, d));
                    ph->nlocal_acc += b->dry ? 0 : 1;
                }
                if (active[d] && active[d] != a)
                    ptrvec_push(b->arena, &as.retired[d], active[d]);
                active[d] = a;
                into_slot = a->slot;
            }
            PrimeAction *k = act(b, d, PRIME_ACT_KERNEL);
            k->tensor = ph->out.tensor;
            k->slot = into_slot;
            k->arg = kernel_offsets(b, ph, d, t);
            k->nin = ph->nin;
            for (int i = 0; i < ph->nin; ++i) {
                const Store *st = store_of(b, ph->in[i].tensor, d);
                k->in_tensor[i] = ph->in[i].tensor;
                k->in_slot[i] = st->items[store_find(st, tile_at(b, &ph->in[i], d, t))].slot;
            }
            acc_add(partial ? partial : active[d], red_id(b, &as, d, t), s);
            if (partial)
                active[d] = partial;
        }
        /* 3. Wait for this step's transfers. */
        emit_wait_all(b);
        /* 4. Merge arrived accumulators; free what was given away. */
        for (int d = 0; d < ndev; ++d) {
            if (incoming[d]) {
                PrimeAction *a = act(b, d, PRIME_ACT_ADD);
                a->tensor = ph->out.tensor;
                a->slot = active[d]->slot;
                a->nin = 1;
                a->in_tensor[0] = ph->out.tensor;
                a->in_slot[0] = as.incoming_slot[d];
                acc_merge(active[d], incoming[d], as.nred);
                emit_free(b, ph->out.tensor, d, as.incoming_slot[d]);
                incoming[d] = NULL;
            }
            if (as.sent_slot[d] >= 0) {
                emit_free(b, ph->out.tensor, d, as.sent_slot[d]);
                as.sent_slot[d] = -1;
            }
            for (int i = 0; i < ph->nin; ++i) {
                int slot = pending_free_slot[d * SCHED_MAX_OPERANDS + i];
                if (slot < 0)
                    continue;
                Store *st = store_of(b, ph->in[i].tensor, d);
                for (int x = 0; x < st->count; ++x) {
                    if (st->items[x].slot == slot) {
                        store_remove(st, x);
                        break;
                    }
                }
                emit_free(b, ph->in[i].tensor, d, slot);
            }
        }
        for (int i = 0; i < ph->nin; ++i)
            for (int r = 0; r < nadd[i]; ++r)
                store_add(b, store_of(b, ph->in[i].tensor, add_dev[i][r]), add_tile[i][r],
                          add_slot[i][r]);
        /* 5. Accumulators that travel to the next step. */
        if (s + 1 < T) {
            const long tn = op_step(b, ph, s + 1);
            int n = 0;
            for (int d = 0; d < ndev; ++d) {
                as.next_tile[d] = tile_at(b, &ph->out, d, tn);
                as.claimed[d] = 0;
            }
            for (int d = 0; d < ndev; ++d) {
                long want = as.next_tile[d];
                if ((active[d] && active[d]->tile == want) || retired_find(&as, d, want) >= 0)
                    continue;
                int any = 0;
                for (int c = 0; c < ndev && !any; ++c)
                    any = acc_available(b, ph->out.tensor, c, d, want, &as);
                if (!any)
                    continue;
                dst[n] = d;
                tiles[n] = want;
                n++;
            }
            if (n > 0) {
                long delta[IR_MAX_AXES] = {0};
                MoveKind kind = choose_sources(b, ph->out.tensor, n, dst, tiles, acc_available, &as,
                                               1, src, delta);
                int tag = b->next_tag++;
                int m = 0;
                for (int r = 0; r < n; ++r) {
                    if (src[r] < 0)
                        continue; /* no free accumulator left: start a new partial */
                    as.claimed[src[r]] = 1;
                    dst[m] = dst[r];
                    src[m] = src[r];
                    tiles[m] = tiles[r];
                    m++;
                }
                for (int r = 0; r < m; ++r) {
                    int slot = emit_alloc(b, ph->out.tensor, dst[r]);
                    emit_recv(b, ph->out.tensor, dst[r], slot, src[r], tag);
                    as.incoming_slot[dst[r]] = slot;
                }
                for (int r = 0; r < m; ++r) {
                    Acc *a = active[src[r]];
                    emit_send(b, ph->out.tensor, src[r], a->slot, dst[r], tag, PRIME_BYTES_SHIFT);
                    as.sent_slot[src[r]] = a->slot;
                    incoming[dst[r]] = a;
                    active[src[r]] = NULL;
                }
                if (m > 0) {
                    Move *mv = new_move(b, ph->out.tensor, s, kind, delta, m, dst, src, tiles);
                    mv->is_acc = 1;
                    if (!b->dry) {
                        ptrvec_push(b->arena, &ph->moves, mv);
                        ph->ntravel_acc += m;
                    }
                }
            }
            /* Accumulators left behind stay on their device. */
            for (int d = 0; d < ndev; ++d) {
                if (active[d] && active[d]->tile != as.next_tile[d]) {
                    ptrvec_push(b->arena, &as.retired[d], active[d]);
                    active[d] = NULL;
                }
            }
        }
    }
    for (int d = 0; d < ndev; ++d) {
        if (active[d])
            ptrvec_push(b->arena, &as.retired[d], active[d]);
        if (incoming[d] || as.sent_slot[d] >= 0)
            ICE("accumulator still in flight after the last step");
    }
    finish_accumulators(b, ph, &as);
    /* The output's tiles now sit in the accumulators' slots. */
    for (int d = 0; d < ndev; ++d) {
        Store *st = store_of(b, ph->out.tensor, d);
        for (int i = 0; i < as.retired[d].count; ++i) {
            const Acc *a = as.retired[d].items[i];
            store_add(b, st, a->tile, a->slot);
        }
    }
}

/* ------------------------------------------------------------------ */
/* Phase boundaries and order                                          */

typedef struct Hidden {
    Held *items[SCHED_MAX_TENSORS]; /* [dev * cap + i] */
    int *count[SCHED_MAX_TENSORS];
    int cap[SCHED_MAX_TENSORS];
} Hidden;

/* Sets tiles outside `need` aside so that the phase sees exactly its
 * required residency (the same as in its trial runs). */
static void hide_extras(Builder *b, int tensor, const Layout *need, Hidden *h) {
    int cap = 0;
    for (int d = 0; d < b->ndev; ++d)
        if (store_of(b, tensor, d)->count > cap)
            cap = store_of(b, tensor, d)->count;
    h->cap[tensor] = cap;
    h->items[tensor] = ARENA_ARRAY(b->arena, Held, (size_t)b->ndev * (size_t)cap + 1);
    h->count[tensor] = ARENA_ARRAY(b->arena, int, b->ndev);
    for (int d = 0; d < b->ndev; ++d) {
        Store *st = store_of(b, tensor, d);
        for (int i = st->count - 1; i >= 0; --i) {
            if (!layout_has(need, d, st->items[i].tile)) {
                h->items[tensor][(size_t)d * cap + h->count[tensor][d]++] = st->items[i];
                store_remove(st, i);
            }
        }
    }
}

static void unhide(Builder *b, int tensor, Hidden *h) {
    for (int d = 0; d < b->ndev; ++d) {
        Store *st = store_of(b, tensor, d);
        for (int i = 0; i < h->count[tensor][d]; ++i) {
            Held held = h->items[tensor][(size_t)d * h->cap[tensor] + i];
            if (store_find(st, held.tile) >= 0)
                emit_free(b, tensor, d, held.slot); /* a second copy arrived */
            else
                store_add(b, st, held.tile, held.slot);
        }
    }
}

static void enter_phase(Builder *b, PhaseSched *ph) {
    b->ph = ph;
    if (ph->inst >= 0) {
        b->inst = &b->s->model->instances[ph->inst];
        b->st = &b->s->slices[ph->inst];
        b->steps = b->inst->steps;
    }
}

/* Input storage tensors of a phase, each once. */
static int phase_inputs(const PhaseSched *ph, int *tensors) {
    int n = 0;
    for (int i = 0; i < ph->nin; ++i) {
        int dup = 0;
        for (int j = 0; j < n; ++j)
            dup |= tensors[j] == ph->in[i].tensor;
        if (!dup)
            tensors[n++] = ph->in[i].tensor;
    }
    return n;
}

/* Learns the residency each input needs at the start of the phase: a
 * trial run from empty input stores records the tiles nobody could
 * send; a second trial from that residency confirms it. */
static void learn_needs(Builder *b, PhaseSched *ph) {
    int rev = ph->reversed ? 1 : 0;
    if (ph->need_cached[rev]) {
        const Layout *cache = ph->need_cache[rev];
        for (int i = 0; i < ph->nin; ++i)
            b->need[ph->in[i].tensor] = cache[i];
        return;
    }
    int ins[SCHED_MAX_OPERANDS + 1];
    int nins = phase_inputs(ph, ins);
    /* The trial runs touch the phase's operands only: those are saved. */
    int touched[SCHED_MAX_OPERANDS + 1], ntouched = nins;
    memcpy(touched, ins, sizeof(int) * (size_t)nins);
    int out_listed = 0;
    for (int i = 0; i < nins; ++i)
        out_listed |= ins[i] == ph->out.tensor;
    if (!out_listed)
        touched[ntouched++] = ph->out.tensor;
    Machine saved;
    saved.ntensors = b->m.ntensors;
    saved.ndev = b->m.ndev;
    machine_copy_some(b, &saved, &b->m, touched, ntouched);
#ifndef NDEBUG
    Machine whole; /* checks that the trials touch nothing else */
    machine_copy(b, &whole, &b->m);
#endif
    int was_dry = b->dry, was_failed = b->failed, was_tag = b->next_tag;
    b->dry = 1;
    for (int i = 0; i < nins; ++i) {
        b->need[ins[i]] = layout_empty(b);
        b->track_need[ins[i]] = 1;
    }
    for (int pass = 0; pass < 3; ++pass) {
        machine_copy_some(b, &b->m, &saved, touched, ntouched);
        int before = 0, after = 0;
        for (int i = 0; i < nins; ++i) {
            for (int d = 0; d < b->ndev; ++d) {
                store_of(b, ins[i], d)->count = 0;
                for (int x = 0; x < b->need[ins[i]].count[d]; ++x)
                    store_add(b, store_of(b, ins[i], d), b->need[ins[i]].tiles[d][x],
                              slot_alloc(b, ins[i], d));
                before += b->need[ins[i]].count[d];
            }
        }
        /* The output starts empty. */
        for (int d = 0; d < b->ndev; ++d)
            store_of(b, ph->out.tensor, d)->count = 0;
        run_phase(b, ph);
        for (int i = 0; i < nins; ++i)
            for (int d = 0; d < b->ndev; ++d)
                after += b->need[ins[i]].count[d];
        /* One step: nothing moves, so the first trial is exact. */
        if ((pass > 0 && after == before) || b->steps == 1)
            break;
    }
    for (int i = 0; i < nins; ++i)
        b->track_need[ins[i]] = 0;
#ifndef NDEBUG
    for (int t = 0; t < whole.ntensors; ++t) {
        int listed = 0;
        for (int k = 0; k < ntouched; ++k)
            listed |= touched[k] == t;
        for (int d = 0; d < b->ndev && !listed; ++d) {
            const Store *x = &whole.stores[t][d], *y = &b->m.stores[t][d];
            if (x->count != y->count ||
                (x->count && memcmp(x->items, y->items, sizeof(Held) * (size_t)x->count)))
                ICE("a trial run of a phase changed storage tensor %d, not one of its operands", t);
        }
    }
#endif
    machine_copy_some(b, &b->m, &saved, touched, ntouched);
    b->dry = was_dry;
    b->failed = was_failed;
    b->next_tag = was_tag; /* trial tags are never emitted */
    Layout *cache = ARENA_ARRAY(b->arena, Layout, ph->nin + 1);
    for (int k = 0; k < ph->nin; ++k)
        cache[k] = b->need[ph->in[k].tensor];
    ph->need_cache[rev] = cache;
    ph->need_cached[rev] = 1;
}

static void strict_check(Builder *b, PhaseSched *ph, int first_boundary) {
    if (!b->s->model->strict || b->dry)
        return;
    for (int i = first_boundary; i < ph->boundary.count; ++i) {
        const Move *mv = ph->boundary.items[i];
        const Instance *inst = ph->inst >= 0 ? &b->s->model->instances[ph->inst] : NULL;
        diag_error(b->sink, inst ? inst->span : b->s->model->name_span,
                   "strict: '%s' needs a redistribution (%s, %ld bytes) in the %s phase: %s",
                   b->s->tensors[mv->tensor].name, move_kind_name(mv->kind), mv->bytes,
                   phase_name(ph->kind), mv->reason);
        if (inst && inst->partition)
            diag_note(
                b->sink, inst->use_span,
                "the layouts come from partition '%s' applied here; `primec explain` shows both",
                inst->partition->name);
        b->failed = 1;
    }
}

/* Does any storage tensor of the same value hold tiles? Returns it. */
static int value_holder(Builder *b, int tensor) {
    const SchedTensor *t = &b->s->tensors[tensor];
    for (int u = 0; u < b->s->ntensors; ++u) {
        const SchedTensor *o = &b->s->tensors[u];
        if (u == tensor || o->model_tensor != t->model_tensor || o->is_grad != t->is_grad)
            continue;
        for (int d = 0; d < b->ndev; ++d)
            if (store_of(b, u, d)->count)
                return u;
    }
    return -1;
}

static int holds_any(Builder *b, int tensor) {
    for (int d = 0; d < b->ndev; ++d)
        if (store_of(b, tensor, d)->count)
            return 1;
    return 0;
}

static int add_box(Builder *b, PhaseSched *ph, const PrimeBox *box) {
    if (b->dry)
        return 0;
    for (int i = 0; i < ph->nboxes; ++i)
        if (memcmp(&ph->boxes[i], box, sizeof *box) == 0)
            return i;
    if (ph->nboxes == ph->box_cap) {
        int cap = ph->box_cap ? ph->box_cap * 2 : 8;
        PrimeBox *nb = ARENA_ARRAY(b->arena, PrimeBox, cap);
        if (ph->nboxes)
            memcpy(nb, ph->boxes, sizeof(PrimeBox) * (size_t)ph->nboxes);
        ph->boxes = nb;
        ph->box_cap = cap;
    }
    ph->boxes[ph->nboxes] = *box;
    return ph->nboxes++;
}

/* Is storage tensor t read by a phase after the current one? */
static int read_after(Builder *b, int t) {
    for (int q = b->phase_index + 1; q < b->s->phases.count; ++q) {
        const PhaseSched *qh = b->s->phases.items[q];
        for (int i = 0; i < qh->nin; ++i)
            if (qh->in[i].tensor == t)
                return 1;
    }
    return 0;
}

/* A conversion right after the all-reduces that produced `from`, in which
 * every member of each group keeps exactly its chunk of the reduced tile
 * (the rows that prime_reduce_scatter_sum leaves it) and nobody else reads
 * the tile: those all-reduces become reduce-scatters, which send half the
 * bytes. `from` must not be read again. */
static void try_reduce_scatter(Builder *b, PhaseSched *ph, int from, int to, const Layout *target) {
    if (b->dry || !b->reduced || b->reduced[from].count == 0 ||
        b->reduced_phase[from] != b->phase_index - 1 || read_after(b, from) ||
        b->s->tensors[from].check)
        return;
    (void)ph;
    const SchedTensor *tf = &b->s->tensors[from], *tt = &b->s->tensors[to];
    PtrVec *cols = &b->reduced[from];
    for (int c = 0; c < cols->count; ++c) {
        const Collective *col = cols->items[c];
        long lo[IR_MAX_DIMS], hi[IR_MAX_DIMS], rowlen = 1;
        for (int x = 0; x < tf->ndims; ++x) {
            lo[x] = sched_tile_coord(tf, col->tile, x) * tf->extent[x];
            hi[x] = lo[x] + tf->extent[x];
            if (x > 0)
                rowlen *= tf->extent[x];
        }
        if (tf->ndims == 0)
            return;
        for (int d = 0; d < b->ndev; ++d) {
            int pos = -1;
            for (int q = 0; q < col->gsize; ++q)
                if (col->group[q] == d)
                    pos = q;
            int pieces = 0;
            for (int i = 0; i < target->count[d]; ++i) {
                long tile = target->tiles[d][i];
                long blo[IR_MAX_DIMS], bhi[IR_MAX_DIMS];
                int overlap = 1;
                for (int x = 0; x < tt->ndims && overlap; ++x) {
                    long tlo = sched_tile_coord(tt, tile, x) * tt->extent[x],
                         thi = tlo + tt->extent[x];
                    blo[x] = tlo > lo[x] ? tlo : lo[x];
                    bhi[x] = thi < hi[x] ? thi : hi[x];
                    overlap = blo[x] < bhi[x];
                }
                if (!overlap)
                    continue;
                if (pos < 0 || ++pieces > 1)
                    return;
                /* Full rows of the reduced tile, forming chunk pos exactly. */
                for (int x = 1; x < tf->ndims; ++x)
                    if (blo[x] != lo[x] || bhi[x] != hi[x])
                        return;
                long n = tf->tile_elems, g = col->gsize;
                if ((blo[0] - lo[0]) * rowlen != pos * n / g ||
                    (bhi[0] - lo[0]) * rowlen != (pos + 1) * n / g)
                    return;
            }
            if (pos >= 0 && pieces != 1)
                return;
        }
    }
    for (int c = 0; c < cols->count; ++c) {
        Collective *col = cols->items[c];
        col->reduce_scatter = 1;
        col->bytes = 0;
        for (int q = 0; q < col->gsize; ++q) {
            col->phase->actions[col->group[q]][col->action[q]].op = PRIME_ACT_REDUCE_SCATTER;
            col->bytes += (long)prime_reduce_scatter_bytes((size_t)col->elems, col->gsize, q);
        }
    }
    cols->count = 0;
}

/* Names the communication pattern of a conversion's transfers: none
 * (each device slices what it holds), an all-gather (every receiving
 * device gets pieces from every other device that sends, and all end with
 * the same tiles), an all-to-all (the same exchange, different tiles),
 * or a general exchange. */
static const char *conversion_pattern(Builder *b, int n, const int *dst, const int *src,
                                      const Layout *target) {
    if (n == 0)
        return "local slice";
    unsigned char *pair = arena_alloc(b->arena, (size_t)b->ndev * (size_t)b->ndev);
    unsigned char *sends = arena_alloc(b->arena, (size_t)b->ndev);
    unsigned char *recvs = arena_alloc(b->arena, (size_t)b->ndev);
    for (int i = 0; i < n; ++i) {
        pair[dst[i] * b->ndev + src[i]] = 1;
        sends[src[i]] = 1;
        recvs[dst[i]] = 1;
    }
    int complete = 1, first = -1, same = 1;
    for (int d = 0; d < b->ndev; ++d) {
        if (!recvs[d])
            continue;
        for (int s = 0; s < b->ndev && complete; ++s)
            if (sends[s] && s != d && !pair[d * b->ndev + s])
                complete = 0;
        if (first < 0) {
            first = d;
        } else if (target->count[d] != target->count[first] ||
                   memcmp(target->tiles[d], target->tiles[first],
                          sizeof(long) * (size_t)target->count[d]) != 0) {
            same = 0;
        }
    }
    if (!complete)
        return "exchange";
    return same ? "all-gather" : "all-to-all";
}

/* Builds every tile of `target` (in tensor `to`'s tiling) from the
 * tiles of `from` (another tiling of the same value): each piece comes
 * from the device itself when it holds it, else from the nearest
 * holder, as a box. Returns the bytes moved. */
static long convert(Builder *b, PhaseSched *ph, int from, int to, const Layout *target,
                    const char *reason) {
    try_reduce_scatter(b, ph, from, to, target);
    const SchedTensor *tf = &b->s->tensors[from], *tt = &b->s->tensors[to];
    ICE_ASSERT(tf->ndims == tt->ndims);
    int tag = b->next_tag++;
    long bytes = 0;
    int n = 0, cap = 16;
    int *dsts = ARENA_ARRAY(b->arena, int, cap);
    int *srcs = ARENA_ARRAY(b->arena, int, cap);
    long *tiles = ARENA_ARRAY(b->arena, long, cap);
    Layout have = layout_of(b, from);
    for (int d = 0; d < b->ndev; ++d) {
        for (int i = 0; i < target->count[d]; ++i) {
            long tile = target->tiles[d][i];
            int slot = emit_alloc(b, to, d);
            long lo[IR_MAX_DIMS], hi[IR_MAX_DIMS];
            for (int x = 0; x < tt->ndims; ++x) {
                lo[x] = sched_tile_coord(tt, tile, x) * tt->extent[x];
                hi[x] = lo[x] + tt->extent[x];
            }
            /* Source tiles that overlap. */
            for (long st = 0; st < tf->ntiles; ++st) {
                PrimeBox box;
                memset(&box, 0, sizeof box);
                box.ndims = tt->ndims;
                int overlap = 1;
                for (int x = 0; x < tt->ndims && overlap; ++x) {
                    long slo = sched_tile_coord(tf, st, x) * tf->extent[x];
                    long shi = slo + tf->extent[x];
                    long a = slo > lo[x] ? slo : lo[x], z = shi < hi[x] ? shi : hi[x];
                    overlap = a < z;
                    box.ext[x] = z - a;
                    box.src_tile[x] = tf->extent[x];
                    box.src_off[x] = a - slo;
                    box.dst_tile[x] = tt->extent[x];
                    box.dst_off[x] = a - lo[x];
                }
                if (!overlap)
                    continue;
                long elems = 1;
                for (int x = 0; x < tt->ndims; ++x)
                    elems *= box.ext[x];
                /* The holder: this device, else the nearest. */
                int src = -1;
                long best = -1;
                for (int c = 0; c < b->ndev; ++c) {
                    if (store_find(store_of(b, from, c), st) < 0)
                        continue;
                    long delta[IR_MAX_AXES];
                    delta_between(b, d, c, delta);
                    long dist = c == d ? -1 : axis_distance(&b->s->model->mesh, delta);
                    if (src < 0 || dist < best) {
                        src = c;
                        best = dist;
                    }
                }
                if (src < 0) {
                    if (!b->dry)
                        ICE("tile %ld of '%s' is held by no device", st, tf->name);
                    b->failed = 1;
                    return 0;
                }
                const Store *ss = store_of(b, from, src);
                int sslot = ss->items[store_find(ss, st)].slot;
                int bi = add_box(b, ph, &box);
                if (src == d) {
                    PrimeAction *a = act(b, d, PRIME_ACT_COPY_BOX);
                    a->tensor = to;
                    a->slot = slot;
                    a->arg = bi;
                    a->nin = 1;
                    a->in_tensor[0] = from;
                    a->in_slot[0] = sslot;
                } else {
                    PrimeAction *a = act(b, d, PRIME_ACT_RECV_BOX);
                    a->tensor = to;
                    a->slot = slot;
                    a->peer = src;
                    a->tag = tag;
                    a->arg = bi;
                    a = act(b, src, PRIME_ACT_SEND_BOX);
                    a->tensor = from;
                    a->slot = sslot;
                    a->peer = d;
                    a->tag = tag;
                    a->arg = bi;
                    a->kind = PRIME_BYTES_REDIST;
                    bytes += elems * (long)sizeof(float);
                    if (n == cap) {
                        cap *= 2;
                        int *nd = ARENA_ARRAY(b->arena, int, cap),
                            *ns = ARENA_ARRAY(b->arena, int, cap);
                        long *nt = ARENA_ARRAY(b->arena, long, cap);
                        memcpy(nd, dsts, sizeof(int) * (size_t)n);
                        memcpy(ns, srcs, sizeof(int) * (size_t)n);
                        memcpy(nt, tiles, sizeof(long) * (size_t)n);
                        dsts = nd;
                        srcs = ns;
                        tiles = nt;
                    }
                    dsts[n] = d;
                    srcs[n] = src;
                    tiles[n] = tile;
                    n++;
                }
            }
            store_add(b, store_of(b, to, d), tile, slot);
        }
    }
    emit_wait_all(b);
    Move *mv = new_move(b, to, -1, MOVE_CONVERSION, NULL, n, dsts, srcs, tiles);
    mv->bytes = bytes;
    mv->reason = reason;
    mv->from_tensor = from;
    mv->pattern = conversion_pattern(b, n, dsts, srcs, target);
    mv->have = have;
    mv->need = *target;
    if (!b->dry)
        ptrvec_push(b->arena, &ph->boundary, mv);
    return bytes;
}

/* Frees every tile of a storage tensor. */
static void free_all(Builder *b, int tensor) {
    for (int d = 0; d < b->ndev; ++d) {
        Store *st = store_of(b, tensor, d);
        while (st->count) {
            emit_free(b, tensor, d, st->items[st->count - 1].slot);
            store_remove(st, st->count - 1);
        }
    }
}

/* Brings the phase's inputs into the residency it needs; returns the
 * bytes moved. */
static long prepare_inputs(Builder *b, PhaseSched *ph) {
    long bytes = 0;
    int ins[SCHED_MAX_OPERANDS];
    int nins = phase_inputs(ph, ins);
    for (int i = 0; i < nins; ++i) {
        int tensor = ins[i];
        const char *who = b->inst ? b->inst->name : "?";
        if (!holds_any(b, tensor)) {
            int from = value_holder(b, tensor);
            if (from < 0)
                ICE("value of '%s' is held nowhere before the %s phase of '%s'",
                    b->s->tensors[tensor].name, phase_name(ph->kind), who);
            const char *reason =
                b->dry
                    ? TRIAL_REASON
                    : arena_printf(b->arena,
                                   "the %s phase of '%s' tiles '%s' differently from its producer",
                                   phase_name(ph->kind), who, b->s->tensors[from].name);
            bytes += convert(b, ph, from, tensor, &b->need[tensor], reason);
        } else {
            const char *reason =
                b->dry ? TRIAL_REASON
                       : arena_printf(b->arena,
                                      "the %s phase of '%s' needs '%s' in a different layout "
                                      "than it was left in",
                                      phase_name(ph->kind), who, b->s->tensors[tensor].name);
            bytes += redistribute(b, ph, tensor, &b->need[tensor], 0, reason);
        }
    }
    return bytes;
}

/* Runs one phase with its input boundary; returns the bytes moved. */
static long phase_exec(Builder *b, PhaseSched *ph) {
    learn_needs(b, ph);
    if (ph->kind == PHASE_FWD && !b->dry && b->consumed)
        for (int i = 0; i < ph->nin; ++i)
            if (!b->consumed[ph->in[i].tensor].ndev)
                b->consumed[ph->in[i].tensor] = b->need[ph->in[i].tensor];
    int nb = ph->boundary.count;
    long bytes = prepare_inputs(b, ph);
    int ins[SCHED_MAX_OPERANDS];
    int nins = phase_inputs(ph, ins);
    Hidden hidden; /* set for the tensors in ins[] only */
    for (int i = 0; i < nins; ++i)
        hide_extras(b, ins[i], &b->need[ins[i]], &hidden);
    for (int i = 0; i < nins; ++i)
        b->track_need[ins[i]] = b->dry;
    run_phase(b, ph);
    for (int i = 0; i < nins; ++i) {
        b->track_need[ins[i]] = 0;
        unhide(b, ins[i], &hidden);
    }
    strict_check(b, ph, nb);
    return bytes;
}

/* Moves tensor `tensor` to `target` (same tiling), dropping extra copies. */
static long land(Builder *b, PhaseSched *ph, int tensor, const Layout *target, const char *reason) {
    int nb = ph->boundary.count;
    long bytes = redistribute(b, ph, tensor, target, 1, reason);
    strict_check(b, ph, nb);
    return bytes;
}

/* The next storage tensor id, or -1 after a diagnostic when the model
 * needs more than the runtime's limit. */
static int new_storage_id(Builder *b) {
    Schedule *s = b->s;
    if (s->ntensors == SCHED_MAX_TENSORS) {
        if (!b->failed)
            diag_error(b->sink, s->model->name_span,
                       "model '%s' needs more than %d stored tensors (tensors in each tiling, "
                       "gradients included)",
                       s->model->name, SCHED_MAX_TENSORS);
        b->failed = 1;
        return -1;
    }
    int id = s->ntensors++;
    memset(&s->tensors[id], 0, sizeof s->tensors[id]);
    memset(&s->home[id], 0, sizeof s->home[id]);
    memset(&s->final[id], 0, sizeof s->final[id]);
    memset(&b->need[id], 0, sizeof b->need[id]);
    b->track_need[id] = 0;
    memset(&b->consumed[id], 0, sizeof b->consumed[id]);
    memset(&b->reduced[id], 0, sizeof b->reduced[id]);
    b->reduced_phase[id] = -2;
    return id;
}

/* A fresh storage tensor with the tiling of `like`. */
static int storage_like(Builder *b, int like) {
    Schedule *s = b->s;
    int id = new_storage_id(b);
    if (id < 0)
        return -1;
    s->tensors[id] = s->tensors[like];
    s->tensors[id].name = arena_printf(b->arena, "%s_sum%d", s->tensors[like].name, ++b->nsums);
    s->tensors[id].check = 0;
    s->tensors[id].fill_phase = -1;
    s->tensors[id].max_slots = 0;
    machine_init(b);
    return id;
}

/* What happens after a backward or gradient phase: the gradient is added
 * into the value's gradient so far (several consumers), a weight's
 * gradient lands in the weight's home layout, weights go home. */
static void flush_collectives(Builder *b, PhaseSched *ph, PtrVec *list) {
    for (int i = 0; i < list->count; ++i)
        emit_collective(b, ph, list->items[i]);
    list->count = 0;
}

/* Do two lists of all-reduces reduce the same tiles over the same groups? */
static int same_collectives(const PtrVec *x, const PtrVec *y) {
    if (x->count != y->count)
        return 0;
    for (int i = 0; i < x->count; ++i) {
        const Collective *a = x->items[i];
        int found = 0;
        for (int j = 0; j < y->count && !found; ++j) {
            const Collective *c = y->items[j];
            found = a->tile == c->tile && a->gsize == c->gsize &&
                    memcmp(a->group, c->group, sizeof(int) * (size_t)a->gsize) == 0;
        }
        if (!found)
            return 0;
    }
    return 1;
}

static int same_layout(Builder *b, int t1, int t2) {
    for (int d = 0; d < b->ndev; ++d) {
        const Store *x = store_of(b, t1, d), *y = store_of(b, t2, d);
        if (x->count != y->count)
            return 0;
        for (int i = 0; i < x->count; ++i)
            if (store_find(y, x->items[i].tile) < 0)
                return 0;
    }
    return 1;
}

/* acc += contrib, tile by tile on every device (same tiles). */
static void add_tiles(Builder *b, int acc, int contrib) {
    for (int d = 0; d < b->ndev; ++d) {
        const Store *sa = store_of(b, acc, d), *sc = store_of(b, contrib, d);
        for (int i = 0; i < sa->count; ++i) {
            PrimeAction *a = act(b, d, PRIME_ACT_ADD);
            a->tensor = acc;
            a->slot = sa->items[i].slot;
            a->nin = 1;
            a->in_tensor[0] = contrib;
            a->in_slot[0] = sc->items[store_find(sc, sa->items[i].tile)].slot;
        }
    }
}

/* After a backward or gradient phase that produced a contribution to the
 * gradient of model tensor mt: sums it into the gradient so far (acc,
 * -1 for the first contribution). Partial sums that would be all-reduced
 * are, when the layouts and groups agree, added locally first and
 * all-reduced once after the last contribution (the Megatron-LM way). */
static long phase_epilogue(Builder *b, PhaseSched *ph, int acc, int mt, int more_later) {
    long bytes = 0;
    const SchedTensor *out = &b->s->tensors[ph->out.tensor];
    int contrib = ph->out.tensor;
    PtrVec mine = b->deferred;
    memset(&b->deferred, 0, sizeof b->deferred);
    PtrVec *pend = &b->pending[mt];
    if (acc < 0) {
        if (more_later)
            *pend = mine;
        else
            flush_collectives(b, ph, &mine);
        return 0;
    }
    int same_tiling = memcmp(b->s->tensors[acc].nslices, out->nslices, sizeof out->nslices) == 0;
    if (mine.count && pend->count && same_tiling && same_layout(b, acc, contrib) &&
        same_collectives(pend, &mine)) {
        add_tiles(b, acc, contrib);
        free_all(b, contrib);
        if (!more_later)
            flush_collectives(b, ph, pend);
        return 0;
    }
    flush_collectives(b, ph, pend);
    flush_collectives(b, ph, &mine);
    /* Bring the contribution to the layout of the gradient so far and add. */
    Layout target = layout_of(b, acc);
    const char *reason =
        arena_printf(b->arena, "the contributions to '%s' are summed where the first one is",
                     b->s->tensors[acc].name);
    if (same_tiling) {
        bytes += land(b, ph, contrib, &target, reason);
    } else {
        int tmp = storage_like(b, acc);
        if (tmp < 0)
            return bytes;
        bytes += convert(b, ph, contrib, tmp, &target, reason);
        free_all(b, contrib);
        contrib = tmp;
    }
    add_tiles(b, acc, contrib);
    free_all(b, contrib);
    return bytes;
}

/* Does a phase after p produce another contribution to mt's gradient? */
static int more_contributions(const Schedule *s, int p, int mt) {
    for (int q = p + 1; q < s->phases.count; ++q) {
        const PhaseSched *qh = s->phases.items[q];
        if ((qh->kind == PHASE_BWD || qh->kind == PHASE_GRAD) &&
            s->tensors[qh->out.tensor].model_tensor == mt)
            return 1;
    }
    return 0;
}

static void phase_alloc(Builder *b, PhaseSched *ph, PhaseKind kind, int inst) {
    ph->kind = kind;
    ph->inst = inst;
    ph->nactions = ARENA_ARRAY(b->arena, int, b->ndev);
    ph->action_cap = ARENA_ARRAY(b->arena, int, b->ndev);
    ph->actions = ARENA_ARRAY(b->arena, PrimeAction *, b->ndev);
}

/* Tries both sweep orders of a phase on copies of the machine; the one
 * that moves fewer bytes at the boundaries wins (forward on a tie). */
static long phase_finish(Builder *b, PhaseSched *ph, int p, const int *grad_storage);

/* Bytes to bring a backward phase's input gradient from where it ends to
 * where its value was consumed in the forward phase (where the producer's
 * backward phase will want it in an aligned plan). */
static long downstream_bytes(Builder *b, PhaseSched *ph) {
    if (ph->kind != PHASE_BWD || !b->consumed)
        return 0;
    const SchedTensor *g = &b->s->tensors[ph->out.tensor];
    for (int t = 0; t < b->s->ntensors; ++t) {
        const SchedTensor *x = &b->s->tensors[t];
        if (x->is_grad || x->model_tensor != g->model_tensor ||
            memcmp(x->nslices, g->nslices, sizeof x->nslices) != 0 || !b->consumed[t].ndev)
            continue;
        Layout have = layout_of(b, ph->out.tensor);
        long bytes = sched_conversion_bytes(g, &have, x, &b->consumed[t], NULL);
        return bytes > 0 ? bytes : 0;
    }
    return 0;
}

static void choose_order(Builder *b, PhaseSched *ph, int p, const int *grad_storage) {
    long best = -1;
    int best_rev = 0;
    if (b->steps <= 1) {
        ph->reversed = 0;
        return;
    }
    for (int rev = 0; rev < 2; ++rev) {
        Machine saved;
        machine_copy(b, &saved, &b->m);
        int was_dry = b->dry, was_failed = b->failed, tag = b->next_tag;
        int nvalues = b->s->model->ntensors;
        PtrVec *pending = ARENA_ARRAY(b->arena, PtrVec, nvalues);
        memcpy(pending, b->pending, sizeof(PtrVec) * (size_t)nvalues);
        for (int v = 0; v < nvalues; ++v) {
            /* A trial may flush a list: give it a copy of each. */
            pending[v].items = NULL;
            pending[v].count = pending[v].cap = 0;
            for (int i = 0; i < b->pending[v].count; ++i)
                ptrvec_push(b->arena, &pending[v], b->pending[v].items[i]);
        }
        PtrVec deferred = b->deferred;
        b->dry = 1;
        b->failed = 0;
        ph->reversed = rev;
        long bytes = phase_exec(b, ph);
        bytes += downstream_bytes(b, ph);
        bytes += phase_finish(b, ph, p, grad_storage);
        int failed = b->failed;
        memcpy(b->pending, pending, sizeof(PtrVec) * (size_t)nvalues);
        b->deferred = deferred;
        machine_copy(b, &b->m, &saved);
        b->dry = was_dry;
        b->failed = was_failed;
        b->next_tag = tag;
        if (!failed && (best < 0 || bytes < best)) {
            best = bytes;
            best_rev = rev;
        }
    }
    ph->reversed = best_rev;
}

/* ------------------------------------------------------------------ */
/* Predictions                                                         */

static void predict(Schedule *s, Arena *arena) {
    int ndev = s->model->mesh.ndev;
    for (int k = 0; k < PRIME_BYTES_KIND_COUNT; ++k)
        s->pred_bytes[k] = ARENA_ARRAY(arena, long, ndev);
    s->pred_peak = ARENA_ARRAY(arena, long, ndev);
    for (int p = 0; p < s->phases.count; ++p) {
        PhaseSched *ph = s->phases.items[p];
        ph->peak = ARENA_ARRAY(arena, long, ndev);
    }
    for (int d = 0; d < ndev; ++d) {
        long cur = 0, peak = 0;
        for (int p = 0; p < s->phases.count; ++p) {
            PhaseSched *ph = s->phases.items[p];
            long phase_peak = cur, temps = 0;
            for (int i = 0; i < ph->nactions[d]; ++i) {
                const PrimeAction *a = &ph->actions[d][i];
                long tile_bytes = a->op == PRIME_ACT_WAIT || a->op == PRIME_ACT_STEP
                                      ? 0
                                      : s->tensors[a->tensor].tile_elems * (long)sizeof(float);
                switch (a->op) {
                case PRIME_ACT_ALLOC:
                    cur += tile_bytes;
                    break;
                case PRIME_ACT_FREE:
                    cur -= tile_bytes;
                    break;
                case PRIME_ACT_SEND:
                    s->pred_bytes[a->kind][d] += tile_bytes;
                    break;
                case PRIME_ACT_SEND_BOX:
                case PRIME_ACT_RECV_BOX: {
                    const PrimeBox *box = &ph->boxes[a->arg];
                    long n = 1;
                    for (int x = 0; x < box->ndims; ++x)
                        n *= box->ext[x];
                    cur += n * (long)sizeof(float);
                    temps += n * (long)sizeof(float);
                    if (a->op == PRIME_ACT_SEND_BOX)
                        s->pred_bytes[a->kind][d] += n * (long)sizeof(float);
                    break;
                }
                case PRIME_ACT_WAIT:
                    cur -= temps;
                    temps = 0;
                    break;
                case PRIME_ACT_ALLREDUCE:
                case PRIME_ACT_REDUCE_SCATTER: {
                    const Collective *c = ph->groups.items[a->arg];
                    int pos = 0;
                    while (c->group[pos] != d)
                        pos++;
                    s->pred_bytes[PRIME_BYTES_COLLECTIVE][d] +=
                        a->op == PRIME_ACT_ALLREDUCE
                            ? (long)prime_allreduce_bytes((size_t)c->elems, c->gsize, pos)
                            : (long)prime_reduce_scatter_bytes((size_t)c->elems, c->gsize, pos);
                    long scratch = (long)prime_collective_scratch((size_t)c->elems, c->gsize) *
                                   (long)sizeof(float);
                    if (cur + scratch > phase_peak)
                        phase_peak = cur + scratch;
                    break;
                }
                default:
                    break;
                }
                if (cur > phase_peak)
                    phase_peak = cur;
            }
            ph->peak[d] = phase_peak;
            if (phase_peak > peak)
                peak = phase_peak;
        }
        s->pred_peak[d] = peak;
    }
}

/* ------------------------------------------------------------------ */
/* Driver                                                              */

/* The storage tensor of a model tensor (or its gradient) in the tiling
 * instance `inst` gives operator tensor `ot`. */
static int storage_for(Builder *b, int mt, int is_grad, int inst, const OpTensor *ot, int fresh) {
    Schedule *s = b->s;
    const ModelTensor *t = &s->model->tensors[mt];
    const SliceTable *st = &s->slices[inst];
    const Op *op = s->model->instances[inst].op;
    long nslices[IR_MAX_DIMS] = {0};
    for (int x = 0; x < ot->ndims; ++x)
        nslices[x] = st->nslices[ot->dims[x]];
    int copies = 0;
    for (int u = 0; u < s->ntensors; ++u) {
        SchedTensor *o = &s->tensors[u];
        if (o->model_tensor != mt || o->is_grad != is_grad)
            continue;
        copies++;
        if (!fresh && memcmp(o->nslices, nslices, sizeof nslices) == 0)
            return u;
    }
    int id = new_storage_id(b);
    if (id < 0)
        return -1;
    SchedTensor *o = &s->tensors[id];
    memset(o, 0, sizeof *o);
    o->name = arena_printf(b->arena, "%s%s%s", is_grad ? "d" : "", t->name,
                           copies ? arena_printf(b->arena, "_%d", copies + 1) : "");
    o->model_tensor = mt;
    o->is_grad = is_grad;
    o->ndims = t->ndims;
    o->is_weight = t->role == TENSOR_WEIGHT;
    o->fill_phase = -1;
    o->tile_elems = 1;
    o->ntiles = 1;
    for (int x = 0; x < t->ndims; ++x) {
        o->shape[x] = t->sizes[x];
        o->nslices[x] = nslices[x];
        o->extent[x] = t->sizes[x] / nslices[x];
        o->tile_elems *= o->extent[x];
        o->ntiles *= nslices[x];
        o->dimnames[x] = op->dims[ot->dims[x]];
    }
    return id;
}

/* Adds every tensor named in e (an op tensor or dY) as an operand. */
static void collect_operands(Builder *b, PhaseSched *ph, const Expr *e, const Instance *inst,
                             int dy_tensor, Sym dy_name) {
    if (!e || (e->kind == EXPR_CALL && strcmp(e->name, "size") == 0))
        return;
    if (e->kind == EXPR_NAME && e->name != dy_name) {
        int tensor_named = 0;
        for (int i = 0; i < inst->op->ninputs; ++i)
            tensor_named |= inst->op->inputs[i].name == e->name;
        if (!tensor_named)
            return; /* a dimension index */
    }
    if (e->kind == EXPR_INDEX || e->kind == EXPR_NAME) {
        for (int i = 0; i < ph->nin; ++i)
            if (ph->in[i].name == e->name)
                return;
        Operand *o = &ph->in[ph->nin];
        const OpTensor *ot = NULL;
        int tensor = -1;
        if (e->name == dy_name) {
            ot = &inst->op->output;
            tensor = dy_tensor;
        } else {
            for (int i = 0; i < inst->op->ninputs; ++i) {
                if (inst->op->inputs[i].name == e->name) {
                    ot = &inst->op->inputs[i];
                    int idx = (int)(inst - b->s->model->instances);
                    tensor = storage_for(b, inst->args[i], 0, idx, ot, 0);
                    /* The same tensor read with another index order (x and
                     * its transpose) is a second storage tensor. */
                    for (int j = 0; j < ph->nin; ++j)
                        if (ph->in[j].tensor == tensor &&
                            (ph->in[j].ndims != ot->ndims ||
                             memcmp(ph->in[j].opdims, ot->dims, sizeof(int) * (size_t)ot->ndims)))
                            tensor = storage_for(b, inst->args[i], 0, idx, ot, 1);
                }
            }
            if (!ot)
                ICE("tensor '%s' in the body of '%s' is not an input", e->name, inst->op->name);
        }
        if (ph->nin == SCHED_MAX_OPERANDS)
            ICE("too many operands");
        o->tensor = tensor;
        o->name = e->name;
        o->ndims = ot->ndims;
        memcpy(o->opdims, ot->dims, sizeof(int) * (size_t)ot->ndims);
        ph->nin++;
        return;
    }
    collect_operands(b, ph, e->lhs, inst, dy_tensor, dy_name);
    collect_operands(b, ph, e->rhs, inst, dy_tensor, dy_name);
    for (int i = 0; i < e->args.count; ++i)
        if (e->kind == EXPR_CALL || e->kind == EXPR_RADIX)
            collect_operands(b, ph, e->args.items[i], inst, dy_tensor, dy_name);
}

static const Expr *body_value(const Op *op) {
    for (int i = 0; i < op->decl->body.count; ++i) {
        const Stmt *st = op->decl->body.items[i];
        if (st->kind != STMT_GRAD)
            return st->value;
    }
    ICE("operator '%s' has no forward statement", op->name);
}

/* The derivative the operator states for input `name`, or NULL. */
static const Expr *stated_grad(const Op *op, Sym name) {
    for (int i = 0; i < op->decl->body.count; ++i) {
        const Stmt *st = op->decl->body.items[i];
        if (st->kind == STMT_GRAD && st->target.name == name)
            return st->value;
    }
    return NULL;
}

static PhaseSched *new_phase(Builder *b, PhaseKind kind, int inst) {
    PhaseSched *ph = ARENA_NEW(b->arena, PhaseSched);
    phase_alloc(b, ph, kind, inst);
    ptrvec_push(b->arena, &b->s->phases, ph);
    return ph;
}

/* A value's uses after phase index p (any tiling). */
static int used_after(Builder *b, int tensor, int p) {
    const SchedTensor *t = &b->s->tensors[tensor];
    for (int q = p + 1; q < b->s->phases.count; ++q) {
        const PhaseSched *ph = b->s->phases.items[q];
        for (int i = 0; i < ph->nin; ++i) {
            const SchedTensor *u = &b->s->tensors[ph->in[i].tensor];
            if (u->model_tensor == t->model_tensor && u->is_grad == t->is_grad)
                return 1;
        }
    }
    return 0;
}

/* After phase p: frees storage tensors no later phase reads, unless they
 * are results to check or weights. */
static void free_dead(Builder *b, int p) {
    PhaseSched *ph = b->s->phases.items[p];
    for (int t = 0; t < b->s->ntensors; ++t) {
        const SchedTensor *ts = &b->s->tensors[t];
        if (ts->check || (ts->is_weight && !ts->is_grad) || !holds_any(b, t))
            continue;
        if (used_after(b, t, p)) {
            /* Keep it while it is the only tiling holding the value, or
             * a later phase reads this very storage. */
            int direct = 0;
            for (int q = p + 1; q < b->s->phases.count && !direct; ++q) {
                const PhaseSched *qh = b->s->phases.items[q];
                for (int i = 0; i < qh->nin; ++i)
                    direct |= qh->in[i].tensor == t;
            }
            if (direct || value_holder(b, t) < 0)
                continue;
        }
        b->ph = ph;
        free_all(b, t);
    }
}

/* After a backward or gradient phase: its gradient is summed with
 * earlier contributions; a weight's gradient lands in the weight's home
 * layout; after the instance's last phase its weights go home. Returns
 * the bytes moved (phase order trials compare them). */
static long phase_finish(Builder *b, PhaseSched *ph, int p, const int *grad_storage) {
    Schedule *s = b->s;
    const Model *model = s->model;
    Arena *arena = b->arena;
    const Instance *inst = &model->instances[ph->inst];
    long bytes = 0;
    if (ph->kind == PHASE_BWD || ph->kind == PHASE_GRAD) {
        int mt = inst->args[ph->wrt];
        int acc = grad_storage[mt] != ph->out.tensor ? grad_storage[mt] : -1;
        bytes += phase_epilogue(b, ph, acc, mt, more_contributions(s, p, mt));
        if (model->tensors[mt].role == TENSOR_WEIGHT) {
            int w = storage_for(b, mt, 0, ph->inst, &inst->op->inputs[ph->wrt], 0);
            if (s->home[w].ndev && acc < 0)
                bytes += land(
                    b, ph, ph->out.tensor, &s->home[w],
                    arena_printf(arena,
                                 "'%s' must end in the layout of '%s' for a local optimizer step",
                                 s->tensors[ph->out.tensor].name, s->tensors[w].name));
        }
    }
    /* A weight no later phase reads goes home for the optimizer step. */
    for (int i = 0; i < ph->nin; ++i) {
        int w = ph->in[i].tensor;
        const SchedTensor *ts = &s->tensors[w];
        if (!ts->is_weight || ts->is_grad || !s->home[w].ndev)
            continue;
        int read_later = 0;
        for (int q = p + 1; q < s->phases.count && !read_later; ++q) {
            const PhaseSched *qh = s->phases.items[q];
            for (int k = 0; k < qh->nin; ++k)
                read_later |= qh->in[k].tensor == w;
        }
        if (!read_later)
            bytes += land(
                b, ph, w, &s->home[w],
                arena_printf(arena, "'%s' must be back in its home layout for the optimizer step",
                             ts->name));
    }
    return bytes;
}

Schedule *schedule_build(Arena *arena, DiagSink *sink, const Model *model) {
    Schedule *s = ARENA_NEW(arena, Schedule);
    s->model = model;
    s->tensors = arena_alloc_uninit(arena, sizeof(SchedTensor) * SCHED_MAX_TENSORS);
    s->home = arena_alloc_uninit(arena, sizeof(Layout) * SCHED_MAX_TENSORS);
    s->final = arena_alloc_uninit(arena, sizeof(Layout) * SCHED_MAX_TENSORS);
    s->slices = ARENA_ARRAY(arena, SliceTable, model->ninstances);
    for (int i = 0; i < model->ninstances; ++i)
        if (!partition_eval(arena, sink, model, &model->instances[i], &s->slices[i]))
            return NULL;

    Builder bb, *b = &bb;
    memset(b, 0, offsetof(Builder, m));
    b->m.ntensors = 0;
    b->consumed = arena_alloc_uninit(arena, sizeof(Layout) * SCHED_MAX_TENSORS);
    b->reduced = arena_alloc_uninit(arena, sizeof(PtrVec) * SCHED_MAX_TENSORS);
    b->reduced_phase = arena_alloc_uninit(arena, sizeof(int) * SCHED_MAX_TENSORS);
    b->arena = arena;
    b->sink = sink;
    b->s = s;
    b->ndev = model->mesh.ndev;
    b->st = &s->slices[0];
    b->steps = 1;

    /* Which model tensors are consumed, and by how many instances. */
    int *consumers = ARENA_ARRAY(arena, int, model->ntensors);
    for (int i = 0; i < model->ninstances; ++i)
        for (int a = 0; a < model->instances[i].op->ninputs; ++a)
            consumers[model->instances[i].args[a]]++;

    /* The phase list: forward in order, dY of the outputs, then backward
     * and gradient of every input of every instance in reverse order. */
    PhaseSched *init = new_phase(b, PHASE_INIT, -1);
    for (int i = 0; i < model->ninstances; ++i) {
        const Instance *inst = &model->instances[i];
        PhaseSched *ph = new_phase(b, PHASE_FWD, i);
        ph->expr = body_value(inst->op);
        ph->out.tensor = storage_for(b, inst->result, 0, i, &inst->op->output, 0);
        ph->out.name = inst->op->output.name;
        ph->out.ndims = inst->op->output.ndims;
        memcpy(ph->out.opdims, inst->op->output.dims, sizeof(int) * (size_t)ph->out.ndims);
        collect_operands(b, ph, ph->expr, inst, -1, NULL);
    }
    new_phase(b, PHASE_DYIN, -1);
    int *grad_storage = ARENA_ARRAY(arena, int, model->ntensors);
    for (int t = 0; t < model->ntensors; ++t)
        grad_storage[t] = -1;
    for (int i = model->ninstances - 1; i >= 0; --i) {
        const Instance *inst = &model->instances[i];
        Sym dy_name = arena_intern(arena, arena_printf(arena, "d%s", inst->op->output.name),
                                   strlen(inst->op->output.name) + 1);
        int dy = storage_for(b, inst->result, 1, i, &inst->op->output, 0);
        for (int a = 0; a < inst->op->ninputs; ++a) {
            const ModelTensor *mt = &model->tensors[inst->args[a]];
            PhaseSched *ph = new_phase(b, mt->role == TENSOR_WEIGHT ? PHASE_GRAD : PHASE_BWD, i);
            ph->wrt = a;
            const Expr *stated = stated_grad(inst->op, inst->op->inputs[a].name);
            Expr *d = stated
                          ? NULL
                          : ad_derive(arena, sink, body_value(inst->op), inst->op->inputs[a].name);
            if (!stated && !d)
                return NULL;
            Ident dyid = {dy_name, inst->op->output.span};
            PtrVec dims = {0};
            for (int x = 0; x < inst->op->output.ndims; ++x) {
                Ident *dim = ARENA_NEW(arena, Ident);
                dim->name = inst->op->dims[inst->op->output.dims[x]];
                dim->span = inst->op->output.span;
                ptrvec_push(arena, &dims, dim);
            }
            Expr *dyref = ast_new_index(arena, inst->op->output.span, dyid, dims);
            ph->expr =
                stated ? stated : ast_new_binary(arena, inst->op->output.span, '*', dyref, d);
            /* A second contribution to a gradient gets its own storage. */
            int first = grad_storage[inst->args[a]] < 0;
            ph->out.tensor = storage_for(b, inst->args[a], 1, i, &inst->op->inputs[a], !first);
            if (first)
                grad_storage[inst->args[a]] = ph->out.tensor;
            ph->out.name = arena_intern(arena, arena_printf(arena, "d%s", inst->op->inputs[a].name),
                                        strlen(inst->op->inputs[a].name) + 1);
            ph->out.ndims = inst->op->inputs[a].ndims;
            memcpy(ph->out.opdims, inst->op->inputs[a].dims, sizeof(int) * (size_t)ph->out.ndims);
            collect_operands(b, ph, ph->expr, inst, dy, dy_name);
        }
    }
    if (b->failed)
        return NULL;
    /* Results to check: the outputs, and the gradients of inputs and weights. */
    for (int t = 0; t < s->ntensors; ++t) {
        SchedTensor *ts = &s->tensors[t];
        const ModelTensor *mt = &model->tensors[ts->model_tensor];
        if (!ts->is_grad && mt->role == TENSOR_ACTIVATION && consumers[ts->model_tensor] == 0)
            ts->check = 1;
        if (ts->is_grad && mt->role != TENSOR_ACTIVATION && grad_storage[ts->model_tensor] == t)
            ts->check = 1;
    }
    machine_init(b);
    b->pending = ARENA_ARRAY(arena, PtrVec, model->ntensors);

    /* Init: inputs and weights where their first reader needs them. */
    for (int t = 0; t < model->ntensors; ++t) {
        if (model->tensors[t].role == TENSOR_ACTIVATION)
            continue;
        for (int p = 0; p < s->phases.count; ++p) {
            PhaseSched *ph = s->phases.items[p];
            int found = -1;
            for (int i = 0; i < ph->nin && found < 0; ++i)
                if (s->tensors[ph->in[i].tensor].model_tensor == t &&
                    !s->tensors[ph->in[i].tensor].is_grad)
                    found = ph->in[i].tensor;
            if (found < 0)
                continue;
            enter_phase(b, ph);
            learn_needs(b, ph);
            b->ph = init;
            for (int d = 0; d < b->ndev; ++d)
                for (int x = 0; x < b->need[found].count[d]; ++x)
                    store_add(b, store_of(b, found, d), b->need[found].tiles[d][x],
                              emit_alloc(b, found, d));
            s->home[found] = layout_of(b, found);
            s->tensors[found].fill_phase = 0;
            break;
        }
    }

    for (int p = 1; p < s->phases.count; ++p) {
        b->phase_index = p;
        PhaseSched *ph = s->phases.items[p];
        if (ph->kind == PHASE_DYIN) {
            /* dY of every output arrives in the layout the output has. */
            b->ph = ph;
            for (int t = 0; t < s->ntensors; ++t) {
                const SchedTensor *ts = &s->tensors[t];
                if (!ts->check || ts->is_grad)
                    continue;
                for (int u = 0; u < s->ntensors; ++u) {
                    SchedTensor *g = &s->tensors[u];
                    if (g->model_tensor != ts->model_tensor || !g->is_grad ||
                        memcmp(g->nslices, ts->nslices, sizeof g->nslices) != 0)
                        continue;
                    Layout yl = layout_of(b, t);
                    for (int d = 0; d < b->ndev; ++d)
                        for (int x = 0; x < yl.count[d]; ++x)
                            store_add(b, store_of(b, u, d), yl.tiles[d][x], emit_alloc(b, u, d));
                    s->home[u] = layout_of(b, u);
                    g->fill_phase = p;
                    break;
                }
            }
            free_dead(b, p);
            continue;
        }
        enter_phase(b, ph);
        b->defer = 0;
        if (ph->kind == PHASE_BWD || ph->kind == PHASE_GRAD) {
            int mt = s->tensors[ph->out.tensor].model_tensor;
            b->defer = more_contributions(s, p, mt) || b->pending[mt].count > 0;
        }
        if (ph->kind != PHASE_FWD)
            choose_order(b, ph, p, grad_storage);
        enter_phase(b, ph);
        phase_exec(b, ph);
        if (b->failed)
            return NULL;
        phase_finish(b, ph, p, grad_storage);
        if (b->failed)
            return NULL;
        free_dead(b, p);
    }
    if (b->failed)
        return NULL;
    for (int t = 0; t < s->ntensors; ++t)
        s->final[t] = layout_of(b, t);
    predict(s, arena);
    return s;
}

long sched_conversion_bytes(const SchedTensor *tf, const Layout *have, const SchedTensor *tt,
                            const Layout *need, long *max_per_device) {
    const int ndev = need->ndev;
    /* held[d * ntiles + st]: does device d hold source tile st? */
    unsigned char *held = calloc((size_t)ndev * (size_t)tf->ntiles + 1, 1);
    unsigned char *anywhere = calloc((size_t)tf->ntiles + 1, 1);
    if (!held || !anywhere)
        ICE("out of memory");
    for (int c = 0; c < have->ndev && c < ndev; ++c)
        for (int k = 0; k < have->count[c]; ++k) {
            held[(size_t)c * (size_t)tf->ntiles + (size_t)have->tiles[c][k]] = 1;
            anywhere[have->tiles[c][k]] = 1;
        }
    long total = 0, worst = 0;
    for (int d = 0; d < ndev && total >= 0; ++d) {
        long mine = 0;
        for (int i = 0; i < need->count[d] && total >= 0; ++i) {
            long tile = need->tiles[d][i];
            /* The source tiles overlapping this tile: per dimension, a range. */
            long lo_s[IR_MAX_DIMS], hi_s[IR_MAX_DIMS], lo[IR_MAX_DIMS], hi[IR_MAX_DIMS];
            for (int x = 0; x < tt->ndims; ++x) {
                lo[x] = sched_tile_coord(tt, tile, x) * tt->extent[x];
                hi[x] = lo[x] + tt->extent[x];
                lo_s[x] = lo[x] / tf->extent[x];
                hi_s[x] = (hi[x] - 1) / tf->extent[x];
            }
            long idx[IR_MAX_DIMS];
            for (int x = 0; x < tt->ndims; ++x)
                idx[x] = lo_s[x];
            for (;;) {
                long st = 0, elems = 1;
                for (int x = 0; x < tt->ndims; ++x) {
                    st = st * tf->nslices[x] + idx[x];
                    long slo = idx[x] * tf->extent[x], shi = slo + tf->extent[x];
                    long a = slo > lo[x] ? slo : lo[x], z = shi < hi[x] ? shi : hi[x];
                    elems *= z - a;
                }
                if (!anywhere[st]) {
                    total = -1;
                    break;
                }
                if (!held[(size_t)d * (size_t)tf->ntiles + (size_t)st])
                    mine += elems * (long)sizeof(float);
                int x = tt->ndims - 1;
                while (x >= 0 && idx[x] == hi_s[x]) {
                    idx[x] = lo_s[x];
                    --x;
                }
                if (x < 0)
                    break;
                idx[x]++;
            }
        }
        if (total < 0)
            break;
        total += mine;
        if (mine > worst)
            worst = mine;
    }
    free(held);
    free(anywhere);
    if (max_per_device)
        *max_per_device = total < 0 ? 0 : worst;
    return total;
}

/* ------------------------------------------------------------------ */
/* Transposition                                                       */

static Layout layout_permuted(Arena *arena, const Layout *l, const int *perm) {
    Layout o = *l;
    if (!l->count)
        return o;
    o.count = ARENA_ARRAY(arena, int, l->ndev);
    o.tiles = ARENA_ARRAY(arena, long *, l->ndev);
    o.slots = l->slots ? ARENA_ARRAY(arena, int *, l->ndev) : NULL;
    for (int d = 0; d < l->ndev; ++d) {
        o.count[perm[d]] = l->count[d];
        o.tiles[perm[d]] = l->tiles[d];
        if (l->slots)
            o.slots[perm[d]] = l->slots[d];
    }
    return o;
}

static long *per_rank_permuted(Arena *arena, const long *v, int ndev, const int *perm) {
    if (!v)
        return NULL;
    long *o = ARENA_ARRAY(arena, long, ndev);
    for (int d = 0; d < ndev; ++d)
        o[perm[d]] = v[d];
    return o;
}

static Collective *collective_permuted(Arena *arena, const Collective *c, PhaseSched *q,
                                       const int *perm) {
    Collective *o = ARENA_NEW(arena, Collective);
    *o = *c;
    o->phase = q;
    o->group = ARENA_ARRAY(arena, int, c->gsize);
    for (int m = 0; m < c->gsize; ++m)
        o->group[m] = perm[c->group[m]];
    return o;
}

static PtrVec moves_permuted(Arena *arena, const PtrVec *moves, const int *perm) {
    PtrVec out = {0};
    for (int k = 0; k < moves->count; ++k) {
        const Move *mv = moves->items[k];
        Move *o = ARENA_NEW(arena, Move);
        *o = *mv;
        o->delta[0] = mv->delta[1];
        o->delta[1] = mv->delta[0];
        o->transfers = ARENA_ARRAY(arena, Transfer, mv->ntransfers + 1);
        for (int x = 0; x < mv->ntransfers; ++x) {
            o->transfers[x] = mv->transfers[x];
            o->transfers[x].src = perm[mv->transfers[x].src];
            o->transfers[x].dst = perm[mv->transfers[x].dst];
        }
        o->have = layout_permuted(arena, &mv->have, perm);
        o->need = layout_permuted(arena, &mv->need, perm);
        ptrvec_push(arena, &out, o);
    }
    return out;
}

Schedule *schedule_transpose(Arena *arena, const Schedule *s, const Model *model) {
    const Mesh *mesh = &s->model->mesh;
    ICE_ASSERT(mesh->naxes == 2 && mesh->sizes[0] == mesh->sizes[1]);
    const int ndev = mesh->ndev, n = (int)mesh->sizes[0];
    int *perm = ARENA_ARRAY(arena, int, ndev);
    for (int d = 0; d < ndev; ++d)
        perm[d] = (d % n) * n + d / n;
    Schedule *t = ARENA_NEW(arena, Schedule);
    *t = *s;
    t->model = model;
    t->slices = ARENA_ARRAY(arena, SliceTable, model->ninstances);
    for (int i = 0; i < model->ninstances; ++i) {
        const SliceTable *st = &s->slices[i];
        SliceTable *o = &t->slices[i];
        *o = *st;
        long per_dim = (long)st->ndev * st->steps;
        o->slice = ARENA_ARRAY(arena, long, (size_t)st->ndims *(size_t)per_dim + 1);
        for (int x = 0; x < st->ndims; ++x)
            for (int d = 0; d < st->ndev; ++d)
                for (long k = 0; k < st->steps; ++k)
                    o->slice[x * per_dim + (long)perm[d] * st->steps + k] =
                        st->slice[x * per_dim + (long)d * st->steps + k];
        o->axis_sizes[0] = st->axis_sizes[1];
        o->axis_sizes[1] = st->axis_sizes[0];
    }
    t->home = ARENA_ARRAY(arena, Layout, s->ntensors + 1);
    t->final = ARENA_ARRAY(arena, Layout, s->ntensors + 1);
    for (int x = 0; x < s->ntensors; ++x) {
        t->home[x] = layout_permuted(arena, &s->home[x], perm);
        t->final[x] = layout_permuted(arena, &s->final[x], perm);
    }
    for (int k = 0; k < PRIME_BYTES_KIND_COUNT; ++k)
        t->pred_bytes[k] = per_rank_permuted(arena, s->pred_bytes[k], ndev, perm);
    t->pred_peak = per_rank_permuted(arena, s->pred_peak, ndev, perm);
    memset(&t->phases, 0, sizeof t->phases);
    for (int p = 0; p < s->phases.count; ++p) {
        const PhaseSched *ph = s->phases.items[p];
        PhaseSched *q = ARENA_NEW(arena, PhaseSched);
        *q = *ph;
        q->nactions = ARENA_ARRAY(arena, int, ndev);
        q->action_cap = ARENA_ARRAY(arena, int, ndev);
        q->actions = ARENA_ARRAY(arena, PrimeAction *, ndev);
        for (int d = 0; d < ndev; ++d) {
            int r = perm[d], na = ph->nactions[d];
            q->nactions[r] = q->action_cap[r] = na;
            q->actions[r] = ARENA_ARRAY(arena, PrimeAction, na + 1);
            for (int a = 0; a < na; ++a) {
                PrimeAction act = ph->actions[d][a];
                if (act.op == PRIME_ACT_SEND || act.op == PRIME_ACT_RECV ||
                    act.op == PRIME_ACT_SEND_BOX || act.op == PRIME_ACT_RECV_BOX)
                    act.peer = perm[act.peer];
                q->actions[r][a] = act;
            }
        }
        /* Collectives: one copy each, shared by the two lists. */
        memset(&q->collectives, 0, sizeof q->collectives);
        memset(&q->groups, 0, sizeof q->groups);
        for (int c = 0; c < ph->collectives.count; ++c)
            ptrvec_push(arena, &q->collectives,
                        collective_permuted(arena, ph->collectives.items[c], q, perm));
        for (int g = 0; g < ph->groups.count; ++g) {
            Collective *copy = NULL;
            for (int c = 0; c < ph->collectives.count && !copy; ++c)
                if (ph->collectives.items[c] == ph->groups.items[g])
                    copy = q->collectives.items[c];
            if (!copy)
                copy = collective_permuted(arena, ph->groups.items[g], q, perm);
            ptrvec_push(arena, &q->groups, copy);
        }
        q->moves = moves_permuted(arena, &ph->moves, perm);
        q->boundary = moves_permuted(arena, &ph->boundary, perm);
        q->peak = per_rank_permuted(arena, ph->peak, ndev, perm);
        q->need_cached[0] = q->need_cached[1] = 0; /* learned on s's devices */
        ptrvec_push(arena, &t->phases, q);
    }
    return t;
}
