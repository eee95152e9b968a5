/*
 * sched_machine.c — the schedule's model of the machine and the actions it
 * appends to every rank's list (see sched_internal.h).
 *
 * A Store lists the tiles one device holds of one storage tensor and the
 * slot of each; a bitmap per tensor and device says which slots are in
 * use. Trial runs copy the stores they touch and put them back.
 * Actions go to the current phase's per-rank lists, except in a trial
 * run (b->dry), where they are discarded.
 */
#include "sched_internal.h"

/* ------------------------------------------------------------------ */
/* Tile indexes                                                        */

static unsigned long tile_hash(long tile, int cap) {
    return ((unsigned long)tile * 0x9e3779b97f4a7c15ul >> 20) & (unsigned long)(cap - 1);
}

void tile_index_clear(TileIndex *ix) {
    for (int i = 0; i < ix->cap; ++i)
        ix->e[i].pos = -1;
    ix->n = 0;
    ix->dup = 0;
}

static TileIndexEntry *tile_index_slot(const TileIndex *ix, long tile) {
    if (!ix->cap)
        return NULL;
    for (unsigned long h = tile_hash(tile, ix->cap); ix->e[h].pos >= 0;
         h = (h + 1) & (unsigned long)(ix->cap - 1))
        if (ix->e[h].tile == tile)
            return &ix->e[h];
    return NULL;
}

void tile_index_insert(Arena *arena, TileIndex *ix, long tile, int pos) {
    if (ix->dup)
        return;
    if (2 * (ix->n + 1) > ix->cap) {
        TileIndex grown = {NULL, ix->cap ? 2 * ix->cap : 32, 0, 0};
        grown.e = ARENA_ARRAY_UNINIT(arena, TileIndexEntry, grown.cap);
        tile_index_clear(&grown);
        for (int i = 0; i < ix->cap; ++i)
            if (ix->e[i].pos >= 0)
                tile_index_insert(arena, &grown, ix->e[i].tile, ix->e[i].pos);
        *ix = grown;
    }
    unsigned long h = tile_hash(tile, ix->cap);
    for (; ix->e[h].pos >= 0; h = (h + 1) & (unsigned long)(ix->cap - 1)) {
        if (ix->e[h].tile == tile) {
            ix->dup = 1; /* the list holds the tile twice: lookups scan it */
            return;
        }
    }
    ix->e[h].tile = tile;
    ix->e[h].pos = pos;
    ix->n++;
}

/* Removes a tile (backward-shift deletion: no tombstones). */
void tile_index_erase(TileIndex *ix, long tile) {
    TileIndexEntry *at = ix->dup ? NULL : tile_index_slot(ix, tile);
    if (!at)
        return;
    unsigned long mask = (unsigned long)(ix->cap - 1), i = (unsigned long)(at - ix->e), j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (ix->e[j].pos < 0)
            break;
        unsigned long k = tile_hash(ix->e[j].tile, ix->cap);
        /* Entry j may move to the hole at i unless its home lies in (i, j]. */
        int stays = i <= j ? (k > i && k <= j) : (k > i || k <= j);
        if (!stays) {
            ix->e[i] = ix->e[j];
            i = j;
        }
    }
    ix->e[i].pos = -1;
    ix->n--;
}

void tile_index_move(TileIndex *ix, long tile, int pos) {
    TileIndexEntry *at = ix->dup ? NULL : tile_index_slot(ix, tile);
    if (at)
        at->pos = pos;
}

int tile_index_find(const TileIndex *ix, long tile) {
    const TileIndexEntry *at = tile_index_slot(ix, tile);
    return at ? at->pos : -1;
}

/* ------------------------------------------------------------------ */
/* Stores                                                              */

int sched_store_find(const Store *st, long tile) {
    if (st->indexed && !st->ix.dup)
        return tile_index_find(&st->ix, tile);
    for (int i = 0; i < st->count; ++i)
        if (st->items[i].tile == tile)
            return i;
    return -1;
}

static void store_count(Store *st, long tile, int by) {
    if (st->holders && tile >= 0 && tile < st->nholders)
        st->holders[tile] += by;
}

/* (Re)builds a store's index from its items. */
static void store_reindex(Arena *arena, Store *st) {
    st->indexed = 1;
    tile_index_clear(&st->ix);
    for (int i = 0; i < st->count; ++i)
        tile_index_insert(arena, &st->ix, st->items[i].tile, i);
}

