/*
 * resolve_stages.c — pipeline stages: `stages s;` (a model item, or a
 * plan's clause that a run writes as one) puts the copies of the model's
 * repeated layer, in S equal runs, on the S groups of devices along mesh
 * axis s (docs/language.md, "Pipeline stages"). The instances before the
 * layer run on the first stage and those after it on the last. A
 * partition of a staged instance binds the other axes; the schedule
 * runs an instance on its stage's devices only.
 *
 * `microbatches b: M;` resolves the model's items M times with parameter
 * b divided by M: micro-batch m's inputs and activations are new tensors
 * (NAME_mbM for m > 0), its instances read the weights of the first, so
 * the schedule sums each weight's gradient over the micro-batches like
 * any gradient of a tensor read several times, and runs the micro-batches'
 * phases in order (every forward, then every backward in reverse): a
 * stage starts on micro-batch m + 1 while the next works on m.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resolve_internal.h"

/* The mesh axis the stages run along; -1 after reporting. */
static int stage_axis(Resolver *r, const Model *m, const ModelItem *it) {
    if (m->mesh.naxes == 0) {
        diag_error(r->sink, it->span, "'stages' needs the model's mesh declared before it");
        return -1;
    }
    for (int a = 0; a < m->mesh.naxes; ++a)
        if (m->mesh.names[a] == it->name.name)
            return a;
    diag_error(r->sink, it->name.span, "the stages run along mesh axis '%s', which the mesh lacks",
               it->name.name);
    diag_note(r->sink, m->mesh.span, "the mesh is declared here");
    return -1;
}

void resolve_stages_item(Resolver *r, Model *m, const ModelItem *it) {
    if (m->stages_item) {
        diag_error(r->sink, it->span, "the model's stages are declared twice");
        diag_note(r->sink, m->stages_item->span, "first declared here");
        m->nstages = -1;
        return;
    }
    m->stages_item = it;
    m->stage_axis = -1;
    if (m->ninstances > 0) {
        diag_error(r->sink, it->span, "'stages' comes before the model's operator instances");
        diag_note(r->sink, m->instances[0].span, "the first instance");
        m->nstages = -1;
        return;
    }
    m->stage_axis = stage_axis(r, m, it);
    if (m->stage_axis < 0)
        m->nstages = -1; /* the model's other items are still resolved; resolve_stages fails */
}

/* A partition that binds the stage axis (its instance would be split over
 * the stages instead of running on one); 0 after reporting the first. */
static int check_bindings(Resolver *r, const Model *m, const ModelItem *it) {
    for (int i = 0; i < m->ninstances; ++i) {
        const Instance *inst = &m->instances[i];
        if (!inst->partition)
            continue;
        for (int a = 0; a < inst->partition->naxes; ++a) {
            if (inst->axis_map[a] != m->stage_axis)
                continue;
            diag_error(r->sink, inst->use_span,
                       "partition '%s' of '%s' binds mesh axis '%s', the axis of the pipeline "
                       "stages",
                       inst->partition->name, inst->name, m->mesh.names[m->stage_axis]);
            diag_note(r->sink, it->span,
                      "the stages are declared here; a staged instance's partition binds the "
                      "other axes");
            return 0;
        }
    }
    return 1;
}

/* Each instance's stage: by its layer copy within its micro-batch. */
static int assign_stages(Resolver *r, Model *m, const ModelItem *it) {
    if (m->nstages < 0)
        return 0; /* reported at the item */
    int axis = m->stage_axis;
    if (m->layer_count == 0) {
        diag_error(r->sink, it->span,
                   "stages split the copies of a model's repeated layer, and model '%s' has %s",
                   m->name, m->nlayer_blocks > 1 ? "several layer blocks" : "no layer block");
        return 0;
    }
    long nstages = m->mesh.sizes[axis];
    if (m->layer_count % nstages != 0) {
        diag_error(r->sink, it->span, "%ld stages do not divide the layer's %d copies", nstages,
                   m->layer_count);
        diag_note(r->sink, m->mesh.spans[axis], "mesh axis '%s' has size %ld", it->name.name,
                  nstages);
        return 0;
    }
    m->nstages = (int)nstages;
    m->stage_copies = (int)(m->layer_count / nstages);
    int per_micro = m->nmicro > 1 ? m->ninstances / m->nmicro : m->ninstances;
    int end = m->layer_first + m->layer_size * m->layer_count;
    for (int i = 0; i < m->ninstances; ++i) {
        Instance *inst = &m->instances[i];
        int j = i % per_micro; /* the same instance of the first micro-batch */
        if (j < m->layer_first)
            inst->stage = 0;
        else if (j >= end)
            inst->stage = (int)nstages - 1;
        else
            inst->stage = (j - m->layer_first) / m->layer_size / m->stage_copies;
    }
    return check_bindings(r, m, it);
}

int resolve_stages(Resolver *r, Model *m) {
    if (m->nmicro < 0)
        return 0; /* reported at the item */
    int ok = !m->stages_item || assign_stages(r, m, m->stages_item);
    if (m->nmicro > 1) {
        /* The instances are no longer one block of copies; the form pass
         * folds each micro-batch's (form_layer_copies). */
        m->micro_layer_copies = m->layer_count;
        m->layer_count = 0;
    }
    return ok;
}

