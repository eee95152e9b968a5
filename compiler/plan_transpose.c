/*
 * plan_transpose.c — a schedule with the two axes of its square mesh
 * swapped (see schedule_transpose in plan.h). The planner uses it to
 * schedule a partition once for both bindings of its axes.
 */
#include "plan.h"

#include <string.h>
static Layout layout_permuted(Arena *arena, const Layout *l, const int *perm) {
    Layout o = *l;
    if (!l->count)
        return o;
    o.count = ARENA_ARRAY(arena, int, l->ndev);
    o.tiles = ARENA_ARRAY(arena, long *, l->ndev);
    o.slots = l->slots ? ARENA_ARRAY(arena, int *, l->ndev) : NULL;
    o.cap = NULL; /* the tiles are shared with l */
    for (int d = 0; d < l->ndev; ++d) {
        o.count[perm[d]] = l->count[d];
        o.tiles[perm[d]] = l->tiles[d];
        if (l->slots)
            o.slots[perm[d]] = l->slots[d];
    }
    return o;
}

static long *per_rank_permuted(Arena *arena, const long *v, int ndev, const int *perm) {
    if (!v)
        return NULL;
    long *o = ARENA_ARRAY(arena, long, ndev);
    for (int d = 0; d < ndev; ++d)
        o[perm[d]] = v[d];
    return o;
}

static Collective *collective_permuted(Arena *arena, const Collective *c, PhaseSched *q,
                                       const int *perm) {
    Collective *o = ARENA_NEW(arena, Collective);
    *o = *c;
    o->phase = q;
    o->group = ARENA_ARRAY(arena, int, c->gsize);
    for (int m = 0; m < c->gsize; ++m)
        o->group[m] = perm[c->group[m]];
    return o;
}

static PtrVec moves_permuted(Arena *arena, const PtrVec *moves, const int *perm) {
    PtrVec out = {0};
    for (int k = 0; k < moves->count; ++k) {
        const Move *mv = moves->items[k];
        Move *o = ARENA_NEW(arena, Move);
        *o = *mv;
        o->delta[0] = mv->delta[1];
        o->delta[1] = mv->delta[0];
        o->transfers = ARENA_ARRAY(arena, Transfer, mv->ntransfers + 1);
        for (int x = 0; x < mv->ntransfers; ++x) {
            o->transfers[x] = mv->transfers[x];
            o->transfers[x].src = perm[mv->transfers[x].src];
            o->transfers[x].dst = perm[mv->transfers[x].dst];
        }
        o->have = layout_permuted(arena, &mv->have, perm);
        o->need = layout_permuted(arena, &mv->need, perm);
        ptrvec_push(arena, &out, o);
    }
    return out;
}

Schedule *schedule_transpose(Arena *arena, const Schedule *s, const Model *model) {
    const Mesh *mesh = &s->model->mesh;
    ICE_ASSERT(mesh->naxes == 2 && mesh->sizes[0] == mesh->sizes[1]);
    const int ndev = mesh->ndev, n = (int)mesh->sizes[0];
    int *perm = ARENA_ARRAY(arena, int, ndev);
    for (int d = 0; d < ndev; ++d)
        perm[d] = (d % n) * n + d / n;
    Schedule *t = ARENA_NEW(arena, Schedule);
    *t = *s;
    t->model = model;
    t->slices = ARENA_ARRAY(arena, SliceTable, model->ninstances);
    for (int i = 0; i < model->ninstances; ++i) {
        const SliceTable *st = &s->slices[i];
        SliceTable *o = &t->slices[i];
        *o = *st;
        long per_dim = (long)st->ndev * st->steps;
        o->slice = ARENA_ARRAY(arena, long, (size_t)st->ndims *(size_t)per_dim + 1);
        for (int x = 0; x < st->ndims; ++x)
            for (int d = 0; d < st->ndev; ++d)
                for (long k = 0; k < st->steps; ++k)
                    o->slice[x * per_dim + (long)perm[d] * st->steps + k] =
                        st->slice[x * per_dim + (long)d * st->steps + k];
        o->axis_sizes[0] = st->axis_sizes[1];
        o->axis_sizes[1] = st->axis_sizes[0];
    }
    t->home = ARENA_ARRAY(arena, Layout, s->ntensors + 1);
    t->final = ARENA_ARRAY(arena, Layout, s->ntensors + 1);
    for (int x = 0; x < s->ntensors; ++x) {
        t->home[x] = layout_permuted(arena, &s->home[x], perm);
        t->final[x] = layout_permuted(arena, &s->final[x], perm);
    }
    for (int k = 0; k < PRIME_BYTES_KIND_COUNT; ++k)
        t->pred_bytes[k] = per_rank_permuted(arena, s->pred_bytes[k], ndev, perm);
    t->pred_peak = per_rank_permuted(arena, s->pred_peak, ndev, perm);
    memset(&t->phases, 0, sizeof t->phases);
    for (int p = 0; p < s->phases.count; ++p) {
        const PhaseSched *ph = s->phases.items[p];
        PhaseSched *q = ARENA_NEW(arena, PhaseSched);
        *q = *ph;
        q->nactions = ARENA_ARRAY(arena, int, ndev);
        q->action_cap = ARENA_ARRAY(arena, int, ndev);
        q->actions = ARENA_ARRAY(arena, PrimeAction *, ndev);
        for (int d = 0; d < ndev; ++d) {
            int r = perm[d], na = ph->nactions[d];
            q->nactions[r] = q->action_cap[r] = na;
            q->actions[r] = ARENA_ARRAY(arena, PrimeAction, na + 1);
            for (int a = 0; a < na; ++a) {
                PrimeAction act = ph->actions[d][a];
                if (act.op == PRIME_ACT_SEND || act.op == PRIME_ACT_RECV ||
                    act.op == PRIME_ACT_SEND_BOX || act.op == PRIME_ACT_RECV_BOX)
                    act.peer = perm[act.peer];
                q->actions[r][a] = act;
            }
        }
        /* Collectives: one copy each, shared by the two lists. */
        memset(&q->collectives, 0, sizeof q->collectives);
        memset(&q->groups, 0, sizeof q->groups);
        for (int c = 0; c < ph->collectives.count; ++c)
            ptrvec_push(arena, &q->collectives,
                        collective_permuted(arena, ph->collectives.items[c], q, perm));
        for (int g = 0; g < ph->groups.count; ++g) {
            Collective *copy = NULL;
            for (int c = 0; c < ph->collectives.count && !copy; ++c)
                if (ph->collectives.items[c] == ph->groups.items[g])
                    copy = q->collectives.items[c];
            if (!copy)
                copy = collective_permuted(arena, ph->groups.items[g], q, perm);
            ptrvec_push(arena, &q->groups, copy);
        }
        q->moves = moves_permuted(arena, &ph->moves, perm);
        q->boundary = moves_permuted(arena, &ph->boundary, perm);
        q->peak = per_rank_permuted(arena, ph->peak, ndev, perm);
        q->start = per_rank_permuted(arena, ph->start, ndev, perm);
        q->need_cached[0] = q->need_cached[1] = 0; /* learned on s's devices */
        ptrvec_push(arena, &t->phases, q);
    }
    return t;
}
