/*
 * form_fold.c — the copies of a repeated layer, folded (see form_fold.h).
 */
#include "form_fold.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_collective(int op) {
    return op == PRIME_ACT_ALLREDUCE || op == PRIME_ACT_REDUCE_SCATTER || op == PRIME_ACT_ALLGATHER;
}

/* ---- Loops over a layer's copies inside a phase -------------------- */

static int has_tensor_op(int op) {
    return prime_action_has_tensor(op);
}

static int has_tag_op(int op) {
    return prime_action_has_tag(op);
}

PrimePhaseForm form_numbered(Arena *arena, const ScheduleForm *sf, const PrimePhaseForm *f) {
    PrimePhaseForm out = *f;
    PrimeActionForm *forms = ARENA_ARRAY(arena, PrimeActionForm, f->nforms + 1);
    for (int i = 0; i < f->nforms; ++i) {
        memcpy(&forms[i], &f->forms[i], sizeof forms[i]);
        PrimeAction *a = &forms[i].a;
        if (!has_tensor_op(a->op))
            continue;
        a->tensor = sf->tensor_number[a->tensor];
        for (int k = 0; k < a->nin && k < PRIME_MAX_KERNEL_INPUTS; ++k)
            a->in_tensor[k] = sf->tensor_number[a->in_tensor[k]];
    }
    out.forms = forms;
    if (f->next) {
        PrimePhaseForm *next = ARENA_NEW(arena, PrimePhaseForm);
        *next = form_numbered(arena, sf, f->next);
        out.next = next;
    }
    return out;
}

/* The shifts of a loop over layer copies: tensors and tags per copy,
 * each set by the first form that has one. */
typedef struct CopyShift {
    int set_tensor, set_tag;
    long dtensor, dtag;
} CopyShift;

static int slots_equal(const PrimeAffine *x, const PrimeAffine *y) {
    if (!x || !y)
        return x == y;
    for (int k = 0; k <= PRIME_MAX_KERNEL_INPUTS; ++k)
        if (x[k].tcoef || memcmp(&x[k], &y[k], sizeof x[k]) != 0)
            return 0;
    return 1;
}

/* Whether b = a + copies * *d, setting *d on the first use. */
static int shifted_by(int *set, long *d, long a, long b, long copies) {
    if (!*set) {
        if ((b - a) % copies)
            return 0;
        *d = (b - a) / copies;
        *set = 1;
    }
    return b == a + copies * *d;
}

/* Whether form y (numbered) is form x (numbered) `copies` copies later:
 * every tensor shifted by copies * dtensor, the tag by copies * dtag,
 * everything else equal. */
static int copy_of(const PrimeActionForm *x, const PrimeActionForm *y, long copies, CopyShift *sh) {
    if (x->repeat > 1 || y->repeat > 1 || x->peer_form == PRIME_FORM_TABLE ||
        x->arg_form == PRIME_FORM_TABLE || y->peer_form == PRIME_FORM_TABLE ||
        y->arg_form == PRIME_FORM_TABLE || x->a.op != y->a.op || !slots_equal(x->slots, y->slots))
        return 0;
    PrimeActionForm u;
    memcpy(&u, y, sizeof u);
    int op = x->a.op;
    if (has_tensor_op(op)) {
        if (!shifted_by(&sh->set_tensor, &sh->dtensor, x->a.tensor, u.a.tensor, copies))
            return 0;
        u.a.tensor = x->a.tensor;
        for (int k = 0; k < u.a.nin && k < PRIME_MAX_KERNEL_INPUTS; ++k) {
            if (!shifted_by(&sh->set_tensor, &sh->dtensor, x->a.in_tensor[k], u.a.in_tensor[k],
                            copies))
                return 0;
            u.a.in_tensor[k] = x->a.in_tensor[k];
        }
    }
    if (has_tag_op(op)) {
        if (!shifted_by(&sh->set_tag, &sh->dtag, x->a.tag, u.a.tag, copies))
            return 0;
        u.a.tag = x->a.tag;
    }
    u.slots = x->slots;
    return memcmp(x, &u, sizeof u) == 0;
}

