/*
 * cost_cli.c — `primec cost`: the predicted time per phase and step of
 * every model of a file on a hardware profile (see cost.h and
 * docs/cost-model.md).
 */
#include "cost_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "json_out.h"
#include "pipeline.h"
#include "profile.h"

static void cost_usage(FILE *out) {
    fprintf(out,
            "usage: primec cost FILE [--model NAME] [--profile NAME|PATH] [--elem-bytes N]\n"
            "                  [--devices-per-node N] [--json]\n"
            "  predicted time per phase and step, communication, memory (default profile: v100)\n");
}

int cost_command_main(int argc, char **argv) {
    const char *file = NULL, *model = NULL, *profile = "v100";
    int json = 0;
    CostOptions opt;
    cost_options_default(&opt);
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cost_usage(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
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
    /* --json: one model's report, or an array of every model's. */
    json_t *all = json && c.schedules.count != 1 ? json_array() : NULL;
    for (int i = 0; i < c.schedules.count; ++i) {
        CostReport r;
        cost_schedule(c.schedules.items[i], &prof, &opt, c.arena, &r);
        if (all) {
            json_array_append_new(all, cost_json(&r));
        } else if (json) {
            cost_print_json(&r, stdout);
        } else {
            if (i)
                printf("\n");
            cost_print(&r, stdout);
        }
    }
    if (all)
        json_out(stdout, all, COST_JSON_FLAGS);
    compilation_free(&c);
    return 0;
}
