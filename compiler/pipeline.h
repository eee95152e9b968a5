/*
 * pipeline.h — the compilation context and the flat pass pipeline.
 *
 * Read top to bottom, the pipeline runs
 *     parse -> resolve -> partition -> phases -> schedule -> emit
 * (partition evaluates DSIs, phases derives the backward and gradient
 * einsums, and schedule the residency, communication, reductions,
 * alignment and memory of every instance).
 * `--dump-after=PASS` prints the IR after any pass and stops there.
 * Everything a compilation allocates lives in its arena; there is no
 * global compiler state but the process's memory budget (budget.h).
 */
#ifndef PRIMEC_PIPELINE_H
#define PRIMEC_PIPELINE_H

#include <stdio.h>

#include "ast.h"
#include "diag.h"
#include "ir.h"
#include "resolve.h"
#include "schedule.h"

typedef struct Compilation {
    Arena *arena;
    SourceMap sources;
    DiagSink sink;
    const char *input; /* the user's file */
    /* When set, the text of `input` (an editor's unsaved buffer): parsed
     * from memory instead of read from disk; imports are still read
     * relative to `input`. */
    const char *input_text;
    size_t input_len;
    const char *model_name; /* NULL: every model */
    int nparams;            /* --param NAME=VALUE overrides */
    const ParamOverride *params;
    const char *dump_after; /* NULL: no dump */
    FILE *dump_out;
    int dumped;      /* the dump pass ran: stop */
    int io_error;    /* the input file could not be read (exit 2) */
    PtrVec programs; /* Program*: stdlib first */
    Module module;
    /* Nothing after the schedule pass reads its action lists, only its
     * predictions and counts (`check`): the schedules keep no lists
     * (schedule_check_from). */
    int predict_only;
    /* `explain`: a mesh with replica axes and more than
     * SCHEDULE_SUMMARY_DEVICES devices is analysed from one replica
     * (schedule_summary_from); its layouts are the replica's. */
    int summary;
    PtrVec schedules;    /* Schedule*, one per model */
    PtrVec slice_tables; /* SliceTable*, one per instance of every selected model */
    PtrVec phase_lists;  /* PhaseList*, one per selected model */
    const char *emit_target;
    /* What the emitted C's target changes (emit_c.h); NULL: cpu and mpi. */
    const struct EmitCHooks *emit_hooks;
    int no_fuse;      /* --no-fuse: the kernels pass fuses nothing */
    int gemm_dtype;   /* --dtype: the GEMM operand type (GEMM_DTYPE_*), set on every schedule */
    PtrVec emitted;   /* char*: emitted program text per schedule */
    const char *pass; /* the pass running, or the last one run; NULL before */
} Compilation;

void compilation_init(Compilation *c, const char *input, FILE *diag_out);
void compilation_free(Compilation *c);

/* Runs passes up to and including `last` ("parse" ... "emit"). Returns 1
 * if no error was reported. Unknown pass names return -1.
 * Fault injection for tests: with PRIMEC_FAULT=ice:PASS in the
 * environment, an internal error is raised as PASS begins. */
int pipeline_run(Compilation *c, const char *last);

/* The pass before `name` ("parse" has none: NULL). */
const char *pipeline_pass_before(const char *name);

/* Is `name` a pass of the pipeline? */
int pipeline_has_pass(const char *name);
/* "parse, resolve, ..." */
const char *pipeline_pass_list(void);

#endif
