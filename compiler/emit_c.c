/*
 * emit_c.c — the C emitter (see emit_c.h).
 */
#include "emit_c.h"

#include <string.h>

#include "printer.h"

typedef struct Emitter {
    Printer p;
    const Schedule *s;
} Emitter;

static long dim_extent(const Schedule *s, int d, int whole)
{
    return whole ? s->inst->dim_sizes[d] : s->slices.extent[d];
}

static int has_dim(const SchedTensor *t, int d)
{
    for (int x = 0; x < t->ndims; ++x)
        if (t->dims[x] == d)
            return 1;
    return 0;
}

static long row_stride(const Schedule *s, const SchedTensor *t, int whole)
{
    return t->ndims ? dim_extent(s, t->dims[t->ndims - 1], whole) : 1;
}

/* out += product of inputs, as one GEMM when the einsum is a plain
 * matrix product (no batch dimension, at most one M, N and K dimension),
 * else as loops over every dimension. */
static void emit_kernel(Emitter *e, const char *fname, const PhaseSched *ph, int whole)
{
    const Schedule *s = e->s;
    const SchedTensor *o = &s->tensors[ph->out];
    Printer *p = &e->p;
    printer_printf(p, "static void %s(float *out, const float *const *in)\n{\n", fname);
    printer_indent(p, 1);
    int gemm = ph->nin == 2;
    int m = -1, n = -1, k = -1;
    const SchedTensor *a = &s->tensors[ph->in[0]];
    const SchedTensor *b = ph->nin == 2 ? &s->tensors[ph->in[1]] : NULL;
    int ia = 0, ib = 1;
    if (gemm) {
        for (int d = 0; d < s->inst->op->ndims && gemm; ++d) {
            int inA = has_dim(a, d), inB = has_dim(b, d), inO = has_dim(o, d);
            if (inA && inB && inO)
                gemm = 0;
            else if (inA && inO)
                gemm = m < 0 ? (m = d, 1) : 0;
            else if (inB && inO)
                gemm = n < 0 ? (n = d, 1) : 0;
            else if (inA && inB)
                gemm = k < 0 ? (k = d, 1) : 0;
            else if (inA || inB)
                gemm = 0;
        }
    }
    if (gemm && o->ndims == 2 && o->dims[0] == n) {
        /* O is [N, M]: compute O = B' A' with the roles swapped. */
        const SchedTensor *t = a;
        a = b;
        b = t;
        int x = m;
        m = n;
        n = x;
        ia = 1;
        ib = 0;
    }
    if (gemm) {
        int ta = a->ndims == 2 && a->dims[0] == k;
        int tb = b->ndims == 2 && b->dims[0] == n;
        printer_printf(p, "prime_gemm(%d, %d, %ld, %ld, %ld, 1.0f, in[%d], %ld, in[%d], %ld, 1.0f, out, %ld);\n",
                       ta, tb, m >= 0 ? dim_extent(s, m, whole) : 1,
                       n >= 0 ? dim_extent(s, n, whole) : 1, k >= 0 ? dim_extent(s, k, whole) : 1,
                       ia, row_stride(s, a, whole), ib, row_stride(s, b, whole),
                       row_stride(s, o, whole));
    } else {
        /* Loops over every dimension of the operator. */
        const Op *op = s->inst->op;
        for (int d = 0; d < op->ndims; ++d) {
            printer_printf(p, "for (long %s = 0; %s < %ld; ++%s) {\n", op->dims[d], op->dims[d],
                           dim_extent(s, d, whole), op->dims[d]);
            printer_indent(p, 1);
        }
        const SchedTensor *ts[IR_MAX_INPUTS + 1];
        ts[0] = o;
        for (int i = 0; i < ph->nin; ++i)
            ts[i + 1] = &s->tensors[ph->in[i]];
        for (int i = 0; i <= ph->nin; ++i) {
            printer_printf(p, i == 0 ? "out[" : " * in[%d][", i - 1);
            for (int x = 0; x < ts[i]->ndims; ++x) {
                long stride = 1;
                for (int y = x + 1; y < ts[i]->ndims; ++y)
                    stride *= dim_extent(s, ts[i]->dims[y], whole);
                printer_printf(p, "%s%s * %ldL", x ? " + " : "", op->dims[ts[i]->dims[x]], stride);
            }
            if (ts[i]->ndims == 0)
                printer_printf(p, "0");
            printer_printf(p, i == 0 ? "] +=" : "]");
        }
        printer_printf(p, ";\n");
        for (int d = 0; d < op->ndims; ++d) {
            printer_indent(p, -1);
            printer_printf(p, "}\n");
        }
    }
    printer_indent(p, -1);
    printer_printf(p, "}\n\n");
}

