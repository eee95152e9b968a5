/*
 * form.c — rank-parametric forms of a schedule (see form.h).
 *
 * Each rank-dependent field is fitted from a few ranks (the origin and
 * one step along each axis) and then checked on every rank; a phase is
 * kept in form only if the runtime's expansion of it equals the
 * schedule's list on every rank.
 */
#include "form.h"

#include <stdlib.h>
#include <string.h>

#include "form_fold.h"
#include "form_internal.h"

/* Fits v(rank) = (base + sum coef[a] * c[a]) mod modulus through the
 * origin and the unit ranks, then checks it on every rank. */
static int fit_affine(const Fit *f, const long *v, long modulus, PrimeAffine *out) {
    memset(out, 0, sizeof *out);
    if (modulus <= 0)
        return 0;
    out->modulus = modulus;
    out->base = v[0];
    for (int a = 0; a < f->mesh->naxes; ++a) {
        if (f->unit[a] < 0)
            continue;
        long c = (v[f->unit[a]] - v[0]) % modulus;
        out->coef[a] = c < 0 ? c + modulus : c;
    }
    /* What prime_affine_eval gives at step 0: base and coefficients lie in
     * [0, modulus) and coordinates are not negative, so one remainder of
     * the sum is the same value. */
    int naxes = f->mesh->naxes;
    for (int r = 0; r < f->ndev; ++r) {
        if (v[r] < 0 || v[r] >= modulus)
            return 0;
        const long *c = f->coords + (long)r * naxes;
        long sum = out->base;
        for (int a = 0; a < naxes; ++a)
            sum += out->coef[a] * c[a];
        if (sum % modulus != v[r])
            return 0;
    }
    return 1;
}

/* The mesh's rank of the Fit's rank r. */
static int fit_rank(const Fit *f, int r) {
    return f->rank_of ? f->rank_of[r] : r;
}

/* The delta from the origin to the rank at c, along every axis. */
static void delta_from_origin(const Fit *f, const long *c, int *delta) {
    for (int a = 0; a < f->mesh->naxes; ++a)
        delta[a] = (int)((c[a] - f->coords0[a] + f->mesh->size[a]) % f->mesh->size[a]);
}

static int shift_fits(const Fit *f, const int *peer, int *delta) {
    long pc[PRIME_MAX_AXES], c[PRIME_MAX_AXES];
    prime_mesh_coords(f->mesh, peer[0], pc);
    delta_from_origin(f, pc, delta);
    for (int r = 0; r < f->ndev; ++r) {
        const long *rc = f->coords + (long)r * f->mesh->naxes;
        for (int a = 0; a < f->mesh->naxes; ++a)
            c[a] = (rc[a] + delta[a]) % f->mesh->size[a];
        if (prime_mesh_rank(f->mesh, c) != peer[r])
            return 0;
    }
    return 1;
}

static int is_collective(int op);

/* Every field but peer, arg and slots, equal on every rank. A
 * collective's tag may differ: each group's collective has its own, and
 * a form gives all of them one (fit_group says when that is safe). */
static int same_kind(const PrimeAction *a, const PrimeAction *b) {
    if (a->op != b->op || a->tensor != b->tensor || a->kind != b->kind || a->nin != b->nin)
        return 0;
    if (a->tag != b->tag && !is_collective(a->op))
        return 0;
    for (int k = 0; k < a->nin && k < PRIME_MAX_KERNEL_INPUTS; ++k)
        if (a->in_tensor[k] != b->in_tensor[k])
            return 0;
    return 1;
}

static int same_shape(const PrimeAction *a, const PrimeAction *b) {
    if (!same_kind(a, b) || a->slot != b->slot)
        return 0;
    for (int k = 0; k < a->nin && k < PRIME_MAX_KERNEL_INPUTS; ++k)
        if (a->in_slot[k] != b->in_slot[k])
            return 0;
    return 1;
}

/* Slots that differ between ranks (differ: some rank's action i is not
 * the same shape as rank 0's) as affine functions of the coordinates,
 * modulo the tensor's slot count. NULL when they are the same everywhere;
 * *ok = 0 when they fit no such function. */
static const PrimeAffine *fit_slots(const Fit *f, const PhaseSched *ph, int i, int differ, long *v,
                                    int *ok) {
    const PrimeAction *a0 = &ph->actions[0][i];
    int nin = a0->nin < PRIME_MAX_KERNEL_INPUTS ? a0->nin : PRIME_MAX_KERNEL_INPUTS;
    *ok = 1;
    if (!differ)
        return NULL;
    PrimeAffine *out = ARENA_ARRAY(f->arena, PrimeAffine, 1 + PRIME_MAX_KERNEL_INPUTS);
    for (int k = 0; k <= nin && *ok; ++k) {
        int tensor = k ? a0->in_tensor[k - 1] : a0->tensor;
        for (int r = 0; r < f->ndev; ++r)
            v[r] = k ? ph->actions[r][i].in_slot[k - 1] : ph->actions[r][i].slot;
        *ok = fit_affine(f, v, f->s->tensors[tensor].max_slots, &out[k]);
    }
    for (int k = nin + 1; k <= PRIME_MAX_KERNEL_INPUTS; ++k)
        out[k].modulus = 1;
    return out;
}

