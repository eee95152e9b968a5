/*
 * emit_kernels.c — kernel and reference functions (see emit_kernels.h).
 */
#include "emit_kernels.h"

#include <stdlib.h>
#include <string.h>

#include "kernel_c.h"

/* The body of a phase's kernel (whole: over whole tensors, for the
 * reference), as text: the phase's kernel IR printed as C (kernel_c.h;
 * the forward of `max=` folds with max from the combiner's identity);
 * with overwrite, the kernel that sets its tile instead of adding to it. */
static char *kernel_body(const Schedule *s, const PhaseSched *ph, int whole, int dbl,
                         int overwrite) {
    Printer p;
    printer_init(&p);
    printer_indent(&p, 1);
    Kernel *k = malloc(sizeof *k);
    if (!k)
        ICE("out of memory");
    kernel_build(k, s, ph, whole);
    kernel_c_body_mode(&p, k, dbl, overwrite);
    free(k);
    size_t len;
    char *body = printer_take(&p, &len);
    printer_free(&p);
    return body;
}

/* Everything a phase's kernel body is built from (kernel_build and
 * kernel_c_body read no more): phases with equal keys have equal bodies,
 * and the copies of a repeated layer share their keys. */
typedef struct KernelKey {
    const void *expr, *op;
    int max_reduce; /* the one field of the phase list's phase that kernel_build reads */
    long dim_sizes[IR_MAX_DIMS];
    long extent[IR_MAX_DIMS];
    int nin;
    struct {
        const char *name;
        int ndims;
        int opdims[IR_MAX_DIMS];
    } operand[SCHED_MAX_OPERANDS + 1];
} KernelKey;

static void kernel_key(const Schedule *s, const PhaseSched *ph, KernelKey *key) {
    memset(key, 0, sizeof *key);
    const Instance *inst = &s->model->instances[ph->inst];
    key->expr = ph->expr;
    key->max_reduce = ph->phase->max_reduce;
    key->op = inst->op;
    for (int d = 0; d < inst->op->ndims && d < IR_MAX_DIMS; ++d) {
        key->dim_sizes[d] = inst->dim_sizes[d];
        key->extent[d] = s->slices[ph->inst].extent[d];
    }
    key->nin = ph->nin;
    for (int i = 0; i <= ph->nin && i <= SCHED_MAX_OPERANDS; ++i) {
        const Operand *o = i == ph->nin ? &ph->out : &ph->in[i];
        key->operand[i].name = o->name;
        key->operand[i].ndims = o->ndims;
        memcpy(key->operand[i].opdims, o->opdims, sizeof o->opdims);
    }
}

static unsigned long bytes_hash(const void *p, size_t n) {
    const unsigned char *b = p;
    unsigned long h = 1469598103934665603ul;
    for (size_t i = 0; i < n; ++i)
        h = (h ^ b[i]) * 1099511628211ul;
    return h;
}

