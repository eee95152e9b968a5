/*
 * schedule.c — the schedule pass's driver (see schedule.h; the files it
 * drives are listed in sched_internal.h).
 *
 * It binds every operand of every phase of the phase list to a storage
 * tensor in the tiling its instance gives it, marks the results that the
 * program checks, fills inputs and weights where their first reader needs
 * them, and then runs the phases in order: each with the sweep order
 * chosen by trial, its input boundary, its steps, and what follows it.
 */
#include "sched_internal.h"
#include "sched_orbit.h"

const char *move_kind_name(MoveKind kind) {
    static const char *const names[] = {"shift", "permutation", "exchange", "conversion"};
    return kind < MOVE_KIND_COUNT ? names[kind] : "?";
}

/* ------------------------------------------------------------------ */
/* Storage tensors                                                     */

/* The next storage tensor id, or -1 after a diagnostic when the model
 * needs more than the runtime's limit. */
static int new_storage_id(Builder *b) {
    Schedule *s = b->s;
    if (s->ntensors == b->tensor_cap) {
        if (!b->failed)
            diag_error(b->sink, s->model->name_span,
                       "model '%s' needs more than %d stored tensors (tensors in each tiling, "
                       "gradients included)",
                       s->model->name, b->tensor_cap);
        b->failed = 1;
        return -1;
    }
    int id = s->ntensors++;
    memset(&s->tensors[id], 0, sizeof s->tensors[id]);
    memset(&s->home[id], 0, sizeof s->home[id]);
    memset(&s->final[id], 0, sizeof s->final[id]);
    memset(&b->need[id], 0, sizeof b->need[id]);
    b->track_need[id] = 0;
    memset(&b->consumed[id], 0, sizeof b->consumed[id]);
    memset(&b->reduced[id], 0, sizeof b->reduced[id]);
    b->reduced_phase[id] = -2;
    return id;
}

/* A fresh storage tensor with the tiling of `like`. */
int sched_storage_like(Builder *b, int like) {
    Schedule *s = b->s;
    int id = new_storage_id(b);
    if (id < 0)
        return -1;
    s->tensors[id] = s->tensors[like];
    s->tensors[id].name = arena_printf(b->arena, "%s_sum%d", s->tensors[like].name, ++b->nsums);
    s->tensors[id].check = 0;
    s->tensors[id].fill_phase = -1;
    s->tensors[id].max_slots = 0;
    sched_value_link(b, id);
    sched_machine_init(b);
    return id;
}

/* The slices per dimension of operator tensor `ot` under instance inst. */
static void tiling_of(const Schedule *s, int inst, const OpTensor *ot, long *nslices) {
    const SliceTable *st = &s->slices[inst];
    memset(nslices, 0, sizeof(long) * IR_MAX_DIMS);
    for (int x = 0; x < ot->ndims; ++x)
        nslices[x] = st->nslices[ot->dims[x]];
}

int sched_storage_find(const Builder *b, int mt, int is_grad, int inst, const OpTensor *ot) {
    const Schedule *s = b->s;
    long nslices[IR_MAX_DIMS];
    tiling_of(s, inst, ot, nslices);
    for (int u = 0; u < s->ntensors; ++u) {
        const SchedTensor *o = &s->tensors[u];
        if (o->model_tensor == mt && o->is_grad == is_grad &&
            memcmp(o->nslices, nslices, sizeof nslices) == 0)
            return u;
    }
    return -1;
}

/* The storage tensor of a model tensor (or its gradient) in the tiling
 * instance `inst` gives operator tensor `ot`. */
