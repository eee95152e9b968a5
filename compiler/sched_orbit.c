/*
 * sched_orbit.c — `check` of a plan with data-parallel replicas by
 * simulating one replica (docs/program-form.md, "One replica per orbit").
 *
 * A mesh axis `r` of size R is a replica axis when every DSI of every
 * instance, evaluated on the slice tables, is either invariant in the
 * coordinate r (the dimension is replicated over the replicas) or
 * affine in it with the slope of a block: slice(r, c, t) = slice(0, c,
 * t) + r * K, with slice(0, c, t) < K and K * R the dimension's slice
 * count (the dimension is split over the replicas, replica-major). Every
 * model tensor's dimension must be one or the other in every instance
 * that reads or writes it, so that a value's tilings agree on it. Then
 * the machine of replica r is that of replica 0 translated (the tiles of
 * a split dimension moved by r * K), and the scheduler's choices commute
 * with the translation:
 *
 *   - the devices a replica's work is laid on, its slots and the order of
 *     its actions are per device, from its slice table rows, which are
 *     translates of replica 0's;
 *   - a source (the nearest holder, a uniform shift) is in the receiver's
 *     own replica: a tile of a split tensor is held only there, and a
 *     tile of an unsplit one is held by the translates of every holder,
 *     the own replica's at a distance smaller by the replica offset; only
 *     an exclusive choice (a travelling accumulator) that finds no free
 *     source in the replica could look further, and that breaks the
 *     proof (Builder.orbit_broken: the full simulation runs instead);
 *   - an all-reduce of a tile unsplit over r whose reduction is split
 *     over r joins the replicas' groups into one group of R times the
 *     members (the replicas' partial sums are of disjoint reduction
 *     slices, so the greedy grouping of sched_finish_accumulators makes,
 *     in each replica, the groups it makes alone); it is simulated as one
 *     collective whose members are replica 0's (Collective.orbit_join, the
 *     axes it is joined over; orbit_gsize, the group's size on the whole
 *     mesh, which prices its scratch; its bytes per member are priced here
 *     from the position of each member in the whole group); every other
 *     collective runs within one replica;
 *   - an all-gather conversion of an unsplit value never qualifies on the
 *     whole mesh (every piece has a holder in each replica), and a
 *     reduce-scatter of a joined group is not attempted: the reduced run
 *     does neither.
 *
 * Besides, a phase whose output and reduction are both split would give a
 * tile of replica r only replica r's block of the reduction (an error
 * the whole mesh reports and one replica cannot see): no replica axis.
 *
 * The axis need not be called r nor be a data-parallel one: the heads or
 * columns of a Megatron-LM plan on mesh(d: P) split every dimension they
 * touch in blocks of d, and d is a replica axis of one device. Every axis
 * that passes on its own and splits no dimension an earlier one splits is
 * taken at once (the translations commute; a replica is one point of each,
 * R the product of their sizes, and a collective is joined over some of
 * them and copied over the others); a square grid's skewed DSIs
 * ((i + j + t) % P) pass on no axis.
 *
 * The reduced model is the model on the mesh without the replica axes,
 * with every split dimension shorter by its axis's size and its slices
 * those of replica 0. Its
 * schedule is built folded (Schedule.folded) and is expanded here: device
 * (r, c) has the predicted bytes and peak of device c of the reduced mesh
 * (its collective bytes apart), every phase keeps the reduced per-rank
 * arrays (action counts, peaks), read through Schedule.orbit_rep; moves'
 * bytes and transfer counts are R times theirs, a collective is one per
 * combination of the coordinates it is not joined over, each over the
 * members of every combination of those it is joined over, and the
 * layouts (home, final, a redistribution's have and need) are the
 * replica's, translated to a device where `explain` reads one
 * (schedule_layout_tiles, schedule_layout_replication). A reduced
 * run that reports anything (an error in the model), or whose proof
 * breaks, is dropped and the whole mesh is simulated, so diagnostics are
 * those of the full simulation.
 */
#include "sched_orbit.h"

#include <stdio.h>
#include <time.h>

/* Modes of an operator dimension over one axis. */
enum { DIM_INVARIANT = 0, DIM_SPLIT = 1 };

/* One mesh axis as a candidate: rank = (hi * R + rho) * stride + lo
 * for its coordinate rho (row-major), hi < outer and lo < stride. */