static int has_peer(int op) {
    return op == PRIME_ACT_SEND || op == PRIME_ACT_RECV || op == PRIME_ACT_SEND_BOX ||
           op == PRIME_ACT_RECV_BOX;
}

static int is_collective(int op) {
    return op == PRIME_ACT_ALLREDUCE || op == PRIME_ACT_REDUCE_SCATTER || op == PRIME_ACT_ALLGATHER;
}

/* A table over the mesh's ranks (0 on those outside a slice). */
static int *rank_table(const Fit *f, const int *v) {
    int *t = ARENA_ARRAY(f->arena, int, f->mesh_ndev);
    for (int r = 0; r < f->ndev; ++r)
        t[fit_rank(f, r)] = v[r];
    return t;
}

/* The offset form of kernel action i, appended unless an equal one exists. */
static int fit_offsets(const Fit *f, const PhaseSched *ph, PhaseForm *pf, int i, long *scratch,
                       PrimeOffsetForm *room) {
    const SliceTable *st = &f->s->slices[ph->inst];
    PrimeOffsetForm of;
    memset(&of, 0, sizeof of);
    of.ndims = st->ndims < 8 ? st->ndims : 8;
    for (int x = 0; x < of.ndims; ++x) {
        of.scale[x] = st->extent[x];
        for (int r = 0; r < f->ndev; ++r) {
            long o = ph->offsets[ph->actions[r][i].arg][x];
            if (st->extent[x] <= 0 || o % st->extent[x])
                return -1;
            scratch[r] = o / st->extent[x];
        }
        if (!fit_affine(f, scratch, st->nslices[x], &of.dim[x]))
            return -1;
    }
    for (int r = 0; r < f->ndev; ++r)
        for (int x = of.ndims; x < 8; ++x)
            if (ph->offsets[ph->actions[r][i].arg][x] != 0)
                return -1;
    for (int k = 0; k < pf->noffset_forms; ++k)
        if (memcmp(&room[k], &of, sizeof of) == 0)
            return k;
    room[pf->noffset_forms] = of;
    return pf->noffset_forms++;
}

/* The group form of collective action i: the axes along which rank 0's
 * group spreads; every rank's group must be its sub-mesh along them.
 * Then the groups partition the mesh: members of one group run action i
 * together, and no two groups exchange a message, so every group can
 * use rank 0's tag (tags of distinct collectives stay distinct). */
static int group_matches(const Fit *f, const PhaseSched *ph, int i, const PrimeGroupForm *g,
                         int *members) {
    for (int r = 0; r < f->ndev; ++r) {
        const Collective *cr = ph->groups.items[ph->actions[r][i].arg];
        const long *rc = f->coords + (long)r * f->mesh->naxes;
        int n = prime_group_members(f->mesh, rc, g, members);
        if (n != cr->gsize || memcmp(members, cr->group, sizeof(int) * (size_t)n) != 0)
            return 0;
    }
    return 1;
}

static int fit_group(const Fit *f, const PhaseSched *ph, PhaseForm *pf, int i, int *members,
                     PrimeGroupForm *room) {
    const Collective *c0 = ph->groups.items[ph->actions[0][i].arg];
    PrimeGroupForm g;
    memset(&g, 0, sizeof g);
    long c[PRIME_MAX_AXES];
    for (int p = 0; p < c0->gsize; ++p) {
        prime_mesh_coords(f->mesh, c0->group[p], c);
        for (int a = 0; a < f->mesh->naxes; ++a)
            if (c[a] != f->coords0[a])
                g.axes |= 1u << a;
    }
    int ok = group_matches(f, ph, i, &g, members);
    /* Else a line through the origin: some member generates the group;
     * or such a line times a whole mesh axis (a line of each data-parallel
     * replica, the replicas along that axis). */
    for (int along = -1; !ok && along < f->mesh->naxes; ++along) {
        long sub = along < 0 ? 1 : f->mesh->size[along];
        if (sub < 2 && along >= 0)
            continue;
        if (c0->gsize % sub)
            continue;
        for (int p = 0; !ok && p < c0->gsize; ++p) {
            if (c0->group[p] == fit_rank(f, 0))
                continue;
            memset(&g, 0, sizeof g);
            g.count = c0->gsize / sub;
            g.axes = along < 0 ? 0 : 1u << along;
            prime_mesh_coords(f->mesh, c0->group[p], c);
            delta_from_origin(f, c, g.step);
            if (along >= 0)
                g.step[along] = 0;
            ok = group_matches(f, ph, i, &g, members);
        }
    }
    if (!ok)
        return -1;
    for (int k = 0; k < pf->ngroup_forms; ++k)
        if (memcmp(&room[k], &g, sizeof g) == 0)
            return k;
    room[pf->ngroup_forms] = g;
    return pf->ngroup_forms++;
}

/* The resolved meaning of an action on a rank, for the proof: peers and
 * args replaced by what they denote. */