int sched_storage_for(Builder *b, int mt, int is_grad, int inst, const OpTensor *ot, int fresh) {
    Schedule *s = b->s;
    const ModelTensor *t = &s->model->tensors[mt];
    const Op *op = s->model->instances[inst].op;
    long nslices[IR_MAX_DIMS];
    tiling_of(s, inst, ot, nslices);
    int copies = 0;
    /* The storage tensors of this value, in id order (sched_value_link). */
    for (int u = b->value_first[2 * mt + is_grad]; u >= 0; u = b->value_next[u]) {
        SchedTensor *o = &s->tensors[u];
        copies++;
        if (!fresh && memcmp(o->nslices, nslices, sizeof nslices) == 0)
            return u;
    }
    int id = new_storage_id(b);
    if (id < 0)
        return -1;
    SchedTensor *o = &s->tensors[id];
    memset(o, 0, sizeof *o);
    o->name = arena_printf(b->arena, "%s%s%s", is_grad ? "d" : "", t->name,
                           copies ? arena_printf(b->arena, "_%d", copies + 1) : "");
    o->model_tensor = mt;
    o->is_grad = is_grad;
    o->ndims = t->ndims;
    o->is_weight = t->role == TENSOR_WEIGHT;
    o->combine = !is_grad && t->producer >= 0 && s->model->instances[t->producer].op->max_reduce
                     ? PRIME_COMBINE_MAX
                     : PRIME_COMBINE_SUM;
    o->fill_phase = -1;
    o->tile_elems = 1;
    o->ntiles = 1;
    for (int x = 0; x < t->ndims; ++x) {
        o->shape[x] = t->sizes[x];
        o->nslices[x] = nslices[x];
        o->extent[x] = t->sizes[x] / nslices[x];
        o->tile_elems *= o->extent[x];
        o->ntiles *= nslices[x];
        o->dimnames[x] = op->dims[ot->dims[x]];
    }
    sched_value_link(b, id);
    return id;
}

/* ------------------------------------------------------------------ */
/* Phases bound to storage tensors                                     */

static PhaseSched *new_phase(Builder *b, const Phase *src) {
    PhaseSched *ph = ARENA_NEW(b->arena, PhaseSched);
    ph->kind = src->kind;
    ph->inst = src->inst;
    ph->wrt = src->wrt;
    ph->expr = src->expr;
    ph->phase = src;
    ph->nactions = ARENA_ARRAY(b->arena, int, b->ndev);
    ph->action_cap = ARENA_ARRAY(b->arena, int, b->ndev);
    ph->actions = ARENA_ARRAY(b->arena, PrimeAction *, b->ndev);
    ptrvec_push(b->arena, &b->s->phases, ph);
    return ph;
}

/* The storage tensor of every operand: dY is dy_tensor; an input is
 * stored in the tiling the instance gives it. */
static void bind_operands(Builder *b, PhaseSched *ph, const Phase *src, int dy_tensor) {
    const Instance *inst = &b->s->model->instances[src->inst];
    for (int k = 0; k < src->nin; ++k) {
        const PhaseOperand *po = &src->in[k];
        Operand *o = &ph->in[ph->nin];
        const OpTensor *ot;
        int tensor;
        if (po->input == PHASE_DY) {
            ot = &inst->op->output;
            tensor = dy_tensor;
        } else if (po->input == PHASE_RESULT) {
            /* The forward result, read by the derivative of a maximum. */
            ot = &inst->op->output;
            tensor = sched_storage_for(b, phases_operand_tensor(b->s->model, src, inst->result), 0,
                                       src->inst, ot, 0);
        } else {
            ot = &inst->op->inputs[po->input];
            int mt = phases_operand_tensor(b->s->model, src, inst->args[po->input]);
            tensor = sched_storage_for(b, mt, 0, src->inst, ot, 0);
            /* The same tensor read with another index order (x and its
             * transpose) is a second storage tensor. */
            for (int j = 0; j < ph->nin; ++j)
                if (ph->in[j].tensor == tensor &&
                    (ph->in[j].ndims != ot->ndims ||
                     memcmp(ph->in[j].opdims, ot->dims, sizeof(int) * (size_t)ot->ndims)))
                    tensor = sched_storage_for(b, mt, 0, src->inst, ot, 1);
        }
        if (ph->nin == SCHED_MAX_OPERANDS)
            ICE("too many operands");
        o->tensor = tensor;
        o->name = po->name;
        o->ndims = ot->ndims;
        memcpy(o->opdims, ot->dims, sizeof(int) * (size_t)ot->ndims);
        ph->nin++;
    }
}

/* Makes the schedule's phases from the phase list. A gradient's first
 * contribution is its storage (grad_storage[model tensor]); every further
 * one gets storage of its own. */
