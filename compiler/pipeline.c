/*
 * pipeline.c — the pass table and each pass's driver (see pipeline.h).
 */
#define _XOPEN_SOURCE 700
#include "pipeline.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "emit_c.h"
#include "form.h"
#include "kernel_accum.h"
#include "kernel_copy.h"
#include "kernel_fuse.h"
#include "kernel_ir.h"
#include "parse.h"
#include "partition.h"
#include "resolve.h"
#include "stdlib_embed.h"

typedef int (*PassFn)(Compilation *c);
typedef void (*DumpFn)(Compilation *c);

/* ------------------------------------------------------------------ */

static int already_loaded(Compilation *c, const char *real) {
    for (int i = 0; i < c->programs.count; ++i) {
        const Program *p = c->programs.items[i];
        const SourceFile *f = source_get(&c->sources, p->file);
        char buf[PATH_MAX];
        if (realpath(f->name, buf) && strcmp(buf, real) == 0)
            return 1;
    }
    return 0;
}

static void parse_imports(Compilation *c, const Program *prog);

static int load_and_parse(Compilation *c, const char *path, const Span *from) {
    char real[PATH_MAX];
    if (realpath(path, real) && already_loaded(c, real))
        return 1;
    int id = !from && c->input_text
                 ? (int)source_add(&c->sources, path, c->input_text, c->input_len)
                 : source_load(&c->sources, path);
    if (id < 0) {
        if (from) {
            diag_error(&c->sink, *from, "cannot open '%s': %s", path, source_load_error(errno));
        } else {
            diag_error_plain(&c->sink, "cannot open '%s': %s", path, source_load_error(errno));
            c->io_error = 1;
        }
        return 0;
    }
    Program *prog = parse_file(c->arena, &c->sources, (uint32_t)id, &c->sink);
    ptrvec_push(c->arena, &c->programs, prog);
    parse_imports(c, prog);
    return 1;
}

static void parse_imports(Compilation *c, const Program *prog) {
    const SourceFile *f = source_get(&c->sources, prog->file);
    for (int i = 0; i < prog->decls.count; ++i) {
        const Decl *d = prog->decls.items[i];
        if (d->kind != DECL_IMPORT)
            continue;
        const char *path = d->import->path;
        if (path[0] != '/') {
            const char *slash = strrchr(f->name, '/');
            if (slash)
                path = arena_printf(c->arena, "%.*s/%s", (int)(slash - f->name), f->name, path);
        }
        load_and_parse(c, path, &d->import->path_span);
    }
}

static int pass_parse(Compilation *c) {
    for (int i = 0; i < stdlib_file_count; ++i) {
        uint32_t id = source_add(&c->sources, stdlib_files[i].name, stdlib_files[i].text,
                                 stdlib_files[i].len);
        ptrvec_push(c->arena, &c->programs, parse_file(c->arena, &c->sources, id, &c->sink));
    }
    if (c->input)
        load_and_parse(c, c->input, NULL);
    return c->sink.error_count == 0;
}

static void dump_parse(Compilation *c) {
    for (int i = stdlib_file_count; i < c->programs.count; ++i)
        ast_dump_program(c->programs.items[i], c->dump_out);
}

static int pass_resolve(Compilation *c) {
    ResolveOptions opt = {c->model_name, c->nparams, c->params};
    return resolve_programs_with(c->arena, &c->sink, (Program *const *)c->programs.items,
                                 c->programs.count, &c->module, &opt);
}

static void dump_resolve(Compilation *c) {
    resolve_dump(&c->module, c->dump_out);
}

/* The models this compilation lowers: a computation (a model without a
 * mesh) only runs through its runs. */
static int selected(const Compilation *c, const Model *m) {
    if (m->computation)
        return 0;
    return !c->model_name || strcmp(c->model_name, m->name) == 0;
}

/* --model names a computation: say which runs it has. */
static void computation_selected(Compilation *c, const Model *m) {
    diag_error(&c->sink, m->decl->name.span,
               "model '%s' has no mesh: it is a computation; check, explain and build one of its "
               "runs, or plan it with `primec plan --devices N`",
               m->name);
    for (int i = 0; i < c->module.models.count; ++i) {
        const Model *x = c->module.models.items[i];
        if (x->run && x->source == m->decl)
            diag_note(&c->sink, x->run->name.span, "run '%s' is declared here", x->name);
    }
}