/* How many copies of the forms [p, p + len) follow from p, the first
 * included; every form of them is outside the phase's step loops. */
static long action_copies(const PrimeActionForm *forms, const unsigned char *looped, int n, int p,
                          int len, CopyShift *sh) {
    long reps = 1;
    memset(sh, 0, sizeof *sh);
    while (p + (reps + 1) * len <= n) {
        CopyShift trial = *sh;
        int ok = 1;
        for (int j = 0; j < len && ok; ++j) {
            int q = (int)(p + reps * len + j);
            ok = !looped[q] && copy_of(&forms[p + j], &forms[q], reps, &trial);
        }
        if (!ok)
            break;
        *sh = trial;
        ++reps;
    }
    return reps;
}

/* The expansions of two forms of one phase are equal on every rank:
 * actions, kernel tile origins and collective groups. */
static int same_expansion(const PrimePhaseForm *a, const PrimePhaseForm *b, const PhaseForm *pf,
                          int ndev) {
    PrimePhase pa, pb;
    memset(&pa, 0, sizeof pa);
    pa.name = "proof";
    pa.offsets = pf->uses_offsets ? (const long(*)[8])pf->sched->offsets : NULL;
    pb = pa;
    pa.form = a;
    pb.form = b;
    int ok = 1;
    for (int r = 0; r < ndev && ok; ++r) {
        PrimeRankPhase va, vb;
        PrimeStatus sa = prime_rank_phase(&pa, r, &va), sb = prime_rank_phase(&pb, r, &vb);
        ok = sa == PRIME_OK && sb == PRIME_OK && va.nactions == vb.nactions;
        for (int i = 0; ok && i < va.nactions; ++i) {
            const PrimeAction *x = &va.actions[i], *y = &vb.actions[i];
            ok = memcmp(x, y, sizeof *x) == 0;
            if (ok && x->op == PRIME_ACT_KERNEL && va.offsets && vb.offsets)
                ok = memcmp(va.offsets[x->arg], vb.offsets[y->arg], sizeof(long[8])) == 0;
            if (ok && is_collective(x->op) && va.groups && vb.groups)
                ok = va.groups[x->arg].size == vb.groups[y->arg].size &&
                     memcmp(va.groups[x->arg].ranks, vb.groups[y->arg].ranks,
                            sizeof(int) * (size_t)va.groups[x->arg].size) == 0;
        }
        if (sa == PRIME_OK)
            prime_rank_phase_release(&va);
        if (sb == PRIME_OK)
            prime_rank_phase_release(&vb);
    }
    return ok;
}

static int cmp_int(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    return (a > b) - (a < b);
}

/* Whether two of the phase's actions name tensors one layer block
 * apart: the condition of every loop over copies (most phases have
 * none, and are not copied to find out). */
static int has_copies(const ScheduleForm *sf, const PrimePhaseForm *f, int *room) {
    int n = 0;
    for (int i = 0; i < f->nforms; ++i)
        if (has_tensor_op(f->forms[i].a.op))
            room[n++] = sf->tensor_number[f->forms[i].a.tensor];
    qsort(room, (size_t)n, sizeof(int), cmp_int);
    for (int i = 0, j = 0; i < n; ++i) {
        while (j < n && room[j] < room[i] + sf->layer_block)
            ++j;
        if (j < n && room[j] == room[i] + sf->layer_block)
            return 1;
    }
    return 0;
}