void sched_store_add(Builder *b, Store *st, long tile, int slot) {
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
    store_count(st, tile, 1);
    if (st->indexed)
        tile_index_insert(b->arena, &st->ix, tile, st->count - 1);
    else if (st->count >= TILE_INDEX_MIN)
        store_reindex(b->arena, st);
}

void sched_store_remove(Store *st, int index) {
    long tile = st->items[index].tile;
    store_count(st, tile, -1);
    if (st->indexed) {
        tile_index_erase(&st->ix, tile);
        if (index != st->count - 1)
            tile_index_move(&st->ix, st->items[st->count - 1].tile, index);
    }
    st->items[index] = st->items[st->count - 1];
    st->count--;
}

void sched_store_clear(Store *st) {
    for (int i = 0; i < st->count; ++i)
        store_count(st, st->items[i].tile, -1);
    st->count = 0;
    tile_index_clear(&st->ix);
}

/* A store's fields other than its items, for a copy outside the machine
 * (no index, no holder counts). */
static void store_detached(Store *o, const Store *s) {
    memset(o, 0, sizeof *o);
    o->count = o->cap = s->count;
}

/* Gives the machine stores for every storage tensor defined so far. */
void sched_machine_init(Builder *b) {
    b->m.ndev = b->ndev;
    for (int t = b->m.ntensors; t < b->s->ntensors; ++t) {
        b->m.stores[t] = ARENA_ARRAY(b->arena, Store, b->ndev);
        long ntiles = b->s->tensors[t].ntiles;
        int *holders = ARENA_ARRAY(b->arena, int, ntiles + 1);
        for (int d = 0; d < b->ndev; ++d) {
            b->m.stores[t][d].holders = holders;
            b->m.stores[t][d].nholders = ntiles;
        }
        b->m.slot_used[t] = arena_alloc(b->arena, sizeof(uint64_t) * (size_t)b->ndev * SLOT_WORDS);
    }
    b->m.ntensors = b->s->ntensors;
}

void sched_machine_room(Builder *b, Machine *m) {
    m->stores = ARENA_ARRAY_UNINIT(b->arena, Store *, b->tensor_cap);
    m->slot_used = ARENA_ARRAY_UNINIT(b->arena, uint64_t *, b->tensor_cap);
}

void sched_machine_copy(Builder *b, Machine *dst, const Machine *src) {
    sched_machine_room(b, dst);
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
            store_detached(o, s);
            if (s->count) {
                o->items = (Held *)at;
                at += sizeof(Held) * (size_t)s->count;
                memcpy(o->items, s->items, sizeof(Held) * (size_t)s->count);
            }
        }
    }
}

/* Saves the stores of the listed tensors of b->m (a trial run of one
 * phase touches its own operands and nothing else). */
void sched_machine_save(Builder *b, MachineSave *sv, const int *tensors, int n) {
    size_t words = sizeof(uint64_t) * (size_t)b->ndev * SLOT_WORDS;
    if (n > SCHED_MAX_OPERANDS + 1)
        ICE("saving %d storage tensors of a trial run", n);
    sv->n = n;
    for (int k = 0; k < n; ++k) {
        int t = tensors[k];
        sv->tensors[k] = t;
        sv->stores[k] = ARENA_ARRAY_UNINIT(b->scratch, Store, b->ndev);
        sv->slot_used[k] = arena_alloc_uninit(b->scratch, words);
        memcpy(sv->slot_used[k], b->m.slot_used[t], words);
        for (int d = 0; d < b->ndev; ++d) {
            const Store *s = &b->m.stores[t][d];
            Store *o = &sv->stores[k][d];
            store_detached(o, s);
            o->items = s->count ? ARENA_ARRAY_UNINIT(b->scratch, Held, s->count) : NULL;
            if (s->count)
                memcpy(o->items, s->items, sizeof(Held) * (size_t)s->count);
        }
    }
}

/* Puts the saved stores back into b->m, in its own memory where it has
 * room (a trial run restores its operands at every pass; a fresh copy
 * each time would keep every copy in the arena). */