static int check_models(Compilation *c) {
    int any = 0;
    for (int i = 0; i < c->module.models.count; ++i) {
        const Model *m = c->module.models.items[i];
        if (m->computation && c->model_name && strcmp(c->model_name, m->name) == 0) {
            computation_selected(c, m);
            return 0;
        }
        if (!selected(c, m))
            continue;
        any = 1;
        if (m->ninstances == 0) {
            diag_error(&c->sink, m->decl->name.span, "model '%s' has no operator instance",
                       m->name);
            continue;
        }
        for (int k = 0; k < m->ninstances; ++k) {
            const Instance *inst = &m->instances[k];
            if (!inst->partition) {
                diag_error(&c->sink, inst->span,
                           "'%s' has no partition: add `use PARTITION`, or let `primec plan` "
                           "choose them (`-o` writes the planned model)",
                           inst->name);
                continue;
            }
            int nforward = 0;
            for (int k2 = 0; k2 < inst->op->decl->body.count; ++k2)
                nforward += ((const Stmt *)inst->op->decl->body.items[k2])->kind != STMT_GRAD;
            if (nforward != 1) {
                diag_error(&c->sink, inst->span,
                           "operator '%s' has %d statements; this version lowers single-statement "
                           "operators",
                           inst->op->name, nforward);
                diag_note(&c->sink, inst->op->decl->name.span, "'%s' is declared here",
                          inst->op->name);
            }
        }
    }
    if (c->model_name && !any) {
        diag_error_plain(&c->sink, "no model named '%s' in '%s'", c->model_name, c->input);
        return 0;
    }
    return c->sink.error_count == 0;
}

/* After an error found in a run (its errors point into the model its
 * plan names, the same text for every run of it): which run it was. */
static void note_run(Compilation *c, const Model *m, int errors_before) {
    if (m->run && c->sink.error_count > errors_before)
        diag_note(&c->sink, m->run->name.span, "found while checking run '%s'", m->name);
}

static int pass_partition(Compilation *c) {
    if (!check_models(c))
        return 0;
    int ok = 1;
    for (int i = 0; i < c->module.models.count; ++i) {
        const Model *m = c->module.models.items[i];
        if (!selected(c, m))
            continue;
        int first = c->slice_tables.count;
        /* clean[k]: instance k's table was made without a diagnostic. */
        unsigned char *clean = arena_alloc(c->arena, (size_t)m->ninstances + 1);
        for (int k = 0; k < m->ninstances; ++k) {
            /* A copy of the repeated layer shares the previous copy's
             * table where the evaluation gives it the same points. */
            int prev = k - m->layer_size;
            if (m->layer_count > 1 && prev >= m->layer_first && clean[prev] &&
                partition_same_points(&m->instances[prev], &m->instances[k])) {
                clean[k] = 1;
                ptrvec_push(c->arena, &c->slice_tables, c->slice_tables.items[first + prev]);
                continue;
            }
            SliceTable *st = ARENA_NEW(c->arena, SliceTable);
            int errors = c->sink.error_count, count = c->sink.count;
            int good = partition_eval(c->arena, &c->sink, m, &m->instances[k], st);
            ok &= good;
            clean[k] = good && c->sink.count == count;
            note_run(c, m, errors);
            ptrvec_push(c->arena, &c->slice_tables, st);
        }
    }
    return ok;
}

static void dump_partition(Compilation *c) {
    int k = 0;
    for (int i = 0; i < c->module.models.count; ++i) {
        const Model *m = c->module.models.items[i];
        if (!selected(c, m))
            continue;
        for (int n = 0; n < m->ninstances; ++n) {
            const SliceTable *st = c->slice_tables.items[k++];
            const Instance *inst = &m->instances[n];
            fprintf(c->dump_out, "model %s instance %s partition %s devices %d steps %ld\n",
                    m->name, inst->name, inst->partition->name, st->ndev, st->steps);
            for (int d = 0; d < st->ndims; ++d)
                fprintf(c->dump_out, "  dim %s size %ld slices %ld extent %ld\n", inst->op->dims[d],
                        inst->dim_sizes[d], st->nslices[d], st->extent[d]);
            for (long t = 0; t < st->steps; ++t) {
                fprintf(c->dump_out, "  t=%ld:", t);
                for (int dev = 0; dev < st->ndev; ++dev) {
                    fprintf(c->dump_out, " [");
                    for (int d = 0; d < st->ndims; ++d)
                        fprintf(c->dump_out, "%s%ld", d ? " " : "", slice_at(st, d, dev, t));
                    fprintf(c->dump_out, "]");
                }
                fprintf(c->dump_out, "\n");
            }
        }
    }
}

/* A model that applies partition p to its operator on a mesh of p's
 * axes with every size parameter = size, on dimensions of `dim` elements:
 * how `check` proves a partition that no model uses. */