typedef struct AxisProof {
    int axis, R;
    long stride, outer;
    /* Split by the axis: [model tensor * IR_MAX_DIMS + dim], [instance *
     * IR_MAX_DIMS + op dim]; any dimension of a model tensor. */
    unsigned char *tdim, *idim, *tensor;
} AxisProof;

/* The mode of dimension x of a slice table over axis `ap`, or -1 when it
 * is neither invariant nor a replica-major block split. */
static int dim_mode(const AxisProof *ap, const SliceTable *st, int x) {
    long n = st->nslices[x];
    int split = n % ap->R == 0 && n > 1;
    long k = split ? n / ap->R : 0;
    int invariant = 1;
    /* The rows of replica rho and of replica 0 with the same other
     * coordinates are runs of stride * steps values, read side by side. */
    const long *table = st->slice + (long)x * st->ndev * st->steps;
    const long run = ap->stride * st->steps;
    for (long hi = 0; hi < ap->outer && (split || invariant); ++hi) {
        const long *row0 = table + hi * ap->R * run;
        if (split)
            for (long i = 0; i < run && split; ++i)
                split = row0[i] < k;
        for (long rho = 1; rho < ap->R && (split || invariant); ++rho) {
            const long *row = row0 + rho * run, off = rho * k;
            for (long i = 0; i < run; ++i) {
                invariant &= row[i] == row0[i];
                split &= row[i] == row0[i] + off;
            }
        }
    }
    return invariant ? DIM_INVARIANT : split ? DIM_SPLIT : -1;
}

/* Records tensor dimension (mt, j) as of mode `mode`; 0 on a conflict. */
static int note_tensor_dim(AxisProof *ap, signed char *seen, int mt, int j, int mode) {
    signed char *s = &seen[(long)mt * IR_MAX_DIMS + j];
    if (*s >= 0 && *s != mode)
        return 0;
    *s = (signed char)mode;
    ap->tdim[(long)mt * IR_MAX_DIMS + j] = (unsigned char)(mode == DIM_SPLIT);
    if (mode == DIM_SPLIT)
        ap->tensor[mt] = 1;
    return 1;
}

/* Whether axis a is a replica axis of the model on its own (filling ap). */
static int prove_axis(Arena *arena, const Model *m, const SliceTable *const *slices,
                      const Phase *const *phases, int nphases, int a, AxisProof *ap) {
    const Mesh *mesh = &m->mesh;
    ap->axis = a;
    ap->R = (int)mesh->sizes[a];
    ap->stride = 1;
    for (int x = a + 1; x < mesh->naxes; ++x)
        ap->stride *= mesh->sizes[x];
    ap->outer = mesh->ndev / (ap->stride * ap->R);
    ap->tdim = ARENA_ARRAY(arena, unsigned char, (long)m->ntensors *IR_MAX_DIMS + 1);
    ap->tensor = ARENA_ARRAY(arena, unsigned char, m->ntensors + 1);
    ap->idim = ARENA_ARRAY(arena, unsigned char, (long)m->ninstances *IR_MAX_DIMS + 1);
    signed char *seen = ARENA_ARRAY_UNINIT(arena, signed char, (long)m->ntensors *IR_MAX_DIMS + 1);
    memset(seen, -1, (size_t)m->ntensors * IR_MAX_DIMS + 1);
    int any = 0;
    for (int i = 0; i < m->ninstances; ++i) {
        const Instance *inst = &m->instances[i];
        const SliceTable *st = slices[i];
        int mode[IR_MAX_DIMS];
        /* A copy of the repeated layer that shares the previous copy's
         * table (pass_partition) has its modes. */
        int prev = i - m->layer_size;
        int same = m->layer_count > 1 && prev >= m->layer_first && slices[prev] == st;
        for (int x = 0; x < st->ndims; ++x) {
            mode[x] = same ? ap->idim[(long)prev * IR_MAX_DIMS + x] : dim_mode(ap, st, x);
            if (mode[x] < 0)
                return 0;
            ap->idim[(long)i * IR_MAX_DIMS + x] = (unsigned char)(mode[x] == DIM_SPLIT);
            any |= mode[x] == DIM_SPLIT;
        }
        const Op *op = inst->op;
        for (int k = 0; k < op->ninputs; ++k)
            for (int j = 0; j < op->inputs[k].ndims; ++j)
                if (!note_tensor_dim(ap, seen, inst->args[k], j, mode[op->inputs[k].dims[j]]))
                    return 0;
        for (int j = 0; j < op->output.ndims; ++j)
            if (!note_tensor_dim(ap, seen, inst->result, j, mode[op->output.dims[j]]))
                return 0;
        /* A recomputed copy is the same value: its dimensions are its
         * original's (phases_operand_tensor reads either). */
        if (m->tensors[inst->result].rc)
            for (int j = 0; j < op->output.ndims; ++j)
                if (!note_tensor_dim(ap, seen, m->tensors[inst->result].rc, j,
                                     mode[op->output.dims[j]]))
                    return 0;
    }
    /* A phase whose output and reduction are both split gives the tiles
     * of replica r only replica r's block of the reduction: on the whole
     * mesh it misses slices, which one replica cannot see. */
    for (int p = 0; p < nphases; ++p) {
        const Phase *ph = phases[p];
        if (ph->inst < 0)
            continue;
        const unsigned char *split = ap->idim + (long)ph->inst * IR_MAX_DIMS;
        int out_split = 0, red_split = 0;
        unsigned char in_out[IR_MAX_DIMS] = {0};
        for (int j = 0; j < ph->out->ndims; ++j) {
            in_out[ph->out->dims[j]] = 1;
            out_split |= split[ph->out->dims[j]];
        }
        for (int x = 0; x < m->instances[ph->inst].op->ndims; ++x)
            red_split |= !in_out[x] && split[x];
        if (out_split && red_split)
            return 0;
    }
    /* Without a split dimension every replica computes the same values:
     * nothing to gain, and a replication the expansion does not price. */
    return any;
}