void sched_machine_restore(Builder *b, const MachineSave *sv) {
    size_t words = sizeof(uint64_t) * (size_t)b->ndev * SLOT_WORDS;
    for (int k = 0; k < sv->n; ++k) {
        int t = sv->tensors[k];
        memcpy(b->m.slot_used[t], sv->slot_used[k], words);
        for (int d = 0; d < b->ndev; ++d) {
            const Store *s = &sv->stores[k][d];
            Store *o = &b->m.stores[t][d];
            if (o->cap < s->count) {
                o->items = ARENA_ARRAY_UNINIT(b->arena, Held, s->count);
                o->cap = s->count;
            }
            o->count = s->count;
            if (s->count)
                memcpy(o->items, s->items, sizeof(Held) * (size_t)s->count);
            if (o->indexed || o->count >= TILE_INDEX_MIN)
                store_reindex(b->arena, o);
        }
        /* The holder counts of the tensor, recounted from its stores. */
        Store *first = &b->m.stores[t][0];
        if (first->holders) {
            memset(first->holders, 0, sizeof(int) * (size_t)(first->nholders + 1));
            for (int d = 0; d < b->ndev; ++d) {
                Store *o = &b->m.stores[t][d];
                for (int i = 0; i < o->count; ++i)
                    store_count(o, o->items[i].tile, 1);
            }
        }
    }
}

#ifndef NDEBUG
int sched_machine_snapshot(Builder *b, Machine *whole) {
    if (b->m.ntensors > SCHED_DEBUG_CHECK_TENSORS)
        return 0;
    Arena *kept = b->arena;
    b->arena = b->scratch;
    sched_machine_copy(b, whole, &b->m);
    b->arena = kept;
    return 1;
}

/* Checks that no storage tensor outside touched[] differs from `whole`
 * (a copy of the machine before a trial run). */
void sched_machine_check_untouched(Builder *b, const Machine *whole, const int *touched, int n) {
    size_t words = sizeof(uint64_t) * (size_t)b->ndev * SLOT_WORDS;
    for (int t = 0; t < whole->ntensors; ++t) {
        int listed = 0;
        for (int k = 0; k < n; ++k)
            listed |= touched[k] == t;
        if (listed)
            continue;
        if (memcmp(whole->slot_used[t], b->m.slot_used[t], words) != 0)
            ICE("a trial run of a phase changed the slots of storage tensor %d, not one of its "
                "operands",
                t);
        for (int d = 0; d < b->ndev; ++d) {
            const Store *x = &whole->stores[t][d], *y = &b->m.stores[t][d];
            if (x->count != y->count ||
                (x->count && memcmp(x->items, y->items, sizeof(Held) * (size_t)x->count)))
                ICE("a trial run of a phase changed storage tensor %d, not one of its operands", t);
        }
    }
}
#endif

/* ------------------------------------------------------------------ */
/* Actions                                                             */

