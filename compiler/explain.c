/*
 * explain.c — text and JSON reports of a schedule (see explain.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "explain.h"

#include "form.h"

#include <stdlib.h>
#include <string.h>

#include "json_out.h"

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

/* Ranks listed device by device: the first `ranks`, or all (-1), or the
 * default's (explain.h). */
static int listed(int ranks, int ndev) {
    if (ranks == EXPLAIN_RANKS_DEFAULT)
        ranks = ndev > SCHEDULE_SUMMARY_DEVICES ? 0 : 16;
    return ranks < 0 || ranks > ndev ? ndev : ranks;
}

static void layout_text(const Schedule *s, Arena *arena, int tensor, const Layout *l, int shown,
                        FILE *out) {
    int ndev = l->ndev ? s->model->mesh.ndev : 0;
    for (int d = 0; d < ndev && d < shown; ++d) {
        fprintf(out, "%sdev %d:", d ? "; " : "", d);
        int n;
        const long *tiles = schedule_layout_tiles(arena, s, tensor, l, d, &n);
        for (int i = 0; i < n; ++i)
            fprintf(out, " %s", sched_tile_name(arena, s, tensor, tiles[i]));
    }
    if (shown < ndev)
        fprintf(out, "%s... %d more device%s", shown ? "; " : "", ndev - shown,
                ndev - shown == 1 ? "" : "s");
}

/* The members of a collective's group listed, at most. */
enum { EXPLAIN_GROUP_MAX = 64 };

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
    return arena_printf(arena, "%s%s of %s",
                        ph->kind == PHASE_FWD && ph->phase->recompute ? "recomputed " : "",
                        phase_name(ph->kind), s->model->instances[ph->inst].name);
}

/* How the program holds its schedule: rank-parametric phases and
 * layouts, or per-rank tables where a phase does not fit (form.h). */