static int same_meaning(const PhaseSched *ph, const PrimeAction *want, const PrimeRankPhase *v,
                        const PrimeAction *got) {
    if (!same_shape(want, got) || want->peer != got->peer)
        return 0;
    if (want->op == PRIME_ACT_KERNEL && ph->offsets)
        return memcmp(ph->offsets[want->arg], v->offsets[got->arg], sizeof(long[8])) == 0;
    if (is_collective(want->op)) {
        const Collective *c = ph->groups.items[want->arg];
        const PrimeGroup *g = &v->groups[got->arg];
        return g->size == c->gsize &&
               memcmp(g->ranks, c->group, sizeof(int) * (size_t)c->gsize) == 0;
    }
    return want->arg == got->arg;
}

/* Runs the runtime's expansion of the form on every rank and compares. */
static const char *prove_phase(const Fit *f, const PhaseSched *ph, PhaseForm *pf) {
    PrimePhase phase;
    memset(&phase, 0, sizeof phase);
    phase.name = "proof";
    phase.form = &pf->form;
    phase.offsets = pf->uses_offsets ? (const long(*)[8])ph->offsets : NULL;
    for (int r = 0; r < f->ndev; ++r) {
        PrimeRankPhase v;
        if (prime_rank_phase(&phase, fit_rank(f, r), &v) != PRIME_OK)
            return "out of memory while proving the form";
        int ok = v.nactions == ph->nactions[r];
        for (int i = 0; ok && i < v.nactions; ++i)
            ok = same_meaning(ph, &ph->actions[r][i], &v, &v.actions[i]);
        prime_rank_phase_release(&v);
        if (!ok)
            return "the expanded form differs from the per-rank schedule";
    }
    return NULL;
}

/* The fallback that a canonical order of posts may cure (form_build). */
static const char *const different_sequences = "ranks run different action sequences";

/* What differs between an action of rank 0 and the same action of some
 * other rank (fit_phase). */
enum { DIFFER_SHAPE = 1, DIFFER_PEER = 2, DIFFER_ARG = 4 };

static const char *fit_slice(const Fit *f, const PhaseSched *ph, PhaseForm *pf);

static const char *fit_phase(const Fit *f, const PhaseSched *ph, PhaseForm *pf) {
    int n = ph->nactions[0];
    for (int r = 1; r < f->ndev; ++r)
        if (ph->nactions[r] != n)
            return f->rank_of ? "ranks run different numbers of actions" : fit_slice(f, ph, pf);
    /* One pass over every rank's list in order (the lists are long and
     * apart: a pass per action across the ranks would miss the cache at
     * every rank): which actions differ from rank 0's in their slots,
     * peer or arg. */
    unsigned char *differs = ARENA_ARRAY(f->arena, unsigned char, n + 1);
    for (int r = 1; r < f->ndev; ++r) {
        for (int i = 0; i < n; ++i) {
            const PrimeAction *a0 = &ph->actions[0][i], *a = &ph->actions[r][i];
            if (!same_kind(a0, a))
                return different_sequences;
            differs[i] |= (unsigned char)((!same_shape(a0, a) ? DIFFER_SHAPE : 0) |
                                          (a->peer != a0->peer ? DIFFER_PEER : 0) |
                                          (a->arg != a0->arg ? DIFFER_ARG : 0));
        }
    }
    int nkernels = 0, ncollectives = 0;
    for (int i = 0; i < n; ++i) {
        nkernels += ph->actions[0][i].op == PRIME_ACT_KERNEL;
        ncollectives += is_collective(ph->actions[0][i].op);
    }
    /* One form per action until the steps are folded: a room reused by
     * every phase, of which the arena keeps the folded forms only. */
    PrimeActionForm *forms = form_scratch_forms(&f->scratch->forms, &f->scratch->forms_cap, n);
    /* One offset form per kernel at most, and fold_steps appends at most
     * one per kernel form of a loop. */
    PrimeOffsetForm *offs = ARENA_ARRAY_UNINIT(f->arena, PrimeOffsetForm, 2 * nkernels + 2);
    PrimeGroupForm *gforms = ARENA_ARRAY_UNINIT(f->arena, PrimeGroupForm, ncollectives + 1);
    long *scratch = ARENA_ARRAY_UNINIT(f->arena, long, f->ndev);
    int *ivals = ARENA_ARRAY_UNINIT(f->arena, int, f->ndev);
    int *members = ARENA_ARRAY_UNINIT(f->arena, int, f->mesh_ndev);
    int kernels_affine = 1, groups_fit = 1;
    int *fitted = ARENA_ARRAY(f->arena, int, n + 1); /* per action: its offset or group form */
    /* Kernels and collectives are all in form or all tables, so that a
     * rank's offsets and groups come from one place. */
    for (int i = 0; i < n && (kernels_affine || groups_fit); ++i) {
        int op = ph->actions[0][i].op;
        if (op == PRIME_ACT_KERNEL && kernels_affine && ph->offsets)
            kernels_affine = (fitted[i] = fit_offsets(f, ph, pf, i, scratch, offs)) >= 0;
        if (is_collective(op) && groups_fit)
            groups_fit = (fitted[i] = fit_group(f, ph, pf, i, members, gforms)) >= 0;
    }
    if (!kernels_affine)
        pf->noffset_forms = 0;
    for (int i = 0; i < n; ++i) {
        const PrimeAction *a0 = &ph->actions[0][i];
        PrimeActionForm *af = &forms[i];
        af->a = *a0;
        int slots_ok;
        af->slots = fit_slots(f, ph, i, differs[i] & DIFFER_SHAPE, scratch, &slots_ok);
        if (!slots_ok)
            return "ranks use slots that are no affine function of their coordinates";
        if (has_peer(a0->op)) {
            int same = !(differs[i] & DIFFER_PEER);
            for (int r = 0; r < f->ndev && !same; ++r)
                ivals[r] = ph->actions[r][i].peer;
            if (same)
                af->peer_form = PRIME_FORM_CONST;
            else if (shift_fits(f, ivals, af->delta))
                af->peer_form = PRIME_FORM_SHIFT, af->a.peer = 0;
            else
                af->peer_form = PRIME_FORM_TABLE, af->peer_table = rank_table(f, ivals),
                af->a.peer = 0, pf->ntables++;
        }
        int same_arg = !(differs[i] & DIFFER_ARG);
        if (a0->op == PRIME_ACT_KERNEL && ph->offsets && kernels_affine) {
            af->arg_form = PRIME_FORM_AFFINE;
            af->index = fitted[i];
            af->a.arg = 0;
        } else if (is_collective(a0->op) && groups_fit) {
            af->arg_form = PRIME_FORM_GROUP;
            af->index = fitted[i];
            af->a.arg = 0;
        } else if (is_collective(a0->op)) {
            return "collective groups are neither sub-meshes nor lines of the mesh";
        } else if (!same_arg || a0->op == PRIME_ACT_KERNEL) {
            /* Table args index the phase's own tables: keep them. */
            for (int r = 0; r < f->ndev; ++r)
                ivals[r] = ph->actions[r][i].arg;
            af->arg_form = PRIME_FORM_TABLE;
            af->arg_table = rank_table(f, ivals);
            af->a.arg = 0;
            pf->ntables++;
            if (a0->op == PRIME_ACT_KERNEL)
                pf->uses_offsets = 1;
        }
    }
    n = form_fold_steps(f, pf, forms, n, offs);
    PrimeActionForm *kept = ARENA_ARRAY_UNINIT(f->arena, PrimeActionForm, n + 1);
    memcpy(kept, forms, sizeof(PrimeActionForm) * (size_t)(n + 1));
    pf->form.mesh = f->mesh;
    pf->form.nforms = n;
    pf->form.forms = kept;
    pf->form.offset_forms = pf->noffset_forms ? offs : NULL;
    pf->form.group_forms = pf->ngroup_forms ? gforms : NULL;
    return prove_phase(f, ph, pf);
}

