/*
 * sched_moves.c — where a tile comes from, and the moves that bring tiles
 * to a target layout.
 *
 * Between steps, and at phase boundaries, every receiver needs a source:
 * one uniform mesh offset when one serves all receivers (a ring shift),
 * else the nearest holder per receiver (a permutation or a general
 * exchange). A redistribution brings a tensor to another layout of the
 * same tiling; a conversion builds another tiling of the same value from
 * boxes, and may turn the all-reduces that produced it into
 * reduce-scatters; a conversion that is an all-gather runs as ring
 * collectives instead (sched_gather.c).
 */
#include "sched_internal.h"

static long axis_distance(const Mesh *mesh, const long *delta) {
    long dist = 0;
    for (int a = 0; a < mesh->naxes; ++a) {
        long d = delta[a], back = mesh->sizes[a] - delta[a];
        dist += d < back ? d : back;
    }
    return dist;
}

/* The coordinates of a device (from the builder's table). */
static const long *coords_of(const Builder *b, int dev) {
    return b->coords + (long)dev * b->s->model->mesh.naxes;
}

static int shifted(const Builder *b, int dev, const long *delta) {
    const Mesh *mesh = &b->s->model->mesh;
    const long *c = coords_of(b, dev);
    long r = 0;
    for (int a = 0; a < mesh->naxes; ++a) {
        long x = c[a] + delta[a];
        r = r * mesh->sizes[a] + (x >= mesh->sizes[a] ? x % mesh->sizes[a] : x);
    }
    return (int)r;
}

static void delta_between(const Builder *b, int dst, int src, long *delta) {
    const long *cd = coords_of(b, dst), *cs = coords_of(b, src);
    const Mesh *mesh = &b->s->model->mesh;
    for (int a = 0; a < mesh->naxes; ++a) {
        long d = cs[a] - cd[a];
        delta[a] = d < 0 ? d + mesh->sizes[a] : d;
    }
}

/* How many devices hold `tile` of `tensor` (the machine's holder count;
 * a tile held twice by one device counts twice), or -1 where the count is
 * not kept. */
static long holders_of(Builder *b, int tensor, long tile) {
    const Store *st = store_of(b, tensor, 0);
    if (!st->holders || tile < 0 || tile >= st->nholders)
        return -1;
    return st->holders[tile];
}

/* The devices a scan for sources of `tile` visits, in ascending order:
 * from the first candidate the scan allows, sc->first's list where it
 * has one (every device that may pass cand is on it), else every device;
 * where cand passes only devices that hold the tile (sc->held), *left
 * counts the holders not yet seen (-1: unknown), a device that does not
 * hold it is passed over before cand is asked, and the scan ends once
 * every holder the machine counts was seen (the devices after them would
 * all fail cand). The choice is the same as over every device. */
static int scan_next(Builder *b, const SourceScan *sc, int tensor, int c, long tile, long *left) {
    if (sc && sc->first) {
        if (c < 0)
            return tile >= 0 && tile < sc->ntiles ? sc->first[tile] : -1;
        return sc->next[c];
    }
    for (++c; c < b->ndev && *left != 0; ++c) {
        if (*left < 0)
            return c;
        if (sched_store_find(store_of(b, tensor, c), tile) >= 0) {
            --*left;
            return c;
        }
    }
    return -1;
}

static long scan_start(Builder *b, const SourceScan *sc, int tensor, long tile) {
    return sc && sc->held ? holders_of(b, tensor, tile) : -1;
}

/* Picks a source for every receiver: one uniform mesh offset if one
 * serves all of them (the nearest such), else the nearest candidate per
 * receiver. Fills src[] and classifies the move. `exclusive`: a source
 * can serve one receiver only (accumulators). `sc` (or NULL) narrows the
 * devices looked at for a receiver's tile (see scan_next). */
