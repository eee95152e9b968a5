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

#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS 4096

const char *phase_name(PhaseKind kind)
{
    static const char *const names[] = {"init", "forward", "dy-in", "backward", "gradient"};
    return kind < PHASE_COUNT ? names[kind] : "?";
}

const char *move_kind_name(MoveKind kind)
{
    static const char *const names[] = {"shift", "permutation", "exchange"};
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
    Store *stores[SCHED_MAX_TENSORS];          /* [dev] */
    unsigned char *slot_used[SCHED_MAX_TENSORS]; /* [dev * MAX_SLOTS + slot] */
} Machine;

typedef struct Builder {
    Arena *arena;
    DiagSink *sink;
    Schedule *s;
    const SliceTable *st;
    int ndev;
    long steps;
    Machine m;
    int dry;       /* a trial run: no diagnostics, actions discarded */
    int failed;
    int next_tag;
    PhaseSched *ph;
    /* Filled by a run: tiles a device needed that nobody held. */
    Layout need[SCHED_MAX_TENSORS];
    int track_need[SCHED_MAX_TENSORS];
} Builder;

static Store *store_of(Builder *b, int tensor, int dev) { return &b->m.stores[tensor][dev]; }

static int store_find(const Store *st, long tile)
{
    for (int i = 0; i < st->count; ++i)
        if (st->items[i].tile == tile)
            return i;
    return -1;
}

static void store_add(Builder *b, Store *st, long tile, int slot)
{
    if (st->count == st->cap) {
        int cap = st->cap ? st->cap * 2 : 4;
        Held *items = ARENA_ARRAY(b->arena, Held, cap);
        if (st->count)
            memcpy(items, st->items, sizeof(Held) * (size_t)st->count);
        st->items = items;
        st->cap = cap;
    }
    st->items[st->count].tile = tile;
    st->items[st->count].slot = slot;
    st->count++;
}

static void store_remove(Store *st, int index)
{
    st->items[index] = st->items[st->count - 1];
    st->count--;
}

static void machine_init(Builder *b)
{
    b->m.ntensors = b->s->ntensors;
    b->m.ndev = b->ndev;
    for (int t = 0; t < b->s->ntensors; ++t) {
        b->m.stores[t] = ARENA_ARRAY(b->arena, Store, b->ndev);
        b->m.slot_used[t] = arena_alloc(b->arena, (size_t)b->ndev * MAX_SLOTS);
    }
}

static void machine_copy(Builder *b, Machine *dst, const Machine *src)
{
    *dst = *src;
    for (int t = 0; t < src->ntensors; ++t) {
        dst->stores[t] = ARENA_ARRAY(b->arena, Store, src->ndev);
        for (int d = 0; d < src->ndev; ++d) {
            const Store *s = &src->stores[t][d];
            Store *o = &dst->stores[t][d];
            o->count = o->cap = s->count;
            o->items = s->count ? ARENA_ARRAY(b->arena, Held, s->count) : NULL;
            if (s->count)
                memcpy(o->items, s->items, sizeof(Held) * (size_t)s->count);
        }
        dst->slot_used[t] = arena_alloc(b->arena, (size_t)src->ndev * MAX_SLOTS);
        memcpy(dst->slot_used[t], src->slot_used[t], (size_t)src->ndev * MAX_SLOTS);
    }
}

/* ------------------------------------------------------------------ */
/* Actions                                                             */

