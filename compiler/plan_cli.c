/*
 * plan_cli.c — `primec plan FILE --model M [--devices N] [--profile P]
 * [--memory-limit BYTES|none] [--mesh T|SxS] [--tp-max T] [--elem-bytes B] [--json]
 * [-o OUT.prime] [--svg DIR]`.
 *
 * Meshes tried for N devices: for every data-parallel degree dp (a divisor
 * of N, N / dp at most --tp-max), the tensor-parallel mesh (t) and, when
 * t is a square, (i: s, j: s). The best plan over all of them is printed,
 * with the model's own pinned plan on its own mesh priced the same way
 * (when every instance pins a partition).
 */
#define _XOPEN_SOURCE 700
#include "plan_cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "cost.h"
#include "json_out.h"
#include "pipeline.h"
#include "plan.h"
#include "plan_price.h"
#include "plan_train.h"
#include "plan_train_cli.h"
#include "plan_write.h"
#include "profile.h"
#include "svg.h"

/* The most devices plan accepts (data-parallel replicas of meshes of at
 * most PLAN_MAX_MESH devices, the limit of a model's mesh). */
#define PLAN_MAX_DEVICES (1L << 20)
#define PLAN_MAX_MESH 4096L

/* The whole of s as a decimal integer in [lo, hi]; 0 if it is not one. */
static int parse_count(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct Result {
    Plan plan;
    Mesh mesh;
    int dp;
    Arena *arena; /* the plan's memory; owned by the Result */
} Result;

static void mesh_1d(Mesh *m, long n) {
    memset(m, 0, sizeof *m);
    m->naxes = 1;
    m->names[0] = "d";
    m->sizes[0] = n;
    m->ndev = (int)n;
}

static void mesh_2d(Mesh *m, long a) {
    memset(m, 0, sizeof *m);
    m->naxes = 2;
    m->names[0] = "i";
    m->names[1] = "j";
    m->sizes[0] = m->sizes[1] = a;
    m->ndev = (int)(a * a);
}

/* The chosen plan as a model of one data-parallel replica: the model's
 * instances with the chosen partitions and mesh-axis bindings, on the
 * planned mesh, at the shapes the candidates were scheduled at (tokens
 * divided among the replicas). This is what `-o` writes and what
 * `primec build` of that file runs. */
static Model *planned_model(Arena *arena, const Model *m, const Result *r) {
    Model *pm = ARENA_NEW(arena, Model);
    *pm = *m;
    pm->mesh = r->mesh;
    pm->strict = 0;
    pm->tensors = ARENA_ARRAY(arena, ModelTensor, m->ntensors + 1);
    memcpy(pm->tensors, m->tensors, sizeof(ModelTensor) * (size_t)m->ntensors);
    pm->instances = ARENA_ARRAY(arena, Instance, m->ninstances + 1);
    for (int i = 0; i < m->ninstances; ++i) {
        const PlanCandidate *pc = r->plan.cands[i].items[r->plan.choice[i]];
        Instance *inst = &pm->instances[i];
        plan_bind_candidate(inst, &m->instances[i], pc);
        memcpy(inst->dim_sizes, pc->inst.dim_sizes, sizeof inst->dim_sizes);
        const Op *op = inst->op;
        for (int a = 0; a <= op->ninputs; ++a) {
            const OpTensor *ot = a < op->ninputs ? &op->inputs[a] : &op->output;
            ModelTensor *mt = &pm->tensors[a < op->ninputs ? inst->args[a] : inst->result];
            for (int x = 0; x < ot->ndims; ++x)
                mt->sizes[x] = inst->dim_sizes[ot->dims[x]];
        }
    }
    return pm;
}

/* A plan scheduled as one program (not instance by instance as the
 * search prices it): exactly what the built program moves and holds,
 * priced by the same cost model, plus the data-parallel gradient
 * all-reduce. 0 when it does not schedule (e.g. more stored tensors than
 * the runtime's limit), with the scheduler's first error in `why`. */
static int schedule_plan(Compilation *c, const Model *m, const Result *r, CostCtx *ctx,
                         PlanCost *out, long *dp_bytes, char *why, size_t why_size) {
    *dp_bytes = 0;
    Arena *arena = arena_create();
    DiagSink mute;
    diag_init(&mute, &c->sources, arena, NULL);
    Schedule *s = schedule_build(arena, &mute, planned_model(arena, m, r));
    if (!s) {
        snprintf(why, why_size, "%s", mute.count ? mute.items[0].message : "no schedule");
        arena_destroy(arena);
        return 0;
    }
    *out = plan_price_schedule(s, arena, ctx);
    if (r->dp > 1) {
        long wbytes = 0;
        for (int d = 0; d < s->model->mesh.ndev; ++d) {
            long w = 0;
            for (int t = 0; t < s->ntensors; ++t)
                if (s->tensors[t].is_weight && !s->tensors[t].is_grad)
                    w += (long)s->home[t].count[d] * s->tensors[t].tile_elems * (long)sizeof(float);
            if (w > wbytes)
                wbytes = w;
        }
        long moved = 0;
        ctx->tp = r->mesh.ndev;
        double dp_time = plan_price_dp(wbytes, r->dp, ctx, &moved);
        out->time += dp_time;
        out->coll_time += dp_time;
        out->coll_bytes += moved;
        *dp_bytes = moved;
    }
    arena_destroy(arena);
    return 1;
}

/* --svg DIR: the timelines of the chosen plan and of the pinned
 * partitions (NULL: none) on one time scale, DIR/MODEL.plan.svg, and
 * each one's mesh pictures in DIR/chosen and DIR/pinned. Paths are
 * listed on `list` unless NULL. 0 after a reported write error. */
static int plan_svg(Compilation *c, const Model *m, const Result *chosen, const Result *pinned,
                    const CostCtx *ctx, const char *dir, FILE *list) {
    Arena *arena = arena_create();
    const Result *rs[2] = {chosen, pinned};
    static const char *const names[2] = {"chosen", "pinned"};
    SvgTimeline tl[2];
    int n = 0, ok = 1;
    for (int k = 0; k < 2 && ok && rs[k]; ++k) {
        DiagSink mute;
        diag_init(&mute, &c->sources, arena, NULL);
        Schedule *s = schedule_build(arena, &mute, planned_model(arena, m, rs[k]));
        if (!s)
            continue; /* the text and JSON reports say why */
        const char *sub = arena_printf(arena, "%s/%s", dir, names[k]);
        ok = svg_prepare_dir(sub) && svg_write_mesh(s, arena, sub, list);
        CostOptions opt = ctx->opt;
        opt.record_events = 1;
        CostReport *r = ARENA_NEW(arena, CostReport);
        cost_schedule(s, ctx->profile, &opt, arena, r);
        char mesh[128];
        size_t len = 0;
        for (int a = 0; a < rs[k]->mesh.naxes; ++a)
            len += (size_t)snprintf(mesh + len, sizeof mesh - len, "%s%s: %ld", a ? ", " : "",
                                    rs[k]->mesh.names[a], rs[k]->mesh.sizes[a]);
        tl[n].title = arena_printf(arena, "%s: mesh (%s) x %d data-parallel, %.1f us", names[k],
                                   mesh, rs[k]->dp, r->step_us);
        tl[n++].report = r;
    }
    const char *path = arena_printf(arena, "%s/%s.plan.svg", dir, m->name);
    if (ok && n) {
        ok = svg_write_timeline(
            path,
            arena_printf(arena,
                         "%s: the chosen plan and the pinned partitions, one replica's "
                         "step on profile %s",
                         m->name, ctx->profile->name),
            tl, n);
        if (ok && list)
            fprintf(list, "%s\n", path);
    }
    arena_destroy(arena);
    return ok;
}

/* A plan as one program in JSON, or an object saying why it has none. */
static json_t *cost_json_of(const PlanCost *pc, long dp_bytes, const char *why) {
    if (!pc)
        return json_pack("{s:s}", "error", why);
    return json_pack("{s:f, s:f, s:I, s:I, s:I, s:I}", "time_s", pc->time, "collective_time_s",
                     pc->coll_time, "collective_bytes", (json_int_t)pc->coll_bytes, "p2p_bytes",
                     (json_int_t)pc->p2p_bytes, "memory_bytes", (json_int_t)pc->peak,
                     "dp_collective_bytes", (json_int_t)dp_bytes);
}

/* A search's estimate of a plan, and the plan as one program. */
static json_t *estimate_json(const Result *r, json_t *schedule) {
    return json_pack("{s:i, s:f, s:I, s:I, s:I, s:o}", "dp", r->dp, "time_s", r->plan.time,
                     "collective_bytes", (json_int_t)r->plan.coll_bytes, "p2p_bytes",
                     (json_int_t)r->plan.p2p_bytes, "memory_bytes", (json_int_t)r->plan.memory,
                     "schedule", schedule);
}

static void write_plan_prime(FILE *f, const Model *m, const Result *r, const char *source,
                             Arena *arena) {
    const char **uses = ARENA_ARRAY(arena, const char *, m->ninstances + 1);
    for (int i = 0; i < m->ninstances; ++i)
        uses[i] = plan_use_text(arena, &r->plan, i);
    plan_write_prime(f, m, uses, &r->mesh, r->dp, plan_replica_axis(&r->plan), source, arena);
}

static void print_plan(const Model *m, const Result *r, const Profile *prof, Arena *arena,
                       FILE *out) {
    fprintf(out, "plan for %s on %d devices (profile %s): mesh (", m->name, r->mesh.ndev * r->dp,
            prof->name);
    for (int a = 0; a < r->mesh.naxes; ++a)
        fprintf(out, "%s%s: %ld", a ? ", " : "", r->mesh.names[a], r->mesh.sizes[a]);
    fprintf(out, ") x %d data-parallel replica%s\n", r->dp, r->dp == 1 ? "" : "s");
    fprintf(out, "  %-14s %-28s %12s %14s %14s\n", "instance", "partition", "time (us)",
            "coll B/dev", "p2p B/dev");
    for (int i = 0; i < m->ninstances; ++i) {
        const PlanCandidate *pc = r->plan.cands[i].items[r->plan.choice[i]];
        fprintf(out, "  %-14s %-28s %12.1f %14ld %14ld\n", m->instances[i].name,
                plan_use_text(arena, &r->plan, i), pc->cost.time * 1e6, pc->cost.coll_bytes,
                pc->cost.p2p_bytes);
    }
    fprintf(out, "  redistribution between instances: %.1f us\n", r->plan.edge_time * 1e6);
}

/* The tensor-parallel meshes a search may use. */
typedef struct MeshSpace {
    long tp_max; /* devices of one replica at most */
    int naxes;   /* --mesh: 1 or 2 axes; 0: any */
    long side;   /* --mesh: the size of every axis */
} MeshSpace;

static int search_meshes(Compilation *c, const Model *m, long n, long token, long memory_limit,
                         const MeshSpace *space, int pinned_only, CostCtx *ctx, Result *best,
                         long *plans, PlanOptions *failed_opt, int *have_failed) {
    int have = 0;
    Arena *spare = NULL, *scratch = arena_create();
    for (long dp = 1; dp <= n; ++dp) {
        if (n % dp)
            continue; /* every divisor of the device count */
        long t = n / dp;
        if (t > space->tp_max)
            continue;
        for (int shape = 0; shape < 2; ++shape) {
            if (space->naxes && (space->naxes != shape + 1 ||
                                 (shape == 0 ? space->side : space->side * space->side) != t))
                continue;
            Result r;
            memset(&r, 0, sizeof r);
            if (shape == 0) {
                mesh_1d(&r.mesh, t);
            } else {
                long s = (long)llround(sqrt((double)t));
                if (s * s != t || s < 2)
                    continue;
                mesh_2d(&r.mesh, s);
            }
            r.dp = (int)dp;
            PlanOptions opt;
            memset(&opt, 0, sizeof opt);
            opt.mesh = r.mesh;
            opt.dp = (int)dp;
            opt.token_size = token;
            opt.memory_limit = memory_limit;
            opt.cost = plan_price_schedule;
            opt.move = plan_price_move;
            opt.dp_cost = plan_price_dp;
            opt.elem_bytes = ctx->opt.elem_bytes;
            opt.state_bytes_per_param = COST_ADAM_STATE_BYTES;
            opt.ctx = ctx;
            opt.pinned_only = pinned_only;
            /* Each mesh plans in its own arena: a loser's is reset and
             * used by the next mesh, so its memory stays mapped. */
            r.arena = spare ? spare : arena_create();
            spare = NULL;
            opt.scratch = scratch;
            ctx->tp = t;
            DiagSink mute;
            diag_init(&mute, &c->sources, r.arena, NULL);
            if (!plan_model(r.arena, &mute, &c->module, m, &opt, &r.plan)) {
                arena_reset(r.arena);
                spare = r.arena;
                if (!*have_failed) {
                    *failed_opt = opt;
                    failed_opt->scratch = NULL; /* freed below */
                    *have_failed = 1;
                }
                continue;
            }
            ++*plans;
            if (!have || r.plan.time < best->plan.time) {
                if (have) {
                    arena_reset(best->arena);
                    spare = best->arena;
                }
                *best = r;
                have = 1;
            } else {
                arena_reset(r.arena);
                spare = r.arena;
            }
        }
    }
    arena_destroy(spare);
    arena_destroy(scratch);
    return have;
}

static int writable_path(const char *path);

/* --layers, --global-batch, --micro-batch, --vocab: a count each. */
static int train_count_flag(const char *a) {
    return !strcmp(a, "--layers") || !strcmp(a, "--global-batch") || !strcmp(a, "--micro-batch") ||
           !strcmp(a, "--vocab");
}

static int parse_train_count(const char *flag, const char *v, PlanTrainArgs *t) {
    long n;
    long max = !strcmp(flag, "--layers") ? 1L << 16 : 1L << 30;
    if (!parse_count(v, 1, max, &n)) {
        fprintf(stderr, "primec: error: bad %s '%s' (a count from 1 to %ld)\n", flag, v, max);
        return 0;
    }
    if (!strcmp(flag, "--layers"))
        t->layers = n;
    else if (!strcmp(flag, "--global-batch"))
        t->global_batch = n;
    else if (!strcmp(flag, "--micro-batch"))
        t->micro_batch = n;
    else
        t->vocab = n;
    return 1;
}

int plan_main(int argc, char **argv) {
    const char *file = NULL, *model_name = NULL, *profile_name = "h100", *out_path = NULL;
    const char *svg_dir = NULL;
    long devices = 0, tp_max = 0; /* 0: 4 nodes' worth of the profile */
    long memory_limit = -1;       /* -1: the profile's device memory; 0: none */
    MeshSpace space = {0, 0, 0};
    int json = 0, elem_bytes = 4, no_program = 0;
    static const char *const with_value[] = {
        "--model",        "--devices", "--profile",   "--tp-max",     "--mesh",   "-o",
        "--memory-limit", "--svg",     "--param",     "--elem-bytes", "--layers", "--global-batch",
        "--micro-batch",  "--vocab",   "--recompute", "--memory",     NULL};
    PlanTrainArgs train;
    memset(&train, 0, sizeof train);
    train.recompute = TRAIN_RECOMPUTE_AUTO;
    ParamOverride params[64];
    int nparams = 0;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        for (int k = 0; with_value[k] && !has; ++k) {
            if (!strcmp(a, with_value[k])) {
                fprintf(stderr, "primec: error: option '%s' needs a value\n", a);
                return 2;
            }
        }
        if (!strcmp(a, "--help")) {
            printf(
                "usage: primec plan FILE [--model M] [--devices N] [--profile P] "
                "[--memory-limit BYTES|none] [--mesh T|SxS] [--tp-max T] [--elem-bytes 2|4] "
                "[--json] [--no-program] [--param NAME=VALUE] [-o OUT.prime] [--svg DIR]\n"
                "       primec plan FILE --training --layers L --global-batch B [--micro-batch b]\n"
                "                   [--vocab V] [--recompute auto|on|off] [--devices N] [--profile "
                "P]\n"
                "                   [--memory BYTES|none] [--shard-optimizer] [--uneven-stages] "
                "[--json] [-o OUT.prime]\n"
                "chooses a partition for every operator instance of each model in FILE (or M)\n"
                "for N devices (default: the model's mesh) on profile P (default h100), over\n"
                "every data-parallel degree and tensor-parallel mesh of at most T devices\n"
                "(default: four nodes), or on --mesh only, within --memory-limit per device\n"
                "(default: the profile's device memory; none: no limit); prints the plan, its\n"
                "estimate and"
                " its cost as one program next to the model's pinned partitions; -o\n"
                "writes it as a .prime model; --no-program skips scheduling the plans as one\n"
                "program (the search's estimate only); --svg DIR draws the chosen and the pinned\n"
                "plan (timelines and mesh pictures, docs/svg.md). With --training, FILE's model\n"
                "is one layer at one sequence: the layer's tensor plan, pipeline stages,\n"
                "data-parallel replicas, micro-batch size and recomputation are chosen together\n"
                "for L layers and a global batch of B sequences; -o writes them (stages,\n"
                "micro-batches in 1F1B's order) as a .prime run. See docs/planner.md.\n");
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--training")) {
            train.on = 1;
        } else if (!strcmp(a, "--shard-optimizer")) {
            train.shard_optimizer = 1;
        } else if (!strcmp(a, "--uneven-stages")) {
            train.uneven_stages = 1;
        } else if (!strcmp(a, "--recompute") && has) {
            const char *v = argv[++i];
            if (!strcmp(v, "auto") || !strcmp(v, "on") || !strcmp(v, "off")) {
                train.recompute = v[1] == 'u'   ? TRAIN_RECOMPUTE_AUTO
                                  : v[1] == 'n' ? TRAIN_RECOMPUTE_ON
                                                : TRAIN_RECOMPUTE_OFF;
            } else {
                fprintf(stderr, "primec: error: bad --recompute '%s' (auto, on or off)\n", v);
                return 2;
            }
        } else if (train_count_flag(a) && has) {
            if (!parse_train_count(a, argv[++i], &train))
                return 2;
        } else if (!strcmp(a, "--no-program")) {
            no_program = 1;
        } else if (!strcmp(a, "--param") && has) {
            if (nparams == (int)(sizeof params / sizeof params[0]) ||
                !resolve_parse_override(argv[i + 1], &params[nparams])) {
                fprintf(stderr,
                        "primec: error: --param takes NAME=VALUE (an integer value), not '%s'\n",
                        argv[i + 1]);
                return 2;
            }
            nparams++;
            ++i;
        } else if (!strcmp(a, "--model") && has) {
            model_name = argv[++i];
        } else if (!strcmp(a, "--devices") && has) {
            if (!parse_count(argv[++i], 1, PLAN_MAX_DEVICES, &devices)) {
                fprintf(stderr, "primec: error: bad --devices '%s' (a count from 1 to %ld)\n",
                        argv[i], PLAN_MAX_DEVICES);
                return 2;
            }
        } else if (!strcmp(a, "--profile") && has) {
            profile_name = argv[++i];
        } else if (!strcmp(a, "--tp-max") && has) {
            if (!parse_count(argv[++i], 1, PLAN_MAX_MESH, &tp_max)) {
                fprintf(stderr, "primec: error: bad --tp-max '%s' (a count from 1 to %ld)\n",
                        argv[i], PLAN_MAX_MESH);
                return 2;
            }
        } else if (!strcmp(a, "--mesh") && has) {
            /* T: a 1-D mesh of T devices; SxS: a 2-D S x S mesh. */
            char *end;
            errno = 0;
            long side = strtol(argv[++i], &end, 10), side2 = side;
            space.naxes = 1;
            if (*end == 'x') {
                space.naxes = 2;
                side2 = strtol(end + 1, &end, 10);
            }
            if (*end || errno || side < 1 || side != side2 ||
                side > (space.naxes == 1 ? PLAN_MAX_MESH : 64)) {
                fprintf(stderr, "primec: error: bad --mesh '%s' (T or SxS, e.g. 8, 6 or 3x3)\n",
                        argv[i]);
                return 2;
            }
            space.side = side;
        } else if (!strcmp(a, "--elem-bytes") && has) {
            long eb;
            if (!parse_count(argv[++i], 1, 8, &eb)) {
                fprintf(stderr,
                        "primec: error: bad --elem-bytes '%s' (bytes per element, e.g. 2 "
                        "or 4)\n",
                        argv[i]);
                return 2;
            }
            elem_bytes = (int)eb;
        } else if (!strcmp(a, "-o") && has) {
            out_path = argv[++i];
        } else if (!strcmp(a, "--svg") && has) {
            svg_dir = argv[++i];
        } else if ((!strcmp(a, "--memory-limit") || !strcmp(a, "--memory")) && has) {
            int ok = 1;
            if (!strcmp(argv[++i], "none"))
                memory_limit = 0;
            else
                memory_limit = budget_parse_bytes(argv[i], &ok);
            if (!ok) {
                fprintf(stderr,
                        "primec: error: bad --memory-limit '%s' (e.g. 16G, 512M, 1000000, none)\n",
                        argv[i]);
                return 2;
            }
        } else if (a[0] == '-') {
            fprintf(stderr, "primec: error: unknown plan option '%s'\n", a);
            return 2;
        } else if (!file) {
            file = a;
        } else {
            fprintf(stderr, "primec: error: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!file) {
        fprintf(stderr,
                "usage: primec plan FILE [--model M] [--devices N] [--profile P] "
                "[--memory-limit BYTES|none] [--mesh T|SxS] [--tp-max T] [--elem-bytes 2|4] "
                "[--json] [-o OUT.prime]\n");
        return 2;
    }
    if (!train.on && (train.layers || train.global_batch || train.micro_batch || train.vocab)) {
        fprintf(stderr, "primec: error: --layers, --global-batch, --micro-batch and --vocab "
                        "belong to --training\n");
        return 2;
    }
    if (train.on && (!train.layers || !train.global_batch)) {
        fprintf(stderr, "primec: error: --training needs --layers L and --global-batch B\n");
        return 2;
    }
    if (train.on && svg_dir) {
        fprintf(stderr, "primec: error: --training prints the plan; --svg is not supported "
                        "with it\n");
        return 2;
    }
    /* The output path is checked before the search, which can take long. */
    if (out_path && !writable_path(out_path))
        return 2;
    if (svg_dir && no_program) {
        fprintf(stderr, "primec: error: --svg draws the plans as programs; it cannot be used "
                        "with --no-program\n");
        return 2;
    }
    if (svg_dir && !svg_prepare_dir(svg_dir))
        return 2;
    Profile prof;
    char err[512];
    if (!profile_load(profile_name, &prof, err, sizeof err)) {
        fprintf(stderr, "primec: error: %s\n", err);
        return 2;
    }
    if (tp_max == 0)
        tp_max = 4L * (prof.devices_per_node > 0 ? prof.devices_per_node : 8);
    if (memory_limit < 0)
        memory_limit = (long)(prof.mem_capacity_GB * 1e9);
    space.tp_max = tp_max;
    if (space.naxes)
        space.tp_max = space.naxes == 1 ? space.side : space.side * space.side;
    struct stat in;
    if (stat(file, &in) == 0 && !S_ISREG(in.st_mode)) {
        fprintf(stderr, "primec: error: cannot open '%s': %s\n", file,
                S_ISDIR(in.st_mode) ? "it is a directory" : "not a regular file");
        return 2;
    }
    Compilation c;
    compilation_init(&c, file, stderr);
    c.model_name = model_name;
    c.nparams = nparams;
    c.params = params;
    if (!pipeline_run(&c, "resolve")) {
        diag_finish(&c.sink);
        int rc = c.io_error ? 2 : 1;
        compilation_free(&c);
        return rc;
    }
    CostCtx ctx;
    ctx.profile = &prof;
    cost_options_default(&ctx.opt);
    ctx.opt.elem_bytes = elem_bytes;
    ctx.arena = c.arena;
    int rc = 0, any = 0;
    for (int k = 0; k < c.module.models.count && rc == 0; ++k) {
        const Model *m = c.module.models.items[k];
        if ((model_name && strcmp(model_name, m->name)) || (m->computation && !model_name))
            continue;
        any = 1;
        if (m->computation && !devices) {
            diag_error(&c.sink, m->decl->name.span,
                       "model '%s' has no mesh: plan it with --devices N, or plan one of its runs",
                       m->name);
            rc = 1;
            break;
        }
        long n = devices ? devices : m->mesh.ndev;
        budget_context(&c.sink, &m->name_span,
                       arena_printf(c.arena, "planning '%s' on %ld devices", m->name, n));
        if (space.naxes && n % space.tp_max) {
            diag_error_plain(&c.sink,
                             "--mesh needs a multiple of %ld devices; '%s' is planned on %ld "
                             "(see --devices)",
                             space.tp_max, m->name, n);
            rc = 1;
            break;
        }
        if (train.on) {
            train.memory_limit = memory_limit;
            train.tp_max = space.tp_max;
            train.mesh_naxes = space.naxes;
            train.mesh_side = space.side;
            train.json = json;
            train.out_path = out_path;
            train.source = out_path ? plan_relative_path(c.arena, file, out_path) : NULL;
            rc = plan_training(&c, m, n, &ctx, &train);
            continue;
        }
        long token = 0;
        for (int t = 0; t < m->ntensors && !token; ++t)
            if (m->tensors[t].role == TENSOR_INPUT && m->tensors[t].ndims)
                token = m->tensors[t].sizes[0];
        double t0 = now_ms();
        Result best;
        long plans = 0;
        PlanOptions failed_opt;
        int have_failed = 0;
        int have = search_meshes(&c, m, n, token, memory_limit, &space, 0, &ctx, &best, &plans,
                                 &failed_opt, &have_failed);
        double ms = now_ms() - t0;
        if (!have) {
            /* Say why on the first mesh tried. */
            Plan dummy;
            if (!have_failed || plan_model(c.arena, &c.sink, &c.module, m, &failed_opt, &dummy))
                diag_error(&c.sink, m->name_span, "no plan for '%s' on %ld devices", m->name, n);
            rc = 1;
            break;
        }
        /* The model's pinned partitions (e.g. the Megatron-LM plan of an
         * example), with the best mesh and data-parallel degree for them. */
        int pinned = m->ninstances > 0;
        for (int i = 0; i < m->ninstances; ++i)
            pinned &= m->instances[i].partition != NULL;
        Result base;
        memset(&base, 0, sizeof base);
        int have_base = 0;
        if (pinned) {
            long base_plans = 0;
            PlanOptions ignored;
            int ignored_failed = 0;
            have_base = search_meshes(&c, m, n, token, memory_limit, &space, 1, &ctx, &base,
                                      &base_plans, &ignored, &ignored_failed);
        }
        /* Both plans scheduled whole: what their programs do. */
        PlanCost exact, base_exact;
        long dp_bytes = 0, base_dp_bytes = 0;
        char why[512] = "", base_why[512] = "";
        memset(&exact, 0, sizeof exact);
        memset(&base_exact, 0, sizeof base_exact);
        int have_exact = 0, have_base_exact = 0;
        if (no_program) {
            snprintf(why, sizeof why, "--no-program");
            snprintf(base_why, sizeof base_why, "--no-program");
        } else {
            have_exact = schedule_plan(&c, m, &best, &ctx, &exact, &dp_bytes, why, sizeof why);
            /* The pinned partitions are often the search's own plan: that
             * program is scheduled once. */
            if (have_base && base.dp == best.dp &&
                plan_same_program(&best.plan, best.plan.choice, &base.plan, base.plan.choice, 1)) {
                have_base_exact = have_exact;
                base_exact = exact;
                base_dp_bytes = dp_bytes;
                memcpy(base_why, why, sizeof why);
            } else {
                have_base_exact =
                    have_base && schedule_plan(&c, m, &base, &ctx, &base_exact, &base_dp_bytes,
                                               base_why, sizeof base_why);
            }
        }
        /* The search is exact under its own estimate (instances priced one
         * by one, conversions between them); the final choice is made as
         * one program: when the model's pinned partitions run faster than
         * the search's optimum, they are kept. */
        int keep_pinned = have_exact && have_base_exact && base_exact.time < exact.time;
        const Result *chosen = keep_pinned ? &base : &best;
        const PlanCost *chosen_exact = keep_pinned ? &base_exact : have_exact ? &exact : NULL;
        long chosen_dp_bytes = keep_pinned ? base_dp_bytes : dp_bytes;
        if (json) {
            json_t *mesh = json_array();
            for (int a = 0; a < chosen->mesh.naxes; ++a)
                json_array_append_new(mesh, json_pack("{s:s, s:I}", "axis", chosen->mesh.names[a],
                                                      "size", (json_int_t)chosen->mesh.sizes[a]));
            json_t *uses = json_array();
            for (int i = 0; i < m->ninstances; ++i)
                json_array_append_new(uses,
                                      json_pack("{s:s, s:s}", "name", m->instances[i].name, "use",
                                                plan_use_text(c.arena, &chosen->plan, i)));
            json_t *pinned_json =
                have_base ? estimate_json(&base, cost_json_of(have_base_exact ? &base_exact : NULL,
                                                              base_dp_bytes, base_why))
                          : json_null();
            /* The plan as the .prime text -o writes, for tools that build it. */
            char *text = NULL;
            size_t len = 0;
            FILE *mem = open_memstream(&text, &len);
            if (!mem)
                ICE("out of memory (open_memstream)");
            write_plan_prime(mem, m, chosen, plan_relative_path(c.arena, file, out_path), c.arena);
            fclose(mem);
            /* search_ms to the microsecond, as it always was. */
            json_t *report = json_pack(
                "{s:s, s:I, s:s, s:s, s:i, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:f, s:b, s:s}",
                "model", m->name, "devices", (json_int_t)n, "profile", prof.name, "chosen",
                keep_pinned ? "pinned" : "search", "dp", chosen->dp, "mesh", mesh, "instances",
                uses, "schedule", cost_json_of(chosen_exact, chosen_dp_bytes, why), "search",
                estimate_json(&best, cost_json_of(have_exact ? &exact : NULL, dp_bytes, why)),
                "pinned", pinned_json, "candidates", (json_int_t)best.plan.candidates, "plans",
                (json_int_t)plans, "search_ms", round(ms * 1e3) / 1e3, "layer_power",
                best.plan.used_power, "planned_source", text);
            free(text);
            json_out(stdout, report, JSON_REAL_PRECISION(9));
        } else {
            print_plan(m, chosen, &prof, c.arena, stdout);
            printf("search estimate: step %.1f us; collective %ld B/device, point-to-point %ld "
                   "B/device, memory %ld B/device\n",
                   chosen->plan.time * 1e6, chosen->plan.coll_bytes, chosen->plan.p2p_bytes,
                   chosen->plan.memory);
            if (chosen_exact)
                printf(
                    "as one program (what `primec build` of this plan runs): step %.1f us; "
                    "collective %ld B/device, point-to-point %ld B/device, memory %ld B/device\n",
                    chosen_exact->time * 1e6, chosen_exact->coll_bytes, chosen_exact->p2p_bytes,
                    chosen_exact->peak);
            else
                printf("as one program: not scheduled (%s); the plan is the search's\n", why);
            if (keep_pinned)
                printf("the search's optimum, (%d-device mesh) x %d, estimated %.1f us, runs %.1f "
                       "us as "
                       "one program: slower than the model's pinned partitions, which are kept\n",
                       best.mesh.ndev, best.dp, best.plan.time * 1e6, exact.time * 1e6);
            if (have_base) {
                printf("pinned partitions (the model's `use` clauses) on their best mesh, %d "
                       "replica%s: search estimate %.1f us",
                       base.dp, base.dp == 1 ? "" : "s", base.plan.time * 1e6);
                if (have_base_exact)
                    printf("; as one program %.1f us, collective %ld B/device, point-to-point %ld "
                           "B/device, memory %ld B/device\n",
                           base_exact.time * 1e6, base_exact.coll_bytes, base_exact.p2p_bytes,
                           base_exact.peak);
                else
                    printf("; as one program: not scheduled (%s)\n", base_why);
            }
            if (chosen_exact && have_base_exact)
                printf("chosen vs pinned, as one program: throughput %.2fx, collective bytes %.2f, "
                       "memory %.2f\n",
                       base_exact.time / chosen_exact->time,
                       base_exact.coll_bytes
                           ? (double)chosen_exact->coll_bytes / (double)base_exact.coll_bytes
                           : 0.0,
                       base_exact.peak ? (double)chosen_exact->peak / (double)base_exact.peak
                                       : 0.0);
            else if (have_base)
                printf("chosen vs pinned, search estimates: throughput %.2fx\n",
                       base.plan.time / chosen->plan.time);
            printf("searched %ld candidates in %ld mesh shapes in %.1f ms%s\n",
                   best.plan.candidates, plans, ms,
                   best.plan.used_power ? " (layers composed as a (min,+) matrix power)" : "");
        }
        if (svg_dir &&
            !plan_svg(&c, m, chosen, have_base ? &base : NULL, &ctx, svg_dir, json ? NULL : stdout))
            rc = 2;
        if (out_path) {
            FILE *f = fopen(out_path, "w");
            int written = 0;
            if (f) {
                write_plan_prime(f, m, chosen, plan_relative_path(c.arena, file, out_path),
                                 c.arena);
                written = !ferror(f);
                written &= fclose(f) == 0;
            }
            if (!written) {
                fprintf(stderr, "primec: error: cannot write '%s': %s\n", out_path,
                        strerror(errno));
                rc = 2;
            }
        }
        arena_destroy(best.arena);
        if (have_base)
            arena_destroy(base.arena);
    }
    if (!any && rc == 0) {
        diag_error_plain(&c.sink, model_name ? "no model named '%s'" : "no model in '%s'",
                         model_name ? model_name : file);
        rc = 1;
    }
    diag_finish(&c.sink);
    compilation_free(&c);
    /* Output that could not be written is an I/O error. */
    errno = 0;
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0) {
        fprintf(stderr, "primec: error: cannot write the output: %s\n",
                errno ? strerror(errno) : "write error");
        rc = 2;
    }
    return rc;
}

/* Can path be written (the file is writable, or its folder takes new
 * files)? Reports why not. A device such as /dev/stdout is accepted. */
static int writable_path(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode) || access(path, W_OK) != 0) {
            fprintf(stderr, "primec: error: cannot write '%s': %s\n", path,
                    S_ISDIR(st.st_mode) ? "it is a directory" : strerror(errno));
            return 0;
        }
        return 1;
    }
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir)
        ICE("out of memory");
    int ok = access(dir, W_OK | X_OK) == 0;
    if (!ok)
        fprintf(stderr, "primec: error: cannot write '%s': %s\n", path, strerror(errno));
    free(dir);
    return ok;
}
