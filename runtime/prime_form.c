/*
 * prime_form.c — expansion of rank-parametric phases and layouts (see
 * prime_form.h). The compiler runs this same code to prove its forms
 * equal its per-rank schedule, so keep it free of any backend.
 */
#include "prime_form.h"

#include <stdlib.h>
#include <string.h>

void prime_mesh_coords(const PrimeMesh *mesh, int rank, long *coords) {
    for (int a = mesh->naxes - 1; a >= 0; --a) {
        coords[a] = rank % mesh->size[a];
        rank = (int)(rank / mesh->size[a]);
    }
}

int prime_mesh_rank(const PrimeMesh *mesh, const long *coords) {
    long r = 0;
    for (int a = 0; a < mesh->naxes; ++a)
        r = r * mesh->size[a] + coords[a];
    return (int)r;
}

long prime_affine_eval(const PrimeAffine *f, const PrimeMesh *mesh, const long *coords, long it) {
    long v = (f->base % f->modulus + (f->tcoef % f->modulus) * (it % f->modulus)) % f->modulus;
    for (int a = 0; a < mesh->naxes; ++a)
        v = (v + (f->coef[a] % f->modulus) * (coords[a] % f->modulus)) % f->modulus;
    return v < 0 ? v + f->modulus : v;
}

