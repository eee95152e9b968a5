/*
 * plan_fusion.c — the saving of fused kernels on a layer plan, cached per
 * program (see plan_fusion.h).
 */
#include "plan_fusion.h"

#include <string.h>

#include "phases.h"
#include "schedule.h"

void plan_fusion_init(PlanFusion *f, const SourceMap *sources, const Model *model,
                      const Profile *profile, const CostOptions *opt, Arena *arena) {
    memset(f, 0, sizeof *f);
    f->sources = sources;
    f->model = model;
    f->profile = profile;
    f->opt = *opt;
    f->arena = arena;
    f->scratch = arena_create();
}

void plan_fusion_free(PlanFusion *f) {
    arena_destroy(f->scratch);
    f->scratch = NULL;
}

/* The layer at one sequence (m's shapes) with the partitions of `choice`
 * bound as its candidates bind them, on the plan's mesh. */
static Model *layer_program(Arena *arena, const Model *m, const Plan *plan, const int *choice) {
    Model *pm = ARENA_NEW(arena, Model);
    *pm = *m;
    pm->mesh = plan->mesh;
    pm->strict = 0;
    pm->instances = ARENA_ARRAY(arena, Instance, m->ninstances + 1);
    for (int i = 0; i < m->ninstances; ++i)
        plan_bind_candidate(&pm->instances[i], &m->instances[i], plan->cands[i].items[choice[i]]);
    return pm;
}

void plan_fusion_program(PlanFusion *f, const Plan *plan, const int *choice, double *fwd_s,
                         double *bwd_s) {
    *fwd_s = *bwd_s = 0;
    Arena *a = f->scratch;
    arena_reset(a);
    DiagSink mute;
    diag_init(&mute, f->sources, a, NULL);
    Schedule *s = schedule_build(a, &mute, layer_program(a, f->model, plan, choice));
    if (s) {
        CostOptions opt = f->opt;
        CostReport fused, alone;
        opt.no_fuse = 0;
        cost_schedule(s, f->profile, &opt, a, &fused);
        opt.no_fuse = 1;
        cost_schedule(s, f->profile, &opt, a, &alone);
        for (int q = 0; q < fused.nphases; ++q) {
            const PhaseSched *ph = fused.phases[q].phase;
            if (ph->inst < 0)
                continue;
            double saved = (alone.phases[q].time_us - fused.phases[q].time_us) * 1e-6;
            *(ph->kind == PHASE_FWD ? fwd_s : bwd_s) += saved;
        }
    }
    arena_reset(a);
    ++f->programs;
}

void plan_fusion_saved(PlanFusion *f, const Plan *plan, const int *choice, double *fwd_s,
                       double *bwd_s) {
    for (int k = 0; k < f->count; ++k) {
        const PlanFusionEntry *e = &f->entries[k];
        if (plan_same_program(e->plan, e->choice, plan, choice, 0)) {
            ++f->hits;
            *fwd_s = e->fwd_s;
            *bwd_s = e->bwd_s;
            return;
        }
    }
    if (f->count == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 16;
        PlanFusionEntry *grown = ARENA_ARRAY(f->arena, PlanFusionEntry, f->cap);
        if (f->count)
            memcpy(grown, f->entries, sizeof *grown * (size_t)f->count);
        f->entries = grown;
    }
    PlanFusionEntry *e = &f->entries[f->count++];
    e->plan = plan;
    e->choice = ARENA_ARRAY(f->arena, int, plan->ninst + 1);
    memcpy(e->choice, choice, sizeof(int) * (size_t)plan->ninst);
    plan_fusion_program(f, plan, choice, &e->fwd_s, &e->bwd_s);
    *fwd_s = e->fwd_s;
    *bwd_s = e->bwd_s;
}
