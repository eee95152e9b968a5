/*
 * fuzz_gen.c — the program generator of the structure-aware fuzz target
 * (see fuzz_gen.h for what it generates and why).
 *
 * Every choice is `pick(r, k)`: the next byte modulo k, or 0 once the
 * bytes are exhausted; 0 is always the plain, valid option. Deliberate
 * mistakes go through `oops(r)`, which reads a byte only when the input's
 * first byte asked for mistakes at all, so most inputs stay valid.
 *
 * Test code, not compiler code: it allocates with malloc and keeps its
 * bounds as small fixed arrays.
 */
#include "fuzz_gen_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Output buffer and choices */

void put(Buf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            abort();
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        b->cap = 2 * b->cap + (size_t)n + 1;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            abort();
    }
}

unsigned pick(Reader *r, unsigned k) {
    if (k <= 1 || r->i >= r->n)
        return 0;
    return r->p[r->i++] % k;
}

int oops(Reader *r) {
    if (!r->oops_rate || r->i >= r->n)
        return 0;
    return r->p[r->i++] < r->oops_rate;
}

/* ------------------------------------------------------------------ */
/* The stdlib table */

void fuzz_table_build(FuzzTable *t, const Module *module, const PtrVec *programs) {
    memset(t, 0, sizeof *t);
    t->nops = module->ops.count;
    t->ops = calloc((size_t)t->nops + 1, sizeof *t->ops);
    t->npart = calloc((size_t)t->nops + 1, sizeof *t->npart);
    t->parts = calloc((size_t)t->nops + 1, sizeof *t->parts);
    for (int i = 0; i < t->nops; ++i) {
        const Op *op = module->ops.items[i];
        t->ops[i] = op;
        t->parts[i] = calloc((size_t)module->partitions.count + 1, sizeof **t->parts);
        for (int k = 0; k < module->partitions.count; ++k) {
            const Partition *p = module->partitions.items[k];
            if (p->op == op)
                t->parts[i][t->npart[i]++] = p;
        }
    }
    if (programs)
        fuzz_table_add_composites(t, programs);
}

