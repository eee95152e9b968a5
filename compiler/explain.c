/*
 * explain.c — text and JSON reports of a schedule (see explain.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "explain.h"

#include "form.h"

#include <stdlib.h>
#include <string.h>

#include "printer.h"

int layout_replication(const Layout *l, long ntiles) {
    int *copies = calloc((size_t)ntiles, sizeof(int));
    int most = 0;
    if (!copies)
        ICE("out of memory");
    for (int d = 0; d < l->ndev; ++d)
        for (int i = 0; i < l->count[d]; ++i)
            if (++copies[l->tiles[d][i]] > most)
                most = copies[l->tiles[d][i]];
    free(copies);
    return most;
}

/* "dx[m, k] += dy[m, n] * w[k, n]" with the model's names. */
static const char *einsum_text(const Schedule *s, Arena *arena, const PhaseSched *ph) {
    char buf[1024];
    size_t n = 0;
    const Instance *inst = &s->model->instances[ph->inst];
    n += (size_t)snprintf(buf + n, sizeof buf - n, "%s[", s->tensors[ph->out.tensor].name);
    for (int x = 0; x < ph->out.ndims && n < sizeof buf - 64; ++x)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", x ? ", " : "",
                              inst->op->dims[ph->out.opdims[x]]);
    n += (size_t)snprintf(buf + n, sizeof buf - n, "] %s ", ph->phase->max_reduce ? "max=" : "+=");
    FILE *mem = fmemopen(buf + n, sizeof buf - n, "w");
    if (mem) {
        ast_print_expr(ph->expr, mem);
        fclose(mem);
    }
    n = strlen(buf);
    n += (size_t)snprintf(buf + n, sizeof buf - n, "  with");
    for (int i = 0; i < ph->nin && n < sizeof buf - 64; ++i)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s %s = %s", i ? "," : "", ph->in[i].name,
                              s->tensors[ph->in[i].tensor].name);
    return arena_strdup(arena, buf);
}

/* "(i, j+1)": where a device receives from, as mesh coordinates. */
static const char *delta_text(const Schedule *s, Arena *arena, const long *delta) {
    const Mesh *mesh = &s->model->mesh;
    char buf[256];
    size_t n = 0;
    buf[n++] = '(';
    for (int a = 0; a < mesh->naxes && n < sizeof buf - 40; ++a) {
        long v = delta[a];
        if (v > mesh->sizes[a] / 2)
            v -= mesh->sizes[a];
        if (v == 0)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", a ? ", " : "", mesh->names[a]);
        else
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s%+ld", a ? ", " : "",
                                  mesh->names[a], v);
    }
    snprintf(buf + n, sizeof buf - n, ")");
    return arena_strdup(arena, buf);
}

static const char *coords_text(const Schedule *s, Arena *arena, int rank) {
    const Mesh *mesh = &s->model->mesh;
    long c[IR_MAX_AXES];
    mesh_coords(mesh, rank, c);
    char buf[256];
    size_t n = 0;
    for (int a = 0; a < mesh->naxes && n < sizeof buf - 40; ++a)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s=%ld", a ? ", " : "", mesh->names[a],
                              c[a]);
    return arena_strdup(arena, buf);
}

/* Ranks listed device by device: the first `ranks`, or all (-1). */
static int listed(int ranks, int ndev) {
    return ranks < 0 || ranks > ndev ? ndev : ranks;
}

static void layout_text(const Schedule *s, Arena *arena, int tensor, const Layout *l, int shown,
                        FILE *out) {
    for (int d = 0; d < l->ndev && d < shown; ++d) {
        fprintf(out, "%sdev %d:", d ? "; " : "", d);
        for (int i = 0; i < l->count[d]; ++i)
            fprintf(out, " %s", sched_tile_name(arena, s, tensor, l->tiles[d][i]));
    }
    if (shown < l->ndev)
        fprintf(out, "%s... %d more device%s", shown ? "; " : "", l->ndev - shown,
                l->ndev - shown == 1 ? "" : "s");
}

/* Whether a collective's group has a listed rank. */
static int group_listed(const Collective *c, int shown) {
    for (int g = 0; g < c->gsize; ++g)
        if (c->group[g] < shown)
            return 1;
    return 0;
}

static int is_compute(const PhaseSched *ph) {
    return ph->kind == PHASE_FWD || ph->kind == PHASE_BWD || ph->kind == PHASE_GRAD;
}