/* The micro-batch count of a `microbatches` item, or -1 after reporting. */
static int micro_count(Resolver *r, const Model *m, const ModelItem *it, const long *value,
                       long count) {
    if (m->micro_item) {
        diag_error(r->sink, it->span, "the model's micro-batches are declared twice");
        diag_note(r->sink, m->micro_item->span, "first declared here");
        return -1;
    }
    if (m->ntensors > 0) {
        diag_error(r->sink, it->span,
                   "'microbatches' comes before the model's inputs, weights and instances");
        diag_note(r->sink, m->tensors[0].span, "the first tensor");
        return -1;
    }
    if (!value) {
        diag_error(r->sink, it->name.span,
                   "the model has no parameter '%s' to split into micro-batches", it->name.name);
        return -1;
    }
    if (count == LONG_MIN)
        return -1; /* the count's expression was reported */
    if (count < 1 || count > 64) {
        diag_error(r->sink, it->value->span, "a batch splits into 1 to 64 micro-batches, not %ld",
                   count);
        return -1;
    }
    if (*value % count != 0) {
        diag_error(r->sink, it->span, "%ld micro-batches do not divide parameter '%s' = %ld", count,
                   it->name.name, *value);
        return -1;
    }
    return (int)count;
}

void resolve_micro_item(Resolver *r, Model *m, const ModelItem *it, long *value, long count) {
    int n = micro_count(r, m, it, value, count);
    if (!m->micro_item)
        m->micro_item = it;
    if (n < 0) {
        m->nmicro = -1; /* the model's other items are still resolved, once; then it fails */
        return;
    }
    *value /= n;
    m->nmicro = n;
    m->micro_order = it->order;
    m->recompute = it->recompute;
}

/* A tensor's interned name and its index, ordered by the name's address. */
typedef struct NamedTensor {
    uintptr_t name;
    int t;
} NamedTensor;

static int by_name(const void *a, const void *b) {
    uintptr_t x = ((const NamedTensor *)a)->name, y = ((const NamedTensor *)b)->name;
    return (x > y) - (x < y);
}

/* The recomputed copies (`recompute`): NAME_rc of every activation a
 * layer instance makes, the producer's; 0 after reporting. */
int resolve_recompute(Resolver *r, Model *m) {
    if (!m->recompute)
        return 1;
    if (m->nstages < 1) {
        diag_error(r->sink, m->micro_item->recompute_span,
                   "'recompute' runs each pipeline stage's forward again before its backward, and "
                   "model '%s' has no stages",
                   m->name);
        diag_note(
            r->sink, m->micro_item->span,
            "a plan's 'stages AXIS;' (or the model's item) puts the layer's copies on stages");
        return 0;
    }
    int per_micro = m->nmicro > 1 ? m->ninstances / m->nmicro : m->ninstances;
    int end = m->layer_first + m->layer_size * m->stage_copies * m->nstages;
    int n = 0;
    for (int i = 0; i < m->ninstances; ++i)
        n += i % per_micro >= m->layer_first && i % per_micro < end;
    ModelTensor *tensors = ARENA_ARRAY(r->arena, ModelTensor, m->ntensors + n + 1);
    memcpy(tensors, m->tensors, sizeof(ModelTensor) * (size_t)m->ntensors);
    int count = m->ntensors;
    /* A copy's name may be no tensor's of the model (the copies' names
     * differ as their originals' do): the names sorted once, each copy's
     * looked up. */
    NamedTensor *sorted = ARENA_ARRAY(r->arena, NamedTensor, m->ntensors + 1);
    for (int t = 0; t < m->ntensors; ++t)
        sorted[t] = (NamedTensor){(uintptr_t)tensors[t].name, t};
    qsort(sorted, (size_t)m->ntensors, sizeof *sorted, by_name);
    for (int i = 0; i < m->ninstances; ++i) {
        if (i % per_micro < m->layer_first || i % per_micro >= end)
            continue;
        ModelTensor *orig = &tensors[m->instances[i].result];
        const char *name = arena_printf(r->arena, "%s_rc", orig->name);
        Sym sym = arena_intern(r->arena, name, strlen(name));
        NamedTensor key = {(uintptr_t)sym, 0};
        const NamedTensor *hit =
            bsearch(&key, sorted, (size_t)m->ntensors, sizeof *sorted, by_name);
        if (hit) {
            int t = hit->t;
            diag_error(r->sink, m->micro_item->recompute_span,
                       "the recomputed copy of '%s' is named '%s', a tensor of the model",
                       orig->name, sym);
            diag_note(r->sink, tensors[t].span, "'%s' is declared here", sym);
            return 0;
        }
        ModelTensor *rc = &tensors[count];
        *rc = *orig;
        rc->name = sym;
        rc->is_rc = 1;
        rc->rc = 0;
        rc->file_name = NULL;
        orig->rc = count++;
    }
    m->tensors = tensors;
    m->ntensors = count;
    return 1;
}