/* The replica axes of the model: every axis that is one on its own and
 * splits no dimension an earlier one splits (their translations then
 * commute and every dimension has at most one block structure to move).
 * Fills o; 0 when there is none. */
static int find_axes(Arena *arena, const Model *m, const SliceTable *const *slices,
                     const Phase *const *phases, int nphases, SchedOrbit *o) {
    memset(o, 0, sizeof *o);
    long nt = (long)m->ntensors * IR_MAX_DIMS + 1, ni = (long)m->ninstances * IR_MAX_DIMS + 1;
    o->tensor_dim_split = ARENA_ARRAY(arena, unsigned char, nt);
    o->dim_split = ARENA_ARRAY(arena, unsigned char, ni);
    o->tensor_split = ARENA_ARRAY(arena, unsigned char, m->ntensors + 1);
    for (int a = 0; a < m->mesh.naxes; ++a) {
        if (m->mesh.sizes[a] < 2)
            continue;
        AxisProof ap;
        if (!prove_axis(arena, m, slices, phases, nphases, a, &ap))
            continue;
        int clash = 0;
        for (long x = 0; x < nt - 1 && !clash; ++x)
            clash = ap.tdim[x] && o->tensor_dim_split[x];
        for (long x = 0; x < ni - 1 && !clash; ++x)
            clash = ap.idim[x] && o->dim_split[x];
        if (clash)
            continue;
        int k = o->n++;
        o->axes[k] = a;
        o->sizes[k] = ap.R;
        for (long x = 0; x < nt - 1; ++x)
            if (ap.tdim[x])
                o->tensor_dim_split[x] = (unsigned char)(k + 1);
        for (long x = 0; x < ni - 1; ++x)
            if (ap.idim[x])
                o->dim_split[x] = (unsigned char)(k + 1);
        for (int t = 0; t < m->ntensors; ++t)
            if (ap.tensor[t])
                o->tensor_split[t] |= (unsigned char)(1u << k);
    }
    if (!o->n)
        return 0;
    o->all = (1u << o->n) - 1;
    /* The geometry: replica index (mixed radix over the replica axes in
     * mesh order) and rank on the mesh without them. */
    const Mesh *mesh = &m->mesh;
    o->R = 1;
    for (int k = 0; k < o->n; ++k)
        o->R *= o->sizes[k];
    o->ndev = mesh->ndev;
    o->ndev_red = mesh->ndev / o->R;
    o->rho_of = ARENA_ARRAY(arena, int, o->ndev);
    o->rep_of = ARENA_ARRAY(arena, int, o->ndev);
    o->full_of = ARENA_ARRAY(arena, int, o->ndev);
    long coords[IR_MAX_AXES];
    for (int d = 0; d < o->ndev; ++d) {
        mesh_coords(mesh, d, coords);
        long red = 0, rho = 0;
        for (int x = 0, k = 0; x < mesh->naxes; ++x) {
            if (k < o->n && o->axes[k] == x)
                rho = rho * o->sizes[k++] + coords[x];
            else
                red = red * mesh->sizes[x] + coords[x];
        }
        o->rho_of[d] = (int)rho;
        o->rep_of[d] = (int)red;
        o->full_of[rho * o->ndev_red + red] = d;
    }
    o->leading = 1;
    for (int k = 0; k < o->n; ++k)
        o->leading &= o->axes[k] == k;
    return 1;
}

