/*
 * sched_trials.c — the trial runs that learn the residency each input of
 * a phase needs at its start (sched_learn_needs), and the reuse of their
 * results by a later phase of the same shape.
 */
#include "sched_internal.h"

/* ---- Residency trials reused --------------------------------------- */

/* What the residency trials of a phase learnt, and everything they read:
 * the trials clear the stores of the phase's operands and output (so the
 * holder counts are theirs alone) and run the phase on the machine, so
 * what they decide is a function of the phase's shape (its instance's
 * slice table and steps, its operands' index orders and tilings, which
 * operands share a storage tensor, the sweep order), of the slots in use
 * and the slot rings of the tensors they touch (the stores are cleared,
 * the slots are not), and of whether the phase's all-reduces are
 * deferred. A later phase equal in all of these (a copy of a repeated
 * layer, its tensors another block) learns the same: it takes the
 * result instead of running the trials. The side effects of the trials
 * on the builder are replayed too: the tensors they allocated a slot of
 * join the list sched_free_dead looks at, and the phase's action lists
 * get the room its trials would have counted. */
/* The nonzero words of a tensor's slot words (Machine.slot_used), in
 * order: what the memo compares a later phase's slots with, a fraction of
 * the words of every device. */
typedef struct SlotSnap {
    long n;
    long *at; /* word index, ascending */
    uint64_t *word;
} SlotSnap;

typedef struct NeedMemo {
    const PhaseSched *ph; /* the phase whose trials ran */
    int rev, defer, nins, ntouched;
    SlotSnap slots[SCHED_MAX_OPERANDS + 1];      /* per touched tensor, before the trials */
    Layout need[SCHED_MAX_OPERANDS + 1];         /* per distinct input (ins[]) */
    unsigned char alloc[SCHED_MAX_OPERANDS + 1]; /* a trial took a slot of touched[k] */
    int *hint;                                   /* per device: most actions a trial run appended */
} NeedMemo;

/* Whether two storage tensors are tiled alike. */
static int same_tiling(const SchedTensor *x, const SchedTensor *y) {
    return x->ndims == y->ndims && x->ntiles == y->ntiles && x->tile_elems == y->tile_elems &&
           x->combine == y->combine && memcmp(x->nslices, y->nslices, sizeof x->nslices) == 0;
}

static int same_operand(const Schedule *s, const Operand *x, const Operand *y) {
    return x->ndims == y->ndims &&
           memcmp(x->opdims, y->opdims, sizeof(int) * (size_t)x->ndims) == 0 &&
           same_tiling(&s->tensors[x->tensor], &s->tensors[y->tensor]);
}

/* Where operand i's storage tensor first occurs among the phase's
 * operands (the output is operand nin). */
static int first_use(const PhaseSched *ph, int i) {
    int t = i < ph->nin ? ph->in[i].tensor : ph->out.tensor;
    for (int j = 0; j < i; ++j)
        if (ph->in[j].tensor == t)
            return j;
    return i;
}

/* Whether the trials of x and y read the same shape (see NeedMemo). */
static int same_shape(const Builder *b, const PhaseSched *x, const PhaseSched *y) {
    const Schedule *s = b->s;
    if (x->kind != y->kind || x->nin != y->nin || x->inst < 0 || y->inst < 0 ||
        !same_operand(s, &x->out, &y->out))
        return 0;
    for (int i = 0; i < x->nin; ++i)
        if (!same_operand(s, &x->in[i], &y->in[i]))
            return 0;
    for (int i = 0; i <= x->nin; ++i)
        if (first_use(x, i) != first_use(y, i))
            return 0;
    if (x->inst == y->inst)
        return 1;
    const Instance *ix = &s->model->instances[x->inst], *iy = &s->model->instances[y->inst];
    const SliceTable *sx = &s->slices[x->inst], *sy = &s->slices[y->inst];
    if (ix->steps != iy->steps || sx->ndev != sy->ndev || sx->steps != sy->steps ||
        sx->ndims != sy->ndims || memcmp(sx->nslices, sy->nslices, sizeof sx->nslices) ||
        memcmp(sx->extent, sy->extent, sizeof sx->extent))
        return 0;
    size_t n = (size_t)sx->ndims * (size_t)sx->ndev * (size_t)sx->steps;
    return sx->slice == sy->slice || memcmp(sx->slice, sy->slice, sizeof(long) * n) == 0;
}

/* A copy of a learnt layout that aliases as the original would: its
 * arrays are its own, with the same room to grow in place. */