/* f restricted to the ranks whose coordinate along `axis` is `coord`
 * (f on the whole mesh): numbered among the slice's, its first rank the
 * origin. */
static void slice_fit(const Fit *f, int axis, long coord, Fit *sub) {
    const PrimeMesh *mesh = f->mesh;
    int naxes = mesh->naxes;
    int nsub = (int)(f->ndev / mesh->size[axis]);
    int *rank_of = ARENA_ARRAY_UNINIT(f->arena, int, nsub + 1);
    long *coords = ARENA_ARRAY_UNINIT(f->arena, long, (long)nsub *naxes + 1);
    int k = 0;
    for (int r = 0; r < f->ndev; ++r) {
        if (f->coords[(long)r * naxes + axis] != coord)
            continue;
        rank_of[k] = r;
        memcpy(coords + (long)k * naxes, f->coords + (long)r * naxes, sizeof(long) * (size_t)naxes);
        ++k;
    }
    *sub = *f;
    sub->ndev = nsub;
    sub->coords = coords;
    sub->rank_of = rank_of;
    memcpy(sub->coords0, coords, sizeof(long) * (size_t)naxes);
    for (int a = 0; a < naxes; ++a) {
        long c[PRIME_MAX_AXES];
        memcpy(c, coords, sizeof(long) * (size_t)naxes);
        c[a] = (c[a] + 1) % mesh->size[a];
        sub->unit[a] = -1;
        for (int q = 0; a != axis && mesh->size[a] > 1 && q < nsub; ++q)
            if (memcmp(coords + (long)q * naxes, c, sizeof(long) * (size_t)naxes) == 0)
                sub->unit[a] = q;
    }
}

/* The lists of ph on the ranks of the slice that sub fits (slice_fit). */
static PhaseSched *slice_sched(const Fit *sub, const PhaseSched *ph) {
    PhaseSched *out = ARENA_NEW(sub->arena, PhaseSched);
    *out = *ph;
    out->nactions = ARENA_ARRAY_UNINIT(sub->arena, int, sub->ndev + 1);
    out->actions = ARENA_ARRAY_UNINIT(sub->arena, PrimeAction *, sub->ndev + 1);
    for (int k = 0; k < sub->ndev; ++k) {
        out->nactions[k] = ph->nactions[sub->rank_of[k]];
        out->actions[k] = ph->actions[sub->rank_of[k]];
    }
    return out;
}

/* The ranks of one slice of the mesh, those whose coordinate along one
 * axis has one value (a pipeline stage's), when they are exactly the
 * ranks r with count[r] != 0: *sub is f restricted to them (numbered
 * among the slice's, the slice's first rank the origin) and *axis,
 * *coord say which slice. 0 when the ranks with a count are no slice. */
