/*
 * form_steps.c — the steps of a phase in form, folded into loops (see
 * form.h, "Steps: loops" in docs/program-form.md).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "form_internal.h"

/* ---- Step loops ---------------------------------------------------- */

/* The slot affine of slot k (0: the action's own, 1 + x: input x). */
static PrimeAffine slot_affine(const Fit *f, const PrimeActionForm *af, int k) {
    if (af->slots)
        return af->slots[k];
    PrimeAffine a;
    memset(&a, 0, sizeof a);
    int tensor = k ? af->a.in_tensor[k - 1] : af->a.tensor;
    a.modulus = !prime_action_has_tensor(af->a.op) ? 1 : f->s->tensors[tensor].max_slots;
    a.base = k ? af->a.in_slot[k - 1] : af->a.slot;
    return a;
}

/* Whether b is a advanced by `it` steps of the increment d (for
 * affine forms: same coefficients and modulus, bases in progression). */
static long mod_step(long x, long m) {
    long v = x % m;
    return v < 0 ? v + m : v;
}

static int affine_follows(const PrimeAffine *a, const PrimeAffine *b, long d, long it) {
    if (a->modulus != b->modulus || a->modulus <= 0 || a->tcoef || b->tcoef)
        return 0;
    if (memcmp(a->coef, b->coef, sizeof a->coef) != 0)
        return 0;
    return mod_step(b->base, a->modulus) == mod_step(a->base + it * d, a->modulus);
}

/* The increments from form a (iteration 0) to form b (iteration 1), in
 * the loop form `out` (a's fields with tcoef set, its slots in sl, room
 * for 1 + PRIME_MAX_KERNEL_INPUTS); 0 if their shapes differ in a way no
 * loop covers. */
static int step_increments(const Fit *f, const PrimeActionForm *a, const PrimeActionForm *b,
                           const PrimeOffsetForm *offs, PrimeActionForm *out,
                           PrimeOffsetForm *loop_off, PrimeAffine *sl) {
    if (a->a.op != b->a.op || a->a.tensor != b->a.tensor || a->a.kind != b->a.kind ||
        a->a.nin != b->a.nin || a->peer_form != b->peer_form || a->arg_form != b->arg_form ||
        a->peer_form == PRIME_FORM_TABLE || a->arg_form == PRIME_FORM_TABLE ||
        (a->slots == NULL) != (b->slots == NULL) || a->repeat > 1 || b->repeat > 1)
        return 0;
    for (int x = 0; x < a->a.nin && x < PRIME_MAX_KERNEL_INPUTS; ++x)
        if (a->a.in_tensor[x] != b->a.in_tensor[x])
            return 0;
    if (a->peer_form == PRIME_FORM_SHIFT && memcmp(a->delta, b->delta, sizeof a->delta) != 0)
        return 0;
    if (a->peer_form == PRIME_FORM_CONST && a->a.peer != b->a.peer)
        return 0;
    if (a->arg_form == PRIME_FORM_GROUP && a->index != b->index)
        return 0;
    *out = *a;
    out->dstep_tag = b->a.tag - a->a.tag;
    out->dstep_arg = a->arg_form == PRIME_FORM_CONST ? b->a.arg - a->a.arg : 0;
    int nslots = 1 + (a->a.nin < PRIME_MAX_KERNEL_INPUTS ? a->a.nin : PRIME_MAX_KERNEL_INPUTS);
    int moving = 0;
    for (int k = 0; k <= PRIME_MAX_KERNEL_INPUTS; ++k) {
        if (k >= nslots) {
            sl[k].modulus = 1;
            continue;
        }
        PrimeAffine sa = slot_affine(f, a, k), sb = slot_affine(f, b, k);
        if (sa.modulus <= 0)
            return 0;
        long d = mod_step(sb.base - sa.base, sa.modulus);
        if (!affine_follows(&sa, &sb, d, 1))
            return 0;
        sl[k] = sa;
        sl[k].tcoef = d;
        moving |= d != 0;
    }
    out->slots = moving || a->slots ? sl : NULL;
    if (a->arg_form == PRIME_FORM_AFFINE) {
        const PrimeOffsetForm *oa = &offs[a->index], *ob = &offs[b->index];
        if (oa->ndims != ob->ndims || memcmp(oa->scale, ob->scale, sizeof oa->scale) != 0)
            return 0;
        *loop_off = *oa;
        for (int x = 0; x < oa->ndims; ++x) {
            long d = mod_step(ob->dim[x].base - oa->dim[x].base, oa->dim[x].modulus);
            if (!affine_follows(&oa->dim[x], &ob->dim[x], d, 1))
                return 0;
            loop_off->dim[x].tcoef = d;
        }
    }
    return 1;
}