void fuzz_table_free(FuzzTable *t) {
    for (int i = 0; i < t->nops; ++i)
        free(t->parts[i]);
    free(t->parts);
    free(t->npart);
    free(t->ops);
    free(t->comps);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------------ */
/* The generator's view of operators and partitions: the stdlib's plus
 * the ones this program declares. */

static const char *const param_names[NPARAMS] = {"s", "h", "f", "a", "e"};

const char *user_name(Gen *g, const char *fmt, int n) {
    char *s = g->user_names[g->nuser_names++];
    snprintf(s, sizeof g->user_names[0], fmt, n);
    return s;
}

void add_part(GOp *op, const char *name, int naxes, const char *const *axes) {
    if (op->npart >= MAX_PARTS)
        return;
    GPart *p = &op->part[op->npart++];
    p->name = name;
    p->naxes = naxes;
    for (int a = 0; a < naxes && a < IR_MAX_AXES; ++a)
        p->axis[a] = axes[a];
}

static void sig_of_op(FuzzSig *s, const Op *op) {
    memset(s, 0, sizeof *s);
    s->name = op->name;
    s->ndims = op->ndims;
    for (int d = 0; d < op->ndims; ++d)
        s->dims[d] = op->dims[d];
    s->ninputs = op->ninputs;
    for (int i = 0; i <= op->ninputs; ++i) {
        const OpTensor *from = i < op->ninputs ? &op->inputs[i] : &op->output;
        FuzzTensor *to = i < op->ninputs ? &s->inputs[i] : &s->output;
        to->name = from->name;
        to->ndims = from->ndims;
        memcpy(to->dims, from->dims, sizeof to->dims);
    }
}

/* ------------------------------------------------------------------ */
/* Operator bodies */

static const char *const intrinsics[] = {"exp",  "log",  "sqrt", "rsqrt", "tanh", "erf", "sigmoid",
                                         "relu", "gelu", "silu", "abs",   "step", "cos", "sin"};
#define NINTRINSICS ((unsigned)(sizeof intrinsics / sizeof intrinsics[0]))

void put_ref(Gen *g, const FuzzSig *sig, int in) {
    const FuzzTensor *t = &sig->inputs[in];
    put(g->out, "%s[", t->name);
    for (int d = 0; d < t->ndims; ++d)
        put(g->out, "%s%s", d ? ", " : "", sig->dims[t->dims[d]]);
    put(g->out, "]");
}

/* The product of every input: the einsum of a contraction. */
static void put_product(Gen *g, const FuzzSig *sig) {
    for (int i = 0; i < sig->ninputs; ++i) {
        if (i)
            put(g->out, " * ");
        put_ref(g, sig, i);
    }
}

static void put_body_expr(Gen *g, const FuzzSig *sig, int depth) {
    Reader *r = g->r;
    unsigned c = depth <= 0 ? 1 : pick(r, 9);
    switch (c) {
    case 0:
        put_product(g, sig);
        break;
    case 1:
        if (pick(r, 4) == 3)
            put(g->out, "%s", sig->inputs[pick(r, (unsigned)sig->ninputs)].name);
        else
            put_ref(g, sig, (int)pick(r, (unsigned)sig->ninputs));
        break;
    case 2:
    case 3:
        put(g->out, "%s(", intrinsics[pick(r, NINTRINSICS)]);
        put_body_expr(g, sig, depth - 1);
        put(g->out, ")");
        break;
    case 4: {
        static const char ops[] = "+-*/";
        put(g->out, "(");
        put_body_expr(g, sig, depth - 1);
        put(g->out, " %c ", ops[pick(r, 4)]);
        put_body_expr(g, sig, depth - 1);
        put(g->out, ")");
        break;
    }
    case 5:
        put(g->out, "%u", pick(r, 5));
        break;
    case 6:
        put(g->out, "size(%s)", sig->dims[pick(r, (unsigned)sig->ndims)]);
        break;
    case 7:
        put(g->out, "%s", sig->dims[pick(r, (unsigned)sig->ndims)]);
        break;
    default:
        put(g->out, "-");
        put_body_expr(g, sig, depth - 1);
        break;
    }
}

/* `op uN(...) -> Y[...] { ... }` with the signature of a stdlib op. */
static void gen_user_op(Gen *g, const FuzzTable *t, GOp *op, int n) {
    Reader *r = g->r;
    op->sig = g->ops[pick(r, (unsigned)t->nops)].sig;
    op->sig.name = user_name(g, "u%d", n);
    op->npart = 0;
    op->ninst = 1;
    const FuzzSig *sig = &op->sig;
    put(g->out, "op %s(", sig->name);
    for (int i = 0; i < sig->ninputs; ++i) {
        put(g->out, "%s", i ? ", " : "");
        put_ref(g, sig, i);
    }
    put(g->out, ") -> %s[", sig->output.name);
    for (int d = 0; d < sig->output.ndims; ++d)
        put(g->out, "%s%s", d ? ", " : "", sig->dims[sig->output.dims[d]]);
    put(g->out, "] {\n    %s", sig->output.name);
    /* A contraction (or a reduction) must say `+=`; an elementwise body
     * over the result's dimensions may say either. */
    int full = sig->output.ndims == sig->ndims;
    if (!full || pick(r, 2) == 0) {
        put(g->out, "[");
        for (int d = 0; d < sig->output.ndims; ++d)
            put(g->out, "%s%s", d ? ", " : "", sig->dims[sig->output.dims[d]]);
        put(g->out, "] %s ", full && !oops(r) ? "=" : "+=");
    } else {
        put(g->out, " = ");
    }
    put_body_expr(g, sig, (int)pick(r, 4));
    put(g->out, ";\n");
    if (pick(r, 6) == 5) {
        /* A stated derivative of one input. */
        int in = (int)pick(r, (unsigned)sig->ninputs);
        put(g->out, "    grad %s = d%s * ", sig->inputs[in].name, sig->output.name);
        put_body_expr(g, sig, 1);
        put(g->out, ";\n");
    }
    put(g->out, "}\n");
}

/* ------------------------------------------------------------------ */
/* Partitions */

static const char *const axis_sets[3][3] = {{"d"}, {"i", "j"}, {"i", "j", "k"}};

static void put_dsi_expr(Gen *g, int naxes, const char *const *axes, int steps, int depth) {
    Reader *r = g->r;
    unsigned c = depth <= 0 ? pick(r, 4) : pick(r, 8);
    switch (c) {
    case 0:
        put(g->out, "%s", axes[pick(r, (unsigned)naxes)]);
        break;
    case 1:
        put(g->out, "%s", steps ? "t" : axes[0]);
        break;
    case 2:
        put(g->out, "%u", pick(r, 4));
        break;
    case 3:
        put(g->out, "P");
        break;
    case 4:
    case 5: {
        static const char ops[] = "+-*/%^";
        put(g->out, "(");
        put_dsi_expr(g, naxes, axes, steps, depth - 1);
        put(g->out, " %c ", ops[pick(r, 6)]);
        put_dsi_expr(g, naxes, axes, steps, depth - 1);
        put(g->out, ")");
        break;
    }
    case 6:
        put(g->out, "(");
        put_dsi_expr(g, naxes, axes, steps, depth - 1);
        put(g->out, ", ");
        put_dsi_expr(g, naxes, axes, steps, depth - 1);
        put(g->out, ")");
        break;
    default:
        put(g->out, "(");
        put_dsi_expr(g, naxes, axes, steps, depth - 1);
        put(g->out, ") %% P");
        break;
    }
}

/* `partition qN of OP on mesh(...) [steps(t: P)] { dim = DSI; ... }`:
 * mostly one of the shapes the stdlib uses (split dimensions by axes in
 * order, skewed, or a ring), sometimes arbitrary DSIs. */
static void gen_user_partition(Gen *g, GOp *op, int n) {
    Reader *r = g->r;
    const FuzzSig *sig = &op->sig;
    int naxes = 1 + (int)pick(r, 2);
    if (oops(r))
        naxes = 3;
    const char *const *axes = axis_sets[naxes - 1];
    int steps = pick(r, 3) == 2;
    int literal = oops(r); /* an axis of fixed size instead of P */
    const char *name = user_name(g, "q%d", n);
    put(g->out, "partition %s of %s on mesh(", name, sig->name);
    for (int a = 0; a < naxes; ++a)
        put(g->out, "%s%s: %s", a ? ", " : "", axes[a], literal && a == 0 ? "2" : "P");
    put(g->out, ")");
    if (steps)
        put(g->out, " steps(t: %s)", oops(r) ? "Q" : "P");
    put(g->out, " {");
    unsigned scheme = pick(r, 5);
    int used_axis = 0;
    for (int d = 0; d < sig->ndims; ++d) {
        const char *dim = sig->dims[d];
        switch (scheme) {
        case 0: /* dimension d split by axis d */
            if (d < naxes)
                put(g->out, " %s = %s;", dim, axes[d]);
            else if (steps && d == naxes)
                put(g->out, " %s = (%s + t) %% P;", dim, axes[0]);
            break;
        case 1: /* skewed: the second dimension by (i + j) */
            if (d == 0)
                put(g->out, " %s = %s;", dim, axes[0]);
            else if (d == 1 && naxes > 1)
                put(g->out, " %s = (%s + %s) %% P;", dim, axes[0], axes[1]);
            else if (d == 1 && steps)
                put(g->out, " %s = (%s + t) %% P;", dim, axes[0]);
            break;
        case 2: /* no DSI: replicated */
            break;
        case 3: /* mixed radix over every axis */
            if (d == 0 && naxes > 1)
                put(g->out, " %s = (%s, %s);", dim, axes[0], axes[1]);
            else if (d == 0)
                put(g->out, " %s = %s;", dim, axes[0]);
            else if (d == 1 && steps)
                put(g->out, " %s = t;", dim);
            break;
        default: /* arbitrary */
            if (pick(r, 2)) {
                put(g->out, " %s = ", dim);
                put_dsi_expr(g, naxes, axes, steps, 1 + (int)pick(r, 3));
                put(g->out, ";");
                used_axis = 1;
            }
            break;
        }
    }
    (void)used_axis;
    if (oops(r))
        put(g->out, " %s = d;", pick(r, 2) ? "zz" : sig->dims[0]); /* unknown dim or twice */
    put(g->out, " }\n");
    add_part(op, name, naxes, axes);
}

/* ------------------------------------------------------------------ */
/* Models */

static void put_size(Gen *g, int s) {
    if (s >= 0)
        put(g->out, "%s", param_names[s]);
    else
        put(g->out, "%d", -s);
}

static void put_shape(Gen *g, const GTensor *t) {
    put(g->out, "[");
    for (int d = 0; d < t->rank; ++d) {
        put(g->out, "%s", d ? ", " : "");
        put_size(g, t->dims[d]);
    }
    put(g->out, "]");
}

static GTensor *new_tensor(Gen *g, const char *prefix, int rank, const int *dims) {
    if (g->ntensors >= MAX_TENSORS)
        return NULL;
    GTensor *t = &g->tensors[g->ntensors++];
    snprintf(t->name, sizeof t->name, "%s%d", prefix, g->counter++);
    t->rank = rank;
    memcpy(t->dims, dims, sizeof t->dims);
    t->layer_depth = g->depth;
    return t;
}

static int same_shape(const GTensor *t, int rank, const int *dims) {
    if (t->rank != rank)
        return 0;
    for (int d = 0; d < rank; ++d)
        if (t->dims[d] != dims[d])
            return 0;
    return 1;
}

/* Fixes the name of the tensor new_tensor just made. */
static GTensor *renamed(GTensor *t, const char *name) {
    if (t)
        snprintf(t->name, sizeof t->name, "%s", name);
    return t;
}

/* Can op follow a tensor of `cur`'s shape? In a layer block, only if its
 * result has cur's shape again (the block's output is its next input). */
static int fits(const GOp *op, const GTensor *cur, int in_layer) {
    const FuzzSig *sig = &op->sig;
    if (sig->inputs[0].ndims != cur->rank)
        return 0;
    if (!in_layer)
        return 1;
    if (sig->output.ndims != cur->rank)
        return 0;
    for (int j = 0; j < cur->rank; ++j) {
        int dim = sig->output.dims[j];
        for (int k = 0; k < cur->rank; ++k)
            if (sig->inputs[0].dims[k] == dim && cur->dims[k] != cur->dims[j])
                return 0;
    }
    return 1;
}

/* One instance `NAME = OP(args) use PART;` after the weights it needs.
 * Returns the result tensor, or NULL if no operator fits. */
static GTensor *gen_instance(Gen *g, const GTensor *cur, const char *result_name) {
    Reader *r = g->r;
    int in_layer = g->depth > 0;
    int cand[256], ncand = 0;
    int comps_only = pick(r, 6) == 5; /* a composite, if one fits */
    long copies = in_layer && g->block_copies > 1 ? g->block_copies : 1;
    for (int pass = 0; pass < 2 && ncand == 0; ++pass)
        for (int i = 0; i < g->nops && ncand < 256; ++i)
            if (g->ops[i].sig.ninputs > 0 && g->ops[i].npart > 0 &&
                (pass || !comps_only || g->ops[i].is_comp) &&
                (!g->ops[i].is_comp || g->expanded + g->ops[i].ninst * copies <= MAX_EXPANDED) &&
                fits(&g->ops[i], cur, in_layer))
                cand[ncand++] = i;
    if (ncand == 0)
        return NULL;
    const GOp *op = &g->ops[cand[pick(r, (unsigned)ncand)]];
    const FuzzSig *sig = &op->sig;
    g->expanded += op->ninst * copies;

    /* Bind the operator's dimensions to sizes. */
    int size[IR_MAX_DIMS];
    for (int d = 0; d < sig->ndims; ++d)
        size[d] = -1000;
    for (int j = 0; j < cur->rank; ++j)
        size[sig->inputs[0].dims[j]] = cur->dims[j];
    if (in_layer)
        for (int j = 0; j < sig->output.ndims && j < cur->rank; ++j)
            if (size[sig->output.dims[j]] == -1000)
                size[sig->output.dims[j]] = cur->dims[j];
    for (int d = 0; d < sig->ndims; ++d)
        if (size[d] == -1000)
            size[d] = oops(r) ? -(int)(1 + pick(r, 12)) : (int)pick(r, NPARAMS);

    /* The arguments: cur first, then existing tensors of the right shape
     * or new weights. */
    const char *args[FUZZ_MAX_INPUTS];
    char wname[FUZZ_MAX_INPUTS][24];
    args[0] = cur->name;
    for (int i = 1; i < sig->ninputs; ++i) {
        const FuzzTensor *ot = &sig->inputs[i];
        int dims[IR_MAX_DIMS] = {0};
        for (int d = 0; d < ot->ndims; ++d)
            dims[d] = size[ot->dims[d]];
        int match[MAX_TENSORS], nmatch = 0;
        for (int k = 0; k < g->ntensors; ++k)
            if (same_shape(&g->tensors[k], ot->ndims, dims))
                match[nmatch++] = k;
        if (nmatch && pick(r, 2)) {
            args[i] = g->tensors[match[pick(r, (unsigned)nmatch)]].name;
            continue;
        }
        if (oops(r) && ot->ndims > 0)
            dims[pick(r, (unsigned)ot->ndims)] = (int)pick(r, NPARAMS); /* maybe a wrong size */
        GTensor *w = new_tensor(g, "w", ot->ndims, dims);
        if (!w)
            return NULL;
        put(g->out, "    weight %s", w->name);
        put_shape(g, w);
        put_source(g, w->name, w->rank);
        put(g->out, ";\n");
        snprintf(wname[i], sizeof wname[i], "%s", w->name);
        args[i] = wname[i];
    }
    int nargs = sig->ninputs;
    if (oops(r))
        nargs += pick(r, 2) ? 1 : -1;

    /* The result. */
    int rdims[IR_MAX_DIMS] = {0};
    for (int d = 0; d < sig->output.ndims; ++d)
        rdims[d] = size[sig->output.dims[d]];
    char rname[24];
    if (result_name)
        snprintf(rname, sizeof rname, "%s", result_name);
    else
        snprintf(rname, sizeof rname, "t%d", g->counter++);
    const char *lhs = oops(r) ? cur->name : rname;
    put(g->out, "    %s = %s(", lhs, oops(r) ? "nope" : sig->name);
    if (g->ninst < MAX_INSTANCES) {
        GInst *in = &g->inst[g->ninst++];
        snprintf(in->name, sizeof in->name, "%s", lhs);
        in->op = op;
        in->block = g->block;
        in->copies = g->block > 0 ? (int)(g->block_copies < 64 ? g->block_copies : 64) : 0;
    }
    for (int i = 0; i < nargs; ++i)
        put(g->out, "%s%s", i ? ", " : "", i < sig->ninputs ? args[i] : "x");
    put(g->out, ")");

    /* The partition: one that fits the mesh, bound in order or by name, or
     * one by role renamed onto the operator's dimensions. */
    int pc[MAX_PARTS], npc = 0;
    for (int k = 0; k < op->npart; ++k)
        if (op->part[k].naxes <= g->mesh_naxes)
            pc[npc++] = k;
    if (npc == 0 || oops(r)) {
        for (int k = 0; k < op->npart; ++k)
            pc[npc++] = k;
    }
    if (npc > 0 && !oops(r)) {
        const GPart *p = &op->part[pc[pick(r, (unsigned)npc)]];
        if (g->nroles == 0 || pick(r, 3) != 2 || !put_role_use(g, op))
            put_use(g, op, p);
    }
    put(g->out, ";\n");
    if (result_name)
        return NULL; /* the caller declares the layer's output */
    return renamed(new_tensor(g, "t", sig->output.ndims, rdims), rname);
}

/* `layer(cur -> lN) repeat R { ... }`: instances that keep cur's shape. */
static const GTensor *gen_layer(Gen *g, const GTensor *cur) {
    Reader *r = g->r;
    int ok = 0;
    for (int i = 0; i < g->nops; ++i)
        ok |= g->ops[i].sig.ninputs > 0 && g->ops[i].npart > 0 && fits(&g->ops[i], cur, 1);
    if (!ok)
        return cur;
    char out[24];
    snprintf(out, sizeof out, "l%d", g->counter++);
    static const long repeats[] = {0, 1025, 4096, 100000};
    long rep = 1 + (long)pick(r, 3);
    if (oops(r))
        rep = repeats[pick(r, 4)];
    put(g->out, "    layer(%s -> %s) repeat %ld {\n", cur->name, out, rep);
    int keep = g->ntensors;
    g->depth++;
    g->block = ++g->nblocks;
    g->block_copies = rep;
    GTensor in = *cur;
    const GTensor *c = &in;
    int n = 1 + (int)pick(r, 4);
    for (int k = 0; k < n; ++k) {
        if (k == n - 1) {
            gen_instance(g, c, out);
            break;
        }
        GTensor *t = gen_instance(g, c, NULL);
        if (!t)
            break;
        c = t;
        /* residual: sometimes add the block's input back */
    }
    g->depth--;
    g->block = 0;
    g->ntensors = keep;
    put(g->out, "    }\n");
    GTensor *res = new_tensor(g, "", in.rank, in.dims);
    return renamed(res, out) ? res : cur;
}

static void gen_model(Gen *g, int n) {
    Reader *r = g->r;
    static const char *const odd_sizes[] = {
        "3", "0", "6", "-2", "4294967296", "65536", "4611686018427387904", "9223372036854775807"};
    static const int values[NPARAMS][4] = {
        {16, 32, 8, 64}, {16, 32, 64, 8}, {32, 64, 16, 128}, {4, 8, 2, 16}, {8, 4, 16, 2}};
    g->ntensors = 0;
    g->ninst = 0;
    g->depth = 0;
    g->nblocks = g->block = 0;
    g->expanded = 0;
    snprintf(g->model_name, sizeof g->model_name, "m%d", n);
    put(g->out, "model %s {\n    param", g->model_name);
    for (int p = 0; p < NPARAMS; ++p) {
        put(g->out, "%s %s = ", p ? "," : "", param_names[p]);
        if (oops(r)) {
            unsigned c = pick(r, 3);
            if (c == 0)
                put(g->out, "%s", odd_sizes[pick(r, 8)]);
            else if (c == 1 && p > 0)
                put(g->out, "%d * %s", 1 << pick(r, 4), param_names[pick(r, (unsigned)p)]);
            else
                put(g->out, "%s", param_names[(p + 1) % NPARAMS]); /* a later one: unknown */
        } else {
            put(g->out, "%d", values[p][pick(r, 4)]);
        }
    }
    put(g->out, ";\n");

    /* The mesh: 1-3 axes, power-of-two sizes, mostly all equal. */
    g->mesh_naxes = 1 + (int)pick(r, 3);
    static const int bases[3][4] = {{2, 4, 1, 8}, {2, 4, 1, 2}, {2, 1, 2, 2}};
    int base = bases[g->mesh_naxes - 1][pick(r, 4)];
    int equal = pick(r, 4) != 3;
    /* At most 16 devices, so that an input takes well under a second in
     * the sanitized build (large meshes are planner benchmarks, not bugs). */
    int ndev = 1;
    put(g->out, "    ");
    size_t mesh_at = g->out->len;
    put(g->out, "mesh(");
    for (int a = 0; a < g->mesh_naxes; ++a) {
        g->mesh_axis[a] = axis_sets[g->mesh_naxes - 1][a];
        put(g->out, "%s%s: ", a ? ", " : "", g->mesh_axis[a]);
        int size = equal ? base : 1 << pick(r, 3);
        while (size > 1 && ndev * size > 16)
            size /= 2;
        ndev *= size;
        if (oops(r))
            put(g->out, "%s", odd_sizes[pick(r, 8)]);
        else
            put(g->out, "%d", size);
    }
    put(g->out, ")");
    snprintf(g->mesh_text, sizeof g->mesh_text, "%.*s", (int)(g->out->len - mesh_at),
             g->out->p + mesh_at);
    put(g->out, ";\n");
    if (pick(r, 8) == 7)
        put(g->out, "    strict;\n");

    int xdims[IR_MAX_DIMS] = {0, 1};
    GTensor *x = new_tensor(g, "x", 2, xdims);
    renamed(x, "x");
    if (oops(r)) {
        x->rank = 1 + (int)pick(r, 3);
        for (int d = 0; d < x->rank; ++d)
            x->dims[d] = (int)pick(r, NPARAMS);
    }
    put(g->out, "    input x");
    put_shape(g, x);
    put_source(g, "x", x->rank);
    put(g->out, ";\n");

    const GTensor *cur = x;
    int ninst = 1 + (int)pick(r, 8);
    for (int k = 0; k < ninst; ++k) {
        if (pick(r, 6) == 5) {
            cur = gen_layer(g, cur);
            continue;
        }
        GTensor *t = gen_instance(g, cur, NULL);
        if (!t)
            break;
        cur = t;
        if (pick(r, 5) == 4 && g->ntensors > 0) /* branch from an earlier tensor */
            cur = &g->tensors[pick(r, (unsigned)g->ntensors)];
    }
    if (oops(r))
        put(g->out, "    %s = gelu(x) use rows;\n", cur->name); /* defined twice */
    put(g->out, "}\n");
}

char *fuzz_gen_program(const FuzzTable *t, const uint8_t *data, size_t size, size_t *len) {
    /* First byte: how often to make mistakes (most inputs: never).
     * Second byte: how much of the input's tail describes user operators
     * and partitions (the rest drives the models), so that growing one
     * part does not reshuffle the other. */
    Reader head = {data, size, 0, 0};
    unsigned level = pick(&head, 8);
    unsigned share = pick(&head, 4);
    unsigned rate = level < 5 ? 0 : level == 5 ? 4 : level == 6 ? 12 : 32;
    size_t rest = size > head.i ? size - head.i : 0;
    size_t tail = rest * share / 6;
    Reader r = {data + head.i, rest - tail, 0, rate};
    Reader ur = {data + head.i + (rest - tail), tail, 0, rate};

    Buf out = {malloc(4096), 0, 4096};
    if (!out.p)
        abort();
    out.p[0] = '\0';
    Gen *g = calloc(1, sizeof *g);
    if (!g)
        abort();
    g->r = &r;
    g->out = &out;
    g->t = t;
    g->ops =
        calloc((size_t)t->nops + MAX_USER_OPS + (size_t)t->ncomps + MAX_USER_COMPS, sizeof *g->ops);
    if (!g->ops)
        abort();
    for (int i = 0; i < t->nops; ++i) {
        GOp *op = &g->ops[g->nops++];
        sig_of_op(&op->sig, t->ops[i]);
        op->ninst = 1;
        for (int k = 0; k < t->npart[i]; ++k) {
            const Partition *p = t->parts[i][k];
            const char *axes[IR_MAX_AXES];
            for (int a = 0; a < p->naxes; ++a)
                axes[a] = p->axes[a]->name.name;
            add_part(op, p->name, p->naxes, axes);
        }
    }

    g->r = &ur;
    int nuser = (int)pick(&ur, 4);
    if (nuser > MAX_USER_OPS)
        nuser = MAX_USER_OPS;
    int npart = 0;
    for (int k = 0; k < nuser; ++k) {
        GOp *op = &g->ops[g->nops++];
        gen_user_op(g, t, op, k);
        gen_user_partition(g, op, npart++);
    }
    /* More partitions, of user and stdlib ops; some no model uses, which
     * `check` proves alone. */
    int more = (int)pick(&ur, 3);
    for (int k = 0; k < more; ++k) {
        GOp *op = nuser && pick(&ur, 2) ? &g->ops[t->nops + (int)pick(&ur, (unsigned)nuser)]
                                        : &g->ops[pick(&ur, (unsigned)t->nops)];
        gen_user_partition(g, op, npart++);
    }
    /* The composites: the stdlib's, then the program's over every
     * operator so far; partitions by role (which uses rename). */
    for (int k = 0; k < t->ncomps; ++k) {
        GOp *op = &g->ops[g->nops++];
        const FuzzComposite *c = &t->comps[k];
        op->sig = c->sig;
        op->npart = c->npart;
        memcpy(op->part, c->part, sizeof op->part);
        op->comp = c;
        op->is_comp = 1;
        op->ninst = c->ninst;
    }
    int ncomp = (int)pick(&ur, 3);
    for (int k = 0; k < ncomp; ++k) {
        gen_user_composite(g, &g->ops[g->nops], k);
        g->nops++;
    }
    int nroles = (int)pick(&ur, 3);
    for (int k = 0; k < nroles; ++k)
        gen_role_partition(g, k);
    if (t->ncomps && oops(&ur)) /* a partition of a composite */
        put(&out, "partition qc of %s on mesh(d: P) { }\n",
            t->comps[pick(&ur, (unsigned)t->ncomps)].sig.name);
    g->r = &r;
    int nmodels = pick(&r, 5) == 4 ? 2 : 1;
    for (int k = 0; k < nmodels; ++k) {
        gen_model(g, k);
        gen_plan(g, k);
    }

    free(g->ops);
    free(g);
    *len = out.len;
    return out.p;
}