/* Folds one phase's runs of layer copies; returns the number of loops. */
static int fold_phase_copies(Arena *arena, const ScheduleForm *sf, PhaseForm *pf, int ndev,
                             int *room) {
    if (!has_copies(sf, &pf->form, room))
        return 0;
    PrimePhaseForm num = form_numbered(arena, sf, &pf->form);
    int n = num.nforms;
    const PrimeActionForm *forms = num.forms;
    unsigned char *looped = ARENA_ARRAY(arena, unsigned char, n + 1);
    for (int i = 0; i < n; ++i)
        if (forms[i].repeat > 1)
            for (int j = i; j < i + forms[i].body && j < n; ++j)
                looped[j] = 1;
    PrimeActionForm *out = ARENA_ARRAY_UNINIT(arena, PrimeActionForm, n + 1);
    int m = 0, loops = 0;
    for (int p = 0; p < n;) {
        int best_len = 1;
        long best_reps = 1;
        CopyShift best = {0, 0, 0, 0}, sh;
        for (int q = p + 1, tried = 0; !looped[p] && q < n && q - p <= (n - p) / 2 && tried < 8;
             ++q) {
            if (looped[q] || forms[q].a.op != forms[p].a.op || !has_tensor_op(forms[p].a.op) ||
                labs(forms[q].a.tensor - forms[p].a.tensor) != sf->layer_block)
                continue;
            ++tried;
            int len = q - p, clean = 1;
            for (int j = p; j < q && clean; ++j)
                clean = !looped[j];
            if (!clean)
                break;
            long reps = action_copies(forms, looped, n, p, len, &sh);
            if (reps >= 2 && sh.dtensor != 0 && reps * len > best_reps * best_len)
                best_len = len, best_reps = reps, best = sh;
        }
        if (best_reps < 2) {
            out[m++] = pf->form.forms[p++];
            continue;
        }
        for (int j = 0; j < best_len; ++j) {
            PrimeActionForm *af = &out[m + j];
            *af = pf->form.forms[p + j];
            af->dstep_tensor = has_tensor_op(af->a.op) ? (int)best.dtensor : 0;
            af->dstep_tag = has_tag_op(af->a.op) ? (int)best.dtag : 0;
        }
        out[m].repeat = best_reps;
        out[m].body = best_len;
        m += best_len;
        p += (int)(best_len * best_reps);
        ++loops;
    }
    if (!loops)
        return 0;
    PrimePhaseForm folded = pf->form;
    folded.nforms = m;
    folded.forms = out;
    PrimePhaseForm folded_num = form_numbered(arena, sf, &folded);
    if (!same_expansion(&num, &folded_num, pf, ndev))
        ICE("a loop over layer copies does not expand to the phase it replaces");
    pf->form = folded;
    return loops;
}

void form_fold_layer_actions(Arena *arena, const Schedule *s, ScheduleForm *sf) {
    if (form_layer_copies(s->model) < 2 || sf->layer_block <= 0)
        return;
    int cap = 0;
    for (int k = 0; k < s->phases.count; ++k)
        for (const PhaseForm *pf = &sf->phases[k]; pf && !pf->fallback; pf = pf->next)
            if (pf->form.nforms > cap)
                cap = pf->form.nforms;
    int *room = malloc(sizeof(int) * ((size_t)cap + 1));
    if (!room)
        ICE("out of memory");
    for (int k = 0; k < s->phases.count; ++k) {
        /* A phase split by slices: each piece's loops (its form is
         * proven on every rank, the others' pieces expanding alike). */
        for (PhaseForm *pf = &sf->phases[k]; pf && !pf->fallback; pf = pf->next)
            pf->layer_loops = fold_phase_copies(arena, sf, pf, s->model->mesh.ndev, room);
    }
    free(room);
}

/* ---- Layer folding ------------------------------------------------- */

/* The shifts of a run of phases per copy: tensors and tags, one each;
 * values, one per operand of each phase of the run (PhaseRun.dvalue). */
typedef struct Shift {
    int set[2];
    int d[2]; /* tensor, tag */
    int len;
    unsigned char *vset; /* len * FORM_RUN_OPERANDS */
    int *vd;
} Shift;

static int shift_ok(Shift *sh, int which, long a, long b, long copies) {
    if (!sh->set[which]) {
        if ((b - a) % copies)
            return 0;
        sh->d[which] = (int)((b - a) / copies);
        sh->set[which] = 1;
    }
    return b == a + copies * sh->d[which];
}

/* The same for the value of operand x of the run's phase j. */
static int value_shift_ok(Shift *sh, int j, int x, long a, long b, long copies) {
    int i = j * FORM_RUN_OPERANDS + x;
    if (!sh->vset[i]) {
        if ((b - a) % copies)
            return 0;
        sh->vd[i] = (int)((b - a) / copies);
        sh->vset[i] = 1;
    }
    return b == a + copies * sh->vd[i];
}

