/*
 * sched_boundary.c — what happens around a phase: its inputs brought into
 * the residency it needs, gradients summed over several contributions,
 * gradients and weights landing in their home layouts, the choice of
 * sweep order, and tensors freed once no later phase reads them.
 */
#include "sched_internal.h"

/* Tiles set aside, per input of a phase (index into its inputs). */
typedef struct Hidden {
    Held *items[SCHED_MAX_OPERANDS]; /* [dev * cap + i] */
    int *count[SCHED_MAX_OPERANDS];
    int cap[SCHED_MAX_OPERANDS];
} Hidden;

/* Sets tiles outside `need` aside so that the phase sees exactly its
 * required residency (the same as in its trial runs). */
static void hide_extras(Builder *b, int tensor, const Layout *need, Hidden *h, int k) {
    int cap = 0;
    for (int d = 0; d < b->ndev; ++d)
        if (store_of(b, tensor, d)->count > cap)
            cap = store_of(b, tensor, d)->count;
    h->cap[k] = cap;
    h->items[k] = ARENA_ARRAY_UNINIT(b->scratch, Held, (size_t)b->ndev * (size_t)cap + 1);
    h->count[k] = ARENA_ARRAY(b->scratch, int, b->ndev);
    for (int d = 0; d < b->ndev; ++d) {
        Store *st = store_of(b, tensor, d);
        for (int i = st->count - 1; i >= 0; --i) {
            if (!sched_layout_has(need, d, st->items[i].tile)) {
                h->items[k][(size_t)d * cap + h->count[k][d]++] = st->items[i];
                sched_store_remove(st, i);
            }
        }
    }
}

static void unhide(Builder *b, int tensor, Hidden *h, int k) {
    for (int d = 0; d < b->ndev; ++d) {
        Store *st = store_of(b, tensor, d);
        for (int i = 0; i < h->count[k][d]; ++i) {
            Held held = h->items[k][(size_t)d * h->cap[k] + i];
            if (sched_store_find(st, held.tile) >= 0)
                sched_emit_free(b, tensor, d, held.slot); /* a second copy arrived */
            else
                sched_store_add(b, st, held.tile, held.slot);
        }
    }
}

static void sched_free_all(Builder *b, int tensor) {
    for (int d = 0; d < b->ndev; ++d) {
        Store *st = store_of(b, tensor, d);
        while (st->count) {
            sched_emit_free(b, tensor, d, st->items[st->count - 1].slot);
            sched_store_remove(st, st->count - 1);
        }
    }
}

/* Brings the phase's inputs into the residency it needs; returns the
 * bytes moved. */
static long sched_prepare_inputs(Builder *b, PhaseSched *ph) {
    long bytes = 0;
    int ins[SCHED_MAX_OPERANDS];
    int nins = sched_phase_inputs(ph, ins);
    for (int i = 0; i < nins; ++i) {
        int tensor = ins[i];
        const char *who = b->inst ? b->inst->name : "?";
        if (!sched_holds_any(b, tensor)) {
            int from = sched_value_holder(b, tensor);
            if (from < 0)
                ICE("value of '%s' is held nowhere before the %s phase of '%s'",
                    b->s->tensors[tensor].name, phase_name(ph->kind), who);
            const char *reason =
                b->dry
                    ? TRIAL_REASON
                    : arena_printf(b->arena,
                                   "the %s phase of '%s' tiles '%s' differently from its producer",
                                   phase_name(ph->kind), who, b->s->tensors[from].name);
            bytes += sched_convert(b, ph, from, tensor, &b->need[tensor], reason);
        } else {
            const char *reason =
                b->dry ? TRIAL_REASON
                       : arena_printf(b->arena,
                                      "the %s phase of '%s' needs '%s' in a different layout "
                                      "than it was left in",
                                      phase_name(ph->kind), who, b->s->tensors[tensor].name);
            bytes += sched_redistribute(b, ph, tensor, &b->need[tensor], 0, reason);
        }
    }
    return bytes;
}