static Model *synthetic_model(Compilation *c, const Partition *p, long size, long dim) {
    Model *m = ARENA_NEW(c->arena, Model);
    const Op *op = p->op;
    m->name = p->name;
    m->span = p->decl->span;
    m->decl = NULL;
    m->name_span = p->decl->name.span;
    m->mesh.ndev = 1;
    m->mesh.span = p->decl->name.span;
    for (int a = 0; a < p->naxes; ++a) {
        long v = p->axes[a]->size->kind == EXPR_INT ? p->axes[a]->size->value : size;
        m->mesh.names[a] = p->axes[a]->name.name;
        m->mesh.sizes[a] = v;
        m->mesh.spans[a] = p->axes[a]->span;
        m->mesh.ndev *= (int)v;
        m->mesh.naxes++;
    }
    m->ntensors = op->ninputs + 1;
    m->tensors = ARENA_ARRAY(c->arena, ModelTensor, m->ntensors);
    for (int i = 0; i <= op->ninputs; ++i) {
        const OpTensor *ot = i < op->ninputs ? &op->inputs[i] : &op->output;
        ModelTensor *t = &m->tensors[i];
        t->name = ot->name;
        t->span = ot->span;
        t->role = i == op->ninputs ? TENSOR_ACTIVATION : i == 0 ? TENSOR_INPUT : TENSOR_WEIGHT;
        t->producer = i == op->ninputs ? 0 : -1;
        t->ndims = ot->ndims;
        for (int x = 0; x < ot->ndims; ++x)
            t->sizes[x] = dim;
    }
    m->ninstances = 1;
    m->instances = ARENA_ARRAY(c->arena, Instance, 1);
    Instance *inst = &m->instances[0];
    inst->name = m->tensors[op->ninputs].name;
    inst->span = p->decl->name.span;
    inst->op = op;
    for (int i = 0; i < op->ninputs; ++i)
        inst->args[i] = i;
    inst->result = op->ninputs;
    for (int d = 0; d < op->ndims; ++d)
        inst->dim_sizes[d] = dim;
    inst->partition = p;
    inst->use_span = p->decl->name.span;
    for (int a = 0; a < p->naxes; ++a) {
        inst->axis_map[a] = a;
        const Expr *sz = p->axes[a]->size;
        int known = 0;
        for (int k = 0; k < inst->nsize_params; ++k)
            known |= inst->size_param_names[k] == sz->name;
        if (sz->kind == EXPR_NAME && !known) {
            inst->size_param_names[inst->nsize_params] = sz->name;
            inst->size_param_values[inst->nsize_params++] = size;
        }
    }
    inst->steps = 1;
    if (p->steps)
        inst->steps = p->steps->size->kind == EXPR_INT ? p->steps->size->value : size;
    return m;
}

/* Proves every partition of the user's files that no model applies, on
 * meshes with size parameters 2 and 4. */
static int check_unused_partitions(Compilation *c) {
    int ok = 1;
    for (int i = 0; i < c->module.partitions.count; ++i) {
        const Partition *p = c->module.partitions.items[i];
        const SourceFile *f = source_get(&c->sources, p->decl->span.file);
        if (strncmp(f->name, "<stdlib>/", 9) == 0)
            continue;
        int used = 0;
        for (int k = 0; k < c->module.models.count && !used; ++k) {
            const Model *m = c->module.models.items[k];
            for (int n = 0; n < m->ninstances; ++n)
                used |= m->instances[n].partition == p;
        }
        if (used)
            continue;
        /* A step count named by no axis's size can never be bound: every
         * use would be refused ("not bound by any mesh axis"). */
        const Expr *steps = p->steps ? p->steps->size : NULL;
        int bound = !steps || steps->kind != EXPR_NAME;
        for (int a = 0; a < p->naxes && !bound; ++a)
            bound = p->axes[a]->size->kind == EXPR_NAME && p->axes[a]->size->name == steps->name;
        if (!bound) {
            diag_error(&c->sink, steps->span,
                       "step count '%s' of partition '%s' is not the size of any of its mesh axes",
                       steps->name, p->name);
            ok = 0;
            continue;
        }
        for (long size = 2; size <= 4 && ok; size *= 2) {
            long ndev = 1;
            for (int a = 0; a < p->naxes; ++a)
                ndev *= p->axes[a]->size->kind == EXPR_INT ? p->axes[a]->size->value : size;
            if (ndev > 256)
                continue;
            Model *m = synthetic_model(c, p, size, 16 * size * size);
            if (!schedule_build(c->arena, &c->sink, m)) {
                diag_note_plain(&c->sink,
                                "found while checking partition '%s' of '%s' alone with its size "
                                "parameters = %ld and every dimension of size %ld",
                                p->name, p->op->name, size, 16 * size * size);
                ok = 0;
            }
        }
    }
    return ok;
}