static void bind_phases(Builder *b, const PhaseList *pl, int *grad_storage) {
    int dy = -1, dy_inst = -1;
    for (int p = 0; p < pl->count; ++p) {
        const Phase *src = &pl->items[p];
        PhaseSched *ph = new_phase(b, src);
        if (src->inst < 0)
            continue;
        int first = 1;
        if (src->kind == PHASE_BWD || src->kind == PHASE_GRAD) {
            const Instance *inst = &b->s->model->instances[src->inst];
            if (dy_inst != src->inst) {
                dy = sched_storage_for(b, inst->result, 1, src->inst, &inst->op->output, 0);
                dy_inst = src->inst;
            }
            first = grad_storage[src->out_tensor] < 0;
        }
        ph->out.tensor =
            sched_storage_for(b, src->out_tensor, src->out_grad, src->inst, src->out, !first);
        if (src->out_grad && first)
            grad_storage[src->out_tensor] = ph->out.tensor;
        ph->out.name = src->out_name;
        ph->out.ndims = src->out->ndims;
        memcpy(ph->out.opdims, src->out->dims, sizeof(int) * (size_t)ph->out.ndims);
        bind_operands(b, ph, src, dy);
    }
}

/* Results to check: the outputs, and the gradients of inputs and weights. */
static void mark_checks(Schedule *s, Arena *arena, const int *grad_storage) {
    const Model *model = s->model;
    int *consumers = ARENA_ARRAY(arena, int, model->ntensors);
    for (int i = 0; i < model->ninstances; ++i)
        for (int a = 0; a < model->instances[i].op->ninputs; ++a)
            consumers[model->instances[i].args[a]]++;
    for (int t = 0; t < s->ntensors; ++t) {
        SchedTensor *ts = &s->tensors[t];
        const ModelTensor *mt = &model->tensors[ts->model_tensor];
        if (!ts->is_grad && mt->role == TENSOR_ACTIVATION && !mt->is_rc &&
            consumers[ts->model_tensor] == 0)
            ts->check = 1;
        if (ts->is_grad && mt->role != TENSOR_ACTIVATION && grad_storage[ts->model_tensor] == t)
            ts->check = 1;
    }
}

/* ------------------------------------------------------------------ */
/* The phases in order                                                 */

/* Init: inputs and weights where their first reader needs them. */
static void fill_inputs(Builder *b) {
    Schedule *s = b->s;
    const Model *model = s->model;
    PhaseSched *init = s->phases.items[0];
    for (int t = 0; t < model->ntensors; ++t) {
        if (model->tensors[t].role == TENSOR_ACTIVATION)
            continue;
        for (int p = 0; p < s->phases.count; ++p) {
            PhaseSched *ph = s->phases.items[p];
            int found = -1;
            for (int i = 0; i < ph->nin && found < 0; ++i)
                if (s->tensors[ph->in[i].tensor].model_tensor == t &&
                    !s->tensors[ph->in[i].tensor].is_grad)
                    found = ph->in[i].tensor;
            if (found < 0)
                continue;
            sched_enter_phase(b, ph);
            sched_learn_needs(b, ph);
            b->ph = init;
            for (int d = 0; d < b->ndev; ++d)
                for (int x = 0; x < b->need[found].count[d]; ++x)
                    sched_store_add(b, store_of(b, found, d), b->need[found].tiles[d][x],
                                    sched_emit_alloc(b, found, d));
            s->home[found] = sched_layout_of(b, found);
            s->tensors[found].fill_phase = 0;
            break;
        }
    }
}

/* dY of every output arrives in the layout the output has. */
static void fill_output_grads(Builder *b, PhaseSched *ph, int p) {
    Schedule *s = b->s;
    b->ph = ph;
    for (int t = 0; t < s->ntensors; ++t) {
        const SchedTensor *ts = &s->tensors[t];
        if (!ts->check || ts->is_grad)
            continue;
        if (ph->phase->micro >= 0 &&
            phases_tensor_micro(s->model, ts->model_tensor) != ph->phase->micro)
            continue; /* 1F1B: another micro-batch's output, whose dy-in is its own */
        for (int u = 0; u < s->ntensors; ++u) {
            SchedTensor *g = &s->tensors[u];
            if (g->model_tensor != ts->model_tensor || !g->is_grad ||
                memcmp(g->nslices, ts->nslices, sizeof g->nslices) != 0)
                continue;
            Layout yl = sched_layout_of(b, t);
            for (int d = 0; d < b->ndev; ++d)
                for (int x = 0; x < yl.count[d]; ++x)
                    sched_store_add(b, store_of(b, u, d), yl.tiles[d][x],
                                    sched_emit_alloc(b, u, d));
            s->home[u] = sched_layout_of(b, u);
            g->fill_phase = p;
            break;
        }
    }
}