PrimeAction *sched_act(Builder *b, int dev, int op) {
    static PrimeAction scratch;
    if (b->dry || !b->ph) {
        if (b->dry && b->dry_count)
            b->dry_count[dev]++;
        return &scratch; /* written, never read */
    }
    if (b->s->folded)
        return sched_fold_act(b, dev, op);
    PhaseSched *ph = b->ph;
    if (ph->nactions[dev] == ph->action_cap[dev]) {
        /* A first list has room for what the phase's trial runs appended
         * and an eighth more (its boundaries), so most lists are never
         * copied (an arena keeps every copy). */
        int hint = ph->action_hint ? ph->action_hint[dev] : 0;
        int cap = ph->action_cap[dev] ? ph->action_cap[dev] * 2 : 16 + hint + hint / 8;
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

static int slot_is_used(const uint64_t *used, int s) {
    return (used[s / 64] >> (s % 64)) & 1;
}

/* The slot a new tile of a tensor gets on a device: the first free one
 * in the device's ring of the tensor's slots, from the one after the
 * slot handed out last (next-fit), so that the tiles of a tensor that
 * travel through a device take its slots in turn; a ring of R slots is
 * then an affine function of the step (slot = (base + k * step) mod R),
 * which the program's loops can follow. The ring grows by one when all
 * of its slots are in use, so it is as large as the most tiles the device
 * holds at once, as lowest-free slots would be. */
int sched_slot_alloc(Builder *b, int tensor, int dev) {
    uint64_t *ring = b->m.slot_used[tensor] + (size_t)dev * SLOT_WORDS;
    uint64_t *used = ring + 1;
    int size = (int)(*ring >> 32), next = (int)(*ring & 0xffffffffu);
    int s = -1;
    if (size <= 64) {
        /* One word: the free slots of the ring, from next on first. */
        uint64_t ring_free = ~used[0] & (size == 64 ? ~(uint64_t)0 : ((uint64_t)1 << size) - 1);
        uint64_t after = next < 64 ? ring_free & (~(uint64_t)0 << next) : 0;
        if (ring_free)
            s = __builtin_ctzll(after ? after : ring_free);
    } else {
        for (int c = next; c < size && s < 0; ++c)
            if (!slot_is_used(used, c))
                s = c;
        for (int c = 0; c < next && c < size && s < 0; ++c)
            if (!slot_is_used(used, c))
                s = c;
    }
    for (int c = size; s < 0 && c < MAX_SLOTS; ++c)
        if (!slot_is_used(used, c))
            s = c;
    if (s >= 0) {
        used[s / 64] |= (uint64_t)1 << (s % 64);
        if (s + 1 > size)
            size = s + 1;
        *ring = (uint64_t)size << 32 | (uint64_t)(s + 1 == size ? 0 : s + 1);
        if (!b->dry && s + 1 > b->s->tensors[tensor].max_slots)
            b->s->tensors[tensor].max_slots = s + 1;
        if (b->gained_flag && !b->gained_flag[tensor]) {
            b->gained_flag[tensor] = 1;
            intlist_push(b->arena, &b->gained, tensor);
        }
        return s;
    }
    /* A resource limit, not an internal error: the partition of the
     * current instance needs more tiles at once than a device's store
     * holds. Reported at the partition (its steps, when it has them). */
    if (!b->out_of_slots) {
        const Instance *inst = b->inst;
        const Partition *p = inst ? inst->partition : NULL;
        if (p)
            diag_error(b->sink, p->steps ? p->steps->size->span : p->decl->name.span,
                       "partition '%s' keeps more than %d tiles of '%s' live on one device "
                       "at once (at most %d are supported)",
                       p->name, MAX_SLOTS, b->s->tensors[tensor].name, MAX_SLOTS);
        else
            diag_error(b->sink, b->s->model->name_span,
                       "model '%s' keeps more than %d tiles of '%s' live on one device at once "
                       "(at most %d are supported)",
                       b->s->model->name, MAX_SLOTS, b->s->tensors[tensor].name, MAX_SLOTS);
        if (p)
            diag_note(b->sink, inst->use_span, "partition '%s' applied here", p->name);
    }
    b->out_of_slots = 1;
    b->failed = 1;
    return MAX_SLOTS - 1; /* a valid slot; the schedule is abandoned */
}

/* Allocates a tile filled with the identity of the tensor's combiner (0,
 * or -inf for a maximum) and returns its slot. */
int sched_emit_alloc(Builder *b, int tensor, int dev) {
    int slot = sched_slot_alloc(b, tensor, dev);
    PrimeAction *a = sched_act(b, dev, PRIME_ACT_ALLOC);
    a->tensor = tensor;
    a->slot = slot;
    a->kind = b->s->tensors[tensor].combine;
    return slot;
}

void sched_emit_free(Builder *b, int tensor, int dev, int slot) {
    b->m.slot_used[tensor][(size_t)dev * SLOT_WORDS + 1 + slot / 64] &=
        ~((uint64_t)1 << (slot % 64));
    PrimeAction *a = sched_act(b, dev, PRIME_ACT_FREE);
    a->tensor = tensor;
    a->slot = slot;
}

void sched_emit_send(Builder *b, int tensor, int dev, int slot, int peer, int tag, int kind) {
    PrimeAction *a = sched_act(b, dev, PRIME_ACT_SEND);
    a->tensor = tensor;
    a->slot = slot;
    a->peer = peer;
    a->tag = tag;
    a->kind = kind;
}

void sched_emit_recv(Builder *b, int tensor, int dev, int slot, int peer, int tag) {
    PrimeAction *a = sched_act(b, dev, PRIME_ACT_RECV);
    a->tensor = tensor;
    a->slot = slot;
    a->peer = peer;
    a->tag = tag;
}

void sched_emit_wait_all(Builder *b) {
    for (int d = 0; d < b->ndev; ++d)
        sched_act(b, d, PRIME_ACT_WAIT);
}