/* Whether form c is the loop form l at iteration it. */
static int step_matches(const Fit *f, const PrimeActionForm *l, const PrimeOffsetForm *loop_off,
                        const PrimeActionForm *c, const PrimeOffsetForm *offs, long it) {
    if (c->a.tag != l->a.tag + it * l->dstep_tag)
        return 0;
    if (l->arg_form == PRIME_FORM_CONST && c->a.arg != l->a.arg + it * l->dstep_arg)
        return 0;
    if (l->peer_form == PRIME_FORM_SHIFT && memcmp(l->delta, c->delta, sizeof l->delta) != 0)
        return 0;
    if (l->peer_form == PRIME_FORM_CONST && l->a.peer != c->a.peer)
        return 0;
    if (l->arg_form == PRIME_FORM_GROUP && l->index != c->index)
        return 0;
    if (l->a.op != c->a.op || l->a.tensor != c->a.tensor || l->a.kind != c->a.kind ||
        l->a.nin != c->a.nin || l->peer_form != c->peer_form || l->arg_form != c->arg_form)
        return 0;
    for (int x = 0; x < l->a.nin && x < PRIME_MAX_KERNEL_INPUTS; ++x)
        if (l->a.in_tensor[x] != c->a.in_tensor[x])
            return 0;
    int nslots = 1 + (l->a.nin < PRIME_MAX_KERNEL_INPUTS ? l->a.nin : PRIME_MAX_KERNEL_INPUTS);
    for (int k = 0; k < nslots; ++k) {
        PrimeAffine base = slot_affine(f, l, k), sc = slot_affine(f, c, k);
        long d = l->slots ? l->slots[k].tcoef : 0;
        base.tcoef = 0;
        if (!affine_follows(&base, &sc, d, it))
            return 0;
    }
    if (l->arg_form == PRIME_FORM_AFFINE) {
        const PrimeOffsetForm *oc = &offs[c->index];
        if (oc->ndims != loop_off->ndims ||
            memcmp(oc->scale, loop_off->scale, sizeof oc->scale) != 0)
            return 0;
        for (int x = 0; x < oc->ndims; ++x) {
            PrimeAffine base = loop_off->dim[x];
            long d = base.tcoef;
            base.tcoef = 0;
            if (!affine_follows(&base, &oc->dim[x], d, it))
                return 0;
        }
    }
    return 1;
}

/* ---- One loop over the whole phase ------------------------------- */

/* An action of the loop over every step: where it is in the first,
 * a middle (the second) and the last step (-1: absent there). */
typedef struct Entry {
    int first, middle, last;
} Entry;

typedef int Pair[2];

typedef struct Whole {
    const Fit *f;
    const PrimeOffsetForm *offs;
    const PrimeActionForm *forms;
    const int *start; /* per step: its first form; start[nb] = n */
    int nb;
    PrimeActionForm tmp;
    PrimeOffsetForm tmp_off;
    PrimeAffine tmp_sl[1 + PRIME_MAX_KERNEL_INPUTS];
    /* Aligning the last step with the middle one: per middle action, the
     * tag a message of the last step must have to be that action (its
     * tags advance from the first step's; INT_MIN: any). */
    const int *want_tag;
} Whole;

/* Whether forms x and y can be one action of a loop, a step apart. */
static int compatible(Whole *w, const PrimeActionForm *x, const PrimeActionForm *y) {
    if (w->want_tag) {
        int want = w->want_tag[y - (w->forms + w->start[1])];
        if (want != INT_MIN && x->a.tag != want)
            return 0;
    }
    return step_increments(w->f, x, y, w->offs, &w->tmp, &w->tmp_off, w->tmp_sl);
}