static int slice_of(const Fit *f, const int *count, Fit *sub, int *axis, long *coord) {
    const PrimeMesh *mesh = f->mesh;
    int naxes = mesh->naxes, first = 0;
    if (f->rank_of)
        return 0;
    while (first < f->ndev && count[first] == 0)
        ++first;
    if (first == f->ndev)
        return 0;
    const long *c0 = f->coords + (long)first * naxes;
    *axis = -1;
    for (int a = 0; a < naxes && *axis < 0; ++a) {
        if (mesh->size[a] < 2)
            continue;
        int ok = 1;
        for (int r = 0; r < f->ndev && ok; ++r)
            ok = (count[r] != 0) == (f->coords[(long)r * naxes + a] == c0[a]);
        if (ok)
            *axis = a;
    }
    if (*axis < 0)
        return 0;
    *coord = c0[*axis];
    slice_fit(f, *axis, *coord, sub);
    return 1;
}

/* A phase that only the ranks of one slice of the mesh run (slice_of),
 * the others running nothing: fitted on the slice's ranks alone, and its
 * form says which ranks run it (PrimePhaseForm.sliced). The proof covers
 * the ranks outside the slice too: their expansion must be empty. */
static const char *fit_slice(const Fit *f, const PhaseSched *ph, PhaseForm *pf) {
    static const char *const differ = "ranks run different numbers of actions";
    Fit sf;
    int axis;
    long coord;
    if (!slice_of(f, ph->nactions, &sf, &axis, &coord))
        return differ;
    pf->form.sliced = 1;
    pf->form.slice_axis = axis;
    pf->form.slice_coord = coord;
    const char *why = fit_phase(&sf, slice_sched(&sf, ph), pf);
    if (why) {
        pf->form.sliced = 0;
        return why;
    }
    /* The ranks outside the slice: nothing. */
    PrimePhase phase;
    memset(&phase, 0, sizeof phase);
    phase.name = "proof";
    phase.form = &pf->form;
    for (int r = 0; r < f->ndev; ++r) {
        if (ph->nactions[r] != 0)
            continue;
        PrimeRankPhase v;
        if (prime_rank_phase(&phase, r, &v) != PRIME_OK)
            return "out of memory while proving the form";
        int empty = v.nactions == 0;
        prime_rank_phase_release(&v);
        if (!empty)
            return "the expanded form differs from the per-rank schedule";
    }
    return NULL;
}

/* A phase that the ranks of several slices of the mesh along one axis
 * run, each slice its own list (every pipeline stage allocating its own
 * weights in the first phase; senders on one stage and receivers on the
 * next): one sliced form per slice that runs anything, fitted on that
 * slice's ranks (fit_slice's way), chained by PrimePhaseForm.next. The
 * proof expands the chain on every rank of the mesh, those in no piece's
 * slice included. */
static const char *fit_split(const Fit *f, const PhaseSched *ph, PhaseForm *pf) {
    const char *why = "ranks run different numbers of actions";
    const PrimeMesh *mesh = f->mesh;
    for (int axis = 0; axis < mesh->naxes && !f->rank_of; ++axis) {
        if (mesh->size[axis] < 2)
            continue;
        PhaseForm *head = NULL, **tail = &head;
        int npieces = 0, ok = 1;
        for (long c = 0; c < mesh->size[axis] && ok; ++c) {
            Fit sub;
            slice_fit(f, axis, c, &sub);
            int any = 0;
            for (int k = 0; k < sub.ndev && !any; ++k)
                any = ph->nactions[sub.rank_of[k]] != 0;
            if (!any)
                continue;
            PhaseForm *piece = ARENA_NEW(f->arena, PhaseForm);
            piece->form.sliced = 1;
            piece->form.slice_axis = axis;
            piece->form.slice_coord = c;
            const char *w = fit_phase(&sub, slice_sched(&sub, ph), piece);
            if (w) {
                why = w;
                ok = 0;
                break;
            }
            piece->sched = ph;
            *tail = piece;
            tail = &piece->next;
            ++npieces;
        }
        if (!ok || npieces < 2)
            continue;
        for (PhaseForm *q = head; q; q = q->next)
            q->form.next = q->next ? &q->next->form : NULL;
        *pf = *head;
        for (PhaseForm *q = head->next; q; q = q->next) {
            pf->uses_offsets |= q->uses_offsets;
            pf->ntables += q->ntables;
        }
        const char *proof = prove_phase(f, ph, pf);
        if (!proof)
            return NULL;
        memset(pf, 0, sizeof *pf);
        why = proof;
    }
    return why;
}

/* A layout in form: the same slots on every rank, each holding a tile
 * whose slice indices are affine in the coordinates. */
static PrimeLayoutForm *fit_layout(const Fit *f, const SchedTensor *t, const Layout *l);

/* Whether lf gives the mesh's rank `rank` exactly the (tile, slot) pairs,
 * as a set, of row r of l. */
static int layout_form_gives(const PrimeLayoutForm *lf, const PrimeMesh *mesh, int rank,
                             const Layout *l, int r) {
    int n = prime_layout_form_count(lf, mesh, rank);
    if (n != l->count[r])
        return 0;
    for (int i = 0; i < n; ++i) {
        long id;
        int sl, found = 0;
        prime_layout_form_tile(lf, mesh, rank, i, &id, &sl);
        for (int k = 0; k < n && !found; ++k)
            found = l->tiles[r][k] == id && l->slots[r][k] == sl;
        if (!found)
            return 0;
    }
    return 1;
}

