/*
 * sched_predict.c — predicted bytes and peak memory per rank, from
 * interpreting the action lists the emitted program runs (so they are
 * exact for it).
 *
 * The interpretation is a fold over each rank's actions in order, phase
 * by phase. sched_predict runs it over the kept lists; a schedule built
 * for `check` alone (schedule_check_from) runs the same fold on each
 * action as it is appended, and keeps no list: every rank's last action
 * waits in one record (Builder.pending_act) until the rank's next action or
 * the end of the schedule, since its fields are written after
 * sched_act returns it.
 */
#include "sched_internal.h"

uint64_t sched_collective_bytes(int op, long elems, int gsize, int pos) {
    size_t n = (size_t)elems;
    return op == PRIME_ACT_ALLGATHER        ? prime_allgather_bytes(n, gsize, pos)
           : op == PRIME_ACT_REDUCE_SCATTER ? prime_reduce_scatter_bytes(n, gsize, pos)
                                            : prime_allreduce_bytes(n, gsize, pos);
}

const char *sched_collective_kind(const Collective *c) {
    return c->allgather ? "all-gather" : c->reduce_scatter ? "reduce-scatter" : "all-reduce";
}

static void predict_room(Schedule *s, Arena *arena) {
    int ndev = s->model->mesh.ndev;
    for (int k = 0; k < PRIME_BYTES_KIND_COUNT; ++k)
        s->pred_bytes[k] = ARENA_ARRAY(arena, long, ndev);
    s->pred_peak = ARENA_ARRAY(arena, long, ndev);
    for (int p = 0; p < s->phases.count; ++p) {
        PhaseSched *ph = s->phases.items[p];
        ph->peak = ARENA_ARRAY(arena, long, ndev);
    }
}

static void open_phase(PredictRank *r, int p) {
    r->phase = p;
    r->phase_peak = r->cur;
    r->temps = 0;
}

static void close_phase(Schedule *s, int d, PredictRank *r) {
    PhaseSched *ph = s->phases.items[r->phase];
    ph->peak[d] = r->phase_peak;
    if (r->phase_peak > r->peak)
        r->peak = r->phase_peak;
}

/* One action of rank d in phase ph; tile_bytes: of its tensor's tiles. */
static void fold_action(Schedule *s, const PhaseSched *ph, int d, const PrimeAction *a,
                        long tile_bytes, PredictRank *r) {
    if (!prime_action_has_tensor(a->op))
        tile_bytes = 0;
    switch (a->op) {
    case PRIME_ACT_ALLOC:
        r->cur += tile_bytes;
        break;
    case PRIME_ACT_FREE:
        r->cur -= tile_bytes;
        break;
    case PRIME_ACT_SEND:
        s->pred_bytes[a->kind][d] += tile_bytes;
        break;
    case PRIME_ACT_SEND_BOX:
    case PRIME_ACT_RECV_BOX: {
        const PrimeBox *box = &ph->boxes[a->arg];
        long n = 1;
        for (int x = 0; x < box->ndims; ++x)
            n *= box->ext[x];
        r->cur += n * (long)sizeof(float);
        r->temps += n * (long)sizeof(float);
        if (a->op == PRIME_ACT_SEND_BOX)
            s->pred_bytes[a->kind][d] += n * (long)sizeof(float);
        break;
    }
    case PRIME_ACT_WAIT:
        r->cur -= r->temps;
        r->temps = 0;
        break;
    case PRIME_ACT_KEEP: {
        /* Packed buffers of box sends kept past their phase, per tag:
         * freed at the WAIT_KEPT of the tag, as the runtime frees them. */
        long *k = ARENA_ARRAY(r->arena, long, 2);
        k[0] = a->tag;
        k[1] = r->temps;
        ptrvec_push(r->arena, &r->kept, k);
        r->temps = 0;
        break;
    }
    case PRIME_ACT_WAIT_KEPT:
        for (int j = 0; j < r->kept.count; ++j) {
            long *k = r->kept.items[j];
            if (k[0] == a->tag)
                r->cur -= k[1], k[1] = 0;
        }
        break;
    case PRIME_ACT_ALLREDUCE:
    case PRIME_ACT_REDUCE_SCATTER:
    case PRIME_ACT_ALLGATHER: {
        const Collective *c = ph->groups.items[a->arg];
        int pos = 0;
        while (c->group[pos] != d)
            pos++;
        /* A group over every replica of which this run simulates one
         * (sched_orbit.c): its bytes depend on the member's position in
         * the whole group and are added when the schedule is expanded. */
        int gsize = c->orbit_gsize ? c->orbit_gsize : c->gsize;
        if (!c->orbit_gsize)
            s->pred_bytes[PRIME_BYTES_COLLECTIVE][d] +=
                (long)sched_collective_bytes(a->op, c->elems, c->gsize, pos);
        /* The all-gather receives into the tile itself. */
        long scratch =
            a->op == PRIME_ACT_ALLGATHER
                ? 0
                : (long)prime_collective_scratch((size_t)c->elems, gsize) * (long)sizeof(float);
        if (r->cur + scratch > r->phase_peak)
            r->phase_peak = r->cur + scratch;
        break;
    }
    default:
        break;
    }
    if (r->cur > r->phase_peak)
        r->phase_peak = r->cur;
}

