/*
 * cost_cli.c — `primec cost`: the predicted time per phase and step of
 * every model of a file on a hardware profile (see cost.h and
 * docs/cost-model.md).
 */
#include "cost_cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "cost_pipeline.h"
#include "json_out.h"
#include "pipeline.h"
#include "profile.h"

static void cost_usage(FILE *out) {
    fprintf(out,
            "usage: primec cost FILE [--model NAME] [--profile NAME|PATH] [--elem-bytes N]\n"
            "                  [--devices-per-node N] [--no-fuse] [--json]\n"
            "                  [--layers L --stages P [--chunks V] [--replicas D]\n"
            "                   --micro-batch B --global-batch G [--vocab N] [--recompute]]\n"
            "  predicted time per phase and step, communication, memory (default profile: v100),\n"
            "  kernels fused as the kernels pass fuses them (--no-fuse: each phase's alone);\n"
            "  with --layers, FILE's model is one layer at one sequence, and the report adds a\n"
            "  training iteration of L such layers pipelined over P stages (V chunks each) on D\n"
            "  data-parallel replicas of its mesh (docs/cost-model.md)\n");
}

/* The pipeline options: name, where the value goes. */
typedef struct PipelineFlag {
    const char *name;
    long *value;
    long max;
} PipelineFlag;

static int parse_long(const char *flag, const char *v, long max, long *out) {
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (!*v || *end || errno || n < 1 || n > max) {
        fprintf(stderr, "primec: error: bad value '%s' for %s (1 .. %ld)\n", v, flag, max);
        return 0;
    }
    *out = n;
    return 1;
}

int cost_command_main(int argc, char **argv) {
    const char *file = NULL, *model = NULL, *profile = "v100";
    int json = 0;
    CostOptions opt;
    cost_options_default(&opt);
    long stages = 0, chunks = 1, replicas = 1, layers = 0, micro = 0, global = 0, vocab = 0;
    int recompute = 0;
    const PipelineFlag flags[] = {
        {"--stages", &stages, 1 << 16},     {"--chunks", &chunks, 1 << 16},
        {"--replicas", &replicas, 1 << 20}, {"--layers", &layers, 1 << 20},
        {"--micro-batch", &micro, 1 << 20}, {"--global-batch", &global, 1L << 30},
        {"--vocab", &vocab, 1L << 30},
    };
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const PipelineFlag *flag = NULL;
        for (size_t f = 0; f < sizeof flags / sizeof flags[0]; ++f)
            if (strcmp(a, flags[f].name) == 0)
                flag = &flags[f];
        if (flag) {
            if (i + 1 >= argc) {
                fprintf(stderr, "primec: error: %s needs a value\n", a);
                return 2;
            }
            if (!parse_long(a, argv[++i], flag->max, flag->value))
                return 2;
            continue;
        }
        if (strcmp(a, "--recompute") == 0) {
            recompute = 1;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cost_usage(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--no-fuse") == 0) {
            opt.no_fuse = 1;
        } else if ((strcmp(a, "--model") == 0 || strcmp(a, "--profile") == 0 ||
                    strcmp(a, "--elem-bytes") == 0 || strcmp(a, "--devices-per-node") == 0) &&
                   i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(a, "--model") == 0) {
                model = v;
            } else if (strcmp(a, "--profile") == 0) {
                profile = v;
            } else {
                char *end;
                long n = strtol(v, &end, 10);
                if (*end || n < 1 || n > 1 << 20 || (a[2] == 'e' && n != 2 && n != 4)) {
                    fprintf(stderr, "primec: error: bad value '%s' for %s%s\n", v, a,
                            a[2] == 'e' ? " (2 or 4)" : "");
                    return 2;
                }
                if (a[2] == 'e')
                    opt.elem_bytes = (int)n;
                else
                    opt.devices_per_node = (int)n;
            }
        } else if (a[0] != '-' && !file) {
            file = a;
        } else {
            fprintf(stderr, "primec: error: cost: unexpected argument '%s'\n", a);
            cost_usage(stderr);
            return 2;
        }
    }
    if (!file) {
        cost_usage(stderr);
        return 2;
    }
    int piped =
        layers || stages || micro || global || vocab || recompute || chunks != 1 || replicas != 1;
    if (piped && (!layers || !micro || !global)) {
        fprintf(stderr, "primec: error: a pipelined iteration needs --layers, --micro-batch and "
                        "--global-batch\n");
        return 2;
    }
    if (piped && !stages)
        stages = 1;
    PipelineShape shape = {(int)stages, (int)chunks, (int)replicas, layers, micro,
                           global,      vocab,       recompute,     0,      0};
    Profile prof;
    char err[512];
    if (!profile_load(profile, &prof, err, sizeof err)) {
        fprintf(stderr, "primec: error: %s\n", err);
        return 2;
    }
    Compilation c;
    compilation_init(&c, file, stderr);
    c.model_name = model;
    if (!pipeline_run(&c, "schedule")) {
        diag_finish(&c.sink);
        int rc = c.io_error ? 2 : 1;
        compilation_free(&c);
        return rc;
    }
    /* --json: one model's report, or an array of every model's; with a
     * pipeline, each is {"layer": report, "pipeline": iteration}. */
    json_t *all = json && c.schedules.count != 1 ? json_array() : NULL;
    int rc = 0;
    for (int i = 0; i < c.schedules.count; ++i) {
        CostReport r;
        const Schedule *s = c.schedules.items[i];
        cost_schedule(s, &prof, &opt, c.arena, &r);
        PipelineCost pc;
        if (piped) {
            long in_report = s->model->layer_count > 0 ? s->model->layer_count : 1;
            if (!cost_pipeline(&r, in_report, &shape, &prof, &pc, err, sizeof err)) {
                fprintf(stderr, "primec: error: model '%s': %s\n", s->model->name, err);
                rc = 2;
                break;
            }
        }
        if (json) {
            json_t *v = cost_json(&r);
            if (piped) {
                json_t *pair = json_object();
                json_object_set_new(pair, "layer", v);
                json_object_set_new(pair, "pipeline", cost_pipeline_json(&pc));
                v = pair;
            }
            if (all)
                json_array_append_new(all, v);
            else
                json_out(stdout, v, COST_JSON_FLAGS);
        } else {
            if (i)
                printf("\n");
            cost_print(&r, stdout);
            if (piped)
                cost_pipeline_print(&pc, stdout);
        }
    }
    if (all && rc == 0)
        json_out(stdout, all, COST_JSON_FLAGS);
    else if (all)
        json_decref(all);
    compilation_free(&c);
    return rc;
}