/* Runs one phase with its input boundary; returns the bytes moved. */
long sched_phase_exec(Builder *b, PhaseSched *ph) {
    sched_learn_needs(b, ph);
    if (ph->kind == PHASE_FWD && !b->dry && b->consumed)
        for (int i = 0; i < ph->nin; ++i)
            if (!b->consumed[ph->in[i].tensor].ndev)
                b->consumed[ph->in[i].tensor] = b->need[ph->in[i].tensor];
    int nb = ph->boundary.count;
    long bytes = sched_prepare_inputs(b, ph);
    int ins[SCHED_MAX_OPERANDS];
    int nins = sched_phase_inputs(ph, ins);
    Hidden hidden; /* set for the tensors in ins[] only */
    for (int i = 0; i < nins; ++i)
        hide_extras(b, ins[i], &b->need[ins[i]], &hidden, i);
    for (int i = 0; i < nins; ++i)
        b->track_need[ins[i]] = b->dry;
    sched_run_phase(b, ph);
    for (int i = 0; i < nins; ++i) {
        b->track_need[ins[i]] = 0;
        unhide(b, ins[i], &hidden, i);
    }
    sched_strict_check(b, ph, nb);
    return bytes;
}

/* Moves tensor `tensor` to `target` (same tiling), dropping extra copies. */
static long sched_land(Builder *b, PhaseSched *ph, int tensor, const Layout *target,
                       const char *reason) {
    int nb = ph->boundary.count;
    long bytes = sched_redistribute(b, ph, tensor, target, 1, reason);
    sched_strict_check(b, ph, nb);
    return bytes;
}

/* What happens after a backward or gradient phase: the gradient is added
 * into the value's gradient so far (several consumers), a weight's
 * gradient lands in the weight's home layout, weights go home. */
static void flush_collectives(Builder *b, PhaseSched *ph, PtrVec *list) {
    for (int i = 0; i < list->count; ++i)
        sched_emit_collective(b, ph, list->items[i]);
    list->count = 0;
}

/* Do two lists of all-reduces reduce the same tiles over the same groups? */
static int same_collectives(const PtrVec *x, const PtrVec *y) {
    if (x->count != y->count)
        return 0;
    for (int i = 0; i < x->count; ++i) {
        const Collective *a = x->items[i];
        int found = 0;
        for (int j = 0; j < y->count && !found; ++j) {
            const Collective *c = y->items[j];
            found = a->tile == c->tile && a->gsize == c->gsize &&
                    a->orbit_gsize == c->orbit_gsize && a->orbit_join == c->orbit_join &&
                    memcmp(a->group, c->group, sizeof(int) * (size_t)a->gsize) == 0;
        }
        if (!found)
            return 0;
    }
    return 1;
}

static int same_layout(Builder *b, int t1, int t2) {
    for (int d = 0; d < b->ndev; ++d) {
        const Store *x = store_of(b, t1, d), *y = store_of(b, t2, d);
        if (x->count != y->count)
            return 0;
        for (int i = 0; i < x->count; ++i)
            if (sched_store_find(y, x->items[i].tile) < 0)
                return 0;
    }
    return 1;
}

/* acc += contrib, tile by tile on every device (same tiles). */
static void add_tiles(Builder *b, int acc, int contrib) {
    for (int d = 0; d < b->ndev; ++d) {
        const Store *sa = store_of(b, acc, d), *sc = store_of(b, contrib, d);
        for (int i = 0; i < sa->count; ++i) {
            PrimeAction *a = sched_act(b, d, PRIME_ACT_ADD);
            a->tensor = acc;
            a->slot = sa->items[i].slot;
            a->nin = 1;
            a->in_tensor[0] = contrib;
            a->in_slot[0] = sc->items[sched_store_find(sc, sa->items[i].tile)].slot;
        }
    }
}

/* After a backward or gradient phase that produced a contribution to the
 * gradient of model tensor mt: sums it into the gradient so far (acc,
 * -1 for the first contribution). Partial sums that would be all-reduced
 * are, when the layouts and groups agree, added locally first and
 * all-reduced once after the last contribution (the Megatron-LM way). */
