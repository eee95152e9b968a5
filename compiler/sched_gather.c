/*
 * sched_gather.c — conversions that are all-gathers, run as ring
 * collectives (prime_allgather) instead of point-to-point boxes.
 *
 * A conversion qualifies when every tile of the target layout is needed
 * by a group of at least two devices, each member of the group holds, in
 * the source tiling, exactly one of the tile's pieces, and the pieces are
 * the ring chunks of the tile: contiguous in its row-major order, the
 * member at position p holding chunk p (prime_chunk_lo). Each member then
 * copies its piece into its chunk of a new tile, and the group all-gathers
 * the tile: every member sends n - |chunk p+1| elements, the bytes the
 * boxes would have moved, as one collective whose bytes are counted as
 * collective bytes. Anything else stays a box conversion.
 */
#include "sched_internal.h"

/* One gathered tile: its group in chunk order, and per member the source
 * tile and slot that hold its chunk. */
typedef struct Gather {
    long tile;
    int gsize;
    int *group;
    long *src_tile;
    int *src_slot;
    PrimeBox *box; /* per member: its piece, source tile to gathered tile */
} Gather;

/* Start of ring chunk c of n elements over g members: c*n/g, the
 * chunking of runtime/abi.c's prime_chunk_lo. */
static long chunk_lo(long n, int g, int c) {
    return c * (n / g) + c * (n % g) / g;
}

/* The overlap of source tile st of tf with target tile tile of tt as a
 * box; 0 when they do not overlap. */
static int overlap_box(const SchedTensor *tf, long st, const SchedTensor *tt, long tile,
                       PrimeBox *box) {
    memset(box, 0, sizeof *box);
    box->ndims = tt->ndims;
    for (int x = 0; x < tt->ndims; ++x) {
        long lo = sched_tile_coord(tt, tile, x) * tt->extent[x], hi = lo + tt->extent[x];
        long slo = sched_tile_coord(tf, st, x) * tf->extent[x], shi = slo + tf->extent[x];
        long a = slo > lo ? slo : lo, z = shi < hi ? shi : hi;
        if (a >= z)
            return 0;
        box->ext[x] = z - a;
        box->src_tile[x] = tf->extent[x];
        box->src_off[x] = a - slo;
        box->dst_tile[x] = tt->extent[x];
        box->dst_off[x] = a - lo;
    }
    return 1;
}

/* The first element of a box inside its destination tile when the box is
 * contiguous there (extent 1 before its first dimension of more, whole
 * after it), with its length in *len; -1 otherwise. */
static long contiguous_start(const PrimeBox *box, long *len) {
    int x0 = 0;
    while (x0 + 1 < box->ndims && box->ext[x0] == 1)
        x0++;
    long start = 0, stride = 1;
    for (int x = box->ndims - 1; x >= 0; --x) {
        if (x > x0 && (box->dst_off[x] != 0 || box->ext[x] != box->dst_tile[x]))
            return -1;
        start += box->dst_off[x] * stride;
        if (x == x0)
            *len = box->ext[x] * stride;
        stride *= box->dst_tile[x];
    }
    if (box->ndims == 0)
        *len = 1;
    return start;
}

/* The gather of target tile `tile` needed by the devices in need[0..g):
 * 1 when it qualifies (filling *gt), else 0. */