static void shift_copy(Shift *to, const Shift *from) {
    memcpy(to->set, from->set, sizeof to->set);
    memcpy(to->d, from->d, sizeof to->d);
    size_t n = (size_t)from->len * FORM_RUN_OPERANDS;
    memcpy(to->vset, from->vset, n);
    memcpy(to->vd, from->vd, sizeof(int) * n);
}

static int value_of(const Schedule *s, int tensor) {
    const SchedTensor *t = &s->tensors[tensor];
    return 2 * t->model_tensor + t->is_grad;
}

/* Whether phase kb is phase ka, the run's phase j, shifted by `copies`
 * layers of *sh. */
static int phase_shifted(const Schedule *s, const ScheduleForm *sf, const int *kernel,
                         const int *reference, int j, int ka, int kb, long copies, Shift *sh) {
    const PhaseForm *fa = &sf->phases[ka], *fb = &sf->phases[kb];
    const PhaseSched *pa = s->phases.items[ka], *pb = s->phases.items[kb];
    if (fa->fallback || fb->fallback || fa->next || fb->next || fa->uses_offsets ||
        fb->uses_offsets || fa->ntables != fb->ntables || fa->form.sliced != fb->form.sliced ||
        (fa->form.sliced && (fa->form.slice_axis != fb->form.slice_axis ||
                             fa->form.slice_coord != fb->form.slice_coord)))
        return 0;
    int ndev = s->model->mesh.ndev;
    if (pa->kind != pb->kind || kernel[ka] != kernel[kb] || reference[ka] != reference[kb] ||
        pa->nin != pb->nin || fa->form.nforms != fb->form.nforms ||
        fa->noffset_forms != fb->noffset_forms || fa->ngroup_forms != fb->ngroup_forms ||
        pa->nboxes != pb->nboxes)
        return 0;
    int compute = pa->kind == PHASE_FWD || pa->kind == PHASE_BWD || pa->kind == PHASE_GRAD;
    if (compute) {
        if (!value_shift_ok(sh, j, 0, value_of(s, pa->out.tensor), value_of(s, pb->out.tensor),
                            copies))
            return 0;
        for (int i = 0; i < pa->nin; ++i)
            if (!value_shift_ok(sh, j, 1 + i, value_of(s, pa->in[i].tensor),
                                value_of(s, pb->in[i].tensor), copies))
                return 0;
    }
    if (fa->noffset_forms && memcmp(fa->form.offset_forms, fb->form.offset_forms,
                                    sizeof(PrimeOffsetForm) * (size_t)fa->noffset_forms) != 0)
        return 0;
    if (fa->ngroup_forms && memcmp(fa->form.group_forms, fb->form.group_forms,
                                   sizeof(PrimeGroupForm) * (size_t)fa->ngroup_forms) != 0)
        return 0;
    if (pa->nboxes && memcmp(pa->boxes, pb->boxes, sizeof(PrimeBox) * (size_t)pa->nboxes) != 0)
        return 0;
    for (int i = 0; i < fa->form.nforms; ++i) {
        PrimeActionForm x = fa->form.forms[i], y = fb->form.forms[i];
        if (x.a.op != y.a.op)
            return 0;
        if (has_tensor_op(x.a.op)) {
            const int *num = sf->tensor_number;
            if (!shift_ok(sh, 0, num[x.a.tensor], num[y.a.tensor], copies))
                return 0;
            for (int k = 0; k < x.a.nin && k < PRIME_MAX_KERNEL_INPUTS; ++k)
                if (!shift_ok(sh, 0, num[x.a.in_tensor[k]], num[y.a.in_tensor[k]], copies))
                    return 0;
            y.a.tensor = x.a.tensor;
            memcpy(y.a.in_tensor, x.a.in_tensor, sizeof x.a.in_tensor);
        }
        if (has_tag_op(x.a.op)) {
            if (!shift_ok(sh, 1, x.a.tag, y.a.tag, copies))
                return 0;
            y.a.tag = x.a.tag;
        }
        if ((x.slots == NULL) != (y.slots == NULL) ||
            (x.slots &&
             memcmp(x.slots, y.slots, sizeof(PrimeAffine) * (1 + PRIME_MAX_KERNEL_INPUTS)) != 0))
            return 0;
        y.slots = x.slots;
        /* Per-rank tables (box indices, say) must hold the same values. */
        if ((x.peer_table == NULL) != (y.peer_table == NULL) ||
            (x.peer_table && memcmp(x.peer_table, y.peer_table, sizeof(int) * (size_t)ndev)))
            return 0;
        if ((x.arg_table == NULL) != (y.arg_table == NULL) ||
            (x.arg_table && memcmp(x.arg_table, y.arg_table, sizeof(int) * (size_t)ndev)))
            return 0;
        y.peer_table = x.peer_table;
        y.arg_table = x.arg_table;
        if (memcmp(&x, &y, sizeof x) != 0)
            return 0;
    }
    return 1;
}