static long sched_phase_epilogue(Builder *b, PhaseSched *ph, int acc, int mt, int more_later) {
    long bytes = 0;
    const SchedTensor *out = &b->s->tensors[ph->out.tensor];
    int contrib = ph->out.tensor;
    PtrVec mine = b->deferred;
    memset(&b->deferred, 0, sizeof b->deferred);
    PtrVec *pend = &b->pending[mt];
    if (acc < 0) {
        if (more_later)
            *pend = mine;
        else
            flush_collectives(b, ph, &mine);
        return 0;
    }
    int same_tiling = memcmp(b->s->tensors[acc].nslices, out->nslices, sizeof out->nslices) == 0;
    if (mine.count && pend->count && same_tiling && same_layout(b, acc, contrib) &&
        same_collectives(pend, &mine)) {
        add_tiles(b, acc, contrib);
        sched_free_all(b, contrib);
        if (!more_later)
            flush_collectives(b, ph, pend);
        return 0;
    }
    flush_collectives(b, ph, pend);
    flush_collectives(b, ph, &mine);
    /* Bring the contribution to the layout of the gradient so far and add. */
    Layout target = sched_layout_of(b, acc);
    const char *reason =
        arena_printf(b->arena, "the contributions to '%s' are summed where the first one is",
                     b->s->tensors[acc].name);
    if (same_tiling) {
        bytes += sched_land(b, ph, contrib, &target, reason);
    } else {
        int tmp = sched_storage_like(b, acc);
        if (tmp < 0)
            return bytes;
        bytes += sched_convert(b, ph, contrib, tmp, &target, reason);
        sched_free_all(b, contrib);
        contrib = tmp;
    }
    add_tiles(b, acc, contrib);
    sched_free_all(b, contrib);
    return bytes;
}

/* Does a phase after p produce another contribution to mt's gradient? */
int sched_more_contributions(const Builder *b, int p, int mt) {
    return b->last_contribution[mt] > p;
}

/* Bytes to bring a backward phase's input gradient from where it ends to
 * where its value was consumed in the forward phase (where the producer's
 * backward phase will want it in an aligned plan). */
static long downstream_bytes(Builder *b, PhaseSched *ph) {
    if (ph->kind != PHASE_BWD || !b->consumed)
        return 0;
    const SchedTensor *g = &b->s->tensors[ph->out.tensor];
    for (int t = 0; t < b->s->ntensors; ++t) {
        const SchedTensor *x = &b->s->tensors[t];
        if (x->is_grad || x->model_tensor != g->model_tensor ||
            memcmp(x->nslices, g->nslices, sizeof x->nslices) != 0 || !b->consumed[t].ndev)
            continue;
        Layout have = sched_layout_of(b, ph->out.tensor);
        long bytes = sched_conversion_bytes(g, &have, x, &b->consumed[t], NULL);
        return bytes > 0 ? bytes : 0;
    }
    return 0;
}

void sched_choose_order(Builder *b, PhaseSched *ph, int p, const int *grad_storage) {
    long best = -1;
    int best_rev = 0;
    if (b->steps <= 1) {
        ph->reversed = 0;
        return;
    }
    /* A trial writes the phase's operands and output, and storage tensors
     * it makes itself (dropped again): only those are saved. */
    int touched[SCHED_MAX_OPERANDS + 1];
    int ntouched = sched_phase_inputs(ph, touched), out_listed = 0;
    for (int i = 0; i < ntouched; ++i)
        out_listed |= touched[i] == ph->out.tensor;
    if (!out_listed)
        touched[ntouched++] = ph->out.tensor;
    /* Both trials start from the same state: one copy of it serves both. */
    MachineSave saved;
    int saved_ntensors = b->m.ntensors;
    sched_machine_save(b, &saved, touched, ntouched);
#ifndef NDEBUG
    Machine whole; /* checks that the trials touch nothing else */
    int check = sched_machine_snapshot(b, &whole);
#endif
    for (int rev = 0; rev < 2; ++rev) {
        int was_dry = b->dry, was_failed = b->failed, tag = b->next_tag;
        /* A trial may flush or replace the deferred all-reduces of the
         * phase's gradient (and only those): it gets a copy. */
        int mt = b->s->tensors[ph->out.tensor].model_tensor;
        PtrVec pending = {0};
        for (int i = 0; i < b->pending[mt].count; ++i)
            ptrvec_push(b->arena, &pending, b->pending[mt].items[i]);
        PtrVec deferred = b->deferred;
        b->dry = 1;
        b->failed = 0;
        ph->reversed = rev;
        long bytes = sched_phase_exec(b, ph);
        bytes += downstream_bytes(b, ph);
        bytes += sched_phase_finish(b, ph, p, grad_storage);
        int failed = b->failed;
        b->pending[mt] = pending;
        b->deferred = deferred;
#ifndef NDEBUG
        if (check)
            sched_machine_check_untouched(b, &whole, touched, ntouched);
#endif
        sched_machine_restore(b, &saved);
        b->m.ntensors = saved_ntensors;
        b->dry = was_dry;
        b->failed = was_failed || b->out_of_slots;
        b->next_tag = tag;
        if (!failed && (best < 0 || bytes < best)) {
            best = bytes;
            best_rev = rev;
        }
    }
    ph->reversed = best_rev;
}