/* Whether mesh axis a is a replica axis of o; its index there in *k. */
static int orbit_axis_index(const SchedOrbit *o, int a, int *k) {
    for (*k = 0; *k < o->n; ++*k)
        if (o->axes[*k] == a)
            return 1;
    return 0;
}

/* The coordinate of replica index rho on replica axis k. */
static int rho_part(const SchedOrbit *o, int rho, int k) {
    for (int j = o->n - 1; j > k; --j)
        rho /= o->sizes[j];
    return rho % o->sizes[k];
}

/* The model on the mesh without the replica axes: split dimensions that
 * many times shorter. */
static Model *reduced_model(Arena *arena, const Model *m, const SchedOrbit *o) {
    Model *r = ARENA_NEW(arena, Model);
    *r = *m;
    Mesh *mesh = &r->mesh;
    int n = 0, newidx[IR_MAX_AXES];
    for (int a = 0, k; a < m->mesh.naxes; ++a) {
        newidx[a] = n;
        if (orbit_axis_index(o, a, &k))
            continue;
        mesh->names[n] = m->mesh.names[a];
        mesh->sizes[n] = m->mesh.sizes[a];
        mesh->spans[n] = m->mesh.spans[a];
        n++;
    }
    mesh->naxes = n;
    mesh->ndev = o->ndev_red;
    r->tensors = ARENA_ARRAY(arena, ModelTensor, m->ntensors + 1);
    memcpy(r->tensors, m->tensors, sizeof(ModelTensor) * (size_t)m->ntensors);
    for (int t = 0; t < m->ntensors; ++t)
        for (int j = 0; j < m->tensors[t].ndims; ++j) {
            int k = o->tensor_dim_split[(long)t * IR_MAX_DIMS + j];
            if (k)
                r->tensors[t].sizes[j] /= o->sizes[k - 1];
        }
    r->instances = ARENA_ARRAY(arena, Instance, m->ninstances + 1);
    memcpy(r->instances, m->instances, sizeof(Instance) * (size_t)m->ninstances);
    for (int i = 0; i < m->ninstances; ++i) {
        Instance *inst = &r->instances[i];
        for (int x = 0; x < inst->op->ndims; ++x) {
            int k = o->dim_split[(long)i * IR_MAX_DIMS + x];
            if (k)
                inst->dim_sizes[x] /= o->sizes[k - 1];
        }
        for (int a = 0; a < IR_MAX_AXES; ++a)
            if (inst->axis_map[a] >= 0 && inst->axis_map[a] < m->mesh.naxes)
                inst->axis_map[a] = newidx[inst->axis_map[a]];
    }
    return r;
}

/* Replica 0's rows of a slice table, split dimensions with that many
 * times fewer slices. */
static SliceTable *reduced_table(Arena *arena, const SliceTable *st, const SchedOrbit *o,
                                 int inst) {
    SliceTable *r = ARENA_NEW(arena, SliceTable);
    *r = *st;
    r->ndev = o->ndev_red;
    r->slice = ARENA_ARRAY_UNINIT(arena, long, (long)st->ndims * r->ndev * st->steps + 1);
    for (int x = 0; x < st->ndims; ++x) {
        int k = o->dim_split[(long)inst * IR_MAX_DIMS + x];
        if (k)
            r->nslices[x] /= o->sizes[k - 1];
        for (int d = 0; d < r->ndev; ++d)
            memcpy(r->slice + ((long)x * r->ndev + d) * st->steps,
                   st->slice + ((long)x * st->ndev + o->full_of[d]) * st->steps,
                   sizeof(long) * (size_t)st->steps);
    }
    int n = 0;
    for (int a = 0, k; a < st->naxes; ++a)
        if (!orbit_axis_index(o, a, &k))
            r->axis_sizes[n++] = st->axis_sizes[a];
    r->naxes = n;
    return r;
}