/* The longest common subsequence of steps a and b under `compatible`:
 * pairs (index in a, index in b), -1 where one has an action the other
 * lacks; between two matched actions, b's unmatched ones come first (in
 * a middle step, what completes the previous step's messages precedes
 * what posts the next one's). Returns the number of pairs. */
static int align_steps(Whole *w, int a, int b, Pair *pairs) {
    const PrimeActionForm *x = w->forms + w->start[a], *y = w->forms + w->start[b];
    int p = w->start[a + 1] - w->start[a], q = w->start[b + 1] - w->start[b];
    FitScratch *sc = w->f->scratch;
    size_t cells = (size_t)(p + 1) * (size_t)(q + 1);
    if (cells > sc->lcs_cap) {
        sc->lcs_cap = cells > 2 * sc->lcs_cap ? cells : 2 * sc->lcs_cap;
        sc->lcs = realloc(sc->lcs, sizeof(int) * sc->lcs_cap);
        if (!sc->lcs)
            ICE("out of memory");
    }
    int *len = sc->lcs;
#define LEN(i, j) len[(size_t)(i) * (size_t)(q + 1) + (size_t)(j)]
    for (int i = 0; i <= p; ++i)
        LEN(i, q) = 0;
    for (int j = 0; j <= q; ++j)
        LEN(p, j) = 0;
    for (int i = p - 1; i >= 0; --i)
        for (int j = q - 1; j >= 0; --j) {
            int best = LEN(i + 1, j) > LEN(i, j + 1) ? LEN(i + 1, j) : LEN(i, j + 1);
            if (LEN(i + 1, j + 1) + 1 > best && compatible(w, &x[i], &y[j]))
                best = LEN(i + 1, j + 1) + 1;
            LEN(i, j) = best;
        }
    int n = 0, i = 0, j = 0;
    while (i < p || j < q) {
        if (i < p && j < q && LEN(i, j) == LEN(i + 1, j + 1) + 1 && compatible(w, &x[i], &y[j])) {
            pairs[n][0] = i++, pairs[n++][1] = j++;
        } else if (j < q && (i == p || LEN(i, j + 1) == LEN(i, j))) {
            pairs[n][0] = -1, pairs[n++][1] = j++;
        } else {
            pairs[n][0] = i++, pairs[n++][1] = -1;
        }
    }
#undef LEN
    return n;
}

static int is_message(int op) {
    return op == PRIME_ACT_SEND || op == PRIME_ACT_RECV || op == PRIME_ACT_SEND_BOX ||
           op == PRIME_ACT_RECV_BOX;
}

/* Whether step b holds a message of (tensor, slot) of the ops given. */
static int step_has_message(const Whole *w, int b, int tensor, int slot, int send) {
    for (int i = w->start[b]; i < w->start[b + 1]; ++i) {
        const PrimeAction *a = &w->forms[i].a;
        if ((send ? a->op == PRIME_ACT_SEND : a->op == PRIME_ACT_RECV) && a->tensor == tensor &&
            a->slot == slot)
            return 1;
    }
    return 0;
}

/* On two steps there is no middle one to say whether an action of one
 * step only would run there too. An action of the first step only that
 * posts or prepares a message (the sends of the next step's operands)
 * would, as would an action of the last step only that completes one
 * (adding what arrived, freeing what was sent or received); others
 * (the allocation of an accumulator that stays) would not. */
static int in_middle_guess(const Whole *w, const Entry *e) {
    const PrimeAction *a = &w->forms[e->first >= 0 ? e->first : e->last].a;
    if (e->first >= 0) {
        if (is_message(a->op))
            return 1;
        if (a->op == PRIME_ACT_ALLOC)
            return step_has_message(w, 0, a->tensor, a->slot, 0);
        if (a->op == PRIME_ACT_FREE)
            return step_has_message(w, 0, a->tensor, a->slot, 1);
        return 0;
    }
    int nslots = 1 + (a->nin < PRIME_MAX_KERNEL_INPUTS ? a->nin : PRIME_MAX_KERNEL_INPUTS);
    for (int k = 0; k < nslots; ++k) {
        int t = k ? a->in_tensor[k - 1] : a->tensor, sl = k ? a->in_slot[k - 1] : a->slot;
        if (step_has_message(w, 0, t, sl, 0) || step_has_message(w, 0, t, sl, 1))
            return 1;
    }
    return 0;
}