static const char *phase_title(const Schedule *s, Arena *arena, const PhaseSched *ph) {
    if (ph->inst < 0)
        return phase_name(ph->kind);
    return arena_printf(arena, "%s of %s", phase_name(ph->kind),
                        s->model->instances[ph->inst].name);
}

/* How the program holds its schedule: rank-parametric phases and
 * layouts, or per-rank tables where a phase does not fit (form.h). */
static void form_text(const Schedule *s, Arena *arena, FILE *out) {
    const ScheduleForm *sf = form_build(arena, s);
    int n = s->phases.count;
    fprintf(out, "program form: %d of %d phases rank-parametric", n - sf->nfallback, n);
    if (sf->nlayout_fallback)
        fprintf(out, "; %d layouts as per-rank tables", sf->nlayout_fallback);
    fprintf(out, "\n");
    for (int k = 0; k < n; ++k) {
        const PhaseForm *pf = &sf->phases[k];
        if (pf->fallback)
            fprintf(out, "  per-rank tables for %s: %s\n",
                    phase_title(s, arena, s->phases.items[k]), pf->fallback);
        else if (pf->ntables)
            fprintf(out, "  %s: %d fields as per-rank tables\n",
                    phase_title(s, arena, s->phases.items[k]), pf->ntables);
    }
}