/* ------------------------------------------------------------------ */
/* Expansion to the whole mesh                                         */

/* The tile id on the whole mesh, in replica rho, of reduced tile `tile`
 * of storage tensor t (whose reduced form is `red`). */
static long full_tile(const SchedOrbit *o, const SchedTensor *red, long tile, int rho) {
    long coord[IR_MAX_DIMS], rest = tile;
    for (int x = red->ndims - 1; x >= 0; --x) {
        coord[x] = rest % red->nslices[x];
        rest /= red->nslices[x];
    }
    long id = 0;
    for (int x = 0; x < red->ndims; ++x) {
        int k = o->tensor_dim_split[(long)red->model_tensor * IR_MAX_DIMS + x];
        long n = red->nslices[x] * (k ? o->sizes[k - 1] : 1);
        id = id * n + coord[x] + (k ? (long)rho_part(o, rho, k - 1) * red->nslices[x] : 0);
    }
    return id;
}

static Move *expand_move(Arena *arena, const SchedOrbit *o, const Move *mv, int naxes) {
    Move *f = ARENA_NEW(arena, Move);
    *f = *mv;
    f->ntransfers = mv->ntransfers * o->R;
    f->bytes = mv->bytes * o->R;
    f->transfers = NULL;
    memset(f->delta, 0, sizeof f->delta);
    for (int a = 0, n = 0, k; a < naxes; ++a)
        f->delta[a] = orbit_axis_index(o, a, &k) ? 0 : mv->delta[n++];
    /* have and need stay the replica's (schedule_layout_tiles). */
    /* A box conversion that moves anything: on the whole mesh no receiver
     * gets pieces from the senders of the other replicas, so it is a
     * general exchange (conversion_pattern), not an all-gather or an
     * all-to-all; a ring all-gather stays one. */
    if (mv->pattern &&
        (strcmp(mv->pattern, "all-gather") == 0 || strcmp(mv->pattern, "all-to-all") == 0))
        f->pattern = "exchange";
    return f;
}

/* The bytes each position of an all-reduce of `elems` over g members
 * sends, the last table made kept (the collectives of a phase are mostly
 * of one size). */
typedef struct BytesCache {
    long elems;
    int g;
    long *bytes;
} BytesCache;

static const long *position_bytes(Arena *arena, BytesCache *c, long elems, int g) {
    if (!c->bytes || c->elems != elems || c->g != g) {
        c->elems = elems;
        c->g = g;
        c->bytes = ARENA_ARRAY_UNINIT(arena, long, g);
        for (int p = 0; p < g; ++p)
            c->bytes[p] = (long)sched_collective_bytes(PRIME_ACT_ALLREDUCE, elems, g, p);
    }
    return c->bytes;
}

static int cmp_long(const void *x, const void *y) {
    long a = *(const long *)x, b = *(const long *)y;
    return (a > b) - (a < b);
}

/* A collective of the reduced schedule on the whole mesh: one per
 * combination of the coordinates it is not joined over, each over the
 * members of every combination of those it is joined over
 * (Collective.orbit_join), whose bytes per member are added to the
 * predictions here. */
