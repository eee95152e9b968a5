/*
 * sched_simulate.c — one phase, simulated step by step on the machine
 * model (the trial runs that learn the residency a phase needs are in
 * sched_trials.c).
 */
#include "sched_internal.h"

/* Appends a row of kernel offsets to ph->offsets (growing it). */
static int kernel_offsets_append(Builder *b, PhaseSched *ph, const long *row) {
    if (ph->noffsets == ph->offset_cap) {
        int cap = ph->offset_cap ? ph->offset_cap * 2 : 16;
        long(*n)[8] = arena_alloc(b->arena, sizeof(long[8]) * (size_t)cap);
        if (ph->noffsets)
            memcpy(n, ph->offsets, sizeof(long[8]) * (size_t)ph->noffsets);
        ph->offsets = n;
        ph->offset_cap = cap;
    }
    memcpy(ph->offsets[ph->noffsets], row, sizeof(long[8]));
    return ph->noffsets++;
}

/* kernel_offsets where the slice combinations of the instance are no
 * more than twice its (device, step) points: a table indexed by the
 * combination (rows numbered as first seen, as by the hash). -1: not
 * this way. */
static int kernel_offsets_dense(Builder *b, PhaseSched *ph, int dev, long t, const long *row) {
    const SliceTable *st = b->st;
    if (ph->offset_hash || st->ndims > 8)
        return -1;
    long combos = 1, limit = 2 * (long)st->ndev * st->steps, id = 0;
    for (int d = 0; d < st->ndims && combos <= limit; ++d)
        combos *= st->nslices[d];
    if (combos > limit)
        return -1;
    if (!ph->offset_dense) {
        ph->offset_dense = ARENA_ARRAY_UNINIT(b->arena, int, combos);
        for (long k = 0; k < combos; ++k)
            ph->offset_dense[k] = -1;
    }
    for (int d = 0; d < st->ndims; ++d)
        id = id * st->nslices[d] + slice_fast(b, d, dev, t);
    if (ph->offset_dense[id] < 0)
        ph->offset_dense[id] = kernel_offsets_append(b, ph, row);
    return ph->offset_dense[id];
}

/* The index of the offsets row (global origin of every operator
 * dimension's slice) of the sub-operator at (dev, t); 0 in a schedule for
 * `check` alone (Schedule.folded), which has no rows. */