/* Moves loop form l, whose fields are those of iteration it, back to
 * iteration 0. */
static void rebase(PrimeActionForm *l, PrimeOffsetForm *off, long it) {
    l->a.tag = (int)(l->a.tag - it * l->dstep_tag);
    if (l->arg_form == PRIME_FORM_CONST)
        l->a.arg = (int)(l->a.arg - it * l->dstep_arg);
    if (l->slots) {
        PrimeAffine *sl = (PrimeAffine *)l->slots;
        for (int k = 0; k <= PRIME_MAX_KERNEL_INPUTS; ++k)
            sl[k].base = mod_step(sl[k].base - it * sl[k].tcoef, sl[k].modulus);
    }
    if (l->arg_form == PRIME_FORM_AFFINE)
        for (int x = 0; x < off->ndims; ++x)
            off->dim[x].base =
                mod_step(off->dim[x].base - it * off->dim[x].tcoef, off->dim[x].modulus);
}

/* The loop form of an action seen at one iteration only: its increments
 * are not seen. Slots advance as those of the same tensor that are seen
 * (the first such in `known`), tags by the tags a step uses. */
static void guess_increments(const Fit *f, PrimeActionForm *l, const PrimeActionForm *known,
                             int nknown, int dtag) {
    int nslots = 1 + (l->a.nin < PRIME_MAX_KERNEL_INPUTS ? l->a.nin : PRIME_MAX_KERNEL_INPUTS);
    PrimeAffine *sl = ARENA_ARRAY(f->arena, PrimeAffine, 1 + PRIME_MAX_KERNEL_INPUTS);
    int moving = 0;
    for (int k = 0; k <= PRIME_MAX_KERNEL_INPUTS; ++k) {
        if (k >= nslots) {
            sl[k].modulus = 1;
            continue;
        }
        sl[k] = slot_affine(f, l, k);
        int tensor = k ? l->a.in_tensor[k - 1] : l->a.tensor;
        for (int j = 0; j < nknown && !sl[k].tcoef; ++j) {
            const PrimeActionForm *o = &known[j];
            if (!o->slots || !prime_action_has_tensor(o->a.op))
                continue;
            int on = 1 + (o->a.nin < PRIME_MAX_KERNEL_INPUTS ? o->a.nin : PRIME_MAX_KERNEL_INPUTS);
            for (int x = 0; x < on && !sl[k].tcoef; ++x)
                if ((x ? o->a.in_tensor[x - 1] : o->a.tensor) == tensor &&
                    o->slots[x].modulus == sl[k].modulus)
                    sl[k].tcoef = o->slots[x].tcoef;
        }
        moving |= sl[k].tcoef != 0;
    }
    if (moving || l->slots)
        l->slots = sl;
    if (is_message(l->a.op))
        l->dstep_tag = dtag;
}

/* Whether the loop forms body[0..len) with their skip bits give back
 * every step of the phase. */
static int whole_matches(Whole *w, const PrimeActionForm *body, int len,
                         const PrimeOffsetForm *offs) {
    for (int t = 0; t < w->nb; ++t) {
        int i = w->start[t];
        for (int j = 0; j < len; ++j) {
            if (!prime_form_runs(body[j].skip, t, w->nb))
                continue;
            if (i == w->start[t + 1])
                return 0;
            const PrimeOffsetForm *lo =
                body[j].arg_form == PRIME_FORM_AFFINE ? &offs[body[j].index] : NULL;
            if (!step_matches(w->f, &body[j], lo, &w->forms[i], w->offs, t))
                return 0;
            ++i;
        }
        if (i != w->start[t + 1])
            return 0;
    }
    return 1;
}

/* The actions of the loop over every step, in order: the first and the
 * last step aligned with the middle one (or, on two steps, with each
 * other); returns their number. */