/* A layout that only the ranks of one slice of the mesh hold tiles of
 * (slice_of; a pipeline stage's weights): fitted on those ranks, and its
 * form says which they are (PrimeLayoutForm.sliced). */
static PrimeLayoutForm *fit_sliced_layout(const Fit *f, const SchedTensor *t, const Layout *l) {
    Fit sf;
    int axis;
    long coord;
    if (!slice_of(f, l->count, &sf, &axis, &coord))
        return NULL;
    Layout sub = *l;
    sub.ndev = sf.ndev;
    sub.count = ARENA_ARRAY_UNINIT(f->arena, int, sf.ndev + 1);
    sub.tiles = ARENA_ARRAY_UNINIT(f->arena, long *, sf.ndev + 1);
    sub.slots = ARENA_ARRAY_UNINIT(f->arena, int *, sf.ndev + 1);
    sub.cap = NULL;
    for (int k = 0; k < sf.ndev; ++k) {
        sub.count[k] = l->count[sf.rank_of[k]];
        sub.tiles[k] = l->tiles[sf.rank_of[k]];
        sub.slots[k] = l->slots[sf.rank_of[k]];
    }
    PrimeLayoutForm *lf = fit_layout(&sf, t, &sub);
    if (!lf)
        return NULL;
    lf->sliced = 1;
    lf->slice_axis = axis;
    lf->slice_coord = coord;
    /* The proof of the slice's ranks ran in fit_layout before the form
     * was sliced: run it again on every rank of the mesh. */
    for (int r = 0; r < f->ndev; ++r)
        if (!layout_form_gives(lf, f->mesh, r, l, r))
            return NULL;
    return lf;
}

static PrimeLayoutForm *fit_layout(const Fit *f, const SchedTensor *t, const Layout *l) {
    int n = l->count[0];
    for (int r = 1; r < f->ndev; ++r)
        if (l->count[r] != n)
            return fit_sliced_layout(f, t, l);
    int *slot = ARENA_ARRAY(f->arena, int, n + 1);
    PrimeAffine *coord = ARENA_ARRAY(f->arena, PrimeAffine, (size_t)n * (size_t)t->ndims + 1);
    long *v = ARENA_ARRAY_UNINIT(f->arena, long, f->ndev);
    long *tile = ARENA_ARRAY_UNINIT(f->arena, long, f->ndev);
    for (int i = 0; i < n; ++i) {
        slot[i] = l->slots[0][i];
        for (int r = 0; r < f->ndev; ++r) {
            int k = 0;
            while (k < n && l->slots[r][k] != slot[i])
                ++k;
            if (k == n)
                return NULL;
            tile[r] = l->tiles[r][k];
        }
        for (int x = 0; x < t->ndims; ++x) {
            for (int r = 0; r < f->ndev; ++r)
                v[r] = sched_tile_coord(t, tile[r], x);
            if (!fit_affine(f, v, t->nslices[x], &coord[i * t->ndims + x]))
                return NULL;
        }
    }
    PrimeLayoutForm *lf = ARENA_NEW(f->arena, PrimeLayoutForm);
    lf->count = n;
    lf->ndims = t->ndims;
    lf->nslices = t->nslices;
    lf->slot = slot;
    lf->coord = coord;
    /* The proof: every rank's (tile, slot) pairs, as a set, are its own. */
    for (int r = 0; r < f->ndev; ++r)
        if (!layout_form_gives(lf, f->mesh, fit_rank(f, r), l, r))
            return NULL;
    return lf;
}

int form_layer_copies(const Model *m) {
    if (m->layer_count > 0)
        return m->layer_count;
    /* Micro-batches zero layer_count (resolve_stages), which keeps each
     * micro-batch's copies. */
    return m->nmicro > 1 ? m->micro_layer_copies : 0;
}

/* The layer copy an instance is in, or -1: with micro-batches, the copy
 * of its micro-batch's layer (each micro-batch's instances are the
 * first's, in order). */
static int layer_of_instance(const Model *m, int i) {
    int copies = form_layer_copies(m);
    if (m->nmicro > 1 && m->ninstances % m->nmicro == 0)
        i %= m->ninstances / m->nmicro;
    if (copies <= 0 || m->layer_size <= 0 || i < m->layer_first ||
        i >= m->layer_first + m->layer_size * copies)
        return -1;
    return (i - m->layer_first) / m->layer_size;
}

typedef struct TensorKey {
    int layer; /* -1: outside the repeated layer */
    int role;  /* the model tensor's position among its layer's */
    int is_grad;
    int tiling; /* how many storage tensors of the same value come before */
    int index;
} TensorKey;