static int pass_phases(Compilation *c) {
    int ok = 1;
    for (int i = 0; i < c->module.models.count; ++i) {
        const Model *m = c->module.models.items[i];
        if (!selected(c, m))
            continue;
        int errors = c->sink.error_count;
        PhaseList *pl = phases_derive(c->arena, &c->sink, m);
        if (!pl)
            ok = 0;
        note_run(c, m, errors);
        ptrvec_push(c->arena, &c->phase_lists, pl);
    }
    return ok;
}

static void dump_phases(Compilation *c) {
    for (int i = 0; i < c->phase_lists.count; ++i)
        phases_dump(c->phase_lists.items[i], c->dump_out);
}

static int pass_schedule(Compilation *c) {
    int ok = check_unused_partitions(c);
    /* The partition and phases passes left one slice table per instance
     * and one phase list per selected model, in model order. */
    int k = 0, n = 0;
    for (int i = 0; i < c->module.models.count; ++i) {
        const Model *m = c->module.models.items[i];
        if (!selected(c, m))
            continue;
        const SliceTable *const *slices = (const SliceTable *const *)c->slice_tables.items + k;
        k += m->ninstances;
        budget_context(&c->sink, &m->name_span,
                       arena_printf(c->arena, "the schedule of '%s' on %d devices%s", m->name,
                                    m->mesh.ndev,
                                    m->layer_count > 1
                                        ? arena_printf(c->arena, " with %d layers", m->layer_count)
                                        : ""));
        int errors = c->sink.error_count;
        const PhaseList *pl = c->phase_lists.items[n++];
        Schedule *s = c->predict_only ? schedule_check_from(c->arena, &c->sink, m, slices, pl)
                      : c->summary    ? schedule_summary_from(c->arena, &c->sink, m, slices, pl)
                                      : schedule_build_from(c->arena, &c->sink, m, slices, pl);
        note_run(c, m, errors);
        if (!s)
            ok = 0;
        else
            ptrvec_push(c->arena, &c->schedules, s);
    }
    return ok && c->sink.error_count == 0;
}

static void dump_schedule(Compilation *c) {
    for (int i = 0; i < c->schedules.count; ++i) {
        const Schedule *s = c->schedules.items[i];
        fprintf(c->dump_out, "schedule %s\n", s->model->name);
        for (int k = 0; k < s->phases.count; ++k) {
            const PhaseSched *ph = s->phases.items[k];
            fprintf(c->dump_out, " phase %s%s%s%s\n", phase_name(ph->kind),
                    ph->inst >= 0 ? " of " : "",
                    ph->inst >= 0 ? s->model->instances[ph->inst].name : "",
                    ph->reversed ? " reversed" : "");
            for (int r = 0; r < s->model->mesh.ndev; ++r) {
                fprintf(c->dump_out, "  rank %d:", r);
                for (int a = 0; a < ph->nactions[r]; ++a) {
                    const PrimeAction *x = &ph->actions[r][a];
                    fprintf(c->dump_out, " %s", prime_action_name(x->op));
                    if (x->op == PRIME_ACT_STEP)
                        fprintf(c->dump_out, "%d", x->arg);
                    else if (x->op == PRIME_ACT_KEEP || x->op == PRIME_ACT_WAIT_KEPT)
                        fprintf(c->dump_out, "(tag %d)", x->tag);
                    else if (x->op != PRIME_ACT_WAIT)
                        fprintf(c->dump_out, "(%s#%d%s%d)", s->tensors[x->tensor].name, x->slot,
                                x->op == PRIME_ACT_SEND   ? "->"
                                : x->op == PRIME_ACT_RECV ? "<-"
                                                          : "",
                                x->op == PRIME_ACT_SEND || x->op == PRIME_ACT_RECV ? x->peer : 0);
                }
                fprintf(c->dump_out, "\n");
            }
        }
    }
}

/* The kernel IR is built by the emitter from each schedule; this pass
 * finds the groups of phases fused across instances (kernel_fuse.h) and
 * the gradient contributions computed into the tile they are added to
 * (kernel_accum.h), and rewrites the schedule's actions for them (every
 * target: the cpu and CUDA runtimes both run a fused group as one call,
 * and both targets' kernels accumulate into their output tile). */