static int plan_gather(Builder *b, int from, int to, long tile, const int *need, int g,
                       Gather *gt) {
    const SchedTensor *tf = &b->s->tensors[from], *tt = &b->s->tensors[to];
    long *start = ARENA_ARRAY(b->arena, long, g), *len = ARENA_ARRAY(b->arena, long, g);
    unsigned char *taken = arena_alloc(b->arena, (size_t)g); /* member has its piece */
    gt->tile = tile;
    gt->gsize = g;
    gt->group = ARENA_ARRAY(b->arena, int, g);
    gt->src_tile = ARENA_ARRAY(b->arena, long, g);
    gt->src_slot = ARENA_ARRAY(b->arena, int, g);
    gt->box = ARENA_ARRAY(b->arena, PrimeBox, g);
    int pieces = 0;
    for (long st = 0; st < tf->ntiles; ++st) {
        PrimeBox box;
        if (!overlap_box(tf, st, tt, tile, &box))
            continue;
        if (++pieces > g)
            return 0;
        /* Exactly one member holds this piece. */
        int holder = -1;
        for (int m = 0; m < g; ++m) {
            if (sched_store_find(store_of(b, from, need[m]), st) < 0)
                continue;
            if (holder >= 0)
                return 0;
            holder = m;
        }
        if (holder < 0 || taken[holder])
            return 0;
        long s0 = contiguous_start(&box, &len[holder]);
        if (s0 < 0)
            return 0;
        const Store *ss = store_of(b, from, need[holder]);
        taken[holder] = 1;
        start[holder] = s0;
        gt->src_tile[holder] = st;
        gt->src_slot[holder] = ss->items[sched_store_find(ss, st)].slot;
        gt->box[holder] = box;
    }
    if (pieces != g)
        return 0;
    /* Members in chunk order: position p must hold chunk p exactly. */
    int *pos = ARENA_ARRAY(b->arena, int, g);
    for (int m = 0; m < g; ++m) {
        int p = 0;
        for (int o = 0; o < g; ++o)
            if (start[o] < start[m])
                p++;
        pos[m] = p;
    }
    long n = tt->tile_elems;
    for (int m = 0; m < g; ++m)
        if (start[m] != chunk_lo(n, g, pos[m]) ||
            len[m] != chunk_lo(n, g, pos[m] + 1) - chunk_lo(n, g, pos[m]))
            return 0;
    /* Reorder by position. */
    long *st2 = ARENA_ARRAY(b->arena, long, g);
    int *sl2 = ARENA_ARRAY(b->arena, int, g);
    PrimeBox *bx2 = ARENA_ARRAY(b->arena, PrimeBox, g);
    for (int m = 0; m < g; ++m) {
        gt->group[pos[m]] = need[m];
        st2[pos[m]] = gt->src_tile[m];
        sl2[pos[m]] = gt->src_slot[m];
        bx2[pos[m]] = gt->box[m];
    }
    gt->src_tile = st2;
    gt->src_slot = sl2;
    gt->box = bx2;
    return 1;
}

/* The gathers of every tile of `target`, or NULL (*count 0) when some
 * tile does not qualify. */
static Gather *plan_gathers(Builder *b, int from, int to, const Layout *target, int *count) {
    const SchedTensor *tt = &b->s->tensors[to];
    *count = 0;
    /* One replica's simulation (sched_orbit.c): on the whole mesh every
     * piece of a value unsplit over a replica axis has a holder in each of
     * its replicas, so no tile qualifies. */
    if (b->orbit && b->orbit->tensor_split[tt->model_tensor] != b->orbit->all)
        return NULL;
    int cap = 8, n = 0;
    Gather *gs = ARENA_ARRAY(b->arena, Gather, cap);
    int *need = ARENA_ARRAY(b->arena, int, b->ndev);
    unsigned char *done = arena_alloc(b->arena, (size_t)tt->ntiles);
    for (int d = 0; d < b->ndev; ++d) {
        for (int i = 0; i < target->count[d]; ++i) {
            long tile = target->tiles[d][i];
            if (done[tile])
                continue;
            done[tile] = 1;
            int g = 0;
            for (int e = 0; e < b->ndev; ++e)
                if (sched_layout_has(target, e, tile))
                    need[g++] = e;
            if (g < 2)
                return NULL;
            if (n == cap) {
                Gather *ng = ARENA_ARRAY(b->arena, Gather, cap * 2);
                memcpy(ng, gs, sizeof(Gather) * (size_t)n);
                gs = ng;
                cap *= 2;
            }
            if (!plan_gather(b, from, to, tile, need, g, &gs[n]))
                return NULL;
            n++;
        }
    }
    *count = n;
    return n ? gs : NULL;
}