static void expand_collective(Arena *arena, const SchedOrbit *o, Schedule *full,
                              const Schedule *red, PhaseSched *ph, const Collective *c,
                              BytesCache *cache) {
    const SchedTensor *t = &red->tensors[c->tensor];
    int join = c->orbit_join, nj = 1, nja = 0, nc = 1, nca = 0;
    long stride[IR_MAX_AXES], jstride[IR_MAX_AXES], cstride[IR_MAX_AXES];
    int jsize[IR_MAX_AXES], csize[IR_MAX_AXES];
    for (int k = o->n - 1; k >= 0; --k)
        stride[k] = k == o->n - 1 ? 1 : stride[k + 1] * o->sizes[k + 1];
    for (int k = 0; k < o->n; ++k) {
        if (join & (1 << k)) {
            jsize[nja] = o->sizes[k];
            jstride[nja++] = stride[k];
            nj *= o->sizes[k];
        } else {
            csize[nca] = o->sizes[k];
            cstride[nca++] = stride[k];
            nc *= o->sizes[k];
        }
    }
    int g = c->gsize * nj;
    ICE_ASSERT(!join || g == c->orbit_gsize);
    const long *bytes_at = join ? position_bytes(arena, cache, c->elems, g) : NULL;
    long *key = join ? ARENA_ARRAY(arena, long, g) : NULL;
    /* One copy per combination of the other axes' coordinates (its
     * joined coordinates 0). */
    for (int copy = 0; copy < nc; ++copy) {
        int rho = 0;
        for (int i = nca - 1, rest = copy; i >= 0; --i) {
            rho += (int)(rest % csize[i] * cstride[i]);
            rest /= csize[i];
        }
        Collective *f = ARENA_NEW(arena, Collective);
        *f = *c;
        f->phase = ph;
        f->action = NULL;
        f->tile = full_tile(o, t, c->tile, rho);
        f->gsize = g;
        f->orbit_gsize = 0;
        f->orbit_join = 0;
        f->group = ARENA_ARRAY(arena, int, g);
        if (!join) {
            for (int p = 0; p < g; ++p)
                f->group[p] = o->full_of[rho * o->ndev_red + c->group[p]];
        } else {
            /* Members sorted by rank, as the ring of sched_finish_accumulators
             * (a slot below MAX_SLOTS rides along). */
            for (int combo = 0, n = 0; combo < nj; ++combo) {
                long rho2 = rho, rest = combo;
                for (int i = nja - 1; i >= 0; --i) {
                    rho2 += rest % jsize[i] * jstride[i];
                    rest /= jsize[i];
                }
                for (int p = 0; p < c->gsize; ++p)
                    key[n++] = (long)o->full_of[rho2 * o->ndev_red + c->group[p]] * MAX_SLOTS +
                               c->slots[p];
            }
            int sorted = 1;
            for (int k = 1; k < g && sorted; ++k)
                sorted = key[k - 1] < key[k];
            if (!sorted)
                qsort(key, (size_t)g, sizeof(long), cmp_long);
            f->slots = ARENA_ARRAY(arena, int, g);
            f->bytes = 0;
            for (int p = 0; p < g; ++p) {
                int d = (int)(key[p] / MAX_SLOTS);
                f->group[p] = d;
                f->slots[p] = (int)(key[p] % MAX_SLOTS);
                f->bytes += bytes_at[p];
                full->pred_bytes[PRIME_BYTES_COLLECTIVE][d] += bytes_at[p];
            }
        }
        ptrvec_push(arena, &ph->collectives, f);
        ptrvec_push(arena, &ph->groups, f);
    }
}

/* How many copies of each output tile the whole mesh has per copy in one
 * replica: those of the replica axes over which the phase's output and
 * its reduction are both unsplit (every replica makes the same tile from
 * the same slices). */
static int replicated_copies(const SchedOrbit *o, const Schedule *red, const PhaseSched *ph) {
    if (ph->inst < 0)
        return 1;
    const SchedTensor *out = &red->tensors[ph->out.tensor];
    unsigned split = o->tensor_split[out->model_tensor];
    const Op *op = red->model->instances[ph->inst].op;
    for (int x = 0; x < op->ndims; ++x) {
        int k = o->dim_split[(long)ph->inst * IR_MAX_DIMS + x];
        if (k)
            split |= 1u << (k - 1);
    }
    int copies = 1;
    for (int k = 0; k < o->n; ++k)
        if (!(split & (1u << k)))
            copies *= o->sizes[k];
    return copies;
}

/* A per-rank array of the reduced mesh on the whole mesh: device d has
 * the value of its reduced rank. */
static void *spread(Arena *arena, const SchedOrbit *o, const void *red, size_t size) {
    char *out = arena_alloc_uninit(arena, size * (size_t)o->ndev + 1);
    const char *in = red;
    if (o->leading) {
        /* Replica-major: R copies of the reduced array. */
        for (int rho = 0; rho < o->R; ++rho)
            memcpy(out + size * (size_t)rho * (size_t)o->ndev_red, in, size * (size_t)o->ndev_red);
    } else {
        for (int d = 0; d < o->ndev; ++d)
            memcpy(out + size * (size_t)d, in + size * (size_t)o->rep_of[d], size);
    }
    return out;
}