MoveKind sched_choose_sources(Builder *b, int tensor, int nrecv, const int *dst, const long *tile,
                              CandidateFn cand, void *ctx, int exclusive, const SourceScan *sc,
                              int *src, long *delta_out) {
    long best_delta[IR_MAX_AXES];
    long best_dist = -1;
    long left = scan_start(b, sc, tensor, tile[0]);
    for (int c = scan_next(b, sc, tensor, -1, tile[0], &left); c >= 0;
         c = scan_next(b, sc, tensor, c, tile[0], &left)) {
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
        left = scan_start(b, sc, tensor, tile[r]);
        for (int c = scan_next(b, sc, tensor, -1, tile[r], &left); c >= 0;
             c = scan_next(b, sc, tensor, c, tile[r], &left)) {
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
        } else if (exclusive && b->orbit &&
                   b->orbit->tensor_split[b->s->tensors[tensor].model_tensor] != b->orbit->all) {
            /* On the whole mesh another replica's source could be free
             * (sched_orbit.c): not followed. */
            b->orbit_broken = 1;
        }
    }
    return distinct ? MOVE_PERMUTATION : MOVE_EXCHANGE;
}

int sched_holds_tile(Builder *b, int tensor, int src, int dst, long tile, void *ctx) {
    (void)ctx;
    (void)dst;
    return sched_store_find(store_of(b, tensor, src), tile) >= 0;
}

Move *sched_new_move(Builder *b, int tensor, long step, MoveKind kind, const long *delta, int n,
                     const int *dst, const int *src, const long *tile) {
    Move *mv = ARENA_NEW(sched_run_arena(b), Move);
    mv->tensor = tensor;
    mv->step = step;
    mv->kind = kind;
    if (kind == MOVE_SHIFT)
        memcpy(mv->delta, delta, sizeof(long) * IR_MAX_AXES);
    mv->ntransfers = n;
    mv->bytes = (long)n * b->s->tensors[tensor].tile_elems * (long)sizeof(float);
    if (b->s->folded && step >= 0)
        return mv; /* a move between steps: no reader of its transfers (Schedule.folded) */
    mv->transfers = ARENA_ARRAY(sched_run_arena(b), Transfer, n);
    for (int i = 0; i < n; ++i) {
        mv->transfers[i].src = src[i];
        mv->transfers[i].dst = dst[i];
        mv->transfers[i].tile = tile[i];
    }
    return mv;
}

/* ------------------------------------------------------------------ */
/* Redistribution to a target layout                                   */

/* Brings every tile of `target` to its device from a holder, then (with
 * drop) frees tiles a device holds outside the target. Returns the bytes
 * moved; records the move in ph->boundary unless nothing moved. */
long sched_redistribute(Builder *b, PhaseSched *ph, int tensor, const Layout *target, int drop,
                        const char *reason) {
    int n = 0, cap = 0;
    for (int d = 0; d < b->ndev; ++d)
        cap += target->count[d];
    int *dst = ARENA_ARRAY(b->scratch, int, cap + 1);
    int *src = ARENA_ARRAY(b->scratch, int, cap + 1);
    long *tile = ARENA_ARRAY(b->scratch, long, cap + 1);
    for (int d = 0; d < b->ndev; ++d) {
        for (int i = 0; i < target->count[d]; ++i) {
            if (sched_store_find(store_of(b, tensor, d), target->tiles[d][i]) < 0) {
                dst[n] = d;
                tile[n] = target->tiles[d][i];
                n++;
            }
        }
    }
    Layout have = sched_layout_of(b, tensor);
    long bytes = 0;
    if (n > 0) {
        long delta[IR_MAX_AXES] = {0};
        const SourceScan held = {1, NULL, NULL, 0};
        MoveKind kind = sched_choose_sources(b, tensor, n, dst, tile, sched_holds_tile, NULL, 0,
                                             &held, src, delta);
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
        int *slots = ARENA_ARRAY(b->scratch, int, n);
        for (int r = 0; r < n; ++r) {
            slots[r] = sched_emit_alloc(b, tensor, dst[r]);
            sched_emit_recv(b, tensor, dst[r], slots[r], src[r], tag);
        }
        for (int r = 0; r < n; ++r) {
            const Store *ss = store_of(b, tensor, src[r]);
            int slot = ss->items[sched_store_find(ss, tile[r])].slot;
            sched_emit_send(b, tensor, src[r], slot, dst[r], tag, PRIME_BYTES_REDIST);
        }
        sched_emit_wait_all(b);
        for (int r = 0; r < n; ++r)
            sched_store_add(b, store_of(b, tensor, dst[r]), tile[r], slots[r]);
        Move *mv = sched_new_move(b, tensor, -1, kind, delta, n, dst, src, tile);
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
                if (!sched_layout_has(target, d, st->items[i].tile)) {
                    sched_emit_free(b, tensor, d, st->items[i].slot);
                    sched_store_remove(st, i);
                }
            }
        }
    }
    return bytes;
}