static const char *phase_ident(PhaseKind k)
{
    static const char *const names[] = {"init", "forward", "dyin", "backward", "gradient"};
    return names[k];
}

static void emit_actions(Emitter *e, const PhaseSched *ph)
{
    const Schedule *s = e->s;
    Printer *p = &e->p;
    const char *pn = phase_ident(ph->kind);
    int ndev = s->model->mesh.ndev;
    for (int r = 0; r < ndev; ++r) {
        if (ph->nactions[r] == 0)
            continue;
        printer_printf(p, "static const PrimeAction %s_rank%d[] = {\n", pn, r);
        printer_indent(p, 1);
        for (int i = 0; i < ph->nactions[r]; ++i) {
            const PrimeAction *a = &ph->actions[r][i];
            printer_printf(p, "{.op = PRIME_ACT_%s", a->op == PRIME_ACT_ALLOC       ? "ALLOC"
                                                     : a->op == PRIME_ACT_FREE      ? "FREE"
                                                     : a->op == PRIME_ACT_SEND      ? "SEND"
                                                     : a->op == PRIME_ACT_RECV      ? "RECV"
                                                     : a->op == PRIME_ACT_WAIT      ? "WAIT"
                                                     : a->op == PRIME_ACT_KERNEL    ? "KERNEL"
                                                     : a->op == PRIME_ACT_ADD       ? "ADD"
                                                     : a->op == PRIME_ACT_ALLREDUCE ? "ALLREDUCE"
                                                                                    : "STEP");
            if (a->op != PRIME_ACT_WAIT && a->op != PRIME_ACT_STEP)
                printer_printf(p, ", .tensor = T_%s, .slot = %d", s->tensors[a->tensor].name, a->slot);
            if (a->op == PRIME_ACT_SEND || a->op == PRIME_ACT_RECV)
                printer_printf(p, ", .peer = %d, .tag = %d", a->peer, a->tag);
            if (a->op == PRIME_ACT_SEND)
                printer_printf(p, ", .kind = %s",
                               a->kind == PRIME_BYTES_SHIFT        ? "PRIME_BYTES_SHIFT"
                               : a->kind == PRIME_BYTES_COLLECTIVE ? "PRIME_BYTES_COLLECTIVE"
                                                                   : "PRIME_BYTES_REDIST");
            if (a->op == PRIME_ACT_ALLREDUCE)
                printer_printf(p, ", .tag = %d, .arg = %d", a->tag, a->arg);
            if (a->op == PRIME_ACT_STEP || a->op == PRIME_ACT_KERNEL)
                printer_printf(p, ", .arg = %d", a->arg);
            if (a->op == PRIME_ACT_KERNEL || a->op == PRIME_ACT_ADD) {
                printer_printf(p, ", .nin = %d, .in_tensor = {", a->nin);
                for (int k = 0; k < a->nin; ++k)
                    printer_printf(p, "%sT_%s", k ? ", " : "", s->tensors[a->in_tensor[k]].name);
                printer_printf(p, "}, .in_slot = {");
                for (int k = 0; k < a->nin; ++k)
                    printer_printf(p, "%s%d", k ? ", " : "", a->in_slot[k]);
                printer_printf(p, "}");
            }
            printer_printf(p, "},\n");
        }
        printer_indent(p, -1);
        printer_printf(p, "};\n");
    }
}