static PrimeAction *act(Builder *b, int dev, int op)
{
    static PrimeAction scratch;
    if (b->dry || !b->ph) {
        memset(&scratch, 0, sizeof scratch);
        return &scratch;
    }
    PhaseSched *ph = b->ph;
    if (ph->nactions[dev] == ph->action_cap[dev]) {
        int cap = ph->action_cap[dev] ? ph->action_cap[dev] * 2 : 16;
        PrimeAction *a = ARENA_ARRAY(b->arena, PrimeAction, cap);
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

static int slot_alloc(Builder *b, int tensor, int dev)
{
    unsigned char *used = b->m.slot_used[tensor] + (size_t)dev * MAX_SLOTS;
    for (int s = 0; s < MAX_SLOTS; ++s) {
        if (!used[s]) {
            used[s] = 1;
            if (!b->dry && s + 1 > b->s->tensors[tensor].max_slots)
                b->s->tensors[tensor].max_slots = s + 1;
            return s;
        }
    }
    ICE("more than %d live tiles of one tensor on one device", MAX_SLOTS);
}

/* Allocates a zeroed tile and returns its slot. */
static int emit_alloc(Builder *b, int tensor, int dev)
{
    int slot = slot_alloc(b, tensor, dev);
    PrimeAction *a = act(b, dev, PRIME_ACT_ALLOC);
    a->tensor = tensor;
    a->slot = slot;
    return slot;
}

static void emit_free(Builder *b, int tensor, int dev, int slot)
{
    b->m.slot_used[tensor][(size_t)dev * MAX_SLOTS + slot] = 0;
    PrimeAction *a = act(b, dev, PRIME_ACT_FREE);
    a->tensor = tensor;
    a->slot = slot;
}

static void emit_send(Builder *b, int tensor, int dev, int slot, int peer, int tag, int kind)
{
    PrimeAction *a = act(b, dev, PRIME_ACT_SEND);
    a->tensor = tensor;
    a->slot = slot;
    a->peer = peer;
    a->tag = tag;
    a->kind = kind;
}

static void emit_recv(Builder *b, int tensor, int dev, int slot, int peer, int tag)
{
    PrimeAction *a = act(b, dev, PRIME_ACT_RECV);
    a->tensor = tensor;
    a->slot = slot;
    a->peer = peer;
    a->tag = tag;
}

static void emit_wait_all(Builder *b)
{
    for (int d = 0; d < b->ndev; ++d)
        act(b, d, PRIME_ACT_WAIT);
}

/* ------------------------------------------------------------------ */
/* Tiles and layouts                                                   */

long sched_tile_coord(const SchedTensor *t, long tile, int x)
{
    for (int y = t->ndims - 1; y > x; --y)
        tile /= t->nslices[y];
    return tile % t->nslices[x];
}

const char *sched_tile_name(Arena *arena, const Schedule *s, int tensor, long tile)
{
    const SchedTensor *t = &s->tensors[tensor];
    char buf[256];
    size_t n = 0;
    buf[n++] = '(';
    for (int x = 0; x < t->ndims && n < sizeof buf - 40; ++x) {
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s=%ld", x ? ", " : "",
                              s->inst->op->dims[t->dims[x]], sched_tile_coord(t, tile, x));
    }
    snprintf(buf + n, sizeof buf - n, ")");
    return arena_strdup(arena, buf);
}

/* Tile of tensor at device dev and operator step t (not phase step). */
static long tile_at(const Builder *b, int tensor, int dev, long t)
{
    const SchedTensor *ts = &b->s->tensors[tensor];
    long id = 0;
    for (int x = 0; x < ts->ndims; ++x)
        id = id * ts->nslices[x] + slice_at(b->st, ts->dims[x], dev, t);
    return id;
}

/* The operator step run at phase step s. */
static long op_step(const Builder *b, const PhaseSched *ph, long s)
{
    return ph->reversed ? b->steps - 1 - s : s;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Snapshot of which tiles (and slots) every device holds. */
static Layout layout_of(Builder *b, int tensor)
{
    Layout l;
    l.ndev = b->ndev;
    l.count = ARENA_ARRAY(b->arena, int, b->ndev);
    l.tiles = ARENA_ARRAY(b->arena, long *, b->ndev);
    l.slots = ARENA_ARRAY(b->arena, int *, b->ndev);
    for (int d = 0; d < b->ndev; ++d) {
        const Store *st = store_of(b, tensor, d);
        l.count[d] = st->count;
        l.tiles[d] = ARENA_ARRAY(b->arena, long, st->count + 1);
        l.slots[d] = ARENA_ARRAY(b->arena, int, st->count + 1);
        for (int i = 0; i < st->count; ++i)
            l.tiles[d][i] = st->items[i].tile;
        qsort(l.tiles[d], (size_t)st->count, sizeof(long), cmp_long);
        for (int i = 0; i < st->count; ++i)
            l.slots[d][i] = st->items[store_find(st, l.tiles[d][i])].slot;
    }
    return l;
}

static Layout layout_empty(Builder *b)
{
    Layout l;
    l.ndev = b->ndev;
    l.count = ARENA_ARRAY(b->arena, int, b->ndev);
    l.tiles = ARENA_ARRAY(b->arena, long *, b->ndev);
    l.slots = ARENA_ARRAY(b->arena, int *, b->ndev);
    return l;
}

static int layout_has(const Layout *l, int dev, long tile)
{
    for (int i = 0; i < l->count[dev]; ++i)
        if (l->tiles[dev][i] == tile)
            return 1;
    return 0;
}

static void layout_add(Builder *b, Layout *l, int dev, long tile)
{
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

typedef int (*CandidateFn)(Builder *b, int tensor, int src, long tile, void *ctx);

static long axis_distance(const SliceTable *st, const long *delta)
{
    long dist = 0;
    for (int a = 0; a < st->naxes; ++a) {
        long d = delta[a], back = st->axis_sizes[a] - delta[a];
        dist += d < back ? d : back;
    }
    return dist;
}

static int shifted(const Builder *b, int dev, const long *delta)
{
    long c[IR_MAX_AXES];
    mesh_coords(&b->s->model->mesh, dev, c);
    for (int a = 0; a < b->st->naxes; ++a)
        c[a] = (c[a] + delta[a]) % b->st->axis_sizes[a];
    return mesh_rank(&b->s->model->mesh, c);
}

static void delta_between(const Builder *b, int dst, int src, long *delta)
{
    long cd[IR_MAX_AXES], cs[IR_MAX_AXES];
    mesh_coords(&b->s->model->mesh, dst, cd);
    mesh_coords(&b->s->model->mesh, src, cs);
    for (int a = 0; a < b->st->naxes; ++a)
        delta[a] = ((cs[a] - cd[a]) % b->st->axis_sizes[a] + b->st->axis_sizes[a]) %
                   b->st->axis_sizes[a];
}

/* Picks a source for every receiver: one uniform mesh offset if one
 * serves all of them (the nearest such), else the nearest candidate per
 * receiver. Fills src[] and classifies the move. `exclusive`: a source
 * can serve one receiver only (accumulators). */
static MoveKind choose_sources(Builder *b, int tensor, int nrecv, const int *dst,
                               const long *tile, CandidateFn cand, void *ctx, int exclusive,
                               int *src, long *delta_out)
{
    long best_delta[IR_MAX_AXES];
    long best_dist = -1;
    for (int c = 0; c < b->ndev; ++c) {
        if (!cand(b, tensor, c, tile[0], ctx))
            continue;
        long delta[IR_MAX_AXES];
        delta_between(b, dst[0], c, delta);
        long dist = axis_distance(b->st, delta);
        if (best_dist >= 0 && dist >= best_dist)
            continue;
        int ok = 1;
        for (int r = 1; r < nrecv && ok; ++r)
            ok = cand(b, tensor, shifted(b, dst[r], delta), tile[r], ctx);
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
            if ((exclusive && taken[c]) || !cand(b, tensor, c, tile[r], ctx))
                continue;
            long delta[IR_MAX_AXES];
            delta_between(b, dst[r], c, delta);
            long dist = axis_distance(b->st, delta);
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

static int holds_tile(Builder *b, int tensor, int src, long tile, void *ctx)
{
    (void)ctx;
    return store_find(store_of(b, tensor, src), tile) >= 0;
}

static Move *new_move(Builder *b, int tensor, long step, MoveKind kind, const long *delta,
                      int n, const int *dst, const int *src, const long *tile)
{
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
static long redistribute(Builder *b, PhaseSched *ph, int tensor, const Layout *target,
                         int drop, const char *reason)
{
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
                    ICE("tile %s of %s is held by no device", sched_tile_name(b->arena, b->s, tensor, tile[r]),
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
} AccState;

static long red_id(const Builder *b, const AccState *as, int dev, long t)
{
    long id = 0;
    for (int x = 0; x < as->nred_dims; ++x)
        id = id * b->st->nslices[as->red_dims[x]] + slice_at(b->st, as->red_dims[x], dev, t);
    return id;
}

static Acc *acc_new(Builder *b, const AccState *as, int dev, long tile, int slot)
{
    Acc *a = ARENA_NEW(b->arena, Acc);
    a->dev = dev;
    a->tile = tile;
    a->slot = slot;
    a->red = arena_alloc(b->arena, (size_t)as->nred);
    a->red_step = ARENA_ARRAY(b->arena, long, as->nred);
    a->first_dup = -1;
    return a;
}

static void acc_add(Acc *a, long r, long step)
{
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
static void acc_merge(Acc *into, const Acc *from, long nred)
{
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

static int acc_available(Builder *b, int tensor, int src, long tile, void *ctx)
{
    (void)tensor;
    AccState *as = ctx;
    (void)b;
    const Acc *a = as->active[src];
    return a && a->tile == tile && as->next_tile[src] != tile && !as->claimed[src];
}

static int retired_find(const AccState *as, int dev, long tile)
{
    for (int i = 0; i < as->retired[dev].count; ++i)
        if (((Acc *)as->retired[dev].items[i])->tile == tile)
            return i;
    return -1;
}

static const char *red_name(Builder *b, const AccState *as, long r)
{
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
                              b->s->inst->op->dims[as->red_dims[x]], vals[x]);
    return arena_strdup(b->arena, buf);
}

/* The DSI of a reduction dimension, or failing that the partition, for
 * pointing at in diagnostics. */
static Span red_span(const Builder *b, const AccState *as)
{
    const Partition *p = b->s->inst->partition;
    for (int x = 0; x < as->nred_dims; ++x)
        if (p->dsi[as->red_dims[x]])
            return p->dsi[as->red_dims[x]]->span;
    return p->decl->name.span;
}

static void phase_error_note(Builder *b)
{
    diag_note(b->sink, b->s->inst->use_span, "partition '%s' applied to '%s' here",
              b->s->inst->partition->name, b->s->inst->name);
}

/* Checks coverage of the output and all-reduces partial sums. */
static void finish_accumulators(Builder *b, PhaseSched *ph, AccState *as)
{
    const SchedTensor *out = &b->s->tensors[ph->out];
    PtrVec *by_tile = ARENA_ARRAY(b->arena, PtrVec, out->ntiles);
    for (int d = 0; d < b->ndev; ++d) {
        for (int i = 0; i < as->retired[d].count; ++i) {
            Acc *a = as->retired[d].items[i];
            if (a->first_dup >= 0 && !b->failed) {
                if (!b->dry) {
                    diag_error(b->sink, red_span(b, as),
                               "%s phase double counts: reduction slice (%s) is added twice into tile %s of '%s' on device %d (steps %ld and %ld)",
                               phase_name(ph->kind), red_name(b, as, a->first_dup),
                               sched_tile_name(b->arena, b->s, ph->out, a->tile), out->name, d,
                               a->dup_steps[0], a->dup_steps[1]);
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
                diag_error(b->sink, b->s->inst->partition->decl->name.span,
                           "%s phase misses tile %s of '%s': no device computes it",
                           phase_name(ph->kind), sched_tile_name(b->arena, b->s, ph->out, tile),
                           out->name);
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
                               "%s phase misses voxels: tile %s of '%s' never receives reduction slice (%s)%s",
                               phase_name(ph->kind), sched_tile_name(b->arena, b->s, ph->out, tile),
                               out->name, red_name(b, as, missing),
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
                               "%s phase double counts: the partial sums of tile %s of '%s' cannot be split into complete sums",
                               phase_name(ph->kind), sched_tile_name(b->arena, b->s, ph->out, tile),
                               out->name);
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
            col->tensor = ph->out;
            col->tile = tile;
            col->gsize = gs;
            col->group = ARENA_ARRAY(b->arena, int, gs);
            memcpy(col->group, members, sizeof(int) * (size_t)gs);
            col->elems = out->tile_elems;
            for (int p = 0; p < gs; ++p)
                col->bytes += (long)prime_allreduce_bytes((size_t)col->elems, gs, p);
            int tag = b->next_tag++;
            if (!b->dry) {
                ptrvec_push(b->arena, &ph->collectives, col);
                ptrvec_push(b->arena, &ph->groups, col);
            }
            int gindex = ph->groups.count - 1;
            for (int p = 0; p < gs; ++p) {
                PrimeAction *a = act(b, members[p], PRIME_ACT_ALLREDUCE);
                a->tensor = ph->out;
                a->slot = slots[p];
                a->tag = tag;
                a->arg = gindex;
            }
        }
    }
    ph->replication = replication;
}

static void run_phase(Builder *b, PhaseSched *ph)
{
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
    const SchedTensor *out = &b->s->tensors[ph->out];
    as.nred = 1;
    for (int d = 0; d < b->st->ndims; ++d) {
        int in_out = 0;
        for (int x = 0; x < out->ndims; ++x)
            in_out |= out->dims[x] == d;
        if (!in_out) {
            as.red_dims[as.nred_dims++] = d;
            as.nred *= b->st->nslices[d];
        }
    }
    for (int d = 0; d < ndev; ++d)
        as.sent_slot[d] = -1;
    /* Steps at which each device last needs each input tile. */
    long *last_need[IR_MAX_INPUTS];
    for (int i = 0; i < ph->nin; ++i) {
        const SchedTensor *ts = &b->s->tensors[ph->in[i]];
        last_need[i] = ARENA_ARRAY(b->arena, long, (size_t)ndev * ts->ntiles);
        for (long x = 0; x < (long)ndev * ts->ntiles; ++x)
            last_need[i][x] = -1;
        for (long s = 0; s < T; ++s)
            for (int d = 0; d < ndev; ++d)
                last_need[i][(long)d * ts->ntiles + tile_at(b, ph->in[i], d, op_step(b, ph, s))] = s;
    }
    int *dst = ARENA_ARRAY(b->arena, int, ndev);
    int *src = ARENA_ARRAY(b->arena, int, ndev);
    long *tiles = ARENA_ARRAY(b->arena, long, ndev);
    int *pending_free_slot = ARENA_ARRAY(b->arena, int, ndev * IR_MAX_INPUTS);

    for (long s = 0; s < T; ++s) {
        const long t = op_step(b, ph, s);
        for (int d = 0; d < ndev; ++d)
            act(b, d, PRIME_ACT_STEP)->arg = (int)s;
        /* Inputs needed now must be here (first step: from the initial
         * residency; later: they arrived or were resident). */
        for (int i = 0; i < ph->nin; ++i) {
            int tensor = ph->in[i];
            for (int d = 0; d < ndev; ++d) {
                long tile = tile_at(b, tensor, d, t);
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
        for (int d = 0; d < ndev * IR_MAX_INPUTS; ++d)
            pending_free_slot[d] = -1;
        int nadd[IR_MAX_INPUTS] = {0};
        int *add_dev[IR_MAX_INPUTS];
        int *add_slot[IR_MAX_INPUTS];
        long *add_tile[IR_MAX_INPUTS];
        if (s + 1 < T) {
            const long tn = op_step(b, ph, s + 1);
            for (int i = 0; i < ph->nin; ++i) {
                int tensor = ph->in[i];
                const SchedTensor *ts = &b->s->tensors[tensor];
                int n = 0;
                for (int d = 0; d < ndev; ++d) {
                    long tile = tile_at(b, tensor, d, tn);
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
                        pending_free_slot[src[r] * IR_MAX_INPUTS + i] = ss->items[idx].slot;
                }
                Move *mv = new_move(b, tensor, s, kind, delta, n, dst, src, tiles);
                if (!b->dry)
                    ptrvec_push(b->arena, &ph->moves, mv);
            }
        }
        /* 2. Compute. */
        for (int d = 0; d < ndev; ++d) {
            long otile = tile_at(b, ph->out, d, t);
            Acc *a = active[d];
            int into_slot;
            Acc *partial = NULL;
            if (a && a->tile == otile) {
                into_slot = a->slot;
            } else if (incoming[d]) {
                /* Compute into a fresh partial while the accumulator arrives. */
                into_slot = emit_alloc(b, ph->out, d);
                partial = acc_new(b, &as, d, otile, into_slot);
            } else {
                int ri = retired_find(&as, d, otile);
                if (ri >= 0) {
                    a = as.retired[d].items[ri];
                    as.retired[d].items[ri] = as.retired[d].items[--as.retired[d].count];
                } else {
                    a = acc_new(b, &as, d, otile, emit_alloc(b, ph->out, d));
                    ph->nlocal_acc += b->dry ? 0 : 1;
                }
                if (active[d] && active[d] != a)
                    ptrvec_push(b->arena, &as.retired[d], active[d]);
                active[d] = a;
                into_slot = a->slot;
            }
            PrimeAction *k = act(b, d, PRIME_ACT_KERNEL);
            k->tensor = ph->out;
            k->slot = into_slot;
            k->arg = 0;
            k->nin = ph->nin;
            for (int i = 0; i < ph->nin; ++i) {
                const Store *st = store_of(b, ph->in[i], d);
                k->in_tensor[i] = ph->in[i];
                k->in_slot[i] = st->items[store_find(st, tile_at(b, ph->in[i], d, t))].slot;
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
                a->tensor = ph->out;
                a->slot = active[d]->slot;
                a->nin = 1;
                a->in_tensor[0] = ph->out;
                a->in_slot[0] = as.incoming_slot[d];
                acc_merge(active[d], incoming[d], as.nred);
                emit_free(b, ph->out, d, as.incoming_slot[d]);
                incoming[d] = NULL;
            }
            if (as.sent_slot[d] >= 0) {
                emit_free(b, ph->out, d, as.sent_slot[d]);
                as.sent_slot[d] = -1;
            }
            for (int i = 0; i < ph->nin; ++i) {
                int slot = pending_free_slot[d * IR_MAX_INPUTS + i];
                if (slot < 0)
                    continue;
                Store *st = store_of(b, ph->in[i], d);
                for (int x = 0; x < st->count; ++x) {
                    if (st->items[x].slot == slot) {
                        store_remove(st, x);
                        break;
                    }
                }
                emit_free(b, ph->in[i], d, slot);
            }
        }
        for (int i = 0; i < ph->nin; ++i)
            for (int r = 0; r < nadd[i]; ++r)
                store_add(b, store_of(b, ph->in[i], add_dev[i][r]), add_tile[i][r],
                          add_slot[i][r]);
        /* 5. Accumulators that travel to the next step. */
        if (s + 1 < T) {
            const long tn = op_step(b, ph, s + 1);
            int n = 0;
            for (int d = 0; d < ndev; ++d) {
                as.next_tile[d] = tile_at(b, ph->out, d, tn);
                as.claimed[d] = 0;
            }
            for (int d = 0; d < ndev; ++d) {
                long want = as.next_tile[d];
                if ((active[d] && active[d]->tile == want) || retired_find(&as, d, want) >= 0)
                    continue;
                int any = 0;
                for (int c = 0; c < ndev && !any; ++c)
                    any = acc_available(b, ph->out, c, want, &as);
                if (!any)
                    continue;
                dst[n] = d;
                tiles[n] = want;
                n++;
            }
            if (n > 0) {
                long delta[IR_MAX_AXES] = {0};
                MoveKind kind =
                    choose_sources(b, ph->out, n, dst, tiles, acc_available, &as, 1, src, delta);
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
                    int slot = emit_alloc(b, ph->out, dst[r]);
                    emit_recv(b, ph->out, dst[r], slot, src[r], tag);
                    as.incoming_slot[dst[r]] = slot;
                }
                for (int r = 0; r < m; ++r) {
                    Acc *a = active[src[r]];
                    emit_send(b, ph->out, src[r], a->slot, dst[r], tag, PRIME_BYTES_SHIFT);
                    as.sent_slot[src[r]] = a->slot;
                    incoming[dst[r]] = a;
                    active[src[r]] = NULL;
                }
                if (m > 0) {
                    Move *mv = new_move(b, ph->out, s, kind, delta, m, dst, src, tiles);
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
        Store *st = store_of(b, ph->out, d);
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
static void hide_extras(Builder *b, int tensor, const Layout *need, Hidden *h)
{
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

static void unhide(Builder *b, int tensor, Hidden *h)
{
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

/* Learns the residency each input needs at the start of the phase: a
 * trial run from empty input stores records the tiles nobody could
 * send; a second trial from that residency confirms it. */
static void learn_needs(Builder *b, PhaseSched *ph)
{
    Machine saved;
    machine_copy(b, &saved, &b->m);
    int was_dry = b->dry, was_failed = b->failed;
    b->dry = 1;
    for (int i = 0; i < ph->nin; ++i) {
        b->need[ph->in[i]] = layout_empty(b);
        b->track_need[ph->in[i]] = 1;
    }
    for (int pass = 0; pass < 3; ++pass) {
        machine_copy(b, &b->m, &saved);
        for (int i = 0; i < ph->nin; ++i) {
            int tensor = ph->in[i];
            for (int d = 0; d < b->ndev; ++d) {
                store_of(b, tensor, d)->count = 0;
                for (int x = 0; x < b->need[tensor].count[d]; ++x)
                    store_add(b, store_of(b, tensor, d), b->need[tensor].tiles[d][x],
                              slot_alloc(b, tensor, d));
            }
        }
        int before = 0, after = 0;
        for (int i = 0; i < ph->nin; ++i)
            for (int d = 0; d < b->ndev; ++d)
                before += b->need[ph->in[i]].count[d];
        run_phase(b, ph);
        for (int i = 0; i < ph->nin; ++i)
            for (int d = 0; d < b->ndev; ++d)
                after += b->need[ph->in[i]].count[d];
        if (pass > 0 && after == before)
            break;
    }
    for (int i = 0; i < ph->nin; ++i)
        b->track_need[ph->in[i]] = 0;
    machine_copy(b, &b->m, &saved);
    b->dry = was_dry;
    b->failed = was_failed;
}

static void strict_check(Builder *b, PhaseSched *ph, int first_boundary)
{
    if (!b->s->model->strict || b->dry)
        return;
    for (int i = first_boundary; i < ph->boundary.count; ++i) {
        const Move *mv = ph->boundary.items[i];
        diag_error(b->sink, b->s->inst->use_span,
                   "strict: '%s' needs a redistribution (%s, %ld bytes): %s",
                   b->s->tensors[mv->tensor].name, move_kind_name(mv->kind), mv->bytes,
                   mv->reason);
        diag_note(b->sink, b->s->inst->partition->decl->name.span,
                  "the layouts come from partition '%s'; `primec explain` shows both",
                  b->s->inst->partition->name);
        b->failed = 1;
    }
}

/* Runs one phase with its boundaries; returns the bytes redistributed. */
static long phase_exec(Builder *b, PhaseSched *ph)
{
    learn_needs(b, ph);
    long bytes = 0;
    int nb = ph->boundary.count;
    for (int i = 0; i < ph->nin; ++i) {
        int tensor = ph->in[i];
        const char *reason = arena_printf(b->arena, "%s of '%s' starts from a different layout than %s",
                                          phase_name(ph->kind), b->s->inst->name,
                                          ph->kind == PHASE_GRAD && b->s->tensors[tensor].grad_of < 0
                                              ? "the forward phase stashed"
                                              : "the previous phase left");
        bytes += redistribute(b, ph, tensor, &b->need[tensor], 0, reason);
    }
    Hidden hidden;
    memset(&hidden, 0, sizeof hidden);
    for (int i = 0; i < ph->nin; ++i)
        hide_extras(b, ph->in[i], &b->need[ph->in[i]], &hidden);
    for (int i = 0; i < ph->nin; ++i)
        b->track_need[ph->in[i]] = b->dry;
    run_phase(b, ph);
    for (int i = 0; i < ph->nin; ++i) {
        b->track_need[ph->in[i]] = 0;
        unhide(b, ph->in[i], &hidden);
    }
    if (b->failed)
        return bytes;
    /* Gradients land in their primal's home layout. */
    const SchedTensor *out = &b->s->tensors[ph->out];
    if (out->grad_of >= 0 && b->s->home[out->grad_of].ndev) {
        const char *reason = arena_printf(b->arena, "'%s' must end in the layout of '%s'", out->name,
                                          b->s->tensors[out->grad_of].name);
        bytes += redistribute(b, ph, ph->out, &b->s->home[out->grad_of], 1, reason);
    }
    strict_check(b, ph, nb);
    return bytes;
}

/* Tries both sweep orders of a phase on copies of the machine. */
static void choose_order(Builder *b, PhaseSched *ph)
{
    long best = -1;
    int best_rev = 0;
    for (int rev = 0; rev < 2; ++rev) {
        Machine saved;
        machine_copy(b, &saved, &b->m);
        int was_dry = b->dry, was_failed = b->failed, tag = b->next_tag;
        b->dry = 1;
        b->failed = 0;
        ph->reversed = rev;
        long bytes = phase_exec(b, ph);
        /* Weights must also be home again after backward. */
        if (ph->kind == PHASE_BWD)
            for (int i = 0; i < ph->nin; ++i)
                if (b->s->tensors[ph->in[i]].is_weight)
                    bytes += redistribute(b, ph, ph->in[i], &b->s->home[ph->in[i]], 1, "");
        int failed = b->failed;
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

/* Weights go back to their home layout (after backward, the last phase
 * that reads them) so that the optimizer step and the next forward find
 * them there. */
static void weights_home(Builder *b, PhaseSched *ph)
{
    for (int i = 0; i < b->s->inst->op->ninputs; ++i) {
        if (!b->s->tensors[i].is_weight)
            continue;
        b->ph = ph;
        int nb = ph->boundary.count;
        redistribute(b, ph, i, &b->s->home[i], 1,
                     arena_printf(b->arena, "'%s' must be back in its home layout for the optimizer step",
                                  b->s->tensors[i].name));
        strict_check(b, ph, nb);
    }
}

static void phase_setup(Builder *b, PhaseSched *ph, PhaseKind kind)
{
    ph->kind = kind;
    ph->present = 1;
    ph->nactions = ARENA_ARRAY(b->arena, int, b->ndev);
    ph->action_cap = ARENA_ARRAY(b->arena, int, b->ndev);
    ph->actions = ARENA_ARRAY(b->arena, PrimeAction *, b->ndev);
}

/* ------------------------------------------------------------------ */
/* Predictions                                                         */

static void predict(Schedule *s, Arena *arena)
{
    int ndev = s->model->mesh.ndev;
    for (int k = 0; k < PRIME_BYTES_KIND_COUNT; ++k)
        s->pred_bytes[k] = ARENA_ARRAY(arena, long, ndev);
    s->pred_peak = ARENA_ARRAY(arena, long, ndev);
    for (int p = 0; p < PHASE_COUNT; ++p)
        s->phase_peak[p] = ARENA_ARRAY(arena, long, ndev);
    for (int d = 0; d < ndev; ++d) {
        long cur = 0, peak = 0;
        for (int p = 0; p < PHASE_COUNT; ++p) {
            const PhaseSched *ph = &s->phases[p];
            if (!ph->present)
                continue;
            long phase_peak = cur;
            for (int i = 0; i < ph->nactions[d]; ++i) {
                const PrimeAction *a = &ph->actions[d][i];
                long tile_bytes =
                    a->op == PRIME_ACT_WAIT || a->op == PRIME_ACT_STEP
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
                case PRIME_ACT_ALLREDUCE: {
                    const Collective *c = ph->groups.items[a->arg];
                    int pos = 0;
                    while (c->group[pos] != d)
                        pos++;
                    s->pred_bytes[PRIME_BYTES_COLLECTIVE][d] +=
                        (long)prime_allreduce_bytes((size_t)c->elems, c->gsize, pos);
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
            s->phase_peak[p][d] = phase_peak;
            if (phase_peak > peak)
                peak = phase_peak;
        }
        s->pred_peak[d] = peak;
    }
}

/* ------------------------------------------------------------------ */
/* Driver                                                              */

static void tensor_setup(Schedule *s, int id, const char *name, const OpTensor *ot, int grad_of,
                         int is_weight)
{
    SchedTensor *t = &s->tensors[id];
    t->name = name;
    t->ndims = ot->ndims;
    t->grad_of = grad_of;
    t->is_weight = is_weight;
    t->tile_elems = 1;
    t->ntiles = 1;
    for (int x = 0; x < ot->ndims; ++x) {
        t->dims[x] = ot->dims[x];
        t->nslices[x] = s->slices.nslices[ot->dims[x]];
        t->extent[x] = s->slices.extent[ot->dims[x]];
        t->tile_elems *= t->extent[x];
        t->ntiles *= t->nslices[x];
    }
}

Schedule *schedule_build(Arena *arena, DiagSink *sink, const Model *model, const Instance *inst)
{
    Schedule *s = ARENA_NEW(arena, Schedule);
    s->model = model;
    s->inst = inst;
    if (!partition_eval(arena, sink, model, inst, &s->slices))
        return NULL;
    const Op *op = inst->op;
    int nact = 0, nweight = 0, act_in = -1, weight_in = -1;
    for (int i = 0; i < op->ninputs; ++i) {
        const ModelTensor *mt = &model->tensors[inst->args[i]];
        int is_weight = mt->role == TENSOR_WEIGHT;
        tensor_setup(s, i, mt->name, &op->inputs[i], -1, is_weight);
        if (is_weight) {
            nweight++;
            weight_in = i;
        } else {
            nact++;
            act_in = i;
        }
    }
    if (nact > 1 || nweight > 1) {
        diag_error(sink, inst->span,
                   "'%s' has %d activation and %d weight inputs; this version lowers operators with at most one of each",
                   inst->name, nact, nweight);
        return NULL;
    }
    s->t_out = op->ninputs;
    tensor_setup(s, s->t_out, inst->name, &op->output, -1, 0);
    s->t_dout = s->t_out + 1;
    tensor_setup(s, s->t_dout, arena_printf(arena, "d%s", inst->name), &op->output, s->t_out, 0);
    s->ntensors = s->t_dout + 1;
    for (int i = 0; i < op->ninputs; ++i) {
        s->t_grad[i] = s->ntensors++;
        tensor_setup(s, s->t_grad[i], arena_printf(arena, "d%s", s->tensors[i].name),
                     &op->inputs[i], i, s->tensors[i].is_weight);
    }

    Builder bb, *b = &bb;
    memset(b, 0, sizeof bb);
    b->arena = arena;
    b->sink = sink;
    b->s = s;
    b->st = &s->slices;
    b->ndev = model->mesh.ndev;
    b->steps = inst->steps;
    machine_init(b);

    /* Forward: Y = X W. Its required residency is the inputs' home. */
    PhaseSched *fwd = &s->phases[PHASE_FWD];
    phase_setup(b, fwd, PHASE_FWD);
    fwd->out = s->t_out;
    fwd->nin = op->ninputs;
    for (int i = 0; i < op->ninputs; ++i)
        fwd->in[i] = i;
    learn_needs(b, fwd);
    PhaseSched *init = &s->phases[PHASE_INIT];
    phase_setup(b, init, PHASE_INIT);
    b->ph = init;
    for (int i = 0; i < op->ninputs; ++i) {
        for (int d = 0; d < b->ndev; ++d)
            for (int x = 0; x < b->need[i].count[d]; ++x)
                store_add(b, store_of(b, i, d), b->need[i].tiles[d][x], emit_alloc(b, i, d));
        s->home[i] = layout_of(b, i);
    }
    b->ph = fwd;
    phase_exec(b, fwd);
    if (b->failed)
        return NULL;

    /* dY arrives in the layout Y was produced in. */
    PhaseSched *dyin = &s->phases[PHASE_DYIN];
    phase_setup(b, dyin, PHASE_DYIN);
    b->ph = dyin;
    Layout ylayout = layout_of(b, s->t_out);
    for (int d = 0; d < b->ndev; ++d)
        for (int x = 0; x < ylayout.count[d]; ++x)
            store_add(b, store_of(b, s->t_dout, d), ylayout.tiles[d][x],
                      emit_alloc(b, s->t_dout, d));
    s->home[s->t_dout] = layout_of(b, s->t_dout);

    /* Backward: d(act) = dY * others; gradient: d(weight) = others * dY. */
    for (int k = 0; k < 2; ++k) {
        int target = k == 0 ? act_in : weight_in;
        if (target < 0)
            continue;
        PhaseSched *ph = &s->phases[k == 0 ? PHASE_BWD : PHASE_GRAD];
        phase_setup(b, ph, k == 0 ? PHASE_BWD : PHASE_GRAD);
        ph->out = s->t_grad[target];
        ph->nin = 0;
        for (int i = 0; i < op->ninputs; ++i)
            ph->in[ph->nin++] = i == target ? s->t_dout : i;
        b->ph = ph;
        choose_order(b, ph);
        b->ph = ph;
        phase_exec(b, ph);
        if (b->failed)
            return NULL;
        if (k == 0)
            weights_home(b, ph);
    }
    if (act_in < 0)
        weights_home(b, fwd);
    PhaseSched *last = s->phases[PHASE_GRAD].present ? &s->phases[PHASE_GRAD]
                       : s->phases[PHASE_BWD].present ? &s->phases[PHASE_BWD]
                                                      : fwd;
    b->ph = last;
    for (int i = 0; i < op->ninputs; ++i) {
        if (s->tensors[i].is_weight)
            continue;
        for (int d = 0; d < b->ndev; ++d) {
            Store *st = store_of(b, i, d);
            while (st->count) {
                emit_free(b, i, d, st->items[st->count - 1].slot);
                store_remove(st, st->count - 1);
            }
        }
    }
    for (int d = 0; d < b->ndev; ++d) {
        Store *st = store_of(b, s->t_dout, d);
        while (st->count) {
            emit_free(b, s->t_dout, d, st->items[st->count - 1].slot);
            store_remove(st, st->count - 1);
        }
    }
    if (b->failed)
        return NULL;
    for (int t = 0; t < s->ntensors; ++t)
        s->final[t] = layout_of(b, t);
    predict(s, arena);
    return s;
}