static int whole_entries(Whole *w, Pair *pa, Pair *pb, Entry *e) {
    const PrimeActionForm *forms = w->forms;
    const int *start = w->start;
    int last = w->nb - 1, mid = w->nb >= 3 ? 1 : -1;
    int lm = mid >= 0 ? start[2] - start[1] : 0;
    int ne = 0;
    if (mid < 0) {
        int np = align_steps(w, 0, last, pa);
        for (int k = 0; k < np; ++k) {
            Entry x = {pa[k][0] >= 0 ? start[0] + pa[k][0] : -1, -1,
                       pa[k][1] >= 0 ? start[last] + pa[k][1] : -1};
            if (x.first >= 0 && x.last >= 0)
                x.middle = x.first;
            else if (in_middle_guess(w, &x))
                x.middle = x.first >= 0 ? x.first : x.last;
            e[ne++] = x;
        }
    } else {
        int na = align_steps(w, 0, mid, pa);
        int *want = ARENA_ARRAY(w->f->arena, int, lm + 1);
        for (int j = 0; j < lm; ++j)
            want[j] = INT_MIN;
        for (int k = 0; k < na; ++k)
            if (pa[k][0] >= 0 && pa[k][1] >= 0 && is_message(forms[start[0] + pa[k][0]].a.op)) {
                int t0 = forms[start[0] + pa[k][0]].a.tag, t1 = forms[start[1] + pa[k][1]].a.tag;
                want[pa[k][1]] = t1 + (last - 1) * (t1 - t0);
            }
        w->want_tag = want;
        int nl = align_steps(w, last, mid, pb);
        w->want_tag = NULL;
        int kb = 0;
        for (int k = 0; k < na; ++k) {
            /* The last step's own actions before middle action pa[k][1]. */
            while (pa[k][1] >= 0 && kb < nl && pb[kb][1] != pa[k][1]) {
                if (pb[kb][1] < 0)
                    e[ne++] = (Entry){-1, -1, start[last] + pb[kb][0]};
                ++kb;
            }
            Entry x = {pa[k][0] >= 0 ? start[0] + pa[k][0] : -1,
                       pa[k][1] >= 0 ? start[mid] + pa[k][1] : -1, -1};
            if (pa[k][1] >= 0 && kb < nl && pb[kb][1] == pa[k][1]) {
                x.last = pb[kb][0] >= 0 ? start[last] + pb[kb][0] : -1;
                ++kb;
            }
            e[ne++] = x;
        }
        for (; kb < nl; ++kb)
            if (pb[kb][1] < 0)
                e[ne++] = (Entry){-1, -1, start[last] + pb[kb][0]};
    }
    return ne;
}

/* The whole phase, steps [0, nb), as one loop whose body is every step's
 * actions, each with the iterations that skip it (the first step's
 * allocation of an accumulator, the last step's absent sends): the same
 * body, with another trip count, on every size of the mesh. The loop's
 * forms go to out; returns their number, or 0 when the steps do not fit
 * (then pf->noffset_forms is as it was). */
