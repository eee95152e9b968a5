/*
 * lsp_hover.c — hover on an instance or a partition (lsp_internal.h).
 *
 * On a model's instance statement: its call and partition, the mesh, the
 * slice table (size, slice count and slice extent of every operator
 * dimension), the tile each device computes at each step, and per phase
 * of the instance the bytes the schedule moves (shifts, collectives,
 * redistributions), the largest per-device peak memory, and the time the
 * cost model predicts on primec cost's default profile, then the model's
 * totals. On a partition's name: the same for every instance of
 * the document's models that uses it. Markdown; tables are cut to the
 * first HOVER_DEVICES devices and HOVER_STEPS steps.
 */
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "lsp_internal.h"
#include "printer.h"

#define HOVER_DEVICES 16
#define HOVER_STEPS 8
#define HOVER_PROFILE "v100" /* primec cost's default */

static const Schedule *schedule_of(const Compilation *c, const Model *m) {
    for (int i = 0; i < c->schedules.count; ++i) {
        const Schedule *s = c->schedules.items[i];
        if (s->model == m)
            return s;
    }
    return NULL;
}

static void mesh_line(Printer *pr, const Model *m) {
    printer_printf(pr, "model `%s` on mesh(", m->name);
    for (int a = 0; a < m->mesh.naxes; ++a)
        printer_printf(pr, "%s%s: %ld", a ? ", " : "", m->mesh.names[a], m->mesh.sizes[a]);
    printer_printf(pr, "): %d device%s", m->mesh.ndev, m->mesh.ndev == 1 ? "" : "s");
}

static void slice_table(Printer *pr, const Instance *inst, const SliceTable *st) {
    printer_printf(pr, "| dimension | size | slices | elements per slice |\n|---|---|---|---|\n");
    for (int d = 0; d < inst->op->ndims; ++d)
        printer_printf(pr, "| %s | %ld | %ld | %ld |\n", inst->op->dims[d], inst->dim_sizes[d],
                       st->nslices[d], st->extent[d]);
}

static void tile_table(Printer *pr, const Model *m, const Instance *inst, const SliceTable *st) {
    long steps = st->steps < HOVER_STEPS ? st->steps : HOVER_STEPS;
    int ndev = st->ndev < HOVER_DEVICES ? st->ndev : HOVER_DEVICES;
    printer_printf(pr, "\nper-device tiles (the slice of each dimension):\n\n| device |");
    for (long t = 0; t < steps; ++t)
        printer_printf(pr, " t=%ld |", t);
    printer_printf(pr, "\n|---|");
    for (long t = 0; t < steps; ++t)
        printer_printf(pr, "---|");
    printer_printf(pr, "\n");
    for (int dev = 0; dev < ndev; ++dev) {
        long coords[IR_MAX_AXES];
        mesh_coords(&m->mesh, dev, coords);
        printer_printf(pr, "| %d (", dev);
        for (int a = 0; a < m->mesh.naxes; ++a)
            printer_printf(pr, "%s%s=%ld", a ? ", " : "", m->mesh.names[a], coords[a]);
        printer_printf(pr, ") |");
        for (long t = 0; t < steps; ++t) {
            for (int d = 0; d < inst->op->ndims; ++d)
                printer_printf(pr, " %s%ld", inst->op->dims[d], slice_at(st, d, dev, t));
            printer_printf(pr, " |");
        }
        printer_printf(pr, "\n");
    }
    if (ndev < st->ndev || steps < st->steps)
        printer_printf(pr, "\n(the first %d of %d devices, %ld of %ld steps)\n", ndev, st->ndev,
                       steps, st->steps);
}

static long sum_bytes(const PtrVec *moves) {
    long n = 0;
    for (int i = 0; i < moves->count; ++i)
        n += ((const Move *)moves->items[i])->bytes;
    return n;
}

/* The cost model's time of a phase on the default profile (-1 when the
 * profile cannot be read). */
static double phase_time_us(const CostReport *r, const PhaseSched *ph) {
    for (int q = 0; r && q < r->nphases; ++q)
        if (r->phases[q].phase == ph)
            return r->phases[q].time_us;
    return -1;
}

static void phase_table(Printer *pr, const Schedule *s, int k) {
    Profile prof;
    char err[256];
    CostReport report, *r = NULL;
    Arena *scratch = arena_create();
    if (profile_load(HOVER_PROFILE, &prof, err, sizeof err)) {
        cost_schedule(s, &prof, NULL, scratch, &report);
        r = &report;
    }
    printer_printf(pr,
                   "\nbytes moved and peak memory (schedule prediction), time (cost model on "
                   "%s):\n\n| phase | shift bytes | collective bytes | redistribution bytes | "
                   "peak bytes per device | time µs |\n|---|---|---|---|---|---|\n",
                   r ? r->profile : HOVER_PROFILE " (not found)");
    for (int i = 0; i < s->phases.count; ++i) {
        const PhaseSched *ph = s->phases.items[i];
        if (ph->inst != k)
            continue;
        long coll = 0, peak = 0;
        for (int x = 0; x < ph->collectives.count; ++x)
            coll += ((const Collective *)ph->collectives.items[x])->bytes;
        for (int d = 0; d < s->model->mesh.ndev; ++d)
            peak = ph->peak[d] > peak ? ph->peak[d] : peak;
        printer_printf(pr, "| %s -> %s%s | %ld | %ld | %ld | %ld | %.3g |\n", phase_name(ph->kind),
                       s->tensors[ph->out.tensor].name, ph->reversed ? " (reversed)" : "",
                       sum_bytes(&ph->moves), coll, sum_bytes(&ph->boundary), peak,
                       phase_time_us(r, ph));
    }
    if (r)
        printer_printf(pr, "\nstep time of the model on %s: %.3g µs\n", r->profile, r->step_us);
    arena_destroy(scratch);
    long total[PRIME_BYTES_KIND_COUNT] = {0}, peak = 0;
    for (int d = 0; d < s->model->mesh.ndev; ++d) {
        for (int kind = 0; kind < PRIME_BYTES_KIND_COUNT; ++kind)
            total[kind] += s->pred_bytes[kind][d];
        peak = s->pred_peak[d] > peak ? s->pred_peak[d] : peak;
    }
    printer_printf(pr,
                   "\nmodel `%s` in all: %ld shift bytes, %ld collective bytes, %ld "
                   "redistribution bytes; peak memory %ld bytes on the fullest device\n",
                   s->model->name, total[0], total[1], total[2], peak);
}