/* Appends storage tensor `tensor` to its value's list (ids ascending). */
void sched_value_link(Builder *b, int tensor) {
    const SchedTensor *t = &b->s->tensors[tensor];
    int v = t->model_tensor * 2 + t->is_grad;
    b->value_next[tensor] = -1;
    if (b->value_first[v] < 0)
        b->value_first[v] = tensor;
    else
        b->value_next[b->value_end[v]] = tensor;
    b->value_end[v] = tensor;
}

/* Computes the last reads of every storage tensor and value and the last
 * contribution to every gradient, once the phases are bound. */
void sched_liveness_init(Builder *b) {
    Schedule *s = b->s;
    int nphases = s->phases.count;
    b->nlive = s->ntensors;
    b->last_read = ARENA_ARRAY(b->arena, int, s->ntensors + 1);
    b->value_last_read = ARENA_ARRAY(b->arena, int, 2 * s->model->ntensors + 1);
    b->last_contribution = ARENA_ARRAY(b->arena, int, s->model->ntensors + 1);
    b->read_last_at = ARENA_ARRAY(b->arena, IntList, nphases);
    b->gained_flag = arena_alloc(b->arena, (size_t)b->tensor_cap);
    b->seen_at = ARENA_ARRAY(b->arena, int, b->tensor_cap);
    for (int t = 0; t < s->ntensors; ++t)
        b->last_read[t] = -1;
    for (int v = 0; v < 2 * s->model->ntensors; ++v)
        b->value_last_read[v] = -1;
    for (int v = 0; v < s->model->ntensors; ++v)
        b->last_contribution[v] = -1;
    for (int q = 0; q < nphases; ++q) {
        const PhaseSched *qh = s->phases.items[q];
        for (int i = 0; i < qh->nin; ++i) {
            const SchedTensor *u = &s->tensors[qh->in[i].tensor];
            b->last_read[qh->in[i].tensor] = q;
            b->value_last_read[u->model_tensor * 2 + u->is_grad] = q;
        }
        if (qh->kind == PHASE_BWD || qh->kind == PHASE_GRAD)
            b->last_contribution[s->tensors[qh->out.tensor].model_tensor] = q;
    }
    for (int t = 0; t < s->ntensors; ++t)
        if (b->last_read[t] >= 0)
            intlist_push(b->arena, &b->read_last_at[b->last_read[t]], t);
}

/* May tensor t be freed after phase p? It is not a result to check or a
 * weight, holds tiles, and no later phase reads it, or no later phase
 * reads this very storage and another tiling holds the value. */
/* Results to check and weights are never freed. */
static int never_dead(const Builder *b, int t) {
    const SchedTensor *ts = &b->s->tensors[t];
    return ts->check || (ts->is_weight && !ts->is_grad);
}

static int dead_after(Builder *b, int t, int p) {
    const SchedTensor *ts = &b->s->tensors[t];
    if (never_dead(b, t) || !sched_holds_any(b, t))
        return 0;
    if (b->value_last_read[ts->model_tensor * 2 + ts->is_grad] > p)
        return last_read_of(b, t) <= p && sched_value_holder(b, t) >= 0;
    return 1;
}