static int fold_whole(const Fit *f, PhaseForm *pf, const PrimeActionForm *forms, const int *start,
                      int nb, PrimeOffsetForm *offs, PrimeActionForm *out) {
    Whole w = {.f = f, .offs = offs, .forms = forms, .start = start, .nb = nb};
    int last = nb - 1, mid = nb >= 3 ? 1 : -1;
    int lf = start[1] - start[0], ll = start[nb] - start[last];
    int lm = mid >= 0 ? start[2] - start[1] : 0;
    for (int t = 2; t < last; ++t)
        if (start[t + 1] - start[t] != lm)
            return 0;
    int cap = lf + ll + lm + 2;
    Pair *pa = ARENA_ARRAY(f->arena, Pair, cap);
    Pair *pb = ARENA_ARRAY(f->arena, Pair, cap);
    Entry *e = ARENA_ARRAY(f->arena, Entry, cap);
    int ne = whole_entries(&w, pa, pb, e);
    int saved_noff = pf->noffset_forms;
    int dtag = 0;
    for (int k = 0; k < ne; ++k) {
        const Entry *x = &e[k];
        int present_first = x->first >= 0, present_mid = x->middle >= 0,
            present_last = x->last >= 0;
        PrimeActionForm *l = &out[k];
        out[k].skip = 0;
        int a = -1, b = -1;
        long it = 0;
        if (mid < 0 && present_first && present_last) {
            a = x->first, b = x->last;
        } else if (mid >= 0 && present_first && present_mid) {
            a = x->first, b = x->middle;
        } else if (mid >= 0 && present_mid && nb >= 4) {
            a = x->middle, b = start[2] + (x->middle - start[1]), it = 1;
        } else if (mid >= 0 && present_mid && present_last) {
            a = x->middle, b = x->last, it = 1;
        }
        PrimeOffsetForm lo;
        if (a >= 0) {
            PrimeAffine *sl = ARENA_ARRAY(f->arena, PrimeAffine, 1 + PRIME_MAX_KERNEL_INPUTS);
            if (!step_increments(f, &forms[a], &forms[b], offs, l, &lo, sl)) {
                pf->noffset_forms = saved_noff;
                return 0;
            }
            rebase(l, &lo, it);
            if (is_message(l->a.op) && l->dstep_tag > dtag)
                dtag = l->dstep_tag;
        } else {
            int one = present_first ? x->first : present_mid ? x->middle : x->last;
            *l = forms[one];
            l->skip = -1; /* increments to be guessed */
            if (l->arg_form == PRIME_FORM_AFFINE)
                lo = offs[l->index];
        }
        if (l->arg_form == PRIME_FORM_AFFINE) {
            offs[pf->noffset_forms] = lo;
            l->index = pf->noffset_forms++;
        }
        l->repeat = 0;
        l->body = 0;
    }
    if (!dtag) /* no message seen twice: one tag per message of a step */
        for (int i = start[0]; i < start[1]; ++i) {
            int seen = 0;
            for (int j = start[0]; j < i && !seen; ++j)
                seen = is_message(forms[j].a.op) && forms[j].a.tag == forms[i].a.tag;
            dtag += is_message(forms[i].a.op) && !seen;
        }
    for (int k = 0; k < ne; ++k) {
        const Entry *x = &e[k];
        PrimeActionForm *l = &out[k];
        int guessed = l->skip < 0;
        l->skip = (x->first < 0 ? PRIME_SKIP_FIRST : 0) | (x->last < 0 ? PRIME_SKIP_LAST : 0) |
                  (x->middle < 0 ? PRIME_SKIP_MIDDLE : 0);
        /* An action of the first or last step only has no increments;
         * one seen once that runs in middle steps too advances like the
         * others. */
        if (guessed && x->middle >= 0) {
            guess_increments(f, l, out, ne, dtag);
            if (x->first < 0)
                rebase(l, l->arg_form == PRIME_FORM_AFFINE ? &offs[l->index] : NULL,
                       x->middle == x->last ? last : 1);
        }
    }
    if (ne < 1 || out[0].a.op != PRIME_ACT_STEP || out[0].skip ||
        !whole_matches(&w, out, ne, offs)) {
        pf->noffset_forms = saved_noff;
        return 0;
    }
    /* The last step's own actions at its end (after everything else the
     * last step runs) run after the loop. */
    unsigned char *tail = ARENA_ARRAY(f->arena, unsigned char, ne + 1);
    for (int j = ne - 1; j > 0; --j) {
        if (out[j].skip == (PRIME_SKIP_FIRST | PRIME_SKIP_MIDDLE))
            tail[j] = 1;
        else if (!(out[j].skip & PRIME_SKIP_LAST))
            break;
    }
    int body = 0;
    for (int j = 0; j < ne; ++j)
        if (!tail[j])
            out[body++] = out[j];
    int m = body;
    for (int j = 0; j < ne; ++j)
        if (tail[j])
            out[m++] = forms[e[j].last];
    out[0].repeat = nb;
    out[0].body = body;
    return m;
}