static Layout layout_clone(Builder *b, const Layout *l) {
    Layout c;
    c.ndev = l->ndev;
    c.count = ARENA_ARRAY_UNINIT(b->arena, int, l->ndev + 1);
    c.tiles = ARENA_ARRAY(b->arena, long *, l->ndev + 1);
    c.slots = ARENA_ARRAY(b->arena, int *, l->ndev + 1);
    c.cap = l->cap ? ARENA_ARRAY(b->arena, int, l->ndev + 1) : NULL;
    for (int d = 0; d < l->ndev; ++d) {
        int n = l->count[d], room = l->cap && l->cap[d] > n ? l->cap[d] : n;
        c.count[d] = n;
        c.slots[d] = l->slots[d];
        if (l->cap)
            c.cap[d] = l->cap[d];
        if (l->tiles[d] || room) {
            c.tiles[d] = ARENA_ARRAY_UNINIT(b->arena, long, room + 1);
            if (n)
                memcpy(c.tiles[d], l->tiles[d], sizeof(long) * (size_t)n);
        }
    }
    return c;
}

static long slot_words(const Builder *b) {
    return (long)b->ndev * SLOT_WORDS;
}

static SlotSnap slot_snap_take(Builder *b, const uint64_t *w) {
    long nw = slot_words(b), n = 0;
    for (long i = 0; i < nw; ++i)
        n += w[i] != 0;
    SlotSnap sn = {n, ARENA_ARRAY_UNINIT(b->arena, long, n + 1),
                   ARENA_ARRAY_UNINIT(b->arena, uint64_t, n + 1)};
    n = 0;
    for (long i = 0; i < nw; ++i)
        if (w[i]) {
            sn.at[n] = i;
            sn.word[n++] = w[i];
        }
    return sn;
}

/* Whether slot words w are those of the snapshot. */
static int slot_snap_equal(const Builder *b, const SlotSnap *sn, const uint64_t *w) {
    long nw = slot_words(b), k = 0;
    for (long i = 0; i < nw; ++i) {
        if (!w[i])
            continue;
        if (k == sn->n || sn->at[k] != i || sn->word[k] != w[i])
            return 0;
        ++k;
    }
    return k == sn->n;
}

/* The memo of an earlier phase whose trials this phase's would repeat, or
 * NULL; *same_at: the index of the memo of the same shape and order (to
 * replace), -1 if none. */
static NeedMemo *memo_find(Builder *b, const PhaseSched *ph, int rev, const int *touched,
                           int ntouched, int *same_at) {
    *same_at = -1;
    for (int k = b->need_memo.count - 1; k >= 0; --k) {
        NeedMemo *m = b->need_memo.items[k];
        if (m->rev != rev || m->ntouched != ntouched || !same_shape(b, m->ph, ph))
            continue;
        *same_at = k;
        if (m->defer != b->defer)
            return NULL;
        for (int i = 0; i < ntouched; ++i)
            if (!slot_snap_equal(b, &m->slots[i], b->m.slot_used[touched[i]]))
                return NULL;
        return m;
    }
    return NULL;
}

/* Keeps the needs just learnt for phase ph's sweep order rev. */
static void need_cache_store(Builder *b, PhaseSched *ph, int rev) {
    Layout *cache = ARENA_ARRAY(b->arena, Layout, ph->nin + 1);
    for (int k = 0; k < ph->nin; ++k)
        cache[k] = b->need[ph->in[k].tensor];
    ph->need_cache[rev] = cache;
    ph->need_cached[rev] = 1;
}

/* Applies a memo to phase ph: its learnt needs and the trials' effects. */
static void memo_apply(Builder *b, PhaseSched *ph, int rev, const NeedMemo *m, const int *ins,
                       const int *touched) {
    for (int i = 0; i < m->nins; ++i) {
        b->need[ins[i]] = layout_clone(b, &m->need[i]);
        b->track_need[ins[i]] = 0;
    }
    for (int k = 0; k < m->ntouched; ++k)
        if (m->alloc[k] && b->gained_flag && !b->gained_flag[touched[k]]) {
            b->gained_flag[touched[k]] = 1;
            intlist_push(b->arena, &b->gained, touched[k]);
        }
    if (!ph->action_hint)
        ph->action_hint = ARENA_ARRAY(b->arena, int, b->ndev);
    for (int d = 0; d < b->ndev; ++d)
        if (m->hint[d] > ph->action_hint[d])
            ph->action_hint[d] = m->hint[d];
    need_cache_store(b, ph, rev);
    b->need_memo_hits++;
}

/* Learns the residency each input needs at the start of the phase: a
 * trial run from empty input stores records the tiles nobody could
 * send; a second trial from that residency confirms it. */