static int cmp_int(const void *x, const void *y) {
    int a = *(const int *)x, c = *(const int *)y;
    return (a > c) - (a < c);
}

/* After phase p: frees storage tensors no later phase reads, unless they
 * are results to check or weights. Only tensors last read at p, those
 * that gained tiles since the last call and those kept at the last call
 * can be dead (in ascending id order, as a scan of all would find them),
 * so the pass stays linear in the number of phases. */
void sched_free_dead(Builder *b, int p) {
    PhaseSched *ph = b->s->phases.items[p];
    IntList look = b->look; /* its memory is reused from call to call */
    look.count = 0;
    const IntList *from[3] = {&b->read_last_at[p], &b->gained, &b->kept};
    for (int k = 0; k < 3; ++k)
        for (int i = 0; i < from[k]->count; ++i) {
            int t = from[k]->items[i];
            if (b->seen_at[t] != p + 1) {
                b->seen_at[t] = p + 1;
                intlist_push(b->arena, &look, t);
            }
        }
    for (int i = 0; i < b->gained.count; ++i)
        b->gained_flag[b->gained.items[i]] = 0;
    b->gained.count = 0;
    b->kept.count = 0;
    b->look = look;
    if (look.count)
        qsort(look.items, (size_t)look.count, sizeof(int), cmp_int);
    for (int i = 0; i < look.count; ++i) {
        int t = look.items[i];
        if (dead_after(b, t, p)) {
            b->ph = ph;
            sched_free_all(b, t);
        } else if (last_read_of(b, t) <= p && !never_dead(b, t) && sched_holds_any(b, t)) {
            /* Looked at again after the next phase (a tensor that is
             * never freed is not: every layer's weights would be looked
             * at after every phase). */
            intlist_push(b->arena, &b->kept, t);
        }
    }
#ifndef NDEBUG
    for (int t = 0; t < b->s->ntensors && b->s->ntensors <= SCHED_DEBUG_CHECK_TENSORS; ++t)
        if (dead_after(b, t, p))
            ICE("storage tensor '%s' is dead after phase %d but was not freed",
                b->s->tensors[t].name, p);
#endif
}

/* After a backward or gradient phase: its gradient is summed with
 * earlier contributions; a weight's gradient lands in the weight's home
 * layout; after the instance's last phase its weights go home. Returns
 * the bytes moved (phase order trials compare them). */
long sched_phase_finish(Builder *b, PhaseSched *ph, int p, const int *grad_storage) {
    Schedule *s = b->s;
    const Model *model = s->model;
    Arena *arena = b->arena;
    const Instance *inst = &model->instances[ph->inst];
    long bytes = 0;
    if (ph->kind == PHASE_BWD || ph->kind == PHASE_GRAD) {
        int mt = inst->args[ph->wrt];
        int acc = grad_storage[mt] != ph->out.tensor ? grad_storage[mt] : -1;
        bytes += sched_phase_epilogue(b, ph, acc, mt, sched_more_contributions(b, p, mt));
        if (model->tensors[mt].role == TENSOR_WEIGHT) {
            /* No storage: no phase reads the weight, so it has no home. */
            int w = sched_storage_find(b, mt, 0, ph->inst, &inst->op->inputs[ph->wrt]);
            if (w >= 0 && s->home[w].ndev && acc < 0)
                bytes += sched_land(
                    b, ph, ph->out.tensor, &s->home[w],
                    arena_printf(arena,
                                 "'%s' must end in the layout of '%s' for a local optimizer step",
                                 s->tensors[ph->out.tensor].name, s->tensors[w].name));
        }
    }
    /* A weight no later phase reads goes home for the optimizer step. */
    for (int i = 0; i < ph->nin; ++i) {
        int w = ph->in[i].tensor;
        const SchedTensor *ts = &s->tensors[w];
        if (!ts->is_weight || ts->is_grad || !s->home[w].ndev)
            continue;
        if (last_read_of(b, w) <= p)
            bytes += sched_land(
                b, ph, w, &s->home[w],
                arena_printf(arena, "'%s' must be back in its home layout for the optimizer step",
                             ts->name));
    }
    return bytes;
}