static int fold_step_loops(const Fit *f, PhaseForm *pf, PrimeActionForm *forms, int n,
                           PrimeOffsetForm *offs) {
    int *start = ARENA_ARRAY_UNINIT(f->arena, int, n + 2);
    int nb = 0;
    for (int i = 0; i < n; ++i)
        if (forms[i].a.op == PRIME_ACT_STEP)
            start[nb++] = i;
    if (nb < 2)
        return n;
    start[nb] = n;
    /* A unit is at most four steps long. */
    int unit = 0;
    for (int b = 0; b < nb; ++b) {
        int len = start[b + 4 < nb ? b + 4 : nb] - start[b];
        unit = len > unit ? len : unit;
    }
    FitScratch *sc = f->scratch;
    if (unit + 1 > sc->cap) {
        sc->cap = unit + 1 > 2 * sc->cap ? unit + 1 : 2 * sc->cap;
        sc->loop = realloc(sc->loop, sizeof(PrimeActionForm) * (size_t)sc->cap);
        sc->loop_off = realloc(sc->loop_off, sizeof(PrimeOffsetForm) * (size_t)sc->cap);
        sc->loop_slots = realloc(sc->loop_slots, sizeof(PrimeAffine) * (size_t)sc->cap *
                                                     (1 + PRIME_MAX_KERNEL_INPUTS));
        if (!sc->loop || !sc->loop_off || !sc->loop_slots)
            ICE("out of memory");
    }
    PrimeActionForm *loop = sc->loop;
    PrimeOffsetForm *loop_off = sc->loop_off;
    PrimeActionForm *out = form_scratch_forms(&sc->steps, &sc->steps_cap, n);
    int m = 0;
    for (int i = 0; i < start[0]; ++i)
        out[m++] = forms[i];
    int whole = fold_whole(f, pf, forms, start, nb, offs, out + m);
    if (whole) {
        m += whole;
        nb = 0; /* every step is folded */
    }
    for (int b = 0; b < nb;) {
        /* The best unit of q steps (1 to 4: slots that alternate make
         * a unit of two) repeated reps times from step b. */
        int best_q = 1, best_reps = 1;
        for (int q = 1; q <= 4 && b + 2 * q <= nb; ++q) {
            int len = start[b + q] - start[b];
            if (start[b + 2 * q] - start[b + q] != len)
                continue;
            int ok = 1, reps;
            for (int p = 0; p < len && ok; ++p)
                ok = step_increments(f, &forms[start[b] + p], &forms[start[b + q] + p], offs,
                                     &loop[p], &loop_off[p],
                                     sc->loop_slots + (size_t)p * (1 + PRIME_MAX_KERNEL_INPUTS));
            for (reps = ok ? 2 : 1; ok && b + (reps + 1) * q <= nb; ++reps) {
                int u = start[b + reps * q];
                if (start[b + (reps + 1) * q] - u != len)
                    break;
                int match = 1;
                for (int p = 0; p < len && match; ++p)
                    match = step_matches(f, &loop[p], &loop_off[p], &forms[u + p], offs, reps);
                if (!match)
                    break;
            }
            if (reps >= 2 && reps * q > best_reps * best_q)
                best_q = q, best_reps = reps;
        }
        int len = start[b + best_q] - start[b];
        if (best_reps >= 2) {
            /* Recompute the unit's increments for the chosen q. */
            for (int p = 0; p < len; ++p)
                step_increments(f, &forms[start[b] + p], &forms[start[b + best_q] + p], offs,
                                &loop[p], &loop_off[p],
                                ARENA_ARRAY(f->arena, PrimeAffine, 1 + PRIME_MAX_KERNEL_INPUTS));
            for (int p = 0; p < len; ++p) {
                PrimeActionForm *lf = &out[m + p];
                *lf = loop[p];
                if (lf->arg_form == PRIME_FORM_AFFINE) {
                    offs[pf->noffset_forms] = loop_off[p];
                    lf->index = pf->noffset_forms++;
                }
            }
            out[m].repeat = best_reps;
            out[m].body = len;
            m += len;
            b += best_reps * best_q;
        } else {
            for (int p = 0; p < start[b + 1] - start[b]; ++p)
                out[m++] = forms[start[b] + p];
            b += 1;
        }
    }
    memcpy(forms, out, sizeof(PrimeActionForm) * (size_t)m);
    /* Keep only the offset forms still used, in order of first use. */
    int *map = ARENA_ARRAY(f->arena, int, pf->noffset_forms + 1);
    PrimeOffsetForm *kept = ARENA_ARRAY(f->arena, PrimeOffsetForm, pf->noffset_forms + 1);
    int nkept = 0;
    for (int k = 0; k < pf->noffset_forms; ++k)
        map[k] = -1;
    for (int i = 0; i < m; ++i) {
        if (forms[i].arg_form != PRIME_FORM_AFFINE)
            continue;
        int k = forms[i].index;
        if (map[k] < 0) {
            map[k] = nkept;
            kept[nkept++] = offs[k];
        }
        forms[i].index = map[k];
    }
    memcpy(offs, kept, sizeof(PrimeOffsetForm) * (size_t)nkept);
    pf->noffset_forms = nkept;
    return m;
}