/* The collective of one gather: an ALLGATHER action on every member, in
 * group order. Returns the bytes it sends over all members. */
static long emit_gather(Builder *b, PhaseSched *ph, int to, const Gather *gt, const int *slots) {
    Collective *col = ARENA_NEW(b->arena, Collective);
    col->tensor = to;
    col->tile = gt->tile;
    col->gsize = gt->gsize;
    col->group = gt->group;
    col->slots = ARENA_ARRAY(b->arena, int, gt->gsize);
    memcpy(col->slots, slots, sizeof(int) * (size_t)gt->gsize);
    col->allgather = 1;
    col->elems = b->s->tensors[to].tile_elems;
    for (int p = 0; p < col->gsize; ++p)
        col->bytes += (long)prime_allgather_bytes((size_t)col->elems, col->gsize, p);
    int tag = b->next_tag++;
    if (!b->dry) {
        ptrvec_push(b->arena, &ph->collectives, col);
        ptrvec_push(b->arena, &ph->groups, col);
    }
    col->phase = ph;
    col->action = ARENA_ARRAY(b->arena, int, col->gsize);
    for (int p = 0; p < col->gsize; ++p) {
        col->action[p] = ph->nactions[col->group[p]];
        PrimeAction *a = sched_act(b, col->group[p], PRIME_ACT_ALLGATHER);
        a->tensor = to;
        a->slot = col->slots[p];
        a->tag = tag;
        a->arg = ph->groups.count - 1;
    }
    return col->bytes;
}

int sched_convert_allgather(Builder *b, PhaseSched *ph, int from, int to, const Layout *target,
                            const char *reason, long *bytes) {
    const SchedTensor *tf = &b->s->tensors[from], *tt = &b->s->tensors[to];
    if (tf->ndims != tt->ndims)
        return 0;
    int n = 0;
    Gather *gs = plan_gathers(b, from, to, target, &n);
    if (!gs)
        return 0;
    Layout have = sched_layout_of(b, from);
    /* Per gather and member: the slot of the new tile. */
    int **slots = ARENA_ARRAY(b->arena, int *, n);
    for (int k = 0; k < n; ++k)
        slots[k] = ARENA_ARRAY(b->arena, int, gs[k].gsize);
    for (int d = 0; d < b->ndev; ++d) {
        for (int i = 0; i < target->count[d]; ++i) {
            long tile = target->tiles[d][i];
            int k = 0, p = 0;
            while (gs[k].tile != tile)
                k++;
            while (gs[k].group[p] != d)
                p++;
            int slot = sched_emit_alloc(b, to, d);
            PrimeAction *a = sched_act(b, d, PRIME_ACT_COPY_BOX);
            a->tensor = to;
            a->slot = slot;
            a->arg = sched_add_box(b, ph, &gs[k].box[p]);
            a->nin = 1;
            a->in_tensor[0] = from;
            a->in_slot[0] = gs[k].src_slot[p];
            slots[k][p] = slot;
            sched_store_add(b, store_of(b, to, d), tile, slot);
        }
    }
    long sent = 0;
    for (int k = 0; k < n; ++k)
        sent += emit_gather(b, ph, to, &gs[k], slots[k]);
    Move *mv = sched_new_move(b, to, -1, MOVE_CONVERSION, NULL, 0, NULL, NULL, NULL);
    mv->bytes = 0;
    mv->reason = reason;
    mv->from_tensor = from;
    mv->pattern = "all-gather collective";
    mv->have = have;
    mv->need = *target;
    if (!b->dry)
        ptrvec_push(b->arena, &ph->boundary, mv);
    *bytes = sent;
    return 1;
}