static int shifted_peer(const PrimeMesh *mesh, const long *coords, const int *delta) {
    long pc[PRIME_MAX_AXES];
    for (int a = 0; a < mesh->naxes; ++a) {
        long v = (coords[a] + delta[a]) % mesh->size[a];
        pc[a] = v < 0 ? v + mesh->size[a] : v;
    }
    return prime_mesh_rank(mesh, pc);
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Points of the sub-mesh along g->axes (1 when there are none). */
static long submesh_size(const PrimeMesh *mesh, const PrimeGroupForm *g) {
    long n = 1;
    for (int a = 0; a < mesh->naxes; ++a)
        if (g->axes & (1u << a))
            n *= mesh->size[a];
    return n;
}

static long group_size(const PrimeMesh *mesh, const PrimeGroupForm *g) {
    return (g->count > 0 ? g->count : 1) * submesh_size(mesh, g);
}

/* Members of a group form on the rank at `coords`, ascending: the
 * sub-mesh through the rank along g->axes, or, with a count, the line of
 * count points along g->step through it, times the sub-mesh along
 * g->axes when there are axes too (the step is 0 along them). */
int prime_group_members(const PrimeMesh *mesh, const long *coords, const PrimeGroupForm *g,
                        int *out) {
    long size = group_size(mesh, g), sub = submesh_size(mesh, g);
    for (long k = 0; k < size; ++k) {
        long c[PRIME_MAX_AXES], rest = k % sub, along = k / sub;
        for (int a = mesh->naxes - 1; a >= 0; --a) {
            if (g->axes & (1u << a)) {
                c[a] = rest % mesh->size[a];
                rest /= mesh->size[a];
            } else if (g->count > 0) {
                c[a] = (coords[a] + (along % mesh->size[a]) * g->step[a]) % mesh->size[a];
            } else {
                c[a] = coords[a];
            }
        }
        out[k] = prime_mesh_rank(mesh, c);
    }
    if (g->count > 0)
        qsort(out, (size_t)size, sizeof(int), cmp_int);
    return (int)size;
}

static int has_tensor(int op) {
    return prime_action_has_tensor(op);
}

/* The concrete action of form af at loop iteration `it` on the rank at
 * coords; offsets and group members go to the next free row of v. */
static void expand_action(const PrimePhaseForm *f, const PrimeActionForm *af, long it, int rank,
                          const long *coords, PrimeRankPhase *v, int *k, int *g, long *m) {
    const PrimeMesh *mesh = f->mesh;
    PrimeAction *a = &v->own_actions[v->nactions++];
    *a = af->a;
    a->arg = (int)(a->arg + it * af->dstep_arg);
    a->tag = (int)(a->tag + it * af->dstep_tag);
    if (af->dstep_tensor && has_tensor(a->op)) {
        a->tensor = (int)(a->tensor + it * af->dstep_tensor);
        for (int x = 0; x < a->nin && x < PRIME_MAX_KERNEL_INPUTS; ++x)
            a->in_tensor[x] = (int)(a->in_tensor[x] + it * af->dstep_tensor);
    }
    if (af->slots) {
        a->slot = (int)prime_affine_eval(&af->slots[0], mesh, coords, it);
        for (int x = 0; x < a->nin && x < PRIME_MAX_KERNEL_INPUTS; ++x)
            a->in_slot[x] = (int)prime_affine_eval(&af->slots[1 + x], mesh, coords, it);
    }
    if (af->peer_form == PRIME_FORM_SHIFT)
        a->peer = shifted_peer(mesh, coords, af->delta);
    else if (af->peer_form == PRIME_FORM_TABLE)
        a->peer = af->peer_table[rank];
    if (af->arg_form == PRIME_FORM_TABLE) {
        a->arg = af->arg_table[rank];
    } else if (af->arg_form == PRIME_FORM_AFFINE) {
        const PrimeOffsetForm *of = &f->offset_forms[af->index];
        memset(v->own_offsets[*k], 0, sizeof v->own_offsets[*k]);
        for (int x = 0; x < of->ndims; ++x)
            v->own_offsets[*k][x] = of->scale[x] * prime_affine_eval(&of->dim[x], mesh, coords, it);
        a->arg = (*k)++;
    } else if (af->arg_form == PRIME_FORM_GROUP) {
        int *ranks = v->own_ranks + *m;
        int size = prime_group_members(mesh, coords, &f->group_forms[af->index], ranks);
        v->own_groups[*g].size = size;
        v->own_groups[*g].ranks = ranks;
        *m += size;
        a->arg = (*g)++;
    }
}

/* Where a form's run ends: a loop head covers its body, another form
 * itself; *reps is how many times the run repeats. */
static int run_end(const PrimePhaseForm *f, int i, long *reps) {
    const PrimeActionForm *af = &f->forms[i];
    if (af->repeat > 1 && af->body > 0) {
        *reps = af->repeat;
        return i + af->body < f->nforms ? i + af->body : f->nforms;
    }
    *reps = 1;
    return i + 1;
}

static PrimeStatus expand_form(const PrimePhase *phase, const PrimePhaseForm *f, int rank,
                               const long *coords, PrimeRankPhase *v) {
    const PrimeMesh *mesh = f->mesh;
    long nactions = 0, nkernels = 0, ngroups = 0, nmembers = 0;
    for (int i = 0; i < f->nforms;) {
        long reps;
        int end = run_end(f, i, &reps);
        for (int j = i; j < end; ++j) {
            long runs = 0;
            for (long it = 0; it < reps; ++it)
                runs += prime_form_runs(f->forms[j].skip, it, reps);
            nactions += runs;
            if (f->forms[j].arg_form == PRIME_FORM_AFFINE)
                nkernels += runs;
            if (f->forms[j].arg_form == PRIME_FORM_GROUP) {
                ngroups += runs;
                nmembers += runs * group_size(mesh, &f->group_forms[f->forms[j].index]);
            }
        }
        i = end;
    }
    if (nactions > 0x7fffffffL)
        return PRIME_ERR_ARG;
    v->own_actions = malloc(sizeof(PrimeAction) * (size_t)(nactions > 0 ? nactions : 1));
    v->own_offsets = malloc(sizeof(long[8]) * (size_t)(nkernels > 0 ? nkernels : 1));
    v->own_groups = malloc(sizeof(PrimeGroup) * (size_t)(ngroups > 0 ? ngroups : 1));
    v->own_ranks = malloc(sizeof(int) * (size_t)(nmembers > 0 ? nmembers : 1));
    if (!v->own_actions || !v->own_offsets || !v->own_groups || !v->own_ranks)
        return PRIME_ERR_NOMEM;
    int k = 0, g = 0;
    long m = 0;
    v->nactions = 0;
    for (int i = 0; i < f->nforms;) {
        long reps;
        int end = run_end(f, i, &reps);
        for (long it = 0; it < reps; ++it)
            for (int j = i; j < end; ++j)
                if (prime_form_runs(f->forms[j].skip, it, reps))
                    expand_action(f, &f->forms[j], it, rank, coords, v, &k, &g, &m);
        i = end;
    }
    v->actions = v->own_actions;
    /* Table-form args index the phase's own tables; affine and group
     * args index the rank's. A phase mixes them only for boxes (always
     * the phase's), so the two kinds never share a table. */
    v->offsets = nkernels ? (const long(*)[8])v->own_offsets : phase->offsets;
    v->groups = ngroups ? v->own_groups : phase->groups;
    return PRIME_OK;
}

static int has_tag(int op) {
    return prime_action_has_tag(op);
}

PrimeStatus prime_rank_phase_shifted(const PrimePhase *phase, int rank, int dtensor, int dtag,
                                     PrimeRankPhase *v) {
    PrimeStatus st = prime_rank_phase(phase, rank, v);
    if (st != PRIME_OK || (dtensor == 0 && dtag == 0))
        return st;
    if (!v->own_actions) {
        v->own_actions = malloc(sizeof(PrimeAction) * (size_t)(v->nactions > 0 ? v->nactions : 1));
        if (!v->own_actions) {
            prime_rank_phase_release(v);
            return PRIME_ERR_NOMEM;
        }
        if (v->nactions > 0)
            memcpy(v->own_actions, v->actions, sizeof(PrimeAction) * (size_t)v->nactions);
        v->actions = v->own_actions;
    }
    for (int i = 0; i < v->nactions; ++i) {
        PrimeAction *a = &v->own_actions[i];
        if (has_tensor(a->op)) {
            a->tensor += dtensor;
            for (int k = 0; k < a->nin && k < PRIME_MAX_KERNEL_INPUTS; ++k)
                a->in_tensor[k] += dtensor;
        }
        if (has_tag(a->op))
            a->tag += dtag;
    }
    return PRIME_OK;
}

PrimeStatus prime_rank_phase(const PrimePhase *phase, int rank, PrimeRankPhase *v) {
    memset(v, 0, sizeof *v);
    v->name = phase->name;
    v->kernels = phase->kernels;
    v->groups = phase->groups;
    v->boxes = phase->boxes;
    v->offsets = phase->offsets;
    if (!phase->form) {
        v->actions = phase->actions[rank];
        v->nactions = phase->nactions[rank];
        return PRIME_OK;
    }
    long coords[PRIME_MAX_AXES];
    prime_mesh_coords(phase->form->mesh, rank, coords);
    const PrimePhaseForm *f = phase->form;
    while (f && f->sliced && coords[f->slice_axis] != f->slice_coord)
        f = f->next;
    if (!f)
        return PRIME_OK; /* nothing on this rank */
    PrimeStatus st = expand_form(phase, f, rank, coords, v);
    if (st != PRIME_OK)
        prime_rank_phase_release(v);
    return st;
}

void prime_rank_phase_release(PrimeRankPhase *v) {
    free(v->own_actions);
    free(v->own_groups);
    free(v->own_ranks);
    free(v->own_offsets);
    v->own_actions = NULL;
    v->own_groups = NULL;
    v->own_ranks = NULL;
    v->own_offsets = NULL;
}

int prime_layout_form_count(const PrimeLayoutForm *f, const PrimeMesh *mesh, int rank) {
    if (!f->sliced)
        return f->count;
    long coords[PRIME_MAX_AXES];
    prime_mesh_coords(mesh, rank, coords);
    return coords[f->slice_axis] == f->slice_coord ? f->count : 0;
}

void prime_layout_form_tile(const PrimeLayoutForm *f, const PrimeMesh *mesh, int rank, int i,
                            long *tile, int *slot) {
    long coords[PRIME_MAX_AXES];
    prime_mesh_coords(mesh, rank, coords);
    long id = 0;
    for (int x = 0; x < f->ndims; ++x)
        id = id * f->nslices[x] + prime_affine_eval(&f->coord[i * f->ndims + x], mesh, coords, 0);
    *tile = id;
    *slot = f->slot[i];
}