static Schedule *expand(Arena *arena, const SchedOrbit *o, const Model *m,
                        const SliceTable *const *slices, const Schedule *red) {
    Schedule *s = ARENA_NEW(arena, Schedule);
    *s = *red;
    s->model = m;
    s->slices = ARENA_ARRAY(arena, SliceTable, m->ninstances);
    for (int i = 0; i < m->ninstances; ++i)
        s->slices[i] = *slices[i];
    s->tensors = ARENA_ARRAY(arena, SchedTensor, red->ntensors + 1);
    for (int t = 0; t < red->ntensors; ++t) {
        SchedTensor *f = &s->tensors[t];
        *f = red->tensors[t];
        for (int x = 0; x < f->ndims; ++x) {
            int k = o->tensor_dim_split[(long)f->model_tensor * IR_MAX_DIMS + x];
            if (k) {
                f->shape[x] *= o->sizes[k - 1];
                f->nslices[x] *= o->sizes[k - 1];
                f->ntiles *= o->sizes[k - 1];
            }
        }
    }
    /* Layouts are not expanded: the replica's, translated to a device
     * where one is read (schedule_layout_tiles). */
    s->home = red->home;
    s->final = red->final;
    for (int k = 0; k < PRIME_BYTES_KIND_COUNT; ++k)
        s->pred_bytes[k] = spread(arena, o, red->pred_bytes[k], sizeof(long));
    s->pred_peak = spread(arena, o, red->pred_peak, sizeof(long));
    memset(&s->phases, 0, sizeof s->phases);
    BytesCache cache = {0};
    for (int p = 0; p < red->phases.count; ++p) {
        const PhaseSched *rp = red->phases.items[p];
        PhaseSched *ph = ARENA_NEW(arena, PhaseSched);
        *ph = *rp;
        ph->actions = NULL;
        ph->action_cap = NULL;
        ph->action_hint = NULL;
        ph->start = NULL;
        ph->nlocal_acc = rp->nlocal_acc * o->R;
        ph->ntravel_acc = rp->ntravel_acc * o->R;
        ph->replication = rp->replication * replicated_copies(o, red, rp);
        memset(&ph->moves, 0, sizeof ph->moves);
        memset(&ph->boundary, 0, sizeof ph->boundary);
        memset(&ph->collectives, 0, sizeof ph->collectives);
        memset(&ph->groups, 0, sizeof ph->groups);
        for (int k = 0; k < rp->moves.count; ++k)
            ptrvec_push(arena, &ph->moves,
                        expand_move(arena, o, rp->moves.items[k], m->mesh.naxes));
        for (int k = 0; k < rp->boundary.count; ++k)
            ptrvec_push(arena, &ph->boundary,
                        expand_move(arena, o, rp->boundary.items[k], m->mesh.naxes));
        for (int k = 0; k < rp->collectives.count; ++k)
            expand_collective(arena, o, s, red, ph, rp->collectives.items[k], &cache);
        ptrvec_push(arena, &s->phases, ph);
    }
    s->orbit_replicas = o->R;
    s->orbit_axes = 0;
    for (int k = 0; k < o->n; ++k)
        s->orbit_axes |= 1 << o->axes[k];
    s->orbit_rep = o->rep_of;
    SchedOrbit *kept = ARENA_NEW(arena, SchedOrbit);
    *kept = *o;
    s->orbit = kept;
    s->orbit_red = red;
    return s;
}

const long *schedule_layout_tiles(Arena *arena, const Schedule *s, int t, const Layout *l, int d,
                                  int *n) {
    const SchedOrbit *o = s->orbit;
    if (!o) {
        *n = d < l->ndev ? l->count[d] : 0;
        return *n ? l->tiles[d] : NULL;
    }
    int r = o->rep_of[d];
    *n = r < l->ndev ? l->count[r] : 0;
    if (!*n)
        return NULL;
    /* The translation keeps the order: each slice index moves by a
     * constant and the radices grow alike. */
    long *tiles = ARENA_ARRAY_UNINIT(arena, long, *n);
    for (int i = 0; i < *n; ++i)
        tiles[i] = full_tile(o, &s->orbit_red->tensors[t], l->tiles[r][i], o->rho_of[d]);
    return tiles;
}