static void emit_action_index(Emitter *e, const PhaseSched *ph)
{
    const Schedule *s = e->s;
    Printer *p = &e->p;
    const char *pn = phase_ident(ph->kind);
    int ndev = s->model->mesh.ndev;
    printer_printf(p, "static const PrimeAction *const %s_actions[] = {\n", pn);
    printer_indent(p, 1);
    for (int r = 0; r < ndev; ++r) {
        if (ph->nactions[r])
            printer_printf(p, "%s_rank%d,\n", pn, r);
        else
            printer_printf(p, "NULL,\n");
    }
    printer_indent(p, -1);
    printer_printf(p, "};\nstatic const int %s_nactions[] = {", pn);
    for (int r = 0; r < ndev; ++r)
        printer_printf(p, "%s%d", r ? ", " : "", ph->nactions[r]);
    printer_printf(p, "};\n");
    for (int g = 0; g < ph->groups.count; ++g) {
        const Collective *c = ph->groups.items[g];
        printer_printf(p, "static const int %s_group%d[] = {", pn, g);
        for (int i = 0; i < c->gsize; ++i)
            printer_printf(p, "%s%d", i ? ", " : "", c->group[i]);
        printer_printf(p, "};\n");
    }
    if (ph->groups.count) {
        printer_printf(p, "static const PrimeGroup %s_groups[] = {", pn);
        for (int g = 0; g < ph->groups.count; ++g) {
            const Collective *c = ph->groups.items[g];
            printer_printf(p, "%s{%d, %s_group%d}", g ? ", " : "", c->gsize, pn, g);
        }
        printer_printf(p, "};\n");
    }
    int has_kernel = ph->kind == PHASE_FWD || ph->kind == PHASE_BWD || ph->kind == PHASE_GRAD;
    if (has_kernel)
        printer_printf(p, "static const PrimeKernelFn %s_kernels[] = {kernel_%s};\n", pn, pn);
    printer_printf(p,
                   "static const PrimePhase phase_%s = {\"%s\", %s_actions, %s_nactions, %s%s, %s%s};\n\n",
                   pn, phase_name(ph->kind), pn, pn, has_kernel ? pn : "NULL",
                   has_kernel ? "_kernels" : "", ph->groups.count ? pn : "NULL",
                   ph->groups.count ? "_groups" : "");
}

static void emit_layout(Emitter *e, const char *tname, const char *what, const Layout *l)
{
    Printer *p = &e->p;
    int ndev = e->s->model->mesh.ndev;
    for (int r = 0; r < ndev; ++r) {
        if (!l->count[r])
            continue;
        printer_printf(p, "static const long %s_%s_tiles%d[] = {", tname, what, r);
        for (int i = 0; i < l->count[r]; ++i)
            printer_printf(p, "%s%ld", i ? ", " : "", l->tiles[r][i]);
        printer_printf(p, "};\nstatic const int %s_%s_slots%d[] = {", tname, what, r);
        for (int i = 0; i < l->count[r]; ++i)
            printer_printf(p, "%s%d", i ? ", " : "", l->slots[r][i]);
        printer_printf(p, "};\n");
    }
    printer_printf(p, "static const int %s_%s_count[] = {", tname, what);
    for (int r = 0; r < ndev; ++r)
        printer_printf(p, "%s%d", r ? ", " : "", l->count[r]);
    printer_printf(p, "};\n");
    for (int pass = 0; pass < 2; ++pass) {
        printer_printf(p, "static const %s *const %s_%s_%s[] = {", pass ? "int" : "long", tname, what,
                       pass ? "slots" : "tiles");
        for (int r = 0; r < ndev; ++r) {
            if (l->count[r])
                printer_printf(p, "%s%s_%s_%s%d", r ? ", " : "", tname, what, pass ? "slots" : "tiles", r);
            else
                printer_printf(p, "%sNULL", r ? ", " : "");
        }
        printer_printf(p, "};\n");
    }
}