static unsigned long phase_hash(const Schedule *s, const ScheduleForm *sf, const int *kernel,
                                int k) {
    const PhaseForm *f = &sf->phases[k];
    const PhaseSched *ph = s->phases.items[k];
    unsigned long h = 1469598103934665603ul;
    h = (h ^ (unsigned long)ph->kind) * 1099511628211ul;
    h = (h ^ (unsigned long)(kernel[k] + 1)) * 1099511628211ul;
    h = (h ^ (unsigned long)(f->fallback ? -1 : f->form.nforms)) * 1099511628211ul;
    for (int i = 0; !f->fallback && i < f->form.nforms; ++i)
        h = (h ^ (unsigned long)f->form.forms[i].a.op) * 1099511628211ul;
    return h;
}

/* How many copies of [p, p + len) follow from p, the first included;
 * *sh (with room for len phases) gets their shifts, trial is room of
 * the same size. */
static long count_copies(const Schedule *s, const ScheduleForm *sf, const int *kernel,
                         const int *reference, int p, int len, Shift *sh, Shift *trial) {
    int n = s->phases.count;
    long reps = 1;
    memset(sh->set, 0, sizeof sh->set);
    memset(sh->d, 0, sizeof sh->d);
    sh->len = trial->len = len;
    memset(sh->vset, 0, (size_t)len * FORM_RUN_OPERANDS);
    memset(sh->vd, 0, sizeof(int) * (size_t)len * FORM_RUN_OPERANDS);
    while (p + (reps + 1) * len <= n) {
        shift_copy(trial, sh);
        int ok = 1;
        for (int j = 0; j < len && ok; ++j)
            ok = phase_shifted(s, sf, kernel, reference, j, p + j, (int)(p + reps * len + j), reps,
                               trial);
        if (!ok)
            break;
        shift_copy(sh, trial);
        ++reps;
    }
    return reps;
}

static Shift shift_room(int cap) {
    Shift sh;
    memset(&sh, 0, sizeof sh);
    sh.vset = malloc((size_t)cap * FORM_RUN_OPERANDS + 1);
    sh.vd = malloc(sizeof(int) * ((size_t)cap * FORM_RUN_OPERANDS + 1));
    if (!sh.vset || !sh.vd)
        ICE("out of memory");
    return sh;
}