/* Runs every phase after init. Returns 0 after an error. */
static int run_phases(Builder *b, const int *grad_storage) {
    Schedule *s = b->s;
    for (int p = 1; p < s->phases.count; ++p) {
        b->phase_index = p;
        PhaseSched *ph = s->phases.items[p];
        if (ph->kind == PHASE_DYIN) {
            fill_output_grads(b, ph, p);
            sched_free_dead(b, p);
            continue;
        }
        sched_enter_phase(b, ph);
        b->defer = 0;
        if (ph->kind == PHASE_BWD || ph->kind == PHASE_GRAD) {
            int mt = s->tensors[ph->out.tensor].model_tensor;
            b->defer = sched_more_contributions(b, p, mt) || b->pending[mt].count > 0;
        }
        if (ph->kind != PHASE_FWD)
            sched_choose_order(b, ph, p, grad_storage);
        sched_enter_phase(b, ph);
        sched_phase_exec(b, ph);
        if (b->failed)
            return 0;
        sched_phase_finish(b, ph, p, grad_storage);
        if (b->failed)
            return 0;
        sched_free_dead(b, p);
        arena_reset(b->scratch);
    }
    return !b->failed;
}

/* How many storage tensors a schedule of the model can need: each
 * instance operand (and its gradient) may bring a tiling of its own, a
 * partial sum and a conversion; every value its home tiling. */
static int storage_bound(const Model *m) {
    long n = 2L * m->ntensors + 64;
    for (int i = 0; i < m->ninstances; ++i)
        n += 6L * (m->instances[i].op->ninputs + 1);
    return n > 0x3fffffffL ? 0x3fffffff : (int)n;
}

/* fold: predict as the actions are made, keeping no list
 * (schedule_check_from); orbit: the simulation of one replica
 * (sched_orbit.c), *broken set when its proof fails. */
static Schedule *build_in(Builder *b, Arena *arena, DiagSink *sink, const Model *model,
                          const SliceTable *const *slices, const PhaseList *phases, int fold,
                          const SchedOrbit *orbit, int *broken) {
    Schedule *s = ARENA_NEW(arena, Schedule);
    s->model = model;
    int cap = storage_bound(model);
    s->tensors = arena_alloc_uninit(arena, sizeof(SchedTensor) * (size_t)cap);
    s->home = arena_alloc_uninit(arena, sizeof(Layout) * (size_t)cap);
    s->final = arena_alloc_uninit(arena, sizeof(Layout) * (size_t)cap);
    s->slices = ARENA_ARRAY(arena, SliceTable, model->ninstances);
    for (int i = 0; i < model->ninstances; ++i)
        s->slices[i] = *slices[i];

    Arena *scratch = b->scratch;
    memset(b, 0, offsetof(Builder, m));
    b->scratch = scratch;
    b->tensor_cap = cap;
    b->arena = arena;
    b->m.ntensors = 0;
    sched_machine_room(b, &b->m);
    b->need = arena_alloc_uninit(arena, sizeof(Layout) * (size_t)cap);
    b->track_need = arena_alloc_uninit(arena, sizeof(int) * (size_t)cap);
    b->consumed = arena_alloc_uninit(arena, sizeof(Layout) * (size_t)cap);
    b->reduced = arena_alloc_uninit(arena, sizeof(PtrVec) * (size_t)cap);
    b->reduced_phase = arena_alloc_uninit(arena, sizeof(int) * (size_t)cap);
    b->value_next = arena_alloc_uninit(arena, sizeof(int) * (size_t)cap);
    b->value_first = ARENA_ARRAY_UNINIT(arena, int, 2 * model->ntensors + 1);
    b->value_end = ARENA_ARRAY_UNINIT(arena, int, 2 * model->ntensors + 1);
    for (int v = 0; v < 2 * model->ntensors; ++v)
        b->value_first[v] = b->value_end[v] = -1;
    b->arena = arena;
    b->sink = sink;
    b->s = s;
    b->ndev = model->mesh.ndev;
    b->staged = model->nstages != 0;
    b->dry_count = ARENA_ARRAY(arena, int, b->ndev);
    b->coords = ARENA_ARRAY(arena, long, (long)b->ndev * model->mesh.naxes + 1);
    for (int d = 0; d < b->ndev; ++d)
        mesh_coords(&model->mesh, d, b->coords + (long)d * model->mesh.naxes);
    b->st = &s->slices[0];
    b->steps = 1;
    b->reuse_off = getenv("PRIMEC_NO_TRIAL_REUSE") != NULL;
    b->orbit = orbit;

    int *grad_storage = ARENA_ARRAY(arena, int, model->ntensors);
    for (int t = 0; t < model->ntensors; ++t)
        grad_storage[t] = -1;
    bind_phases(b, phases, grad_storage);
    if (b->failed)
        return NULL;
    if (fold)
        sched_fold_begin(b);
    sched_liveness_init(b);
    mark_checks(s, arena, grad_storage);
    sched_machine_init(b);
    b->pending = ARENA_ARRAY(arena, PtrVec, model->ntensors);
    fill_inputs(b);
    int ran = run_phases(b, grad_storage);
    if (broken)
        *broken = b->orbit_broken;
    if (!ran)
        return NULL;
    if (getenv("PRIMEC_TRIAL_REUSE_STATS"))
        fprintf(stderr, "residency trials reused: %d phases\n", b->need_memo_hits);
    for (int t = 0; t < s->ntensors; ++t)
        s->final[t] = sched_layout_of(b, t);
    if (fold) {
        sched_fold_end(b);
    } else {
        sched_post_sends_early(s, arena);
        sched_predict(s, arena);
    }
    return s;
}