void emit_c_kernels(Printer *out, const Schedule *s, int whole, int dbl, int *canon) {
    int n = s->phases.count;
    char **bodies = calloc((size_t)n + 1, sizeof(char *));
    unsigned long *hash = calloc((size_t)n + 1, sizeof(unsigned long));
    KernelKey *keys = malloc(sizeof(KernelKey) * ((size_t)n + 1));
    size_t cap = 16;
    while (cap < 2 * (size_t)n)
        cap *= 2;
    int *table = malloc(sizeof(int) * cap); /* open addressing: phase with the key, or -1 */
    if (!bodies || !hash || !keys || !table)
        ICE("out of memory");
    for (size_t i = 0; i < cap; ++i)
        table[i] = -1;
    for (int k = 0; k < n; ++k) {
        const PhaseSched *ph = s->phases.items[k];
        canon[k] = -1;
        if (ph->kind != PHASE_FWD && ph->kind != PHASE_BWD && ph->kind != PHASE_GRAD)
            continue;
        kernel_key(s, ph, &keys[k]);
        size_t slot = bytes_hash(&keys[k], sizeof keys[k]) & (cap - 1);
        while (table[slot] >= 0 && memcmp(&keys[table[slot]], &keys[k], sizeof keys[k]) != 0)
            slot = (slot + 1) & (cap - 1);
        if (table[slot] >= 0) {
            canon[k] = canon[table[slot]];
            continue;
        }
        table[slot] = k;
        bodies[k] = kernel_body(s, ph, whole, dbl, 0);
        hash[k] = bytes_hash(bodies[k], strlen(bodies[k]));
        canon[k] = k;
        for (int j = 0; j < k; ++j)
            if (canon[j] == j && hash[j] == hash[k] && strcmp(bodies[j], bodies[k]) == 0) {
                canon[k] = j;
                break;
            }
        if (canon[k] != k)
            continue;
        const char *type = dbl ? "double" : "float";
        printer_printf(out, "static void %s%d(%s *out, const %s *const *in, const long *off)\n{\n",
                       dbl     ? "reference_fp64_"
                       : whole ? "reference"
                               : "kernel",
                       k, type, type);
        printer_printf(out, "%s}\n\n", bodies[k]);
        if (whole || dbl)
            continue;
        /* The tile kernel that overwrites (PrimePhase.kernel_overwrites). */
        char *set = kernel_body(s, ph, 0, 0, 1);
        printer_printf(out,
                       "static void kernel%d_set(float *out, const float *const *in, const long "
                       "*off)\n{\n%s}\n\n",
                       k, set);
        free(set);
    }
    for (int k = 0; k < n; ++k)
        free(bodies[k]);
    free(bodies);
    free(hash);
    free(keys);
    free(table);
}

int *emit_fused_distinct(const Schedule *s, char ***bodies_out) {
    const FusePlan *plan = s->fusion;
    char **bodies = calloc((size_t)plan->ngroups + 1, sizeof(char *));
    int *same_as = calloc((size_t)plan->ngroups + 1, sizeof(int));
    if (!bodies || !same_as)
        ICE("out of memory");
    for (int gi = 0; gi < plan->ngroups; ++gi) {
        const FuseGroup *g = &plan->groups[gi];
        Kernel *ks = kernel_fuse_members(s, g);
        Printer p;
        printer_init(&p);
        printer_indent(&p, 1);
        kernel_c_fused(&p, g, ks);
        free(ks);
        size_t len;
        bodies[gi] = printer_take(&p, &len);
        printer_free(&p);
        same_as[gi] = gi;
        for (int j = 0; j < gi && same_as[gi] == gi; ++j)
            if (strcmp(bodies[j], bodies[gi]) == 0)
                same_as[gi] = j;
    }
    if (bodies_out) {
        *bodies_out = bodies;
    } else {
        for (int gi = 0; gi < plan->ngroups; ++gi)
            free(bodies[gi]);
        free(bodies);
    }
    return same_as;
}

void emit_c_fused(Printer *out, const Schedule *s, int *fused_of) {
    const FusePlan *plan = s->fusion;
    int n = s->phases.count;
    for (int k = 0; k < n; ++k)
        fused_of[k] = -1;
    if (!plan || !plan->applied)
        return;
    char **bodies = NULL;
    int *same_as = emit_fused_distinct(s, &bodies);
    for (int gi = 0; gi < plan->ngroups; ++gi) {
        const FuseGroup *g = &plan->groups[gi];
        int first = g->phase[0];
        fused_of[first] = plan->groups[same_as[gi]].phase[0];
        if (same_as[gi] == gi) {
            kernel_fuse_comment(s, g, out);
            printer_printf(out,
                           "static void fused%d(float *const *out, const float *const *const *in, "
                           "const long *off)\n{\n%s}\n\n",
                           first, bodies[gi]);
        }
        free(bodies[gi]);
    }
    free(bodies);
    free(same_as);
}