void sched_predict(Schedule *s, Arena *arena) {
    int ndev = s->model->mesh.ndev;
    predict_room(s, arena);
    /* Tile bytes per tensor in one table: the loop below reads one per
     * action, and the tensors' records are far apart. */
    long *tile_bytes_of = ARENA_ARRAY_UNINIT(arena, long, s->ntensors + 1);
    for (int t = 0; t < s->ntensors; ++t)
        tile_bytes_of[t] = s->tensors[t].tile_elems * (long)sizeof(float);
    /* Phase by phase, every rank in a phase: a phase's lists and per-rank
     * arrays are read and written in one sweep. */
    PredictRank *rs = ARENA_ARRAY(arena, PredictRank, ndev);
    for (int d = 0; d < ndev; ++d)
        rs[d].arena = arena;
    for (int p = 0; p < s->phases.count; ++p) {
        PhaseSched *ph = s->phases.items[p];
        ph->start = ARENA_ARRAY_UNINIT(arena, long, ndev);
        for (int d = 0; d < ndev; ++d) {
            PredictRank *r = &rs[d];
            open_phase(r, p);
            ph->start[d] = r->cur;
            for (int i = 0; i < ph->nactions[d]; ++i) {
                const PrimeAction *a = &ph->actions[d][i];
                long tile_bytes = prime_action_has_tensor(a->op) ? tile_bytes_of[a->tensor] : 0;
                fold_action(s, ph, d, a, tile_bytes, r);
            }
            close_phase(s, d, r);
        }
    }
    for (int d = 0; d < ndev; ++d)
        s->pred_peak[d] = rs[d].peak;
}

/* Whether sched_predict_again can fold rewritten phase ph alone: none
 * of its actions moves bytes between ranks or keeps a buffer past it. */
static int refoldable(const Schedule *s, const PhaseSched *ph) {
    for (int d = 0; d < s->model->mesh.ndev; ++d)
        for (int i = 0; i < ph->nactions[d]; ++i)
            switch (ph->actions[d][i].op) {
            case PRIME_ACT_SEND:
            case PRIME_ACT_SEND_BOX:
            case PRIME_ACT_RECV_BOX:
            case PRIME_ACT_KEEP:
            case PRIME_ACT_WAIT_KEPT:
            case PRIME_ACT_ALLREDUCE:
            case PRIME_ACT_REDUCE_SCATTER:
            case PRIME_ACT_ALLGATHER:
                return 0;
            default:
                break;
            }
    return 1;
}

void sched_predict_again(Schedule *s, Arena *arena, const unsigned char *rewritten) {
    int ndev = s->model->mesh.ndev, n = s->phases.count;
    int ok = !s->folded;
    for (int p = 0; p < n && ok; ++p) {
        const PhaseSched *ph = s->phases.items[p];
        ok = ph->start && (!rewritten[p] || refoldable(s, ph));
    }
    if (!ok) {
        sched_predict(s, arena);
        return;
    }
    /* delta[d]: the bytes in use on rank d now less those before the
     * rewrite, as phase p starts; a phase not rewritten runs alike,
     * shifted by it. */
    long *delta = ARENA_ARRAY(arena, long, ndev), *peak = ARENA_ARRAY(arena, long, ndev);
    for (int p = 0; p < n; ++p) {
        PhaseSched *ph = s->phases.items[p];
        const PhaseSched *next = p + 1 < n ? s->phases.items[p + 1] : NULL;
        for (int d = 0; d < ndev; ++d) {
            if (rewritten[p]) {
                PredictRank r = {0};
                r.arena = arena;
                r.cur = ph->start[d] + delta[d];
                open_phase(&r, p);
                ph->start[d] = r.cur;
                for (int i = 0; i < ph->nactions[d]; ++i) {
                    const PrimeAction *a = &ph->actions[d][i];
                    long tile_bytes = prime_action_has_tensor(a->op)
                                          ? s->tensors[a->tensor].tile_elems * (long)sizeof(float)
                                          : 0;
                    fold_action(s, ph, d, a, tile_bytes, &r);
                }
                ph->peak[d] = r.phase_peak;
                delta[d] = next ? r.cur - next->start[d] : 0;
            } else if (delta[d]) {
                ph->start[d] += delta[d];
                ph->peak[d] += delta[d];
            }
            if (ph->peak[d] > peak[d])
                peak[d] = ph->peak[d];
        }
    }
    for (int d = 0; d < ndev; ++d)
        s->pred_peak[d] = peak[d];
}