void sched_learn_needs(Builder *b, PhaseSched *ph) {
    int rev = ph->reversed ? 1 : 0;
    if (ph->need_cached[rev]) {
        const Layout *cache = ph->need_cache[rev];
        for (int i = 0; i < ph->nin; ++i)
            b->need[ph->in[i].tensor] = cache[i];
        return;
    }
    int ins[SCHED_MAX_OPERANDS + 1];
    int nins = sched_phase_inputs(ph, ins);
    /* The trial runs touch the phase's operands only: those are saved. */
    int touched[SCHED_MAX_OPERANDS + 1], ntouched = nins;
    memcpy(touched, ins, sizeof(int) * (size_t)nins);
    int out_listed = 0;
    for (int i = 0; i < nins; ++i)
        out_listed |= ins[i] == ph->out.tensor;
    if (!out_listed)
        touched[ntouched++] = ph->out.tensor;
    /* Staged models idle devices per instance; a failed or exhausted
     * builder changes what the trials do: no reuse there. */
    int memo =
        !b->reuse_off && !b->s->model->nstages && !b->failed && !b->out_of_slots && b->dry_count;
    int same_at = -1;
    if (memo) {
        const NeedMemo *m = memo_find(b, ph, rev, touched, ntouched, &same_at);
        if (m) {
            memo_apply(b, ph, rev, m, ins, touched);
            return;
        }
    }
    unsigned char had_gained[SCHED_MAX_OPERANDS + 1] = {0};
    int *hint = NULL;
    SlotSnap slots_before[SCHED_MAX_OPERANDS + 1];
    if (memo) {
        /* Which touched tensors the trials take a slot of: their gained
         * flags are cleared meanwhile (a tensor may then be listed twice
         * in gained, which sched_free_dead looks at once). */
        for (int k = 0; k < ntouched && b->gained_flag; ++k) {
            had_gained[k] = b->gained_flag[touched[k]];
            b->gained_flag[touched[k]] = 0;
        }
        hint = ARENA_ARRAY(b->arena, int, b->ndev + 1);
        for (int k = 0; k < ntouched; ++k)
            slots_before[k] = slot_snap_take(b, b->m.slot_used[touched[k]]);
    }
    MachineSave saved;
    sched_machine_save(b, &saved, touched, ntouched);
#ifndef NDEBUG
    Machine whole; /* checks that the trials touch nothing else */
    int check = sched_machine_snapshot(b, &whole);
#endif
    int was_dry = b->dry, was_failed = b->failed, was_tag = b->next_tag;
    b->dry = 1;
    for (int i = 0; i < nins; ++i) {
        b->need[ins[i]] = sched_layout_empty(b);
        b->track_need[ins[i]] = 1;
    }
    for (int pass = 0; pass < 3; ++pass) {
        sched_machine_restore(b, &saved);
        int before = 0, after = 0;
        for (int i = 0; i < nins; ++i) {
            for (int d = 0; d < b->ndev; ++d) {
                sched_store_clear(store_of(b, ins[i], d));
                for (int x = 0; x < b->need[ins[i]].count[d]; ++x)
                    sched_store_add(b, store_of(b, ins[i], d), b->need[ins[i]].tiles[d][x],
                                    sched_slot_alloc(b, ins[i], d));
                before += b->need[ins[i]].count[d];
            }
        }
        /* The output starts empty. */
        for (int d = 0; d < b->ndev; ++d)
            sched_store_clear(store_of(b, ph->out.tensor, d));
        b->need_late = 0;
        sched_run_phase(b, ph);
        for (int d = 0; hint && d < b->ndev; ++d)
            if (b->dry_count[d] > hint[d])
                hint[d] = b->dry_count[d];
        for (int i = 0; i < nins; ++i)
            for (int d = 0; d < b->ndev; ++d)
                after += b->need[ins[i]].count[d];
        /* One step: nothing moves, so the first trial is exact. A first
         * trial that learnt every tile at its first step is confirmed
         * without a second: that one would start from the state the first
         * had after its first step's inputs (the same tiles, and the same
         * slots in use, in another order), so it would run alike and learn
         * nothing. */
        if ((pass > 0 && after == before) || (pass == 0 && !b->need_late) || b->steps == 1 ||
            b->out_of_slots)
            break;
    }
    for (int i = 0; i < nins; ++i)
        b->track_need[ins[i]] = 0;
#ifndef NDEBUG
    if (check)
        sched_machine_check_untouched(b, &whole, touched, ntouched);
#endif
    sched_machine_restore(b, &saved);
    b->dry = was_dry;
    b->failed = was_failed || b->out_of_slots;
    b->next_tag = was_tag; /* trial tags are never emitted */
    need_cache_store(b, ph, rev);
    if (!memo)
        return;
    NeedMemo *m = ARENA_NEW(b->arena, NeedMemo);
    m->ph = ph;
    m->rev = rev;
    m->defer = b->defer;
    m->nins = nins;
    m->ntouched = ntouched;
    memcpy(m->slots, slots_before, sizeof(SlotSnap) * (size_t)ntouched);
    m->hint = hint;
    for (int k = 0; k < ntouched; ++k) {
        m->alloc[k] = b->gained_flag ? b->gained_flag[touched[k]] : 0;
        if (b->gained_flag)
            b->gained_flag[touched[k]] = (unsigned char)(had_gained[k] | m->alloc[k]);
    }
    for (int i = 0; i < nins; ++i)
        m->need[i] = layout_clone(b, &b->need[ins[i]]);
    if (b->failed || b->out_of_slots)
        return; /* a trial failed: nothing to reuse */
    if (same_at >= 0)
        b->need_memo.items[same_at] = m;
    else
        ptrvec_push(b->arena, &b->need_memo, m);
}