static int pass_kernels(Compilation *c) {
    for (int i = 0; i < c->schedules.count && !c->no_fuse; ++i) {
        Schedule *s = c->schedules.items[i];
        /* Copies first: a copy gone leaves its readers and the groups
         * around it to fusion. */
        CopyPlan *copies = kernel_copy_apply(c->arena, s);
        s->fusion = kernel_fuse_plan(c->arena, s, &c->sources);
        s->fusion->copies = copies;
        s->fusion->accum = kernel_accum_plan(c->arena, s, s->fusion);
        /* kernel_fuse_apply predicts both rewrites again. */
        kernel_accum_apply(s, s->fusion->accum);
        kernel_fuse_apply(c->arena, s, s->fusion);
    }
    return 1;
}

static void dump_kernels(Compilation *c) {
    for (int i = 0; i < c->schedules.count; ++i) {
        const Schedule *s = c->schedules.items[i];
        kernel_dump_schedule(s, c->dump_out);
        if (s->fusion)
            kernel_fuse_dump(s, s->fusion, c->dump_out);
        if (s->fusion && s->fusion->accum)
            kernel_accum_dump(s, s->fusion->accum, c->dump_out);
        if (s->fusion && s->fusion->copies)
            kernel_copy_dump(s, s->fusion->copies, c->dump_out);
    }
}

static int pass_emit(Compilation *c) {
    for (int i = 0; i < c->schedules.count; ++i) {
        size_t len;
        Schedule *s = c->schedules.items[i];
        s->gemm_dtype = c->gemm_dtype;
        const ScheduleForm *form = form_build(c->arena, s);
        char *text =
            emit_c_program(c->arena, s, form, c->input ? c->input : "<none>", c->emit_hooks, &len);
        char *copy = arena_strndup(c->arena, text, len);
        free(text);
        ptrvec_push(c->arena, &c->emitted, copy);
    }
    return 1;
}

static void dump_emit(Compilation *c) {
    for (int i = 0; i < c->emitted.count; ++i)
        fputs(c->emitted.items[i], c->dump_out);
}

static const struct {
    const char *name;
    PassFn run;
    DumpFn dump;
} passes[] = {
    {"parse", pass_parse, dump_parse},
    {"resolve", pass_resolve, dump_resolve},
    {"partition", pass_partition, dump_partition},
    {"phases", pass_phases, dump_phases},
    {"schedule", pass_schedule, dump_schedule},
    {"kernels", pass_kernels, dump_kernels},
    {"emit", pass_emit, dump_emit},
};
#define NPASSES ((int)(sizeof passes / sizeof passes[0]))

const char *pipeline_pass_before(const char *name) {
    for (int i = 1; i < NPASSES; ++i)
        if (strcmp(passes[i].name, name) == 0)
            return passes[i - 1].name;
    return NULL;
}

int pipeline_has_pass(const char *name) {
    for (int i = 0; i < NPASSES; ++i)
        if (strcmp(passes[i].name, name) == 0)
            return 1;
    return 0;
}

const char *pipeline_pass_list(void) {
    return "parse, resolve, partition, phases, schedule, kernels, emit";
}

void compilation_init(Compilation *c, const char *input, FILE *diag_out) {
    memset(c, 0, sizeof *c);
    c->arena = arena_create();
    source_map_init(&c->sources, c->arena);
    diag_init(&c->sink, &c->sources, c->arena, diag_out);
    c->input = input;
    c->dump_out = stdout;
}

void compilation_free(Compilation *c) {
    arena_destroy(c->arena);
    memset(c, 0, sizeof *c);
}

/* PRIMEC_FAULT=ice:PASS: an internal error as PASS begins. */
static void fault_point(const char *pass) {
    const char *f = getenv("PRIMEC_FAULT");
    if (f && strncmp(f, "ice:", 4) == 0 && strcmp(f + 4, pass) == 0)
        ICE("fault injected (PRIMEC_FAULT=%s)", f);
}

int pipeline_run(Compilation *c, const char *last) {
    for (int i = 0; i < NPASSES; ++i) {
        c->pass = passes[i].name;
        fault_point(passes[i].name);
        budget_context(&c->sink, NULL, arena_printf(c->arena, "the %s pass", passes[i].name));
        if (!passes[i].run(c))
            return 0;
        if (c->dump_after && strcmp(c->dump_after, passes[i].name) == 0) {
            passes[i].dump(c);
            c->dumped = 1;
            return 1;
        }
        if (strcmp(passes[i].name, last) == 0)
            return 1;
    }
    return 1;
}