/* ------------------------------------------------------------------ */
/* Folding as the actions are appended                                 */

void sched_fold_begin(Builder *b) {
    Schedule *s = b->s;
    predict_room(s, b->arena);
    b->pred = ARENA_ARRAY(b->arena, PredictRank, b->ndev);
    b->pending_act = ARENA_ARRAY(b->arena, PrimeAction, b->ndev);
    b->pending_ph = ARENA_ARRAY(b->arena, PhaseSched *, b->ndev);
    for (int d = 0; d < b->ndev; ++d) {
        b->pred[d].arena = b->arena;
        open_phase(&b->pred[d], 0);
    }
    s->folded = 1;
}

/* Folds rank dev's pending action, first closing the phases before its
 * own (a rank's actions are appended phase after phase). */
static void fold_pending(Builder *b, int dev) {
    Schedule *s = b->s;
    const PhaseSched *ph = b->pending_ph[dev];
    PredictRank *r = &b->pred[dev];
    while (s->phases.items[r->phase] != ph) {
        close_phase(s, dev, r);
        if (r->phase + 1 >= s->phases.count)
            ICE("rank %d appended an action to a phase before the one it is in", dev);
        open_phase(r, r->phase + 1);
    }
    const PrimeAction *a = &b->pending_act[dev];
    long tile_bytes =
        prime_action_has_tensor(a->op) ? s->tensors[a->tensor].tile_elems * (long)sizeof(float) : 0;
    fold_action(s, ph, dev, a, tile_bytes, r);
    b->pending_ph[dev] = NULL;
}

/* Whether folding an action of this kind changes nothing (it moves no
 * byte and allocates none): such an action is counted, not folded. A
 * phase whose actions on a rank are all of these gets the peak of the
 * bytes in use, as when they are folded. */
static int fold_is_noop(int op) {
    switch (op) {
    case PRIME_ACT_ALLOC:
    case PRIME_ACT_FREE:
    case PRIME_ACT_SEND:
    case PRIME_ACT_SEND_BOX:
    case PRIME_ACT_RECV_BOX:
    case PRIME_ACT_WAIT:
    case PRIME_ACT_KEEP:
    case PRIME_ACT_WAIT_KEPT:
    case PRIME_ACT_ALLREDUCE:
    case PRIME_ACT_REDUCE_SCATTER:
    case PRIME_ACT_ALLGATHER:
        return 0;
    default:
        return 1;
    }
}

PrimeAction *sched_fold_act(Builder *b, int dev, int op) {
    static PrimeAction scratch; /* written, never read */
    b->ph->nactions[dev]++;
    if (fold_is_noop(op))
        return &scratch;
    if (b->pending_ph[dev])
        fold_pending(b, dev);
    b->pending_ph[dev] = b->ph;
    /* The fields the fold reads that its caller may leave unset. */
    PrimeAction *a = &b->pending_act[dev];
    a->op = op;
    a->tensor = a->kind = a->arg = 0;
    return a;
}

void sched_fold_end(Builder *b) {
    Schedule *s = b->s;
    for (int d = 0; d < b->ndev; ++d) {
        PredictRank *r = &b->pred[d];
        if (b->pending_ph[d])
            fold_pending(b, d);
        for (; r->phase + 1 < s->phases.count; open_phase(r, r->phase + 1))
            close_phase(s, d, r);
        close_phase(s, d, r);
        s->pred_peak[d] = r->peak;
    }
}

void sched_make_reduce_scatter(Builder *b, Collective *col) {
    for (int q = 0; q < col->gsize; ++q) {
        int d = col->group[q];
        if (b->s->folded) {
            /* Its all-reduce was (or will be) folded as such. */
            b->s->pred_bytes[PRIME_BYTES_COLLECTIVE][d] +=
                (long)prime_reduce_scatter_bytes((size_t)col->elems, col->gsize, q) -
                (long)prime_allreduce_bytes((size_t)col->elems, col->gsize, q);
        } else
            col->phase->actions[d][col->action[q]].op = PRIME_ACT_REDUCE_SCATTER;
    }
}