static void form_text(const Schedule *s, Arena *arena, FILE *out) {
    if (s->orbit) {
        fprintf(out, "program form: not derived (one replica simulated; build derives it from "
                     "every rank's lists, as PRIMEC_FULL_SIMULATION=1 explain does)\n");
        return;
    }
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

/* Which simulation the analysis ran: explain's of every rank; check's of
 * one replica where a replica axis is proven (sched_orbit.c). */
static void analysis_text(const Schedule *s, Arena *arena, FILE *out) {
    int replicas = s->orbit_replicas;
    int axes = replicas ? s->orbit_axes : schedule_replica_axes(arena, s, &replicas);
    const char *names = schedule_axis_names(arena, &s->model->mesh, axes);
    if (s->orbit_replicas)
        fprintf(out, "analysis: one replica of %d along %s simulated\n", replicas, names);
    else if (axes)
        fprintf(out, "analysis: every rank simulated; check simulates one replica of %d along %s\n",
                replicas, names);
    else
        fprintf(out, "analysis: every rank simulated (no replica axis)\n");
}

static json_t *json_analysis(const Schedule *s, Arena *arena) {
    int replicas = s->orbit_replicas;
    int axes = replicas ? s->orbit_axes : schedule_replica_axes(arena, s, &replicas);
    json_t *a = json_pack("{s:s}", "simulated", s->orbit_replicas ? "one replica" : "every rank");
    if (axes) {
        json_t *names = json_array();
        for (int x = 0; x < s->model->mesh.naxes; ++x)
            if (axes & (1 << x))
                json_array_append_new(names, json_string(s->model->mesh.names[x]));
        json_object_set_new(a, "replica_axes", names);
        json_object_set_new(a, "replicas", json_integer(replicas));
    }
    return a;
}

/* The value of the micro-batched parameter in one micro-batch. */
static long micro_param(const Model *m) {
    for (int i = 0; i < m->nparams; ++i)
        if (m->param_names[i] == m->micro_item->name.name)
            return m->param_values[i];
    return 0;
}

void explain_text(const Schedule *s, Arena *arena, FILE *out, int ranks) {
    const Model *m = s->model;
    const int ndev = m->mesh.ndev;
    const int shown = listed(ranks, ndev);
    fprintf(out, "model %s on %d devices (mesh", m->name, ndev);
    for (int a = 0; a < m->mesh.naxes; ++a)
        fprintf(out, " %s:%ld", m->mesh.names[a], m->mesh.sizes[a]);
    fprintf(out, ")\n");
    if (m->nstages)
        fprintf(out, "pipeline stages: %d along mesh axis %s, %d cop%s of the layer each\n",
                m->nstages, m->mesh.names[m->stage_axis], m->stage_copies,
                m->stage_copies == 1 ? "y" : "ies");
    if (m->nmicro > 1)
        fprintf(out,
                "micro-batches: %d of %s = %ld each (micro-batch m's tensors NAME_mbm for m > 0, "
                "the weights shared)%s%s\n",
                m->nmicro, m->micro_item->name.name, micro_param(m),
                m->micro_order == MICRO_1F1B ? ", in 1F1B's order" : "",
                m->recompute ? ", each stage's forward recomputed before its backward (NAME_rc)"
                             : "");
    for (int i = 0; i < m->ninstances; ++i) {
        const Instance *inst = &m->instances[i];
        fprintf(out, "%s = %s(", inst->name, inst->op->name);
        for (int a = 0; a < inst->op->ninputs; ++a)
            fprintf(out, "%s%s", a ? ", " : "", m->tensors[inst->args[a]].name);
        fprintf(out, ") under partition '%s', %ld step%s", inst->partition->name, inst->steps,
                inst->steps == 1 ? "" : "s");
        if (m->nstages)
            fprintf(out, ", on pipeline stage %d (%s = %d)", inst->stage,
                    m->mesh.names[m->stage_axis], inst->stage);
        fprintf(out, "\n");
        if (inst->rule)
            fprintf(out, "  chosen by %s\n", inst->rule);
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
            int rep = schedule_layout_replication(s, t, l);
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
            if (m->nstages)
                fprintf(out,
                        "  pipeline stage %d of %d: the devices with %s = %d; the others skip it\n",
                        inst->stage, m->nstages, m->mesh.names[m->stage_axis], inst->stage);
            for (long st = 0; st < inst->steps; ++st) {
                long t = sched_op_step(s, ph, st);
                fprintf(out, "  step %ld (t = %ld):\n", st, t);
                for (int d = 0; d < shown; ++d) {
                    if (!sched_device_computes(s, ph, d))
                        continue;
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
            fprintf(out, "  %s%s of %s%s over devices {", sched_collective_kind(c),
                    !c->allgather && s->tensors[c->tensor].combine == PRIME_COMBINE_MAX ? " (max)"
                                                                                        : "",
                    s->tensors[c->tensor].name, sched_tile_name(arena, s, c->tensor, c->tile));
            for (int g = 0; g < c->gsize && g < EXPLAIN_GROUP_MAX; ++g)
                fprintf(out, "%s%d", g ? ", " : "", c->group[g]);
            if (c->gsize > EXPLAIN_GROUP_MAX)
                fprintf(out, ", ... %d devices in all", c->gsize);
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
            long v = ph->peak[sched_rank_row(s, d)];
            if (d < shown)
                fprintf(out, " %ld", v);
            most = v > most ? v : most;
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
    analysis_text(s, arena, out);
}

/* ------------------------------------------------------------------ */

static json_t *json_tile(const Schedule *s, int tensor, long tile) {
    const SchedTensor *ts = &s->tensors[tensor];
    json_t *a = json_array();
    for (int x = 0; x < ts->ndims; ++x)
        json_array_append_new(a, json_integer(sched_tile_coord(ts, tile, x)));
    return a;
}

static json_t *json_layout(const Schedule *s, Arena *arena, int tensor, const Layout *l,
                           int shown) {
    json_t *a = json_array();
    int ndev = l->ndev ? s->model->mesh.ndev : 0;
    for (int d = 0; d < ndev && d < shown; ++d) {
        json_t *dev = json_array();
        int n;
        const long *tiles = schedule_layout_tiles(arena, s, tensor, l, d, &n);
        for (int i = 0; i < n; ++i)
            json_array_append_new(dev, json_tile(s, tensor, tiles[i]));
        json_array_append_new(a, dev);
    }
    return a;
}

static json_t *json_instances(const Schedule *s) {
    const Model *m = s->model;
    json_t *list = json_array();
    for (int i = 0; i < m->ninstances; ++i) {
        const Instance *inst = &m->instances[i];
        json_t *dims = json_array();
        for (int d = 0; d < inst->op->ndims; ++d)
            json_array_append_new(dims, json_pack("{s:s, s:I, s:I, s:I}", "name", inst->op->dims[d],
                                                  "size", (json_int_t)inst->dim_sizes[d], "slices",
                                                  (json_int_t)s->slices[i].nslices[d], "extent",
                                                  (json_int_t)s->slices[i].extent[d]));
        json_t *o = json_pack("{s:s, s:s, s:s}", "name", inst->name, "operator", inst->op->name,
                              "partition", inst->partition->name);
        if (inst->rule)
            json_object_set_new(o, "rule", json_string(inst->rule));
        json_object_set_new(o, "steps", json_integer((json_int_t)inst->steps));
        if (m->nstages)
            json_object_set_new(o, "stage", json_integer(inst->stage));
        json_object_set_new(o, "dims", dims);
        json_array_append_new(list, o);
    }
    return list;
}

static json_t *json_tensors(const Schedule *s) {
    json_t *list = json_array();
    for (int t = 0; t < s->ntensors; ++t) {
        const SchedTensor *ts = &s->tensors[t];
        const Layout *l = s->home[t].ndev ? &s->home[t] : &s->final[t];
        json_array_append_new(list,
                              json_pack("{s:s, s:I, s:I, s:i, s:b}", "name", ts->name, "tile_bytes",
                                        (json_int_t)(ts->tile_elems * (long)sizeof(float)), "tiles",
                                        (json_int_t)ts->ntiles, "stored",
                                        l->count ? schedule_layout_replication(s, t, l) : 0,
                                        "checked", ts->check));
    }
    return list;
}

/* Which tile of each operand every listed device computes at each step. */
static json_t *json_steps(const Schedule *s, const PhaseSched *ph, int shown) {
    const Instance *inst = &s->model->instances[ph->inst];
    json_t *steps = json_array();
    for (long st = 0; st < inst->steps; ++st) {
        long t = sched_op_step(s, ph, st);
        json_t *devices = json_array();
        for (int d = 0; d < shown; ++d) {
            if (!sched_device_computes(s, ph, d))
                continue; /* another pipeline stage */
            json_t *tiles = json_object();
            json_object_set_new(
                tiles, s->tensors[ph->out.tensor].name,
                json_tile(s, ph->out.tensor, sched_operand_tile(s, ph, &ph->out, d, t)));
            for (int i = 0; i < ph->nin; ++i)
                json_object_set_new(
                    tiles, s->tensors[ph->in[i].tensor].name,
                    json_tile(s, ph->in[i].tensor, sched_operand_tile(s, ph, &ph->in[i], d, t)));
            json_array_append_new(devices, json_pack("{s:i, s:o}", "rank", d, "tiles", tiles));
        }
        json_array_append_new(steps, json_pack("{s:I, s:I, s:o}", "step", (json_int_t)st, "t",
                                               (json_int_t)t, "devices", devices));
    }
    return steps;
}

static json_t *json_moves(const Schedule *s, Arena *arena, const PhaseSched *ph) {
    json_t *list = json_array();
    for (int i = 0; i < ph->moves.count; ++i) {
        const Move *mv = ph->moves.items[i];
        json_t *o = json_pack("{s:s, s:I, s:s, s:b, s:i, s:I}", "tensor",
                              s->tensors[mv->tensor].name, "after_step", (json_int_t)mv->step,
                              "kind", move_kind_name(mv->kind), "accumulator", mv->is_acc,
                              "transfers", mv->ntransfers, "bytes", (json_int_t)mv->bytes);
        if (mv->kind == MOVE_SHIFT)
            json_object_set_new(o, "from", json_string(delta_text(s, arena, mv->delta)));
        json_array_append_new(list, o);
    }
    return list;
}

static json_t *json_collectives(const Schedule *s, const PhaseSched *ph, int shown) {
    json_t *list = json_array();
    for (int i = 0; i < ph->collectives.count; ++i) {
        const Collective *c = ph->collectives.items[i];
        if (!group_listed(c, shown))
            continue;
        json_t *group = json_array();
        for (int g = 0; g < c->gsize && g < EXPLAIN_GROUP_MAX; ++g)
            json_array_append_new(group, json_integer(c->group[g]));
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:o, s:o, s:i, s:I, s:I}", "kind",
                                              sched_collective_kind(c), "combine",
                                              c->allgather ? "none"
                                              : s->tensors[c->tensor].combine == PRIME_COMBINE_MAX
                                                  ? "max"
                                                  : "sum",
                                              "tensor", s->tensors[c->tensor].name, "tile",
                                              json_tile(s, c->tensor, c->tile), "group", group,
                                              "group_size", c->gsize, "elements",
                                              (json_int_t)c->elems, "bytes", (json_int_t)c->bytes));
    }
    return list;
}

static json_t *json_redistributions(const Schedule *s, Arena *arena, const PhaseSched *ph,
                                    int shown) {
    json_t *list = json_array();
    for (int i = 0; i < ph->boundary.count; ++i) {
        const Move *mv = ph->boundary.items[i];
        int from = mv->kind == MOVE_CONVERSION ? mv->from_tensor : mv->tensor;
        json_array_append_new(
            list,
            json_pack("{s:s, s:s, s:s, s:i, s:I, s:s, s:o, s:o}", "tensor",
                      s->tensors[mv->tensor].name, "kind", move_kind_name(mv->kind), "pattern",
                      mv->kind == MOVE_CONVERSION ? mv->pattern : move_kind_name(mv->kind),
                      "transfers", mv->ntransfers, "bytes", (json_int_t)mv->bytes, "reason",
                      mv->reason, "have", json_layout(s, arena, from, &mv->have, shown), "need",
                      json_layout(s, arena, mv->tensor, &mv->need, shown)));
    }
    return list;
}

static json_t *json_phase(const Schedule *s, Arena *arena, const PhaseSched *ph, int shown) {
    const Model *m = s->model;
    json_t *o = json_pack("{s:s, s:o}", "phase", phase_name(ph->kind), "instance",
                          ph->inst >= 0 ? json_string(m->instances[ph->inst].name) : json_null());
    if (is_compute(ph)) {
        json_object_set_new(o, "einsum", json_string(einsum_text(s, arena, ph)));
        json_object_set_new(o, "order", json_string(ph->reversed ? "reversed" : "forward"));
        json_object_set_new(o, "replication", json_integer(ph->replication));
        json_object_set_new(o, "accumulators", json_integer(ph->nlocal_acc));
        json_object_set_new(o, "accumulator_moves", json_integer(ph->ntravel_acc));
        json_object_set_new(o, "steps", json_steps(s, ph, shown));
        if (m->nstages)
            json_object_set_new(o, "stage", json_integer(m->instances[ph->inst].stage));
    }
    json_object_set_new(o, "moves", json_moves(s, arena, ph));
    json_object_set_new(o, "collectives_total", json_integer(ph->collectives.count));
    json_object_set_new(o, "collectives", json_collectives(s, ph, shown));
    json_object_set_new(o, "redistributions", json_redistributions(s, arena, ph, shown));
    json_t *peak = json_array();
    long most = 0;
    for (int d = 0; d < m->mesh.ndev; ++d) {
        long v = ph->peak[sched_rank_row(s, d)];
        if (d < shown)
            json_array_append_new(peak, json_integer(v));
        most = v > most ? v : most;
    }
    json_object_set_new(o, "peak_bytes", peak);
    json_object_set_new(o, "peak_bytes_max", json_integer(most));
    return o;
}

static json_t *json_program_form(const Schedule *s, Arena *arena) {
    if (s->orbit)
        return json_null(); /* one replica simulated: no rank's lists */
    const ScheduleForm *sf = form_build(arena, s);
    json_t *per_rank = json_array();
    for (int k = 0; k < s->phases.count; ++k)
        if (sf->phases[k].fallback)
            json_array_append_new(
                per_rank, json_pack("{s:i, s:s}", "phase", k, "reason", sf->phases[k].fallback));
    return json_pack("{s:i, s:i, s:i, s:o}", "parametric_phases", s->phases.count - sf->nfallback,
                     "phases", s->phases.count, "layout_tables", sf->nlayout_fallback,
                     "per_rank_phases", per_rank);
}

json_t *explain_json_value(const Schedule *s, Arena *arena, int ranks) {
    const Model *m = s->model;
    const int ndev = m->mesh.ndev;
    const int shown = listed(ranks, ndev);
    json_t *mesh = json_array();
    for (int a = 0; a < m->mesh.naxes; ++a)
        json_array_append_new(mesh, json_pack("{s:s, s:I}", "axis", m->mesh.names[a], "size",
                                              (json_int_t)m->mesh.sizes[a]));
    json_t *phases = json_array();
    for (int k = 0; k < s->phases.count; ++k)
        json_array_append_new(phases, json_phase(s, arena, s->phases.items[k], shown));
    json_t *per_device = json_array();
    long most[PRIME_BYTES_KIND_COUNT + 1] = {0};
    for (int d = 0; d < ndev; ++d) {
        for (int kind = 0; kind <= PRIME_BYTES_KIND_COUNT; ++kind) {
            long v = kind < PRIME_BYTES_KIND_COUNT ? s->pred_bytes[kind][d] : s->pred_peak[d];
            most[kind] = v > most[kind] ? v : most[kind];
        }
        if (d < shown)
            json_array_append_new(per_device,
                                  json_pack("{s:i, s:I, s:I, s:I, s:I}", "rank", d, "shift",
                                            (json_int_t)s->pred_bytes[0][d], "collective",
                                            (json_int_t)s->pred_bytes[1][d], "redist",
                                            (json_int_t)s->pred_bytes[2][d], "peak",
                                            (json_int_t)s->pred_peak[d]));
    }
    json_t *root =
        json_pack("{s:s, s:i, s:i, s:o, s:o, s:o, s:o, s:o, s:{s:I, s:I, s:I, s:I}, s:o}", "model",
                  m->name, "devices", ndev, "ranks_listed", shown, "mesh", mesh, "instances",
                  json_instances(s), "tensors", json_tensors(s), "phases", phases, "per_device",
                  per_device, "per_device_max", "shift", (json_int_t)most[0], "collective",
                  (json_int_t)most[1], "redist", (json_int_t)most[2], "peak", (json_int_t)most[3],
                  "program_form", json_program_form(s, arena));
    json_object_set_new(root, "analysis", json_analysis(s, arena));
    if (m->nstages)
        json_object_set_new(root, "stages",
                            json_pack("{s:s, s:i, s:i}", "axis", m->mesh.names[m->stage_axis],
                                      "count", m->nstages, "copies_each", m->stage_copies));
    if (m->nmicro > 1)
        json_object_set_new(
            root, "microbatches",
            json_pack("{s:s, s:i, s:I, s:s, s:b}", "param", m->micro_item->name.name, "count",
                      m->nmicro, "each", (json_int_t)micro_param(m), "order",
                      m->micro_order == MICRO_1F1B ? "1f1b" : "gpipe", "recompute", m->recompute));
    return root;
}

void explain_json(const Schedule *s, Arena *arena, FILE *out, int ranks) {
    json_out(out, explain_json_value(s, arena, ranks), 0);
}