void explain_text(const Schedule *s, Arena *arena, FILE *out, int ranks) {
    const Model *m = s->model;
    const int ndev = m->mesh.ndev;
    const int shown = listed(ranks, ndev);
    fprintf(out, "model %s on %d devices (mesh", m->name, ndev);
    for (int a = 0; a < m->mesh.naxes; ++a)
        fprintf(out, " %s:%ld", m->mesh.names[a], m->mesh.sizes[a]);
    fprintf(out, ")\n");
    for (int i = 0; i < m->ninstances; ++i) {
        const Instance *inst = &m->instances[i];
        fprintf(out, "%s = %s(", inst->name, inst->op->name);
        for (int a = 0; a < inst->op->ninputs; ++a)
            fprintf(out, "%s%s", a ? ", " : "", m->tensors[inst->args[a]].name);
        fprintf(out, ") under partition '%s', %ld step%s\n", inst->partition->name, inst->steps,
                inst->steps == 1 ? "" : "s");
        for (int d = 0; d < inst->op->ndims; ++d) {
            fprintf(out, "  %s: size %ld, %ld slice%s of %ld, ", inst->op->dims[d],
                    inst->dim_sizes[d], s->slices[i].nslices[d],
                    s->slices[i].nslices[d] == 1 ? "" : "s", s->slices[i].extent[d]);
            if (inst->partition->dsi[d]) {
                fprintf(out, "DSI %s = ", inst->op->dims[d]);
                ast_print_expr(inst->partition->dsi[d]->value, out);
                fprintf(out, "\n");
            } else {
                fprintf(out, "whole\n");
            }
        }
    }
    fprintf(out, "stored tensors:\n");
    for (int t = 0; t < s->ntensors; ++t) {
        const SchedTensor *ts = &s->tensors[t];
        fprintf(out, "  %-8s tile [", ts->name);
        for (int x = 0; x < ts->ndims; ++x)
            fprintf(out, "%s%ld", x ? ", " : "", ts->extent[x]);
        fprintf(out, "], %ld tile%s of %ld bytes", ts->ntiles, ts->ntiles == 1 ? "" : "s",
                ts->tile_elems * (long)sizeof(float));
        const Layout *l = s->home[t].ndev ? &s->home[t] : s->final[t].ndev ? &s->final[t] : NULL;
        if (l && l->count && (s->home[t].ndev || ts->check)) {
            int rep = layout_replication(l, ts->ntiles);
            fprintf(out, ", stored %d time%s", rep, rep == 1 ? "" : "s");
        }
        fprintf(out, "\n");
    }
    long total[PRIME_BYTES_KIND_COUNT] = {0};
    int ncoll = 0, nredist = 0;
    for (int k = 0; k < s->phases.count; ++k) {
        const PhaseSched *ph = s->phases.items[k];
        if (!is_compute(ph) && !ph->boundary.count)
            continue;
        fprintf(out, "\nphase %s", phase_title(s, arena, ph));
        if (is_compute(ph)) {
            const Instance *inst = &m->instances[ph->inst];
            fprintf(out, ": %s (steps in %s order)\n", einsum_text(s, arena, ph),
                    ph->reversed ? "reversed" : "forward");
            fprintf(out,
                    "  accumulation: %ld accumulator%s started, %ld accumulator move%s, %d "
                    "collective%s; each output tile computed %ld time%s\n",
                    ph->nlocal_acc, ph->nlocal_acc == 1 ? "" : "s", ph->ntravel_acc,
                    ph->ntravel_acc == 1 ? "" : "s", ph->collectives.count,
                    ph->collectives.count == 1 ? "" : "s", ph->replication,
                    ph->replication == 1 ? "" : "s");
            for (long st = 0; st < inst->steps; ++st) {
                long t = sched_op_step(s, ph, st);
                fprintf(out, "  step %ld (t = %ld):\n", st, t);
                for (int d = 0; d < shown; ++d) {
                    fprintf(out, "    dev %d (%s): %s%s", d, coords_text(s, arena, d),
                            s->tensors[ph->out.tensor].name,
                            sched_tile_name(arena, s, ph->out.tensor,
                                            sched_operand_tile(s, ph, &ph->out, d, t)));
                    for (int i = 0; i < ph->nin; ++i)
                        fprintf(out, "%s%s%s", i ? ", " : " <- ", s->tensors[ph->in[i].tensor].name,
                                sched_tile_name(arena, s, ph->in[i].tensor,
                                                sched_operand_tile(s, ph, &ph->in[i], d, t)));
                    fprintf(out, "\n");
                }
                if (shown < ndev)
                    fprintf(out, "    ... %d more device%s (--ranks N or --ranks all lists them)\n",
                            ndev - shown, ndev - shown == 1 ? "" : "s");
                for (int i = 0; i < ph->moves.count; ++i) {
                    const Move *mv = ph->moves.items[i];
                    if (mv->step != st)
                        continue;
                    fprintf(out, "    then %s %s%s", s->tensors[mv->tensor].name,
                            mv->is_acc ? "accumulator " : "", move_kind_name(mv->kind));
                    if (mv->kind == MOVE_SHIFT)
                        fprintf(out, ": every receiver gets it from %s",
                                delta_text(s, arena, mv->delta));
                    fprintf(out, ", %d tile%s, %ld bytes (%s)\n", mv->ntransfers,
                            mv->ntransfers == 1 ? "" : "s", mv->bytes,
                            mv->is_acc ? "arrives during the next step's compute"
                                       : "overlapped with this step's compute");
                }
            }
        } else {
            fprintf(out, "\n");
        }
        int unlisted = 0;
        long unlisted_bytes = 0;
        for (int i = 0; i < ph->collectives.count; ++i) {
            const Collective *c = ph->collectives.items[i];
            ncoll++;
            if (!group_listed(c, shown)) {
                unlisted++;
                unlisted_bytes += c->bytes;
                continue;
            }
            fprintf(out, "  %s%s of %s%s over devices {",
                    c->reduce_scatter ? "reduce-scatter" : "all-reduce",
                    s->tensors[c->tensor].combine == PRIME_COMBINE_MAX ? " (max)" : "",
                    s->tensors[c->tensor].name, sched_tile_name(arena, s, c->tensor, c->tile));
            for (int g = 0; g < c->gsize; ++g)
                fprintf(out, "%s%d", g ? ", " : "", c->group[g]);
            fprintf(out, "}: %ld elements, %ld bytes sent in all\n", c->elems, c->bytes);
        }
        if (unlisted)
            fprintf(out,
                    "  ... %d more collective%s over unlisted devices, %ld bytes sent in all\n",
                    unlisted, unlisted == 1 ? "" : "s", unlisted_bytes);
        for (int i = 0; i < ph->boundary.count; ++i) {
            const Move *mv = ph->boundary.items[i];
            fprintf(out, "  redistribution of %s (%s", s->tensors[mv->tensor].name,
                    move_kind_name(mv->kind));
            if (mv->kind == MOVE_CONVERSION)
                fprintf(out, " from %s: %s", s->tensors[mv->from_tensor].name, mv->pattern);
            fprintf(out, ", %d transfer%s, %ld bytes): %s\n", mv->ntransfers,
                    mv->ntransfers == 1 ? "" : "s", mv->bytes, mv->reason);
            fprintf(out, "    have: ");
            layout_text(s, arena, mv->kind == MOVE_CONVERSION ? mv->from_tensor : mv->tensor,
                        &mv->have, shown, out);
            fprintf(out, "\n    need: ");
            layout_text(s, arena, mv->tensor, &mv->need, shown, out);
            fprintf(out, "\n");
            nredist++;
        }
        if (is_compute(ph)) {
            if (!ph->collectives.count)
                fprintf(out, "  no collective\n");
            if (!ph->boundary.count)
                fprintf(out, "  no redistribution\n");
        }
        fprintf(out, "  peak memory per device:");
        long most = 0;
        for (int d = 0; d < ndev; ++d) {
            if (d < shown)
                fprintf(out, " %ld", ph->peak[d]);
            most = ph->peak[d] > most ? ph->peak[d] : most;
        }
        if (shown < ndev)
            fprintf(out, " ... (%d more device%s; largest %ld)", ndev - shown,
                    ndev - shown == 1 ? "" : "s", most);
        fprintf(out, " bytes\n");
    }
    fprintf(out, "\nper device (bytes sent by kind, peak bytes allocated):\n");
    fprintf(out, "  %4s %12s %12s %12s %12s\n", "dev", "shift", "collective", "redist", "peak");
    long most[PRIME_BYTES_KIND_COUNT + 1] = {0};
    for (int d = 0; d < ndev; ++d) {
        if (d < shown)
            fprintf(out, "  %4d", d);
        for (int kind = 0; kind <= PRIME_BYTES_KIND_COUNT; ++kind) {
            long v = kind < PRIME_BYTES_KIND_COUNT ? s->pred_bytes[kind][d] : s->pred_peak[d];
            if (d < shown)
                fprintf(out, " %12ld", v);
            if (kind < PRIME_BYTES_KIND_COUNT)
                total[kind] += v;
            most[kind] = v > most[kind] ? v : most[kind];
        }
        if (d < shown)
            fprintf(out, "\n");
    }
    if (shown < ndev)
        fprintf(out, "  %4s %12ld %12ld %12ld %12ld (%d more device%s)\n", "max", most[0], most[1],
                most[2], most[3], ndev - shown, ndev - shown == 1 ? "" : "s");
    fprintf(out, "  %4s %12ld %12ld %12ld\n", "all", total[0], total[1], total[2]);
    fprintf(out,
            "collectives: %d; redistributions: %d; shift bytes %ld; collective bytes %ld; "
            "redistribution bytes %ld\n",
            ncoll, nredist, total[0], total[1], total[2]);
    form_text(s, arena, out);
}

