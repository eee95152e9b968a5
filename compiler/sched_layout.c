/*
 * sched_layout.c — tile ids, layouts (which tiles, in which slots, every
 * device holds) and the bytes a conversion between tilings moves.
 *
 * A tile id numbers a tensor's tiles in row-major order of their slice
 * indices; layouts keep each device's tiles in ascending order.
 */
#include "sched_internal.h"

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

int sched_device_computes(const Schedule *s, const PhaseSched *ph, int dev) {
    const Model *m = s->model;
    if (!m->nstages || ph->inst < 0)
        return 1;
    long coords[IR_MAX_AXES];
    mesh_coords(&m->mesh, dev, coords);
    return instance_on_device(m, &m->instances[ph->inst], coords);
}

long sched_op_step(const Schedule *s, const PhaseSched *ph, long step) {
    return ph->reversed ? s->model->instances[ph->inst].steps - 1 - step : step;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Snapshot of which tiles (and slots) every device holds. */
Layout sched_layout_of(Builder *b, int tensor) {
    Layout l;
    l.ndev = b->ndev;
    l.count = ARENA_ARRAY_UNINIT(sched_run_arena(b), int, b->ndev);
    l.tiles = ARENA_ARRAY_UNINIT(sched_run_arena(b), long *, b->ndev);
    l.slots = ARENA_ARRAY_UNINIT(sched_run_arena(b), int *, b->ndev);
    l.cap = NULL;
    for (int d = 0; d < b->ndev; ++d) {
        const Store *st = store_of(b, tensor, d);
        l.count[d] = st->count;
        l.tiles[d] = ARENA_ARRAY_UNINIT(sched_run_arena(b), long, st->count + 1);
        l.slots[d] = ARENA_ARRAY_UNINIT(sched_run_arena(b), int, st->count + 1);
        for (int i = 0; i < st->count; ++i)
            l.tiles[d][i] = st->items[i].tile;
        qsort(l.tiles[d], (size_t)st->count, sizeof(long), cmp_long);
        for (int i = 0; i < st->count; ++i)
            l.slots[d][i] = st->items[sched_store_find(st, l.tiles[d][i])].slot;
    }
    return l;
}

Layout sched_layout_empty(Builder *b) {
    Layout l;
    l.ndev = b->ndev;
    l.count = ARENA_ARRAY(b->arena, int, b->ndev);
    l.tiles = ARENA_ARRAY(b->arena, long *, b->ndev);
    l.slots = ARENA_ARRAY(b->arena, int *, b->ndev);
    l.cap = NULL;
    return l;
}

/* The first position of a device's (ascending) tiles not below tile. */
static int lower_bound(const long *tiles, int n, long tile) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (tiles[mid] < tile)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The tiles of a layout are ascending: a binary search. */
int sched_layout_has(const Layout *l, int dev, long tile) {
    int at = lower_bound(l->tiles[dev], l->count[dev], tile);
    return at < l->count[dev] && l->tiles[dev][at] == tile;
}

/* Inserts in order (the tiles are ascending). The device's array grows
 * by doubling and is filled in place: a dry run adds a tile per device
 * and step, and a copy per addition made that quadratic in time and
 * arena memory. */
void sched_layout_add(Builder *b, Layout *l, int dev, long tile) {
    long *tiles = l->tiles[dev];
    int n = l->count[dev], lo = lower_bound(tiles, n, tile);
    if (lo < n && tiles[lo] == tile)
        return;
    if (!l->cap || l->cap[dev] <= n) {
        int cap = n < 4 ? 8 : 2 * n;
        long *grown = ARENA_ARRAY_UNINIT(b->arena, long, cap);
        if (n)
            memcpy(grown, tiles, sizeof(long) * (size_t)n);
        if (!l->cap)
            l->cap = ARENA_ARRAY(b->arena, int, l->ndev);
        l->cap[dev] = cap;
        l->tiles[dev] = tiles = grown;
    }
    memmove(tiles + lo + 1, tiles + lo, sizeof(long) * (size_t)(n - lo));
    tiles[lo] = tile;
    l->count[dev] = n + 1;
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

int layout_replication(const Layout *l, long ntiles) {
    int *copies = calloc((size_t)ntiles + 1, sizeof(int));
    int most = 0;
    if (!copies)
        ICE("out of memory");
    for (int d = 0; d < l->ndev; ++d)
        for (int i = 0; i < l->count[d]; ++i)
            if (++copies[l->tiles[d][i]] > most)
                most = copies[l->tiles[d][i]];
    free(copies);
    return most;
}