static int cmp_key(const void *pa, const void *pb) {
    const TensorKey *a = pa, *b = pb;
    if ((a->layer < 0) != (b->layer < 0))
        return a->layer < 0 ? -1 : 1;
    if (a->layer < 0)
        return (a->index > b->index) - (a->index < b->index);
    int d[4] = {a->layer - b->layer, a->role - b->role, a->is_grad - b->is_grad,
                a->tiling - b->tiling};
    for (int k = 0; k < 4; ++k)
        if (d[k])
            return d[k] < 0 ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

static void number_tensors(Arena *arena, const Schedule *s, ScheduleForm *sf) {
    const Model *m = s->model;
    int n = s->ntensors;
    int *mt_layer = ARENA_ARRAY(arena, int, m->ntensors + 1);
    int *mt_role = ARENA_ARRAY(arena, int, m->ntensors + 1);
    for (int t = 0; t < m->ntensors; ++t)
        mt_layer[t] = -2; /* not yet seen */
    for (int i = 0; i < m->ninstances; ++i) {
        const Instance *inst = &m->instances[i];
        int l = layer_of_instance(m, i);
        /* A copy's results and the leaves only it reads are its own;
         * with micro-batches the model's inputs are no copy's (a later
         * micro-batch's input, which only its first copy reads, would
         * widen the first block between the micro-batches' tensors and
         * shift them unequally). Without, the input stays in the first
         * block, where the runs found are longer (opt_small_megatron at
         * 8 layers: 293 KB of C against 319 KB with it outside). */
        for (int a = 0; a <= inst->op->ninputs; ++a) {
            int t = a < inst->op->ninputs ? inst->args[a] : inst->result;
            int leaf = m->tensors[t].producer < 0 &&
                       (m->nmicro < 2 || m->tensors[t].role == TENSOR_WEIGHT);
            if (a == inst->op->ninputs || leaf)
                mt_layer[t] = mt_layer[t] == -2 || mt_layer[t] == l ? l : -1;
        }
    }
    int *next_role = ARENA_ARRAY(arena, int, form_layer_copies(m) + 1);
    for (int t = 0; t < m->ntensors; ++t) {
        if (mt_layer[t] == -2)
            mt_layer[t] = -1;
        mt_role[t] = mt_layer[t] >= 0 ? next_role[mt_layer[t]]++ : 0;
    }
    TensorKey *keys = ARENA_ARRAY(arena, TensorKey, n + 1);
    int *seen = ARENA_ARRAY(arena, int, 2 * m->ntensors + 1);
    for (int t = 0; t < n; ++t) {
        const SchedTensor *ts = &s->tensors[t];
        int v = 2 * ts->model_tensor + ts->is_grad;
        keys[t] = (TensorKey){mt_layer[ts->model_tensor], mt_role[ts->model_tensor], ts->is_grad,
                              seen[v]++, t};
    }
    qsort(keys, (size_t)n, sizeof *keys, cmp_key);
    sf->tensor_number = ARENA_ARRAY(arena, int, n + 1);
    sf->tensor_at = ARENA_ARRAY(arena, int, n + 1);
    for (int k = 0; k < n; ++k) {
        sf->tensor_at[k] = keys[k].index;
        sf->tensor_number[keys[k].index] = k;
        sf->layer_block += keys[k].layer == 1;
    }
}

/* ---- Canonical order of posts ------------------------------------- */

/* Actions that only post work (allocations, sends, receives, box
 * copies) and can trade places: between two other actions nothing is
 * freed, every receive and box send completes at the next wait, and a
 * tile's allocation precedes any use of it. */
static int is_post(int op) {
    return op == PRIME_ACT_ALLOC || op == PRIME_ACT_SEND || op == PRIME_ACT_RECV ||
           op == PRIME_ACT_SEND_BOX || op == PRIME_ACT_RECV_BOX || op == PRIME_ACT_COPY_BOX;
}

typedef struct PostKey {
    int cls; /* 0 alloc, 1 copy, 2 receive, 3 send */
    int tensor;
    long delta; /* the peer relative to the rank, row-major over the mesh */
    int index;  /* original position: keeps messages to one peer in order */
} PostKey;

static int cmp_post(const void *pa, const void *pb) {
    const PostKey *a = pa, *b = pb;
    long d[4] = {a->cls - b->cls, a->tensor - b->tensor, a->delta - b->delta, a->index - b->index};
    for (int k = 0; k < 4; ++k)
        if (d[k])
            return d[k] < 0 ? -1 : 1;
    return 0;
}

static long relative_peer(const PrimeMesh *mesh, int rank, int peer) {
    long c[PRIME_MAX_AXES], p[PRIME_MAX_AXES], key = 0;
    prime_mesh_coords(mesh, rank, c);
    prime_mesh_coords(mesh, peer, p);
    for (int a = 0; a < mesh->naxes; ++a)
        key = key * mesh->size[a] + (p[a] - c[a] + mesh->size[a]) % mesh->size[a];
    return key;
}

PhaseSched *form_canonical_phase(Arena *arena, const PhaseSched *ph, const PrimeMesh *mesh,
                                 int ndev) {
    PhaseSched *c = ARENA_NEW(arena, PhaseSched);
    *c = *ph;
    c->actions = ARENA_ARRAY(arena, PrimeAction *, ndev + 1);
    for (int r = 0; r < ndev; ++r) {
        int n = ph->nactions[r];
        PrimeAction *out = ARENA_ARRAY_UNINIT(arena, PrimeAction, n + 1);
        PostKey *keys = ARENA_ARRAY_UNINIT(arena, PostKey, n + 1);
        for (int i = 0; i < n;) {
            int j = i;
            while (j < n && is_post(ph->actions[r][j].op))
                ++j;
            if (j == i) {
                out[i] = ph->actions[r][i];
                ++i;
                continue;
            }
            for (int k = i; k < j; ++k) {
                const PrimeAction *a = &ph->actions[r][k];
                int cls = a->op == PRIME_ACT_ALLOC                                 ? 0
                          : a->op == PRIME_ACT_COPY_BOX                            ? 1
                          : a->op == PRIME_ACT_RECV || a->op == PRIME_ACT_RECV_BOX ? 2
                                                                                   : 3;
                keys[k - i] =
                    (PostKey){cls, a->tensor, cls >= 2 ? relative_peer(mesh, r, a->peer) : 0, k};
            }
            qsort(keys, (size_t)(j - i), sizeof *keys, cmp_post);
            for (int k = i; k < j; ++k)
                out[k] = ph->actions[r][keys[k - i].index];
            i = j;
        }
        c->actions[r] = out;
    }
    return c;
}

ScheduleForm *form_build(Arena *arena, const Schedule *s) {
    const Mesh *m = &s->model->mesh;
    ScheduleForm *sf = ARENA_NEW(arena, ScheduleForm);
    sf->mesh.naxes = m->naxes;
    for (int a = 0; a < m->naxes; ++a)
        sf->mesh.size[a] = m->sizes[a];
    FitScratch scratch = {NULL, NULL, NULL, 0, NULL, 0, NULL, NULL, 0, NULL, 0, NULL, 0};
    Fit f = {.arena = arena,
             .scratch = &scratch,
             .s = s,
             .mesh = &sf->mesh,
             .ndev = m->ndev,
             .mesh_ndev = m->ndev};
    long *coords = ARENA_ARRAY_UNINIT(arena, long, (long)m->ndev * m->naxes + 1);
    for (int r = 0; r < m->ndev; ++r)
        prime_mesh_coords(&sf->mesh, r, coords + (long)r * m->naxes);
    f.coords = coords;
    for (int a = 0; a < m->naxes; ++a) {
        long c[PRIME_MAX_AXES] = {0};
        c[a] = 1;
        f.unit[a] = m->sizes[a] > 1 ? prime_mesh_rank(&sf->mesh, c) : -1;
    }
    sf->phases = ARENA_ARRAY(arena, PhaseForm, s->phases.count + 1);
    for (int k = 0; k < s->phases.count; ++k) {
        PhaseForm *pf = &sf->phases[k];
        const PhaseSched *ph = s->phases.items[k];
        pf->fallback = fit_phase(&f, ph, pf);
        pf->sched = ph;
        const PhaseSched *canon = NULL;
        if (pf->fallback == different_sequences) {
            /* Posts in a canonical order (sends and receives by their
             * peer's offset) may be the same on every rank. */
            PhaseForm retry;
            memset(&retry, 0, sizeof retry);
            canon = form_canonical_phase(arena, ph, &sf->mesh, m->ndev);
            if (!fit_phase(&f, canon, &retry)) {
                *pf = retry;
                pf->reordered = 1;
                pf->sched = canon;
            }
        }
        if (pf->fallback) {
            /* Every slice along an axis (a pipeline stage) its own list,
             * in the schedule's order or the canonical one. */
            PhaseForm split;
            memset(&split, 0, sizeof split);
            if (!fit_split(&f, ph, &split)) {
                *pf = split;
                pf->sched = ph;
            } else {
                if (!canon)
                    canon = form_canonical_phase(arena, ph, &sf->mesh, m->ndev);
                memset(&split, 0, sizeof split);
                if (!fit_split(&f, canon, &split)) {
                    *pf = split;
                    pf->reordered = 1;
                    pf->sched = canon;
                    for (PhaseForm *q = pf->next; q; q = q->next)
                        q->sched = canon;
                }
            }
        }
        if (pf->fallback)
            sf->nfallback++;
    }
    free(scratch.loop);
    free(scratch.loop_off);
    free(scratch.loop_slots);
    free(scratch.lcs);
    free(scratch.runs);
    free(scratch.runs_looped);
    free(scratch.forms);
    free(scratch.steps);
    sf->home = ARENA_ARRAY(arena, PrimeLayoutForm *, s->ntensors + 1);
    sf->final = ARENA_ARRAY(arena, PrimeLayoutForm *, s->ntensors + 1);
    for (int t = 0; t < s->ntensors; ++t) {
        const SchedTensor *ts = &s->tensors[t];
        if (ts->fill_phase >= 0 && !(sf->home[t] = fit_layout(&f, ts, &s->home[t])))
            sf->nlayout_fallback++;
        if (ts->check && !(sf->final[t] = fit_layout(&f, ts, &s->final[t])))
            sf->nlayout_fallback++;
    }
    number_tensors(arena, s, sf);
    form_fold_layer_actions(arena, s, sf);
    sf->predicted_uniform = 1;
    for (int r = 1; r < m->ndev; ++r) {
        for (int kind = 0; kind < PRIME_BYTES_KIND_COUNT; ++kind)
            if (s->pred_bytes[kind][r] != s->pred_bytes[kind][0])
                sf->predicted_uniform = 0;
        if (s->pred_peak[r] != s->pred_peak[0])
            sf->predicted_uniform = 0;
    }
    return sf;
}