/* ---- Runs of actions outside the loops ---------------------------- */

/* Folds runs of up to four actions outside loops and steps that repeat
 * with their slots and tags in progression (the frees of the P tiles a
 * device held, one by one) into loops; returns the new number of forms.
 * Kernels stay as they are (their offset forms belong to the steps). */
static int fold_runs(const Fit *f, PrimeActionForm *forms, int n) {
    FitScratch *sc = f->scratch;
    if (n + 1 > sc->runs_cap) {
        sc->runs_cap = n + 1 > 2 * sc->runs_cap ? n + 1 : 2 * sc->runs_cap;
        sc->runs = realloc(sc->runs, sizeof(PrimeActionForm) * (size_t)sc->runs_cap);
        sc->runs_looped = realloc(sc->runs_looped, (size_t)sc->runs_cap);
        if (!sc->runs || !sc->runs_looped)
            ICE("out of memory");
    }
    unsigned char *looped = sc->runs_looped;
    memset(looped, 0, (size_t)n + 1);
    for (int i = 0; i < n; ++i) {
        if (forms[i].repeat > 1)
            for (int j = i; j < i + forms[i].body && j < n; ++j)
                looped[j] = 1;
        if (forms[i].a.op == PRIME_ACT_STEP || forms[i].arg_form == PRIME_FORM_AFFINE)
            looped[i] = 1;
    }
    PrimeActionForm *out = sc->runs;
    PrimeActionForm unit[4];
    PrimeAffine unit_sl[4][1 + PRIME_MAX_KERNEL_INPUTS];
    PrimeOffsetForm off;
    int m = 0;
    for (int p = 0; p < n;) {
        int best_q = 1;
        long best_reps = 1;
        for (int q = 1; q <= 4 && p + 2 * q <= n; ++q) {
            int ok = 1;
            for (int j = 0; j < 2 * q && ok; ++j)
                ok = !looped[p + j];
            for (int j = 0; j < q && ok; ++j)
                ok = step_increments(f, &forms[p + j], &forms[p + q + j], NULL, &unit[j], &off,
                                     unit_sl[j]);
            long reps = ok ? 2 : 1;
            while (ok && p + (reps + 1) * q <= n) {
                for (int j = 0; j < q && ok; ++j) {
                    int at = (int)(p + reps * q + j);
                    ok = !looped[at] && step_matches(f, &unit[j], NULL, &forms[at], NULL, reps);
                }
                reps += ok;
            }
            if (reps >= 2 && reps * q > best_reps * best_q)
                best_q = q, best_reps = reps;
        }
        if (best_reps < 2) {
            out[m++] = forms[p++];
            continue;
        }
        for (int j = 0; j < best_q; ++j) {
            PrimeAffine *sl = ARENA_ARRAY(f->arena, PrimeAffine, 1 + PRIME_MAX_KERNEL_INPUTS);
            step_increments(f, &forms[p + j], &forms[p + best_q + j], NULL, &out[m + j], &off, sl);
        }
        out[m].repeat = best_reps;
        out[m].body = best_q;
        m += best_q;
        p += (int)(best_reps * best_q);
    }
    memcpy(forms, out, sizeof(PrimeActionForm) * (size_t)m);
    return m;
}

PrimeActionForm *form_scratch_forms(PrimeActionForm **buf, int *cap, int n) {
    if (n + 1 > *cap) {
        *cap = n + 1 > 2 * *cap ? n + 1 : 2 * *cap;
        free(*buf);
        *buf = malloc(sizeof(PrimeActionForm) * (size_t)*cap);
        if (!*buf)
            ICE("out of memory");
    }
    memset(*buf, 0, sizeof(PrimeActionForm) * (size_t)(n + 1));
    return *buf;
}

int form_fold_steps(const Fit *f, PhaseForm *pf, PrimeActionForm *forms, int n,
                    PrimeOffsetForm *offs) {
    n = fold_step_loops(f, pf, forms, n, offs);
    return fold_runs(f, forms, n);
}