char *emit_c_program(const Schedule *s, const char *source_name, size_t *len)
{
    Emitter e;
    printer_init(&e.p);
    e.s = s;
    Printer *p = &e.p;
    const Instance *inst = s->inst;
    const Model *m = s->model;
    const char *base = strrchr(source_name, '/');
    base = base ? base + 1 : source_name;

    printer_printf(p, "/*\n * Generated by primec %s from %s, model '%s'. Do not edit.\n", PRIMEC_VERSION,
                   base, m->name);
    printer_printf(p, " *\n * %s = %s(", inst->name, inst->op->name);
    for (int i = 0; i < inst->op->ninputs; ++i)
        printer_printf(p, "%s%s", i ? ", " : "", m->tensors[inst->args[i]].name);
    printer_printf(p, ") under partition '%s' on %d devices (mesh", inst->partition->name, m->mesh.ndev);
    for (int a = 0; a < m->mesh.naxes; ++a)
        printer_printf(p, " %s:%ld", m->mesh.names[a], m->mesh.sizes[a]);
    printer_printf(p, "), %ld step%s.\n", inst->steps, inst->steps == 1 ? "" : "s");
    for (int d = 0; d < inst->op->ndims; ++d) {
        const DsiAssign *dsi = inst->partition->dsi[d];
        printer_printf(p, " *   %s: size %ld, %ld slice%s of %ld", inst->op->dims[d], inst->dim_sizes[d],
                       s->slices.nslices[d], s->slices.nslices[d] == 1 ? "" : "s", s->slices.extent[d]);
        printer_printf(p, "%s\n", dsi ? " (split)" : " (whole)");
    }
    for (int k = PHASE_BWD; k <= PHASE_GRAD; ++k)
        if (s->phases[k].present)
            printer_printf(p, " * %s sweeps the steps in %s order.\n", phase_name((PhaseKind)k),
                           s->phases[k].reversed ? "reversed" : "forward");
    printer_printf(p, " */\n#include <stddef.h>\n\n#include \"prime_program.h\"\n#include \"prime_rt.h\"\n#include \"prime_sched.h\"\n\n");

    printer_printf(p, "enum {\n");
    printer_indent(p, 1);
    for (int t = 0; t < s->ntensors; ++t)
        printer_printf(p, "T_%s = %d,\n", s->tensors[t].name, t);
    printer_printf(p, "TENSOR_COUNT = %d\n", s->ntensors);
    printer_indent(p, -1);
    printer_printf(p, "};\n\n");

    /* Kernels: per tile, and whole for the reference. */
    for (int k = PHASE_FWD; k < PHASE_COUNT; ++k) {
        const PhaseSched *ph = &s->phases[k];
        if (!ph->present || k == PHASE_DYIN)
            continue;
        char name[64];
        snprintf(name, sizeof name, "kernel_%s", phase_ident((PhaseKind)k));
        emit_kernel(&e, name, ph, 0);
        snprintf(name, sizeof name, "reference_%s", phase_ident((PhaseKind)k));
        emit_kernel(&e, name, ph, 1);
    }
    printer_printf(p, "static void reference(float *const *t)\n{\n");
    printer_indent(p, 1);
    for (int k = PHASE_FWD; k < PHASE_COUNT; ++k) {
        const PhaseSched *ph = &s->phases[k];
        if (!ph->present || k == PHASE_DYIN)
            continue;
        printer_printf(p, "{\n");
        printer_indent(p, 1);
        printer_printf(p, "const float *in[] = {");
        for (int i = 0; i < ph->nin; ++i)
            printer_printf(p, "%st[T_%s]", i ? ", " : "", s->tensors[ph->in[i]].name);
        printer_printf(p, "};\nreference_%s(t[T_%s], in);\n", phase_ident((PhaseKind)k),
                       s->tensors[ph->out].name);
        printer_indent(p, -1);
        printer_printf(p, "}\n");
    }
    printer_indent(p, -1);
    printer_printf(p, "}\n\n");

    /* Phases. */
    int phase_index[PHASE_COUNT];
    int nphases = 0;
    for (int k = 0; k < PHASE_COUNT; ++k) {
        const PhaseSched *ph = &s->phases[k];
        phase_index[k] = -1;
        if (!ph->present)
            continue;
        phase_index[k] = nphases++;
        emit_actions(&e, ph);
    }
    for (int k = 0; k < PHASE_COUNT; ++k)
        if (s->phases[k].present)
            emit_action_index(&e, &s->phases[k]);
    printer_printf(p, "static const PrimePhase *const phases[] = {");
    for (int k = 0, first = 1; k < PHASE_COUNT; ++k) {
        if (!s->phases[k].present)
            continue;
        printer_printf(p, "%s&phase_%s", first ? "" : ", ", phase_ident((PhaseKind)k));
        first = 0;
    }
    printer_printf(p, "};\n\n");

    /* Layouts the driver fills and checks. */
    for (int t = 0; t < s->ntensors; ++t) {
        const SchedTensor *ts = &s->tensors[t];
        int fill = t < inst->op->ninputs || t == s->t_dout;
        if (fill)
            emit_layout(&e, ts->name, "fill", &s->home[t]);
        int check = t == s->t_out || (ts->grad_of >= 0 && t != s->t_dout);
        if (check)
            emit_layout(&e, ts->name, "final", &s->final[t]);
    }
    printer_printf(p, "\nstatic const PrimeTensorDesc tensors[] = {\n");
    printer_indent(p, 1);
    for (int t = 0; t < s->ntensors; ++t) {
        const SchedTensor *ts = &s->tensors[t];
        int fill = t < inst->op->ninputs || t == s->t_dout;
        int check = t == s->t_out || (ts->grad_of >= 0 && t != s->t_dout);
        printer_printf(p, "{\"%s\", %d, {", ts->name, ts->ndims);
        for (int x = 0; x < ts->ndims; ++x)
            printer_printf(p, "%s%ld", x ? ", " : "", inst->dim_sizes[ts->dims[x]]);
        printer_printf(p, "}, {");
        for (int x = 0; x < ts->ndims; ++x)
            printer_printf(p, "%s%ld", x ? ", " : "", ts->extent[x]);
        printer_printf(p, "}, {");
        for (int x = 0; x < ts->ndims; ++x)
            printer_printf(p, "%s%ld", x ? ", " : "", ts->nslices[x]);
        printer_printf(p, "}, %d, %d, %d, ", ts->max_slots,
                       fill ? phase_index[t == s->t_dout ? PHASE_DYIN : PHASE_INIT] : -1, check);
        if (fill)
            printer_printf(p, "{%s_fill_count, %s_fill_tiles, %s_fill_slots}, ", ts->name, ts->name, ts->name);
        else
            printer_printf(p, "{NULL, NULL, NULL}, ");
        if (check)
            printer_printf(p, "{%s_final_count, %s_final_tiles, %s_final_slots}},\n", ts->name, ts->name,
                           ts->name);
        else
            printer_printf(p, "{NULL, NULL, NULL}},\n");
    }
    printer_indent(p, -1);
    printer_printf(p, "};\n\n");

    int ndev = m->mesh.ndev;
    printer_printf(p, "/* Predicted by primec: bytes sent per rank (shift, collective, redistribution)\n * and peak bytes allocated per rank. */\n");
    printer_printf(p, "static const long predicted_bytes[] = {\n");
    printer_indent(p, 1);
    for (int r = 0; r < ndev; ++r) {
        for (int kind = 0; kind < PRIME_BYTES_KIND_COUNT; ++kind)
            printer_printf(p, "%s%ld", kind ? ", " : "", s->pred_bytes[kind][r]);
        printer_printf(p, ",\n");
    }
    printer_indent(p, -1);
    printer_printf(p, "};\nstatic const long predicted_peak[] = {");
    for (int r = 0; r < ndev; ++r)
        printer_printf(p, "%s%ld", r ? ", " : "", s->pred_peak[r]);
    printer_printf(p, "};\n\n");
    printer_printf(p, "static const PrimeProgram program = {\"%s\", %d, TENSOR_COUNT, tensors, %d, phases, reference, predicted_bytes, predicted_peak, %g};\n\n",
                   m->name, ndev, nphases, 1e-4);
    printer_printf(p, "int main(int argc, char **argv) { return prime_program_main(&program, argc, argv); }\n");
    return printer_take(p, len);
}