int schedule_layout_replication(const Schedule *s, int t, const Layout *l) {
    const Schedule *rs = s->orbit ? s->orbit_red : s;
    int most = layout_replication(l, rs->tensors[t].ntiles);
    if (s->orbit) {
        /* Every replica holds a copy of a tile unsplit over its axis. */
        unsigned split = s->orbit->tensor_split[rs->tensors[t].model_tensor];
        for (int k = 0; k < s->orbit->n; ++k)
            if (!(split & (1u << k)))
                most *= s->orbit->sizes[k];
    }
    return most;
}

int schedule_replica_axes(Arena *arena, const Schedule *s, int *replicas) {
    const Model *m = s->model;
    *replicas = 0;
    if (m->nstages)
        return 0;
    const Phase **list = ARENA_ARRAY(arena, const Phase *, s->phases.count + 1);
    for (int p = 0; p < s->phases.count; ++p)
        list[p] = ((const PhaseSched *)s->phases.items[p])->phase;
    const SliceTable **slices = ARENA_ARRAY(arena, const SliceTable *, m->ninstances + 1);
    for (int i = 0; i < m->ninstances; ++i)
        slices[i] = &s->slices[i];
    SchedOrbit o;
    if (!find_axes(arena, m, slices, list, s->phases.count, &o))
        return 0;
    *replicas = o.R;
    int mask = 0;
    for (int k = 0; k < o.n; ++k)
        mask |= 1 << o.axes[k];
    return mask;
}

/* "'r', 'd'": the names of the mesh axes in mask. */
const char *schedule_axis_names(Arena *arena, const Mesh *mesh, int mask) {
    const char *out = "";
    for (int a = 0; a < mesh->naxes; ++a)
        if (mask & (1 << a))
            out = arena_printf(arena, "%s%s'%s'", out, *out ? ", " : "", mesh->names[a]);
    return out;
}

Schedule *sched_orbit_check(Arena *arena, DiagSink *sink, const Model *m,
                            const SliceTable *const *slices, const PhaseList *phases) {
    if (m->nstages || getenv("PRIMEC_FULL_SIMULATION"))
        return NULL;
    clock_t t0 = clock();
    const Phase **list = ARENA_ARRAY(arena, const Phase *, phases->count + 1);
    for (int p = 0; p < phases->count; ++p)
        list[p] = &phases->items[p];
    SchedOrbit o;
    if (!find_axes(arena, m, slices, list, phases->count, &o))
        return NULL;
    Model *rm = reduced_model(arena, m, &o);
    const SliceTable **rs = ARENA_ARRAY(arena, const SliceTable *, m->ninstances + 1);
    for (int i = 0; i < m->ninstances; ++i)
        rs[i] = reduced_table(arena, slices[i], &o, i);
    clock_t t1 = clock();
    DiagSink mute;
    diag_init(&mute, sink->sources, arena, NULL);
    int broken = 0;
    Schedule *red = sched_build_orbit(arena, &mute, rm, rs, phases, &o, &broken);
    clock_t t2 = clock();
    int ok = red && !broken && mute.count == 0 && mute.error_count == 0 && mute.warning_count == 0;
    if (getenv("PRIMEC_ORBIT_STATS")) {
        int mask = 0;
        for (int k = 0; k < o.n; ++k)
            mask |= 1 << o.axes[k];
        fprintf(stderr, "%s: one replica of %d along %s simulated%s\n", m->name, o.R,
                schedule_axis_names(arena, &m->mesh, mask),
                ok       ? ""
                : broken ? ", the proof broke: every rank simulated"
                         : ", it reported: every rank simulated");
    }
    Schedule *s = ok ? expand(arena, &o, m, slices, red) : NULL;
    if (getenv("PRIMEC_ORBIT_STATS"))
        fprintf(stderr, "proof and reduction %.3f s, one replica %.3f s, expansion %.3f s\n",
                (double)(t1 - t0) / CLOCKS_PER_SEC, (double)(t2 - t1) / CLOCKS_PER_SEC,
                (double)(clock() - t2) / CLOCKS_PER_SEC);
    return s;
}