static Schedule *build(Arena *arena, DiagSink *sink, const Model *model,
                       const SliceTable *const *slices, const PhaseList *phases, int fold,
                       const SchedOrbit *orbit, int *broken) {
    Builder b;
    b.scratch = arena_create();
    Schedule *s = build_in(&b, arena, sink, model, slices, phases, fold, orbit, broken);
    arena_destroy(b.scratch);
    return s;
}

Schedule *schedule_build_from(Arena *arena, DiagSink *sink, const Model *model,
                              const SliceTable *const *slices, const PhaseList *phases) {
    return build(arena, sink, model, slices, phases, 0, NULL, NULL);
}

Schedule *sched_build_orbit(Arena *arena, DiagSink *sink, const Model *reduced,
                            const SliceTable *const *slices, const PhaseList *phases,
                            const SchedOrbit *o, int *broken) {
    return build(arena, sink, reduced, slices, phases, 1, o, broken);
}

Schedule *schedule_check_from(Arena *arena, DiagSink *sink, const Model *model,
                              const SliceTable *const *slices, const PhaseList *phases) {
    /* A staged model's boundary sends are moved once its lists are made
     * (sched_sends.c), which needs the lists: it keeps them. */
    if (model->nstages < 2) {
        Schedule *s = sched_orbit_check(arena, sink, model, slices, phases);
        if (s)
            return s;
    }
    return build(arena, sink, model, slices, phases, model->nstages < 2, NULL, NULL);
}

Schedule *schedule_summary_from(Arena *arena, DiagSink *sink, const Model *model,
                                const SliceTable *const *slices, const PhaseList *phases) {
    if (model->nstages < 2 && model->mesh.ndev > SCHEDULE_SUMMARY_DEVICES) {
        Schedule *s = sched_orbit_check(arena, sink, model, slices, phases);
        if (s)
            return s;
    }
    return schedule_build_from(arena, sink, model, slices, phases);
}

Schedule *schedule_build(Arena *arena, DiagSink *sink, const Model *model) {
    SliceTable *tables = ARENA_ARRAY(arena, SliceTable, model->ninstances);
    const SliceTable **slices = ARENA_ARRAY(arena, const SliceTable *, model->ninstances);
    for (int i = 0; i < model->ninstances; ++i) {
        if (!partition_eval(arena, sink, model, &model->instances[i], &tables[i]))
            return NULL;
        slices[i] = &tables[i];
    }
    const PhaseList *phases = phases_derive(arena, sink, model);
    if (!phases)
        return NULL;
    return schedule_build_from(arena, sink, model, slices, phases);
}