/* ------------------------------------------------------------------ */

static void json_tile(const Schedule *s, int tensor, long tile, FILE *out) {
    const SchedTensor *ts = &s->tensors[tensor];
    fputc('[', out);
    for (int x = 0; x < ts->ndims; ++x)
        fprintf(out, "%s%ld", x ? ", " : "", sched_tile_coord(ts, tile, x));
    fputc(']', out);
}

static void json_layout(const Schedule *s, int tensor, const Layout *l, int shown, FILE *out) {
    fputc('[', out);
    for (int d = 0; d < l->ndev && d < shown; ++d) {
        fprintf(out, "%s[", d ? ", " : "");
        for (int i = 0; i < l->count[d]; ++i) {
            if (i)
                fprintf(out, ", ");
            json_tile(s, tensor, l->tiles[d][i], out);
        }
        fputc(']', out);
    }
    fputc(']', out);
}

void explain_json(const Schedule *s, Arena *arena, FILE *out, int ranks) {
    const Model *m = s->model;
    const int ndev = m->mesh.ndev;
    const int shown = listed(ranks, ndev);
    fprintf(out, "{\"model\": ");
    printer_json_string(out, m->name);
    fprintf(out, ", \"devices\": %d, \"ranks_listed\": %d, \"mesh\": [", ndev, shown);
    for (int a = 0; a < m->mesh.naxes; ++a) {
        fprintf(out, "%s{\"axis\": ", a ? ", " : "");
        printer_json_string(out, m->mesh.names[a]);
        fprintf(out, ", \"size\": %ld}", m->mesh.sizes[a]);
    }
    fprintf(out, "],\n \"instances\": [");
    for (int i = 0; i < m->ninstances; ++i) {
        const Instance *inst = &m->instances[i];
        fprintf(out, "%s{\"name\": ", i ? ", " : "");
        printer_json_string(out, inst->name);
        fprintf(out, ", \"operator\": ");
        printer_json_string(out, inst->op->name);
        fprintf(out, ", \"partition\": ");
        printer_json_string(out, inst->partition->name);
        fprintf(out, ", \"steps\": %ld, \"dims\": [", inst->steps);
        for (int d = 0; d < inst->op->ndims; ++d) {
            fprintf(out, "%s{\"name\": ", d ? ", " : "");
            printer_json_string(out, inst->op->dims[d]);
            fprintf(out, ", \"size\": %ld, \"slices\": %ld, \"extent\": %ld}", inst->dim_sizes[d],
                    s->slices[i].nslices[d], s->slices[i].extent[d]);
        }
        fprintf(out, "]}");
    }
    fprintf(out, "],\n \"tensors\": [");
    for (int t = 0; t < s->ntensors; ++t) {
        const SchedTensor *ts = &s->tensors[t];
        const Layout *l = s->home[t].ndev ? &s->home[t] : &s->final[t];
        fprintf(out, "%s{\"name\": ", t ? ", " : "");
        printer_json_string(out, ts->name);
        fprintf(out, ", \"tile_bytes\": %ld, \"tiles\": %ld, \"stored\": %d, \"checked\": %s}",
                ts->tile_elems * (long)sizeof(float), ts->ntiles,
                l->count ? layout_replication(l, ts->ntiles) : 0, ts->check ? "true" : "false");
    }
    fprintf(out, "],\n \"phases\": [");
    for (int k = 0; k < s->phases.count; ++k) {
        const PhaseSched *ph = s->phases.items[k];
        fprintf(out, "%s\n  {\"phase\": ", k ? "," : "");
        printer_json_string(out, phase_name(ph->kind));
        fprintf(out, ", \"instance\": ");
        if (ph->inst >= 0)
            printer_json_string(out, m->instances[ph->inst].name);
        else
            fprintf(out, "null");
        if (is_compute(ph)) {
            const Instance *inst = &m->instances[ph->inst];
            fprintf(out, ", \"einsum\": ");
            printer_json_string(out, einsum_text(s, arena, ph));
            fprintf(out,
                    ", \"order\": \"%s\", \"replication\": %ld, \"accumulators\": %ld, "
                    "\"accumulator_moves\": %ld,\n   \"steps\": [",
                    ph->reversed ? "reversed" : "forward", ph->replication, ph->nlocal_acc,
                    ph->ntravel_acc);
            for (long st = 0; st < inst->steps; ++st) {
                long t = sched_op_step(s, ph, st);
                fprintf(out, "%s{\"step\": %ld, \"t\": %ld, \"devices\": [", st ? ", " : "", st, t);
                for (int d = 0; d < shown; ++d) {
                    fprintf(out, "%s{\"rank\": %d, \"tiles\": {", d ? ", " : "", d);
                    printer_json_string(out, s->tensors[ph->out.tensor].name);
                    fprintf(out, ": ");
                    json_tile(s, ph->out.tensor, sched_operand_tile(s, ph, &ph->out, d, t), out);
                    for (int i = 0; i < ph->nin; ++i) {
                        fprintf(out, ", ");
                        printer_json_string(out, s->tensors[ph->in[i].tensor].name);
                        fprintf(out, ": ");
                        json_tile(s, ph->in[i].tensor, sched_operand_tile(s, ph, &ph->in[i], d, t),
                                  out);
                    }
                    fprintf(out, "}}");
                }
                fprintf(out, "]}");
            }
            fprintf(out, "]");
        }
        fprintf(out, ",\n   \"moves\": [");
        for (int i = 0; i < ph->moves.count; ++i) {
            const Move *mv = ph->moves.items[i];
            fprintf(out, "%s{\"tensor\": ", i ? ", " : "");
            printer_json_string(out, s->tensors[mv->tensor].name);
            fprintf(out,
                    ", \"after_step\": %ld, \"kind\": \"%s\", \"accumulator\": %s, \"transfers\": "
                    "%d, \"bytes\": %ld",
                    mv->step, move_kind_name(mv->kind), mv->is_acc ? "true" : "false",
                    mv->ntransfers, mv->bytes);
            if (mv->kind == MOVE_SHIFT) {
                fprintf(out, ", \"from\": ");
                printer_json_string(out, delta_text(s, arena, mv->delta));
            }
            fprintf(out, "}");
        }
        fprintf(out, "],\n   \"collectives_total\": %d, \"collectives\": [", ph->collectives.count);
        for (int i = 0, first = 1; i < ph->collectives.count; ++i) {
            const Collective *c = ph->collectives.items[i];
            if (!group_listed(c, shown))
                continue;
            fprintf(out,
                    "%s{\"kind\": \"%s\", \"combine\": \"%s\", \"tensor\": ", first ? "" : ", ",
                    c->reduce_scatter ? "reduce-scatter" : "all-reduce",
                    s->tensors[c->tensor].combine == PRIME_COMBINE_MAX ? "max" : "sum");
            printer_json_string(out, s->tensors[c->tensor].name);
            fprintf(out, ", \"tile\": ");
            json_tile(s, c->tensor, c->tile, out);
            fprintf(out, ", \"group\": [");
            for (int g = 0; g < c->gsize; ++g)
                fprintf(out, "%s%d", g ? ", " : "", c->group[g]);
            fprintf(out, "], \"elements\": %ld, \"bytes\": %ld}", c->elems, c->bytes);
            first = 0;
        }
        fprintf(out, "],\n   \"redistributions\": [");
        for (int i = 0; i < ph->boundary.count; ++i) {
            const Move *mv = ph->boundary.items[i];
            fprintf(out, "%s{\"tensor\": ", i ? ", " : "");
            printer_json_string(out, s->tensors[mv->tensor].name);
            fprintf(out,
                    ", \"kind\": \"%s\", \"pattern\": \"%s\", \"transfers\": %d, \"bytes\": %ld, "
                    "\"reason\": ",
                    move_kind_name(mv->kind),
                    mv->kind == MOVE_CONVERSION ? mv->pattern : move_kind_name(mv->kind),
                    mv->ntransfers, mv->bytes);
            printer_json_string(out, mv->reason);
            fprintf(out, ", \"have\": ");
            json_layout(s, mv->kind == MOVE_CONVERSION ? mv->from_tensor : mv->tensor, &mv->have,
                        shown, out);
            fprintf(out, ", \"need\": ");
            json_layout(s, mv->tensor, &mv->need, shown, out);
            fprintf(out, "}");
        }
        fprintf(out, "],\n   \"peak_bytes\": [");
        long most = 0;
        for (int d = 0; d < ndev; ++d) {
            if (d < shown)
                fprintf(out, "%s%ld", d ? ", " : "", ph->peak[d]);
            most = ph->peak[d] > most ? ph->peak[d] : most;
        }
        fprintf(out, "], \"peak_bytes_max\": %ld}", most);
    }
    fprintf(out, "],\n \"per_device\": [");
    long most[PRIME_BYTES_KIND_COUNT + 1] = {0};
    for (int d = 0; d < ndev; ++d) {
        for (int kind = 0; kind <= PRIME_BYTES_KIND_COUNT; ++kind) {
            long v = kind < PRIME_BYTES_KIND_COUNT ? s->pred_bytes[kind][d] : s->pred_peak[d];
            most[kind] = v > most[kind] ? v : most[kind];
        }
        if (d < shown)
            fprintf(out,
                    "%s{\"rank\": %d, \"shift\": %ld, \"collective\": %ld, \"redist\": %ld, "
                    "\"peak\": %ld}",
                    d ? ", " : "", d, s->pred_bytes[0][d], s->pred_bytes[1][d], s->pred_bytes[2][d],
                    s->pred_peak[d]);
    }
    fprintf(out,
            "],\n \"per_device_max\": {\"shift\": %ld, \"collective\": %ld, \"redist\": %ld, "
            "\"peak\": %ld}",
            most[0], most[1], most[2], most[3]);
    const ScheduleForm *sf = form_build(arena, s);
    fprintf(out,
            ",\n \"program_form\": {\"parametric_phases\": %d, \"phases\": %d, "
            "\"layout_tables\": %d, \"per_rank_phases\": [",
            s->phases.count - sf->nfallback, s->phases.count, sf->nlayout_fallback);
    for (int k = 0, first = 1; k < s->phases.count; ++k) {
        if (!sf->phases[k].fallback)
            continue;
        fprintf(out, "%s{\"phase\": %d, \"reason\": ", first ? "" : ", ", k);
        printer_json_string(out, sf->phases[k].fallback);
        fprintf(out, "}");
        first = 0;
    }
    fprintf(out, "]}}\n");
}