static int kernel_offsets(Builder *b, PhaseSched *ph, int dev, long t) {
    if (b->dry || b->s->folded)
        return 0; /* only the emitted kernels read the rows */
    long row[8] = {0};
    for (int d = 0; d < b->st->ndims && d < 8; ++d)
        row[d] = slice_fast(b, d, dev, t) * b->st->extent[d];
    int dense = kernel_offsets_dense(b, ph, dev, t, row);
    if (dense >= 0)
        return dense;
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

/* An entry of a last-use table: a tile (-1: empty) and the last phase
 * step that uses it. */
typedef struct LastUse {
    long tile, step;
} LastUse;

/* What a phase's simulation carries from stage to stage. */
typedef struct StepState {
    PhaseSched *ph;
    AccState as;
    long T;         /* steps of the phase */
    long s, t;      /* the phase step being simulated and its operator step */
    int *dst, *src; /* per receiver, while choosing sources */
    long *tiles;
    /* Per device and operand: a slot given away this step, freed at the
     * wait, and the tile in it. */
    int *pending_free_slot;
    long *pending_free_tile;
    /* Per operand: tiles arriving for the next step (device, slot, tile). */
    int nadd[SCHED_MAX_OPERANDS];
    int *add_dev[SCHED_MAX_OPERANDS];
    int *add_slot[SCHED_MAX_OPERANDS];
    long *add_tile[SCHED_MAX_OPERANDS];
    /* Scratch reused at every step: the travelling accumulators'
     * candidates by tile. */
    int *acc_first, *acc_next;
    /* Per operand, once per run: the last phase step at which a device
     * uses a tile as that operand or an earlier one of the same tensor
     * (open addressing over tiles, a region of last_cap entries per
     * device; see needed_later). */
    LastUse *last[SCHED_MAX_OPERANDS];
    long last_cap[SCHED_MAX_OPERANDS];
    /* Per operand and device: 1 when the device's entries of the table
     * name every tile once (no tile used at two steps, or as two
     * operands). */
    unsigned char *last_once[SCHED_MAX_OPERANDS];
    /* Per operand (the output as operand nin), the tile of every device
     * at this step's operator step (now) and the next step's (then, when
     * there is a next step): tile_at, once per step and device. */
    long *now[SCHED_MAX_OPERANDS + 1], *then[SCHED_MAX_OPERANDS + 1];
    long then_t; /* the operator step `then` holds, -1: none */
} StepState;

static void step_state_init(Builder *b, PhaseSched *ph, StepState *ss) {
    const int ndev = b->ndev;
    AccState *as = &ss->as;
    memset(ss, 0, sizeof *ss);
    ss->ph = ph;
    ss->T = b->steps;
    as->active = ARENA_ARRAY(b->scratch, Acc *, ndev);
    as->incoming = ARENA_ARRAY(b->scratch, Acc *, ndev);
    as->incoming_slot = ARENA_ARRAY(b->scratch, int, ndev);
    as->sent_slot = ARENA_ARRAY(b->scratch, int, ndev);
    as->retired = ARENA_ARRAY(b->scratch, PtrVec, ndev);
    as->retired_ix = ARENA_ARRAY(b->scratch, TileIndex, ndev);
    as->claimed = arena_alloc(b->scratch, (size_t)ndev);
    as->next_tile = ARENA_ARRAY(b->scratch, long, ndev);
    /* Reduction dimensions: operator dims absent from the output. */
    as->nred = 1;
    for (int d = 0; d < b->st->ndims; ++d) {
        int in_out = 0;
        for (int x = 0; x < ph->out.ndims; ++x)
            in_out |= ph->out.opdims[x] == d;
        if (!in_out) {
            as->red_dims[as->nred_dims++] = d;
            as->nred *= b->st->nslices[d];
        }
    }
    for (int d = 0; d < ndev; ++d)
        as->sent_slot[d] = -1;
    ss->dst = ARENA_ARRAY(b->scratch, int, ndev);
    ss->src = ARENA_ARRAY(b->scratch, int, ndev);
    ss->tiles = ARENA_ARRAY(b->scratch, long, ndev);
    ss->pending_free_slot = ARENA_ARRAY(b->scratch, int, ndev *SCHED_MAX_OPERANDS);
    ss->pending_free_tile = ARENA_ARRAY(b->scratch, long, ndev *SCHED_MAX_OPERANDS);
    for (int i = 0; i < ph->nin; ++i) {
        ss->add_dev[i] = ARENA_ARRAY_UNINIT(b->scratch, int, ndev + 1);
        ss->add_slot[i] = ARENA_ARRAY_UNINIT(b->scratch, int, ndev + 1);
        ss->add_tile[i] = ARENA_ARRAY_UNINIT(b->scratch, long, ndev + 1);
    }
    ss->acc_first = ARENA_ARRAY_UNINIT(b->scratch, int, b->s->tensors[ph->out.tensor].ntiles + 1);
    for (int i = 0; i <= ph->nin; ++i) {
        ss->now[i] = ARENA_ARRAY_UNINIT(b->scratch, long, ndev + 1);
        ss->then[i] = ARENA_ARRAY_UNINIT(b->scratch, long, ndev + 1);
    }
    ss->then_t = -1;
    ss->acc_next = ARENA_ARRAY_UNINIT(b->scratch, int, ndev + 1);
}

/* The tiles of every operand and device at operator step t. */
static void tiles_fill(Builder *b, const PhaseSched *ph, long *const *rows, long t) {
    for (int i = 0; i <= ph->nin; ++i) {
        const Operand *o = i < ph->nin ? &ph->in[i] : &ph->out;
        for (int d = 0; d < b->ndev; ++d)
            rows[i][d] = tile_at(b, o, d, t);
    }
}

/* Sets ss->now to the tiles at ss->t (those of `then` when it holds that
 * step) and ss->then to those at the next step's operator step. */
static void step_tiles(Builder *b, StepState *ss) {
    const PhaseSched *ph = ss->ph;
    if (ss->then_t == ss->t) {
        for (int i = 0; i <= ph->nin; ++i) {
            long *x = ss->now[i];
            ss->now[i] = ss->then[i];
            ss->then[i] = x;
        }
    } else {
        tiles_fill(b, ph, ss->now, ss->t);
    }
    ss->then_t = -1;
    if (ss->s + 1 < ss->T) {
        ss->then_t = op_step(b, ph, ss->s + 1);
        tiles_fill(b, ph, ss->then, ss->then_t);
    }
}

/* Inputs needed now must be here (first step: from the initial
 * residency; later: they arrived or were resident). A dry run learns the
 * initial residency from what is missing. */
static void step_check_inputs(Builder *b, StepState *ss) {
    PhaseSched *ph = ss->ph;
    for (int i = 0; i < ph->nin; ++i) {
        int tensor = ph->in[i].tensor;
        if (operand_repeats(ph, i))
            continue;
        for (int d = 0; d < b->ndev; ++d) {
            if (sched_idle(b, d))
                continue;
            long tile = ss->now[i][d];
            if (sched_store_find(store_of(b, tensor, d), tile) < 0) {
                if (!b->dry || !b->track_need[tensor])
                    ICE("tile %s of %s missing on device %d at step %ld",
                        sched_tile_name(b->arena, b->s, tensor, tile), b->s->tensors[tensor].name,
                        d, ss->s);
                sched_layout_add(b, &b->need[tensor], d, tile);
                b->need_late |= ss->s > 0;
                sched_store_add(b, store_of(b, tensor, d), tile, sched_slot_alloc(b, tensor, d));
            }
        }
    }
}

/* A slot of a device's region of the last-use table; cap is a power of
 * two. */
static unsigned long last_hash(long key, long cap) {
    return ((unsigned long)key * 0x9e3779b97f4a7c15ul >> 17) & (unsigned long)(cap - 1);
}

/* Fills the last-use table of operand i: for every (device, tile) that a
 * device uses as operand i or an earlier operand of the same tensor, the
 * last phase step that uses it. One pass over the devices and steps, once
 * per run, instead of a scan of the remaining steps per send. */
static void last_use_build(Builder *b, StepState *ss, int i) {
    const PhaseSched *ph = ss->ph;
    int uses = 0;
    for (int j = 0; j <= i; ++j)
        uses += ph->in[j].tensor == ph->in[i].tensor;
    /* A region per device, with room for twice its uses: the build walks
     * one device's steps within one region. */
    long cap = 2;
    while (cap < 2 * ss->T * uses)
        cap *= 2;
    size_t total = (size_t)cap * (size_t)b->ndev;
    /* The builder's room for operand i, grown when too small: every run
     * of every phase needs one, so it is reused rather than allocated. */
    if (b->last_use_cap[i] < total) {
        size_t room = total > 2 * b->last_use_cap[i] ? total : 2 * b->last_use_cap[i];
        b->last_use_room[i] = ARENA_ARRAY_UNINIT(b->arena, LastUse, room);
        b->last_use_cap[i] = room;
    }
    LastUse *last = b->last_use_room[i];
    for (size_t k = 0; k < total; ++k)
        last[k].tile = -1;
    if (b->last_once_cap[i] < (size_t)b->ndev) {
        b->last_once_room[i] = arena_alloc_uninit(b->arena, (size_t)b->ndev);
        b->last_once_cap[i] = (size_t)b->ndev;
    }
    unsigned char *once = b->last_once_room[i];
    /* Devices in blocks, steps within a block: the slice table is by
     * step, then device, and a block's regions stay in cache. Each
     * device's region is filled in the same order as device by device. */
    enum { BLOCK = 64 };
    for (int d0 = 0; d0 < b->ndev; d0 += BLOCK) {
        int d1 = d0 + BLOCK < b->ndev ? d0 + BLOCK : b->ndev;
        for (int d = d0; d < d1; ++d)
            once[d] = 1;
        for (int j = 0; j <= i; ++j) {
            if (ph->in[j].tensor != ph->in[i].tensor)
                continue;
            for (long t = 0; t < ss->T; ++t) {
                long ot = op_step(b, ph, t);
                for (int d = d0; d < d1; ++d) {
                    if (sched_idle(b, d))
                        continue;
                    long k = tile_at(b, &ph->in[j], d, ot);
                    if (k < 0)
                        continue;
                    LastUse *region = last + (size_t)d * (size_t)cap;
                    unsigned long h = last_hash(k, cap);
                    while (region[h].tile >= 0 && region[h].tile != k)
                        h = (h + 1) & (unsigned long)(cap - 1);
                    if (region[h].tile >= 0)
                        once[d] = 0;
                    if (region[h].tile < 0 || region[h].step < t)
                        region[h].step = t;
                    region[h].tile = k;
                }
            }
        }
    }
    ss->last[i] = last;
    ss->last_cap[i] = cap;
    ss->last_once[i] = once;
}

/* Whether device dev uses `tile` of operand i's tensor (as operand i or
 * an earlier operand of the same tensor) at a step after this one. */
static int needed_later(Builder *b, StepState *ss, int i, int dev, long tile) {
    if (!ss->last[i])
        last_use_build(b, ss, i);
    long ntiles = b->s->tensors[ss->ph->in[i].tensor].ntiles;
    if (tile < 0 || tile >= ntiles)
        return 0;
    /* A device that uses each tile once and uses this one as operand i
     * now uses it at no other step: the table's answer, without the
     * lookup in the device's region (a cache miss per send). */
    if (ss->last_once[i][dev] && ss->now[i][dev] == tile)
        return 0;
    long cap = ss->last_cap[i];
    const LastUse *region = ss->last[i] + (size_t)dev * (size_t)cap;
    for (unsigned long h = last_hash(tile, cap); region[h].tile >= 0;
         h = (h + 1) & (unsigned long)(cap - 1))
        if (region[h].tile == tile)
            return region[h].step > ss->s;
    return 0;
}

/* Can device src, which takes part in the phase, serve the tile? */
static int holds_tile_here(Builder *b, int tensor, int src, int dst, long tile, void *ctx) {
    return !sched_idle(b, src) && sched_holds_tile(b, tensor, src, dst, tile, ctx);
}

/* 1. Posts the moves of operand i that bring the next step's tiles (at
 * the next step's operator step, ss->then). */
static void step_post_moves_of(Builder *b, StepState *ss, int i) {
    PhaseSched *ph = ss->ph;
    int tensor = ph->in[i].tensor;
    int *dst = ss->dst, *src = ss->src;
    long *tiles = ss->tiles;
    int n = 0;
    if (operand_repeats(ph, i))
        return;
    for (int d = 0; d < b->ndev; ++d) {
        if (sched_idle(b, d))
            continue;
        long tile = ss->then[i][d];
        const Store *st = store_of(b, tensor, d);
        if (sched_store_find(st, tile) >= 0)
            continue;
        /* The machine counts the holders of every tile as stores change. */
        if (!sched_store_held_anywhere(st, tile))
            continue; /* must be resident: learnt at the next step */
        dst[n] = d;
        tiles[n] = tile;
        n++;
    }
    if (n == 0)
        return;
    long delta[IR_MAX_AXES] = {0};
    const SourceScan held = {1, NULL, NULL, 0};
    MoveKind kind =
        sched_choose_sources(b, tensor, n, dst, tiles, holds_tile_here, NULL, 0, &held, src, delta);
    int tag = b->next_tag++;
    for (int r = 0; r < n; ++r) {
        int slot = sched_emit_alloc(b, tensor, dst[r]);
        sched_emit_recv(b, tensor, dst[r], slot, src[r], tag);
        ss->add_dev[i][ss->nadd[i]] = dst[r];
        ss->add_slot[i][ss->nadd[i]] = slot;
        ss->add_tile[i][ss->nadd[i]] = tiles[r];
        ss->nadd[i]++;
    }
    for (int r = 0; r < n; ++r) {
        const Store *st = store_of(b, tensor, src[r]);
        int idx = sched_store_find(st, tiles[r]);
        sched_emit_send(b, tensor, src[r], st->items[idx].slot, dst[r], tag, PRIME_BYTES_SHIFT);
        /* The source gives the tile up unless it needs it again. */
        if (!needed_later(b, ss, i, src[r], tiles[r])) {
            ss->pending_free_slot[src[r] * SCHED_MAX_OPERANDS + i] = st->items[idx].slot;
            ss->pending_free_tile[src[r] * SCHED_MAX_OPERANDS + i] = tiles[r];
        }
    }
    if (!b->dry) /* a trial run's moves are not kept */
        ptrvec_push(b->arena, &ph->moves,
                    sched_new_move(b, tensor, ss->s, kind, delta, n, dst, src, tiles));
}

static void step_post_moves(Builder *b, StepState *ss) {
    /* Every slot -1 (all bits set). */
    memset(ss->pending_free_slot, 0xff, sizeof(int) * (size_t)b->ndev * SCHED_MAX_OPERANDS);
    memset(ss->nadd, 0, sizeof ss->nadd);
    if (ss->s + 1 >= ss->T)
        return;
    for (int i = 0; i < ss->ph->nin; ++i)
        step_post_moves_of(b, ss, i);
}

/* 2. Compute: every device adds its sub-operator into the accumulator of
 * its output tile (a fresh partial while an accumulator arrives). */
static void step_compute(Builder *b, StepState *ss) {
    PhaseSched *ph = ss->ph;
    AccState *as = &ss->as;
    Acc **active = as->active;
    for (int d = 0; d < b->ndev; ++d) {
        if (sched_idle(b, d))
            continue;
        long otile = ss->now[ph->nin][d];
        Acc *a = active[d];
        int into_slot;
        Acc *partial = NULL;
        if (a && a->tile == otile) {
            into_slot = a->slot;
        } else if (as->incoming[d]) {
            into_slot = sched_emit_alloc(b, ph->out.tensor, d);
            partial = sched_acc_new(b, as, d, otile, into_slot);
        } else {
            int ri = sched_retired_find(as, d, otile);
            if (ri >= 0) {
                a = sched_retired_take(as, d, ri);
            } else {
                a = sched_acc_new(b, as, d, otile, sched_emit_alloc(b, ph->out.tensor, d));
                ph->nlocal_acc += b->dry ? 0 : 1;
            }
            if (active[d] && active[d] != a)
                sched_retired_push(b, as, d, active[d]);
            active[d] = a;
            into_slot = a->slot;
        }
        PrimeAction *k = sched_act(b, d, PRIME_ACT_KERNEL);
        k->tensor = ph->out.tensor;
        k->slot = into_slot;
        k->arg = kernel_offsets(b, ph, d, ss->t);
        k->nin = ph->nin;
        for (int i = 0; i < ph->nin; ++i) {
            const Store *st = store_of(b, ph->in[i].tensor, d);
            k->in_tensor[i] = ph->in[i].tensor;
            k->in_slot[i] = st->items[sched_store_find(st, ss->now[i][d])].slot;
        }
        sched_acc_add(partial ? partial : active[d], sched_red_id(b, as, d, ss->t), ss->s);
        if (partial)
            active[d] = partial;
    }
}

/* 4. After the wait: merges arrived accumulators, frees what was given
 * away, and records the tiles that arrived. */
static void step_merge(Builder *b, StepState *ss) {
    PhaseSched *ph = ss->ph;
    AccState *as = &ss->as;
    for (int d = 0; d < b->ndev; ++d) {
        if (as->incoming[d]) {
            PrimeAction *a = sched_act(b, d, PRIME_ACT_ADD);
            a->tensor = ph->out.tensor;
            a->slot = as->active[d]->slot;
            a->nin = 1;
            a->in_tensor[0] = ph->out.tensor;
            a->in_slot[0] = as->incoming_slot[d];
            a->kind = b->s->tensors[ph->out.tensor].combine;
            sched_acc_merge(as->active[d], as->incoming[d]);
            sched_emit_free(b, ph->out.tensor, d, as->incoming_slot[d]);
            ptrvec_push(b->scratch, &as->pool, as->incoming[d]);
            as->incoming[d] = NULL;
        }
        if (as->sent_slot[d] >= 0) {
            sched_emit_free(b, ph->out.tensor, d, as->sent_slot[d]);
            as->sent_slot[d] = -1;
        }
        for (int i = 0; i < ph->nin; ++i) {
            int slot = ss->pending_free_slot[d * SCHED_MAX_OPERANDS + i];
            if (slot < 0)
                continue;
            Store *st = store_of(b, ph->in[i].tensor, d);
            int x = sched_store_find(st, ss->pending_free_tile[d * SCHED_MAX_OPERANDS + i]);
            if (x < 0 || st->items[x].slot != slot)
                for (x = 0; x < st->count && st->items[x].slot != slot; ++x)
                    ;
            if (x < st->count)
                sched_store_remove(st, x);
            sched_emit_free(b, ph->in[i].tensor, d, slot);
        }
    }
    for (int i = 0; i < ph->nin; ++i)
        for (int r = 0; r < ss->nadd[i]; ++r)
            sched_store_add(b, store_of(b, ph->in[i].tensor, ss->add_dev[i][r]), ss->add_tile[i][r],
                            ss->add_slot[i][r]);
}

/* 5. Accumulators that travel to the device that adds into their tile at
 * the next step; those left behind stay on their device. */
static void step_travel(Builder *b, StepState *ss) {
    if (ss->s + 1 >= ss->T)
        return;
    PhaseSched *ph = ss->ph;
    AccState *as = &ss->as;
    Acc **active = as->active;
    int *dst = ss->dst, *src = ss->src;
    long *tiles = ss->tiles;
    int n = 0;
    /* The output's tiles at the next step's operator step. */
    for (int d = 0; d < b->ndev; ++d) {
        as->next_tile[d] = sched_idle(b, d) ? -1 : ss->then[ph->nin][d];
        as->claimed[d] = 0;
    }
    /* The devices whose accumulator could travel, by tile (candidates of
     * sched_acc_available, found once rather than per receiver). */
    long ntiles = b->s->tensors[ph->out.tensor].ntiles;
    int *first = ss->acc_first;
    int *next = ss->acc_next;
    for (long t = 0; t < ntiles; ++t)
        first[t] = -1;
    for (int c = b->ndev - 1; c >= 0; --c) {
        const Acc *a = active[c];
        next[c] = -1;
        if (a && a->tile >= 0 && a->tile < ntiles) {
            next[c] = first[a->tile];
            first[a->tile] = c;
        }
    }
    for (int d = 0; d < b->ndev; ++d) {
        long want = as->next_tile[d];
        if (want < 0 || (active[d] && active[d]->tile == want) ||
            sched_retired_find(as, d, want) >= 0)
            continue;
        int any = 0;
        for (int c = want >= 0 && want < ntiles ? first[want] : -1; c >= 0 && !any; c = next[c])
            any = sched_acc_available(b, ph->out.tensor, c, d, want, as);
        if (!any)
            continue;
        dst[n] = d;
        tiles[n] = want;
        n++;
    }
    if (n > 0) {
        long delta[IR_MAX_AXES] = {0};
        /* Only a device whose accumulator is of the tile can send it. */
        const SourceScan by_tile = {0, first, next, ntiles};
        MoveKind kind = sched_choose_sources(b, ph->out.tensor, n, dst, tiles, sched_acc_available,
                                             as, 1, &by_tile, src, delta);
        int tag = b->next_tag++;
        int m = 0;
        for (int r = 0; r < n; ++r) {
            if (src[r] < 0)
                continue; /* no free accumulator left: start a new partial */
            as->claimed[src[r]] = 1;
            dst[m] = dst[r];
            src[m] = src[r];
            tiles[m] = tiles[r];
            m++;
        }
        for (int r = 0; r < m; ++r) {
            int slot = sched_emit_alloc(b, ph->out.tensor, dst[r]);
            sched_emit_recv(b, ph->out.tensor, dst[r], slot, src[r], tag);
            as->incoming_slot[dst[r]] = slot;
        }
        for (int r = 0; r < m; ++r) {
            Acc *a = active[src[r]];
            sched_emit_send(b, ph->out.tensor, src[r], a->slot, dst[r], tag, PRIME_BYTES_SHIFT);
            as->sent_slot[src[r]] = a->slot;
            as->incoming[dst[r]] = a;
            active[src[r]] = NULL;
        }
        if (m > 0 && !b->dry) {
            Move *mv = sched_new_move(b, ph->out.tensor, ss->s, kind, delta, m, dst, src, tiles);
            mv->is_acc = 1;
            ptrvec_push(b->arena, &ph->moves, mv);
            ph->ntravel_acc += m;
        }
    }
    for (int d = 0; d < b->ndev; ++d) {
        if (active[d] && active[d]->tile != as->next_tile[d]) {
            sched_retired_push(b, as, d, active[d]);
            active[d] = NULL;
        }
    }
}

/* After the last step: coverage and all-reduces, and the output's tiles
 * in the accumulators' slots. */
static void step_finish(Builder *b, StepState *ss) {
    AccState *as = &ss->as;
    for (int d = 0; d < b->ndev; ++d) {
        if (as->active[d])
            sched_retired_push(b, as, d, as->active[d]);
        if (as->incoming[d] || as->sent_slot[d] >= 0)
            ICE("accumulator still in flight after the last step");
    }
    sched_finish_accumulators(b, ss->ph, as);
    for (int d = 0; d < b->ndev; ++d) {
        Store *st = store_of(b, ss->ph->out.tensor, d);
        for (int i = 0; i < as->retired[d].count; ++i) {
            const Acc *a = as->retired[d].items[i];
            sched_store_add(b, st, a->tile, a->slot);
        }
    }
}

void sched_run_phase(Builder *b, PhaseSched *ph) {
    StepState ss;
    step_state_init(b, ph, &ss);
    if (b->dry && b->dry_count)
        memset(b->dry_count, 0, sizeof(int) * (size_t)b->ndev);
    for (ss.s = 0; ss.s < ss.T && !b->out_of_slots; ++ss.s) {
        ss.t = op_step(b, ph, ss.s);
        ss.as.step = ss.s;
        step_tiles(b, &ss);
        for (int d = 0; d < b->ndev; ++d)
            if (!sched_idle(b, d))
                sched_act(b, d, PRIME_ACT_STEP)->arg = (int)ss.s;
        step_check_inputs(b, &ss);
        step_post_moves(b, &ss);          /* 1 */
        step_compute(b, &ss);             /* 2 */
        for (int d = 0; d < b->ndev; ++d) /* 3. this step's transfers */
            if (!sched_idle(b, d))
                sched_act(b, d, PRIME_ACT_WAIT);
        step_merge(b, &ss);  /* 4 */
        step_travel(b, &ss); /* 5 */
    }
    step_finish(b, &ss);
    sched_acc_release(b, &ss.as);
    if (b->dry && b->dry_count) {
        if (!ph->action_hint)
            ph->action_hint = ARENA_ARRAY(b->arena, int, b->ndev);
        for (int d = 0; d < b->ndev; ++d)
            if (b->dry_count[d] > ph->action_hint[d])
                ph->action_hint[d] = b->dry_count[d];
    }
}

/* The slice table of instance `inst` by step, then device. */
static void slice_by_step(Builder *b, int inst) {
    const SliceTable *st = &b->s->slices[inst];
    if (!b->by_step || !st->slice || b->by_step_of != st->slice || b->by_step_dims != st->ndims ||
        b->by_step_steps != st->steps) {
        size_t n = (size_t)st->ndims * (size_t)st->steps * (size_t)st->ndev + 1;
        if (n > b->by_step_cap) {
            b->by_step = ARENA_ARRAY_UNINIT(b->arena, long, n);
            b->by_step_cap = n;
        }
        long *t = b->by_step;
        for (int dim = 0; dim < st->ndims; ++dim)
            for (int dev = 0; dev < st->ndev; ++dev)
                for (long s = 0; s < st->steps; ++s)
                    t[((long)dim * st->steps + s) * st->ndev + dev] = slice_at(st, dim, dev, s);
        b->by_step_of = st->slice;
        b->by_step_dims = st->ndims;
        b->by_step_steps = st->steps;
    }
    b->slice_t = b->by_step;
    b->slice_t_inst = inst;
}

void sched_enter_phase(Builder *b, PhaseSched *ph) {
    b->ph = ph;
    if (ph->inst >= 0) {
        b->inst = &b->s->model->instances[ph->inst];
        b->st = &b->s->slices[ph->inst];
        b->steps = b->inst->steps;
        slice_by_step(b, ph->inst);
    }
}

/* Input storage tensors of a phase, each once. */
int sched_phase_inputs(const PhaseSched *ph, int *tensors) {
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

void sched_strict_check(Builder *b, PhaseSched *ph, int first_boundary) {
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