/* Does any storage tensor of the same value hold tiles? Returns it. */
int sched_value_holder(Builder *b, int tensor) {
    const SchedTensor *t = &b->s->tensors[tensor];
    for (int u = b->value_first[t->model_tensor * 2 + t->is_grad]; u >= 0; u = b->value_next[u]) {
        if (u == tensor)
            continue;
        for (int d = 0; d < b->ndev; ++d)
            if (store_of(b, u, d)->count)
                return u;
    }
    return -1;
}

int sched_holds_any(Builder *b, int tensor) {
    for (int d = 0; d < b->ndev; ++d)
        if (store_of(b, tensor, d)->count)
            return 1;
    return 0;
}

int sched_add_box(Builder *b, PhaseSched *ph, const PrimeBox *box) {
    if (b->dry)
        return 0;
    return sched_phase_box(b->arena, ph, box);
}

/* FNV-1a over a box's bytes (boxes are compared bytewise). */
static unsigned long box_hash(const PrimeBox *box) {
    const unsigned char *b = (const unsigned char *)box;
    unsigned long h = 1469598103934665603ul;
    for (size_t i = 0; i < sizeof *box; ++i)
        h = (h ^ b[i]) * 1099511628211ul;
    return h;
}

/* Indexes box i of ph in its hash (which has room). A copy of the phase
 * (schedule_transpose) shares boxes and hash and adds no box; a lookup
 * still checks that the index is one of its own. */
static void box_index(PhaseSched *ph, int i, unsigned long h) {
    int mask = ph->box_hash_cap - 1;
    int k = (int)(h & (unsigned long)mask);
    while (ph->box_hash[k] >= 0)
        k = (k + 1) & mask;
    ph->box_hash[k] = i;
}

/* A phase with this many boxes finds them by hash, not by a scan. */
#define BOX_SCAN_MAX 16

int sched_phase_box(Arena *arena, PhaseSched *ph, const PrimeBox *box) {
    unsigned long h = 0;
    if (ph->box_hash) {
        h = box_hash(box);
        int mask = ph->box_hash_cap - 1;
        for (int k = (int)(h & (unsigned long)mask); ph->box_hash[k] >= 0; k = (k + 1) & mask)
            if (ph->box_hash[k] < ph->nboxes &&
                memcmp(&ph->boxes[ph->box_hash[k]], box, sizeof *box) == 0)
                return ph->box_hash[k];
    } else {
        for (int i = 0; i < ph->nboxes; ++i)
            if (memcmp(&ph->boxes[i], box, sizeof *box) == 0)
                return i;
    }
    if (ph->nboxes == ph->box_cap) {
        int cap = ph->box_cap ? ph->box_cap * 2 : 8;
        PrimeBox *nb = ARENA_ARRAY(arena, PrimeBox, cap);
        if (ph->nboxes)
            memcpy(nb, ph->boxes, sizeof(PrimeBox) * (size_t)ph->nboxes);
        ph->boxes = nb;
        ph->box_cap = cap;
    }
    const int i = ph->nboxes++;
    ph->boxes[i] = *box;
    if (ph->nboxes >= BOX_SCAN_MAX && 2 * ph->nboxes > ph->box_hash_cap) {
        /* (Re)build the hash at twice the boxes' room. */
        ph->box_hash_cap = 4 * ph->box_cap;
        ph->box_hash = ARENA_ARRAY_UNINIT(arena, int, ph->box_hash_cap);
        for (int k = 0; k < ph->box_hash_cap; ++k)
            ph->box_hash[k] = -1;
        for (int k = 0; k < ph->nboxes; ++k)
            box_index(ph, k, box_hash(&ph->boxes[k]));
    } else if (ph->box_hash) {
        box_index(ph, i, h);
    }
    return i;
}