static void instance_section(Printer *pr, const Compilation *c, const Model *m, int k) {
    const Instance *inst = &m->instances[k];
    printer_printf(pr, "**%s** = %s(", inst->name, inst->op->name);
    for (int i = 0; i < inst->op->ninputs; ++i)
        printer_printf(pr, "%s%s", i ? ", " : "", m->tensors[inst->args[i]].name);
    printer_printf(pr, ")");
    if (inst->partition)
        printer_printf(pr, " use partition **%s**", inst->partition->name);
    printer_printf(pr, "\n\n");
    mesh_line(pr, m);
    printer_printf(pr, "; %ld step%s\n\n", inst->steps, inst->steps == 1 ? "" : "s");
    const Schedule *s = schedule_of(c, m);
    if (!s || !inst->partition) {
        printer_printf(pr, "| dimension | size |\n|---|---|\n");
        for (int d = 0; d < inst->op->ndims; ++d)
            printer_printf(pr, "| %s | %ld |\n", inst->op->dims[d], inst->dim_sizes[d]);
        printer_printf(pr, "\n(no schedule: %s)\n",
                       inst->partition ? "the model has errors" : "no partition chosen");
        return;
    }
    const SliceTable *st = &s->slices[k];
    slice_table(pr, inst, st);
    tile_table(pr, m, inst, st);
    phase_table(pr, s, k);
}

static const Partition *partition_at(const Compilation *c, uint32_t file, uint32_t off) {
    for (int i = 0; i < c->module.partitions.count; ++i) {
        const Partition *p = c->module.partitions.items[i];
        if (p->decl && lsp_span_has(p->decl->name.span, file, off))
            return p;
    }
    return NULL;
}

static void partition_sections(Printer *pr, const Compilation *c, uint32_t file,
                               const Partition *p) {
    printer_printf(pr, "partition **%s** of `%s`\n", p->name, p->op->name);
    int used = 0;
    for (int i = 0; i < c->module.models.count; ++i) {
        const Model *m = c->module.models.items[i];
        if (!m->decl || m->decl->span.file != file)
            continue;
        for (int k = 0; k < m->ninstances; ++k) {
            const Instance *inst = &m->instances[k];
            /* One section per statement: the copies of a layer share it. */
            if (inst->partition != p || (k > 0 && m->instances[k - 1].span.lo == inst->span.lo &&
                                         m->instances[k - 1].partition == p))
                continue;
            printer_printf(pr, "\n---\n\n");
            instance_section(pr, c, m, k);
            used = 1;
        }
    }
    if (!used)
        printer_printf(pr, "\nno model of this file uses it\n");
}

/* The number of instances a composite's use written at span expands into
 * (its MITEM_COMPOSITE item, compose.h); 1 for any other instance. */
static int parts_of_use(const PtrVec *items, Span span) {
    for (int i = 0; i < items->count; ++i) {
        const ModelItem *it = items->items[i];
        if (it->kind == MITEM_COMPOSITE && it->span.file == span.file && it->span.lo == span.lo &&
            it->span.hi == span.hi)
            return it->nparts > 0 ? it->nparts : 1;
        if (it->kind == MITEM_LAYER) {
            int n = parts_of_use(&it->items, span);
            if (n > 1)
                return n;
        }
    }
    return 1;
}

json_t *lsp_hover(const LspDoc *doc, int line, int character) {
    if (!doc->c || !doc->sf)
        return json_null();
    uint32_t off = lsp_offset(doc->sf, line, character);
    const Model *m = NULL;
    const Instance *inst = lsp_instance_at(doc->c, doc->file, off, &m);
    const Partition *p = inst ? NULL : partition_at(doc->c, doc->file, off);
    if (!inst && !p)
        return json_null();
    Printer pr;
    printer_init(&pr);
    if (inst) {
        /* A composite's use is the span of each of its parts: one section each. */
        int k = (int)(inst - m->instances);
        int n = m->decl ? parts_of_use(&m->decl->items, inst->span) : 1;
        for (int j = 0; j < n && k + j < m->ninstances; ++j) {
            if (j)
                printer_printf(&pr, "\n---\n\n");
            instance_section(&pr, doc->c, m, k + j);
        }
    } else
        partition_sections(&pr, doc->c, doc->file, p);
    char *text = printer_take(&pr, NULL);
    Span span = inst ? inst->span : p->decl->name.span;
    json_t *hover = json_pack("{s:{s:s, s:o}, s:o}", "contents", "kind", "markdown", "value",
                              lsp_string(text), "range", lsp_range(doc->sf, span));
    free(text);
    return hover;
}