PhaseRuns *form_fold_layers(Arena *arena, const Schedule *s, const ScheduleForm *sf,
                            const int *kernel, const int *reference) {
    int n = s->phases.count;
    PhaseRuns *pr = ARENA_NEW(arena, PhaseRuns);
    pr->runs = ARENA_ARRAY(arena, PhaseRun, n + 1);
    unsigned long *hash = ARENA_ARRAY_UNINIT(arena, unsigned long, n + 1);
    for (int k = 0; k < n; ++k)
        hash[k] = phase_hash(s, sf, kernel, k);
    int cap = n / 2 + 1;
    Shift best = shift_room(cap), sh = shift_room(cap), trial = shift_room(cap);
    for (int p = 0; p < n;) {
        int best_len = 1;
        long best_reps = 1;
        int tried = 0;
        for (int q = p + 1; q < n && q - p <= (n - p) / 2 && tried < 8; ++q) {
            if (hash[q] != hash[p])
                continue;
            ++tried;
            long reps = count_copies(s, sf, kernel, reference, p, q - p, &sh, &trial);
            if (reps >= 2 && reps * (q - p) > best_reps * best_len) {
                best_len = q - p, best_reps = reps;
                best.len = sh.len;
                shift_copy(&best, &sh);
            }
        }
        PhaseRun *prev = pr->nruns ? &pr->runs[pr->nruns - 1] : NULL;
        if (best_reps == 1 && prev && prev->repeat == 1) {
            prev->len++;
            pr->nemitted++;
            p++;
            continue;
        }
        PhaseRun *r = &pr->runs[pr->nruns++];
        r->first = p;
        r->len = best_len;
        r->repeat = best_reps;
        r->dtensor = best_reps > 1 ? best.d[0] : 0;
        r->dtag = best_reps > 1 ? best.d[1] : 0;
        r->dvalue = NULL;
        if (best_reps > 1) {
            r->dvalue = ARENA_ARRAY(arena, int, (size_t)best_len *FORM_RUN_OPERANDS);
            memcpy(r->dvalue, best.vd, sizeof(int) * (size_t)best_len * FORM_RUN_OPERANDS);
        }
        pr->nemitted += best_len;
        p += (int)(best_len * best_reps);
    }
    free(best.vset);
    free(best.vd);
    free(sh.vset);
    free(sh.vd);
    free(trial.vset);
    free(trial.vd);
    return pr;
}

/* ---- Tensor folding ------------------------------------------------ */

static int same_layout_form(const PrimeLayoutForm *a, const PrimeLayoutForm *b) {
    if (!a || !b)
        return a == b;
    if (a->count != b->count || a->ndims != b->ndims || a->sliced != b->sliced ||
        (a->sliced && (a->slice_axis != b->slice_axis || a->slice_coord != b->slice_coord)))
        return 0;
    if (memcmp(a->nslices, b->nslices, sizeof(long) * (size_t)a->ndims) != 0 ||
        memcmp(a->slot, b->slot, sizeof(int) * (size_t)a->count) != 0)
        return 0;
    return memcmp(a->coord, b->coord, sizeof(PrimeAffine) * (size_t)a->count * (size_t)a->ndims) ==
           0;
}

/* Whether storage tensors x and y differ only in value and name. */
static int same_tensor_shape(const Schedule *s, const ScheduleForm *sf, int x, int y) {
    const SchedTensor *a = &s->tensors[x], *b = &s->tensors[y];
    if (a->ndims != b->ndims || a->max_slots != b->max_slots || a->fill_phase != b->fill_phase ||
        a->check != b->check || a->is_grad != b->is_grad)
        return 0;
    size_t n = sizeof(long) * (size_t)a->ndims;
    if (memcmp(a->shape, b->shape, n) || memcmp(a->extent, b->extent, n) ||
        memcmp(a->nslices, b->nslices, n))
        return 0;
    if (a->fill_phase >= 0 && !(sf->home[x] && same_layout_form(sf->home[x], sf->home[y])))
        return 0;
    if (a->check && !(sf->final[x] && same_layout_form(sf->final[x], sf->final[y])))
        return 0;
    return 1;
}

/* The number in a name where names a and b differ: a = P n0 S and
 * b = P n1 S with n0, n1 decimal. Returns 0 when they differ otherwise. */
static int name_number(const char *a, const char *b, size_t *start, size_t *alen, long *n0,
                       long *n1) {
    size_t i = 0;
    while (a[i] && a[i] == b[i])
        ++i;
    while (i > 0 && a[i - 1] >= '0' && a[i - 1] <= '9')
        --i;
    size_t ea = i, eb = i;
    while (a[ea] >= '0' && a[ea] <= '9')
        ++ea;
    while (b[eb] >= '0' && b[eb] <= '9')
        ++eb;
    if (ea == i || eb == i || strcmp(a + ea, b + eb) != 0 || ea - i > 15 || eb - i > 15)
        return 0;
    *start = i;
    *alen = ea - i;
    *n0 = strtol(a + i, NULL, 10);
    *n1 = strtol(b + i, NULL, 10);
    return 1;
}

