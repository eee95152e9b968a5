/*
 * fuzz_model.c — the structure-aware fuzz target: decode the input into
 * a .prime program (fuzz_gen.h) and run the compiler on it up to and
 * including the schedule pass (parse, resolve, partition, phases,
 * schedule: what `primec check` runs), diagnostics silenced.
 *
 * A crash, a sanitizer report, an internal compiler error (ICE exits 3,
 * which libFuzzer reports as "fuzz target exited") or an input slower
 * than -timeout is a finding. The program text of any input is printed
 * by `prime_fuzz_replay --print FILE`.
 *
 * The pipeline reads its input from a file, so each program is written to
 * one temporary file per process. At exit the target prints how far the
 * inputs it ran got, for docs/fuzzing.md.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_gen.h"
#include "fuzz_model.h"
#include "pipeline.h"

static Compilation table_comp; /* the stdlib alone, resolved: what the table points into */
static FuzzTable table;
static char path[64];
static int fd = -1;

static struct {
    long inputs;
    long resolved;      /* got past resolve */
    long reached_sched; /* the schedule pass ran */
    long passed;        /* no diagnostic at all */
} stats;

static void fuzz_model_exit(void) {
    if (stats.inputs > 0)
        fprintf(stderr,
                "fuzz_model: %ld inputs: %.1f%% resolved, %.1f%% reached schedule, %.1f%% "
                "passed schedule\n",
                stats.inputs, 100.0 * stats.resolved / stats.inputs,
                100.0 * stats.reached_sched / stats.inputs, 100.0 * stats.passed / stats.inputs);
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    fuzz_table_free(&table);
    compilation_free(&table_comp);
}

void fuzz_model_init(void) {
    compilation_init(&table_comp, NULL, NULL);
    if (!pipeline_run(&table_comp, "resolve")) {
        fprintf(stderr, "fuzz_model: the stdlib does not resolve\n");
        abort();
    }
    fuzz_table_build(&table, &table_comp.module, &table_comp.programs);
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/prime_fuzz_XXXXXX", dir && strlen(dir) < 32 ? dir : "/tmp");
    fd = mkstemp(path);
    if (fd < 0) {
        perror("fuzz_model: mkstemp");
        abort();
    }
    atexit(fuzz_model_exit);
}

char *fuzz_model_program(const uint8_t *data, size_t size, size_t *len) {
    return fuzz_gen_program(&table, data, size, len);
}

int fuzz_model_run(const uint8_t *data, size_t size) {
    size_t len;
    char *text = fuzz_gen_program(&table, data, size, &len);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, len, 0) != (ssize_t)len) {
        perror("fuzz_model: writing the program");
        abort();
    }
    free(text);

    Compilation c;
    compilation_init(&c, path, NULL);
    int ok = pipeline_run(&c, "schedule");
    /* How far it got: resolve filled the module; the phases pass leaves
     * one phase list per model (NULL for a model it rejected) and the
     * schedule pass runs only if every one is there. The generator always
     * writes a model, so an empty module means resolve or parse failed. */
    int nmodels = c.module.models.count;
    int reached = nmodels > 0 && c.phase_lists.count == nmodels;
    for (int i = 0; reached && i < c.phase_lists.count; ++i)
        reached = c.phase_lists.items[i] != NULL;
    stats.inputs++;
    stats.resolved += c.slice_tables.count > 0 || reached;
    stats.reached_sched += reached;
    stats.passed += ok && c.sink.error_count == 0;
    compilation_free(&c);
    return reached;
}