/* Is storage tensor t read by a phase after the current one? */
static int read_after(Builder *b, int t) {
    return last_read_of(b, t) > b->phase_index;
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
    /* A group over every replica (sched_orbit.c) keeps, on the whole mesh,
     * the same tiles in each replica, never a chunk per member (unless
     * the chunks are empty, which the proof does not follow). */
    for (int c = 0; c < cols->count; ++c) {
        const Collective *col = cols->items[c];
        if (col->orbit_gsize) {
            if (col->elems < col->orbit_gsize)
                b->orbit_broken = 1;
            return;
        }
    }
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
        sched_make_reduce_scatter(b, col);
        for (int q = 0; q < col->gsize; ++q)
            col->bytes += (long)prime_reduce_scatter_bytes((size_t)col->elems, col->gsize, q);
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
long sched_convert(Builder *b, PhaseSched *ph, int from, int to, const Layout *target,
                   const char *reason) {
    try_reduce_scatter(b, ph, from, to, target);
    long gathered = 0;
    if (sched_convert_allgather(b, ph, from, to, target, reason, &gathered))
        return gathered;
    const SchedTensor *tf = &b->s->tensors[from], *tt = &b->s->tensors[to];
    ICE_ASSERT(tf->ndims == tt->ndims);
    int tag = b->next_tag++;
    long bytes = 0;
    int n = 0, cap = 16;
    int *dsts = ARENA_ARRAY(b->arena, int, cap);
    int *srcs = ARENA_ARRAY(b->arena, int, cap);
    long *tiles = ARENA_ARRAY(b->arena, long, cap);
    Layout have = sched_layout_of(b, from);
    for (int d = 0; d < b->ndev; ++d) {
        for (int i = 0; i < target->count[d]; ++i) {
            long tile = target->tiles[d][i];
            int slot = sched_emit_alloc(b, to, d);
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
                    if (sched_store_find(store_of(b, from, c), st) < 0)
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
                int sslot = ss->items[sched_store_find(ss, st)].slot;
                int bi = sched_add_box(b, ph, &box);
                if (src == d) {
                    PrimeAction *a = sched_act(b, d, PRIME_ACT_COPY_BOX);
                    a->tensor = to;
                    a->slot = slot;
                    a->arg = bi;
                    a->nin = 1;
                    a->in_tensor[0] = from;
                    a->in_slot[0] = sslot;
                } else {
                    PrimeAction *a = sched_act(b, d, PRIME_ACT_RECV_BOX);
                    a->tensor = to;
                    a->slot = slot;
                    a->peer = src;
                    a->tag = tag;
                    a->arg = bi;
                    a = sched_act(b, src, PRIME_ACT_SEND_BOX);
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
            sched_store_add(b, store_of(b, to, d), tile, slot);
        }
    }
    sched_emit_wait_all(b);
    Move *mv = sched_new_move(b, to, -1, MOVE_CONVERSION, NULL, n, dsts, srcs, tiles);
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