static int name_is(const char *name, const char *base, size_t start, size_t len, long n) {
    char num[32];
    snprintf(num, sizeof num, "%ld", n);
    size_t nl = strlen(num);
    return strncmp(name, base, start) == 0 && strncmp(name + start, num, nl) == 0 &&
           strcmp(name + start + nl, base + start + len) == 0;
}

/* How many copies of the tensors numbered [p, p + len) follow; dvalue
 * (room for len) gets each tensor's value step. */
static long tensor_copies(const Schedule *s, const ScheduleForm *sf, int p, int len, int *dvalue) {
    int n = s->ntensors;
    const int *at = sf->tensor_at;
    long reps = 1;
    for (; p + (reps + 1) * len <= n; ++reps) {
        int ok = 1;
        for (int j = 0; j < len && ok; ++j) {
            int x = at[p + j], y = at[p + reps * len + j];
            const char *nx = s->tensors[x].name, *ny = s->tensors[y].name;
            int d = value_of(s, y) - value_of(s, x);
            if (reps == 1)
                dvalue[j] = d;
            size_t st, ln;
            long n0, n1, n1b;
            ok = same_tensor_shape(s, sf, x, y) && d == reps * dvalue[j] &&
                 name_number(nx, ny, &st, &ln, &n0, &n1);
            if (ok && reps > 1) {
                /* The step is set by copy 1. */
                const char *n1name = s->tensors[at[p + len + j]].name;
                size_t st1, ln1;
                long a0;
                ok = name_number(nx, n1name, &st1, &ln1, &a0, &n1b) && st1 == st &&
                     name_is(ny, nx, st, ln, n0 + reps * (n1b - n0));
            }
        }
        if (!ok)
            break;
    }
    return reps;
}

TensorRuns *form_fold_tensors(Arena *arena, const Schedule *s, const ScheduleForm *sf) {
    int n = s->ntensors;
    const int *at = sf->tensor_at;
    TensorRuns *tr = ARENA_NEW(arena, TensorRuns);
    tr->runs = ARENA_ARRAY(arena, TensorRun, n + 1);
    int *dv = ARENA_ARRAY(arena, int, n / 2 + 1), *best_dv = ARENA_ARRAY(arena, int, n / 2 + 1);
    for (int p = 0; p < n;) {
        int best_len = 1;
        long best_reps = 1;
        for (int q = p + 1, tried = 0; q < n && q - p <= (n - p) / 2 && tried < 4; ++q) {
            if (!same_tensor_shape(s, sf, at[p], at[q]))
                continue;
            ++tried;
            long reps = tensor_copies(s, sf, p, q - p, dv);
            if (reps >= 2 && reps * (q - p) > best_reps * best_len) {
                best_len = q - p, best_reps = reps;
                memcpy(best_dv, dv, sizeof(int) * (size_t)best_len);
            }
        }
        TensorRun *prev = tr->nruns ? &tr->runs[tr->nruns - 1] : NULL;
        if (best_reps == 1 && prev && prev->repeat == 1) {
            prev->len++;
            tr->nemitted++;
            p++;
            continue;
        }
        TensorRun *r = &tr->runs[tr->nruns++];
        r->first = p;
        r->len = best_len;
        r->repeat = best_reps;
        r->dvalue = NULL;
        tr->nemitted += best_len;
        if (best_reps > 1) {
            r->dvalue = ARENA_ARRAY(arena, int, best_len);
            memcpy(r->dvalue, best_dv, sizeof(int) * (size_t)best_len);
            r->name_format = ARENA_ARRAY(arena, const char *, best_len);
            r->name_base = ARENA_ARRAY(arena, long, best_len);
            r->name_step = ARENA_ARRAY(arena, long, best_len);
            for (int j = 0; j < best_len; ++j) {
                const char *a = s->tensors[at[p + j]].name;
                const char *b = s->tensors[at[p + best_len + j]].name;
                size_t st, ln;
                long n0, n1;
                name_number(a, b, &st, &ln, &n0, &n1);
                r->name_format[j] = arena_printf(arena, "%.*s%%ld%s", (int)st, a, a + st + ln);
                r->name_base[j] = n0;
                r->name_step[j] = n1 - n0;
            }
        }
        p += (int)(best_len * best_reps);
    }
    return tr;
}
