/*
 * emit_c.c — the C emitter (see emit_c.h).
 */
#include "emit_c.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "emit_kernels.h"
#include "form.h"
#include "form_fold.h"
#include "kernel_fuse.h"
#include "printer.h"

typedef struct Emitter {
    Printer p;
    const Schedule *s;
    const ScheduleForm *form;
    int *kernel_of; /* per phase: the phase whose kernel function it calls */
    int *fused_of;  /* per phase: the fused kernel it runs (emit_c_fused), or -1 */
    Arena *arena;
    unsigned char *named; /* per storage tensor: its T_ name is used */
    int dbl;              /* printing the fp64 reference */
    /* The slot forms printed so far (slots%d, shared by every phase
     * whose actions use equal ones): their initializers and hashes. */
    char **slots;
    unsigned long *slots_hash;
    int nslots, slots_cap;
} Emitter;

static unsigned long text_hash(const char *t) {
    unsigned long h = 1469598103934665603ul;
    for (; *t; ++t)
        h = (h ^ (unsigned char)*t) * 1099511628211ul;
    return h;
}

static const char *act_name(int op) {
    switch (op) {
    case PRIME_ACT_ALLOC:
        return "ALLOC";
    case PRIME_ACT_FREE:
        return "FREE";
    case PRIME_ACT_SEND:
        return "SEND";
    case PRIME_ACT_RECV:
        return "RECV";
    case PRIME_ACT_WAIT:
        return "WAIT";
    case PRIME_ACT_KERNEL:
        return "KERNEL";
    case PRIME_ACT_ADD:
        return "ADD";
    case PRIME_ACT_ALLREDUCE:
        return "ALLREDUCE";
    case PRIME_ACT_REDUCE_SCATTER:
        return "REDUCE_SCATTER";
    case PRIME_ACT_ALLGATHER:
        return "ALLGATHER";
    case PRIME_ACT_STEP:
        return "STEP";
    case PRIME_ACT_SEND_BOX:
        return "SEND_BOX";
    case PRIME_ACT_RECV_BOX:
        return "RECV_BOX";
    case PRIME_ACT_COPY_BOX:
        return "COPY_BOX";
    case PRIME_ACT_KEEP:
        return "KEEP";
    case PRIME_ACT_WAIT_KEPT:
        return "WAIT_KEPT";
    default:
        ICE("bad action %d", op);
    }
}

static const char *kind_name(int kind) {
    return kind == PRIME_BYTES_SHIFT        ? "PRIME_BYTES_SHIFT"
           : kind == PRIME_BYTES_COLLECTIVE ? "PRIME_BYTES_COLLECTIVE"
                                            : "PRIME_BYTES_REDIST";
}

/* The fields of one action, as a designated initializer. */
static void print_action(Emitter *e, const PrimeAction *a) {
    const Schedule *s = e->s;
    Printer *p = &e->p;
    printer_printf(p, "{.op = PRIME_ACT_%s", act_name(a->op));
    if (prime_action_has_tensor(a->op)) {
        printer_printf(p, ", .tensor = T_%s, .slot = %d", s->tensors[a->tensor].name, a->slot);
        e->named[a->tensor] = 1;
    }
    if (a->op == PRIME_ACT_SEND || a->op == PRIME_ACT_RECV || a->op == PRIME_ACT_SEND_BOX ||
        a->op == PRIME_ACT_RECV_BOX)
        printer_printf(p, ", .peer = %d, .tag = %d", a->peer, a->tag);
    if (a->op == PRIME_ACT_SEND || a->op == PRIME_ACT_SEND_BOX)
        printer_printf(p, ", .kind = %s", kind_name(a->kind));
    if (a->op == PRIME_ACT_ALLREDUCE || a->op == PRIME_ACT_REDUCE_SCATTER ||
        a->op == PRIME_ACT_ALLGATHER || a->op == PRIME_ACT_KEEP || a->op == PRIME_ACT_WAIT_KEPT)
        printer_printf(p, ", .tag = %d", a->tag);
    if (a->kind == PRIME_COMBINE_MAX &&
        (a->op == PRIME_ACT_ALLOC || a->op == PRIME_ACT_ADD || a->op == PRIME_ACT_ALLREDUCE ||
         a->op == PRIME_ACT_REDUCE_SCATTER))
        printer_printf(p, ", .kind = PRIME_COMBINE_MAX");
    if (a->op == PRIME_ACT_STEP || a->op == PRIME_ACT_KERNEL || a->op == PRIME_ACT_ALLREDUCE ||
        a->op == PRIME_ACT_REDUCE_SCATTER || a->op == PRIME_ACT_ALLGATHER ||
        a->op == PRIME_ACT_SEND_BOX || a->op == PRIME_ACT_RECV_BOX || a->op == PRIME_ACT_COPY_BOX)
        printer_printf(p, ", .arg = %d", a->arg);
    if (a->op == PRIME_ACT_KERNEL && a->kind)
        printer_printf(p, ", .kind = %d", a->kind);
    if (a->op == PRIME_ACT_KERNEL || a->op == PRIME_ACT_ADD || a->op == PRIME_ACT_COPY_BOX) {
        printer_printf(p, ", .nin = %d, .in_tensor = {", a->nin);
        for (int k = 0; k < a->nin; ++k) {
            printer_printf(p, "%sT_%s", k ? ", " : "", s->tensors[a->in_tensor[k]].name);
            e->named[a->in_tensor[k]] = 1;
        }
        printer_printf(p, "}, .in_slot = {");
        for (int k = 0; k < a->nin; ++k)
            printer_printf(p, "%s%d", k ? ", " : "", a->in_slot[k]);
        printer_printf(p, "}");
    }
    printer_printf(p, "}");
}

static void print_ints(Printer *p, const int *v, int n) {
    for (int i = 0; i < n; ++i)
        printer_printf(p, "%s%d", i ? ", " : "", v[i]);
}

static void print_affine(Printer *p, const PrimeAffine *f, int naxes) {
    printer_printf(p, "{%ld, %ld, {", f->base, f->modulus);
    for (int a = 0; a < naxes; ++a)
        printer_printf(p, "%s%ld", a ? ", " : "", f->coef[a]);
    printer_printf(p, "%s}, %ld}", naxes ? "" : "0", f->tcoef);
}

/* The number of the shared slot form equal to slots[], printed before
 * its first use. */
static int slots_index(Emitter *e, const PrimeAffine *slots, int naxes) {
    Printer t;
    printer_init(&t);
    for (int k = 0; k <= PRIME_MAX_KERNEL_INPUTS; ++k) {
        printer_printf(&t, "%s", k ? ", " : "");
        print_affine(&t, &slots[k], naxes);
    }
    size_t len;
    char *text = printer_take(&t, &len);
    printer_free(&t);
    unsigned long h = text_hash(text);
    for (int i = 0; i < e->nslots; ++i)
        if (e->slots_hash[i] == h && strcmp(e->slots[i], text) == 0) {
            free(text);
            return i;
        }
    if (e->nslots == e->slots_cap) {
        e->slots_cap = e->slots_cap ? 2 * e->slots_cap : 64;
        e->slots = realloc(e->slots, sizeof(char *) * (size_t)e->slots_cap);
        e->slots_hash = realloc(e->slots_hash, sizeof(unsigned long) * (size_t)e->slots_cap);
        if (!e->slots || !e->slots_hash)
            ICE("out of memory");
    }
    printer_printf(&e->p, "static const PrimeAffine slots%d[] = {%s};\n", e->nslots, text);
    e->slots[e->nslots] = text;
    e->slots_hash[e->nslots] = h;
    return e->nslots++;
}

/* One piece of a phase in rank-parametric form, named `name` (phaseK, or
 * phaseK_J for the J-th piece of a phase split by slices): one list of
 * action forms, with the tables its table-form fields need, after the
 * pieces it chains to. */
static void emit_phase_piece(Emitter *e, const PhaseForm *pf, int index, int piece) {
    if (pf->next)
        emit_phase_piece(e, pf->next, index, piece + 1);
    char name[48];
    if (piece)
        snprintf(name, sizeof name, "phase%d_%d", index, piece);
    else
        snprintf(name, sizeof name, "phase%d", index);
    Printer *p = &e->p;
    const PrimePhaseForm *f = &pf->form;
    int ndev = e->s->model->mesh.ndev, naxes = f->mesh->naxes;
    int *slots = calloc((size_t)f->nforms + 1, sizeof(int));
    if (!slots)
        ICE("out of memory");
    for (int i = 0; i < f->nforms; ++i) {
        const PrimeActionForm *af = &f->forms[i];
        if (af->slots)
            slots[i] = slots_index(e, af->slots, naxes);
        if (af->peer_form == PRIME_FORM_TABLE) {
            printer_printf(p, "static const int %s_peer%d[] = {", name, i);
            print_ints(p, af->peer_table, ndev);
            printer_printf(p, "};\n");
        }
        if (af->arg_form == PRIME_FORM_TABLE) {
            printer_printf(p, "static const int %s_arg%d[] = {", name, i);
            print_ints(p, af->arg_table, ndev);
            printer_printf(p, "};\n");
        }
    }
    if (f->nforms) {
        printer_printf(p, "static const PrimeActionForm %s_forms[] = {\n", name);
        printer_indent(p, 1);
        for (int i = 0; i < f->nforms; ++i) {
            const PrimeActionForm *af = &f->forms[i];
            printer_printf(p, "{.a = ");
            print_action(e, &af->a);
            if (af->peer_form == PRIME_FORM_SHIFT) {
                printer_printf(p, ", .peer_form = PRIME_FORM_SHIFT, .delta = {");
                print_ints(p, af->delta, naxes);
                printer_printf(p, "}");
            } else if (af->peer_form == PRIME_FORM_TABLE) {
                printer_printf(p, ", .peer_form = PRIME_FORM_TABLE, .peer_table = %s_peer%d", name,
                               i);
            }
            if (af->arg_form == PRIME_FORM_AFFINE || af->arg_form == PRIME_FORM_GROUP)
                printer_printf(p, ", .arg_form = PRIME_FORM_%s, .index = %d",
                               af->arg_form == PRIME_FORM_AFFINE ? "AFFINE" : "GROUP", af->index);
            else if (af->arg_form == PRIME_FORM_TABLE)
                printer_printf(p, ", .arg_form = PRIME_FORM_TABLE, .arg_table = %s_arg%d", name, i);
            if (af->slots)
                printer_printf(p, ", .slots = slots%d", slots[i]);
            if (af->repeat > 1)
                printer_printf(p, ", .repeat = %ld, .body = %d", af->repeat, af->body);
            if (af->dstep_arg)
                printer_printf(p, ", .dstep_arg = %d", af->dstep_arg);
            if (af->dstep_tag)
                printer_printf(p, ", .dstep_tag = %d", af->dstep_tag);
            if (af->dstep_tensor)
                printer_printf(p, ", .dstep_tensor = %d", af->dstep_tensor);
            if (af->skip)
                printer_printf(p, ", .skip = %d", af->skip);
            printer_printf(p, "},\n");
        }
        printer_indent(p, -1);
        printer_printf(p, "};\n");
    }
    if (pf->noffset_forms) {
        printer_printf(p, "static const PrimeOffsetForm %s_offset_forms[] = {\n", name);
        printer_indent(p, 1);
        for (int k = 0; k < pf->noffset_forms; ++k) {
            const PrimeOffsetForm *of = &f->offset_forms[k];
            printer_printf(p, "{%d, {", of->ndims);
            for (int x = 0; x < of->ndims; ++x)
                printer_printf(p, "%s%ld", x ? ", " : "", of->scale[x]);
            printer_printf(p, "%s}, {", of->ndims ? "" : "0");
            for (int x = 0; x < of->ndims; ++x) {
                printer_printf(p, "%s", x ? ", " : "");
                print_affine(p, &of->dim[x], naxes);
            }
            printer_printf(p, "}},\n");
        }
        printer_indent(p, -1);
        printer_printf(p, "};\n");
    }
    if (pf->ngroup_forms) {
        printer_printf(p, "static const PrimeGroupForm %s_group_forms[] = {", name);
        for (int k = 0; k < pf->ngroup_forms; ++k) {
            const PrimeGroupForm *g = &f->group_forms[k];
            printer_printf(p, "%s{%#xu, %ld, {", k ? ", " : "", g->axes, g->count);
            print_ints(p, g->step, naxes);
            printer_printf(p, "%s}}", naxes ? "" : "0");
        }
        printer_printf(p, "};\n");
    }
    printer_printf(p, "static const PrimePhaseForm %s_form = {&mesh, %d, ", name, f->nforms);
    printer_printf(p, f->nforms ? "%s_forms, " : "NULL, ", name);
    printer_printf(p, pf->noffset_forms ? "%s_offset_forms, " : "NULL, ", name);
    printer_printf(p, pf->ngroup_forms ? "%s_group_forms" : "NULL", name);
    printer_printf(p, ", %d, %d, %ld, ", f->sliced, f->slice_axis, f->slice_coord);
    if (pf->next)
        printer_printf(p, "&phase%d_%d_form};\n", index, piece + 1);
    else
        printer_printf(p, "NULL};\n");
    free(slots);
}

/* Per-rank action tables: the form of irregular phases. */
static void emit_phase_ranks(Emitter *e, const PhaseSched *ph, int index) {
    Printer *p = &e->p;
    int ndev = e->s->model->mesh.ndev;
    for (int r = 0; r < ndev; ++r) {
        if (ph->nactions[r] == 0)
            continue;
        printer_printf(p, "static const PrimeAction phase%d_rank%d[] = {\n", index, r);
        printer_indent(p, 1);
        for (int i = 0; i < ph->nactions[r]; ++i) {
            print_action(e, &ph->actions[r][i]);
            printer_printf(p, ",\n");
        }
        printer_indent(p, -1);
        printer_printf(p, "};\n");
    }
    printer_printf(p, "static const PrimeAction *const phase%d_actions[] = {\n", index);
    printer_indent(p, 1);
    for (int r = 0; r < ndev; ++r) {
        if (ph->nactions[r])
            printer_printf(p, "phase%d_rank%d,\n", index, r);
        else
            printer_printf(p, "NULL,\n");
    }
    printer_indent(p, -1);
    printer_printf(p, "};\nstatic const int phase%d_nactions[] = {", index);
    print_ints(p, ph->nactions, ndev);
    printer_printf(p, "};\n");
}

static void emit_phase(Emitter *e, const PhaseSched *ph, const PhaseForm *pf, int index) {
    const Schedule *s = e->s;
    Printer *p = &e->p;
    int in_form = pf->fallback == NULL;
    int need_groups = ph->groups.count && !in_form;
    int need_offsets = ph->noffsets && (!in_form || pf->uses_offsets || !pf->noffset_forms);
    if (in_form)
        emit_phase_piece(e, pf, index, 0);
    else
        emit_phase_ranks(e, ph, index);
    for (int g = 0; need_groups && g < ph->groups.count; ++g) {
        const Collective *c = ph->groups.items[g];
        printer_printf(p, "static const int phase%d_group%d[] = {", index, g);
        for (int i = 0; i < c->gsize; ++i)
            printer_printf(p, "%s%d", i ? ", " : "", c->group[i]);
        printer_printf(p, "};\n");
    }
    if (need_groups) {
        printer_printf(p, "static const PrimeGroup phase%d_groups[] = {", index);
        for (int g = 0; g < ph->groups.count; ++g) {
            const Collective *c = ph->groups.items[g];
            printer_printf(p, "%s{%d, phase%d_group%d}", g ? ", " : "", c->gsize, index, g);
        }
        printer_printf(p, "};\n");
    }
    if (ph->nboxes) {
        printer_printf(p, "static const PrimeBox phase%d_boxes[] = {\n", index);
        printer_indent(p, 1);
        for (int i = 0; i < ph->nboxes; ++i) {
            const PrimeBox *b = &ph->boxes[i];
            const long *rows[] = {b->ext, b->src_tile, b->src_off, b->dst_tile, b->dst_off};
            printer_printf(p, "{%d", b->ndims);
            for (int r = 0; r < 5; ++r) {
                printer_printf(p, ", {");
                for (int x = 0; x < b->ndims; ++x)
                    printer_printf(p, "%s%ld", x ? ", " : "", rows[r][x]);
                if (b->ndims == 0)
                    printer_printf(p, "0");
                printer_printf(p, "}");
            }
            printer_printf(p, "},\n");
        }
        printer_indent(p, -1);
        printer_printf(p, "};\n");
    }
    if (need_offsets) {
        printer_printf(p, "static const long phase%d_offsets[][8] = {\n", index);
        printer_indent(p, 1);
        for (int i = 0; i < ph->noffsets; ++i) {
            printer_printf(p, "{");
            for (int x = 0; x < 8; ++x)
                printer_printf(p, "%s%ld", x ? ", " : "", ph->offsets[i][x]);
            printer_printf(p, "},\n");
        }
        printer_indent(p, -1);
        printer_printf(p, "};\n");
    }
    int compute = ph->kind == PHASE_FWD || ph->kind == PHASE_BWD || ph->kind == PHASE_GRAD;
    if (compute)
        printer_printf(p,
                       "static const PrimeKernelFn phase%d_kernels[] = {kernel%d, kernel%d_set};\n",
                       index, e->kernel_of[index], e->kernel_of[index]);
    /* An instance has one forward phase but may have several backward
     * and gradient phases (a weight's and a bias's gradient), so those
     * name the tensor they write: each kernel's span in the trace and
     * row in the report is then one phase's. */
    int many = ph->kind == PHASE_BWD || ph->kind == PHASE_GRAD;
    printer_printf(p, "static const PrimePhase phase%d = {\"%s%s%s%s%s\", ", index,
                   phase_name(ph->kind), ph->inst >= 0 ? " " : "",
                   ph->inst >= 0 ? s->model->instances[ph->inst].name : "",
                   ph->inst >= 0 && many ? " -> " : "",
                   ph->inst >= 0 && many ? s->tensors[ph->out.tensor].name : "");
    if (in_form)
        printer_printf(p, "NULL, NULL, ");
    else
        printer_printf(p, "phase%d_actions, phase%d_nactions, ", index, index);
    if (compute)
        printer_printf(p, "phase%d_kernels, ", index);
    else
        printer_printf(p, "NULL, ");
    if (need_groups)
        printer_printf(p, "phase%d_groups, ", index);
    else
        printer_printf(p, "NULL, ");
    if (ph->nboxes)
        printer_printf(p, "phase%d_boxes, ", index);
    else
        printer_printf(p, "NULL, ");
    if (need_offsets)
        printer_printf(p, "phase%d_offsets, ", index);
    else
        printer_printf(p, "NULL, ");
    if (in_form)
        printer_printf(p, "&phase%d_form, ", index);
    else
        printer_printf(p, "NULL, ");
    double flops = compute ? cost_kernel_flops(s, ph) : 0.0;
    int fused = e->fused_of[index];
    const FusePlan *plan = s->fusion;
    if (fused >= 0) {
        /* One call runs every member's kernel. */
        const FuseGroup *g = &plan->groups[plan->group_of[index]];
        for (int j = 1; j < g->nmembers; ++j)
            flops += cost_kernel_flops(s, s->phases.items[g->phase[j]]);
    } else if (plan && plan->applied && plan->member_of[index] >= 0) {
        flops = 0.0;
    }
    printer_printf(p, "%.17g, %d", flops, compute);
    if (fused >= 0)
        printer_printf(p, ", fused%d};\n\n", fused);
    else
        printer_printf(p, ", NULL};\n\n");
}

static void emit_layout_form(Emitter *e, const char *tname, const char *what,
                             const PrimeLayoutForm *f) {
    Printer *p = &e->p;
    int naxes = e->form->mesh.naxes;
    printer_printf(p, "static const long %s_%s_nslices[] = {", tname, what);
    for (int x = 0; x < f->ndims; ++x)
        printer_printf(p, "%s%ld", x ? ", " : "", f->nslices[x]);
    printer_printf(p, "%s};\n", f->ndims ? "" : "1");
    printer_printf(p, "static const int %s_%s_slot[] = {", tname, what);
    print_ints(p, f->slot, f->count);
    printer_printf(p, "%s};\nstatic const PrimeAffine %s_%s_coord[] = {", f->count ? "" : "0",
                   tname, what);
    for (int i = 0; i < f->count * f->ndims; ++i) {
        printer_printf(p, "%s", i ? ", " : "");
        print_affine(p, &f->coord[i], naxes);
    }
    if (f->count * f->ndims == 0)
        printer_printf(p, "{0, 1, {0}, 0}");
    printer_printf(p,
                   "};\nstatic const PrimeLayoutForm %s_%s_form = {%d, %d, %s_%s_nslices, "
                   "%s_%s_slot, %s_%s_coord",
                   tname, what, f->count, f->ndims, tname, what, tname, what, tname, what);
    printer_printf(p, ", %d, %d, %ld};\n", f->sliced, f->slice_axis, f->slice_coord);
}

static void emit_layout(Emitter *e, const char *tname, const char *what, const Layout *l,
                        const PrimeLayoutForm *f) {
    if (f) {
        emit_layout_form(e, tname, what, f);
        return;
    }
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
        printer_printf(p, "static const %s *const %s_%s_%s[] = {", pass ? "int" : "long", tname,
                       what, pass ? "slots" : "tiles");
        for (int r = 0; r < ndev; ++r) {
            if (l->count[r])
                printer_printf(p, "%s%s_%s_%s%d", r ? ", " : "", tname, what,
                               pass ? "slots" : "tiles", r);
            else
                printer_printf(p, "%sNULL", r ? ", " : "");
        }
        printer_printf(p, "};\n");
    }
}

/* The calls of one compute phase's reference kernel; inside a layer
 * loop operand x's value index grows by l * dvalue[x] (PhaseRun). */
static void emit_reference_call(Emitter *e, const PhaseSched *ph, int fn, const int *dvalue) {
    const Schedule *s = e->s;
    Printer *p = &e->p;
    printer_printf(p, "{\n");
    printer_indent(p, 1);
    printer_printf(p, "const %s *in[] = {", e->dbl ? "double" : "float");
    for (int i = 0; i < ph->nin; ++i) {
        const SchedTensor *t = &s->tensors[ph->in[i].tensor];
        printer_printf(p, "%sv[%d", i ? ", " : "", 2 * t->model_tensor + t->is_grad);
        if (dvalue && dvalue[1 + i])
            printer_printf(p, " + l * %d", dvalue[1 + i]);
        printer_printf(p, "]");
    }
    const SchedTensor *o = &s->tensors[ph->out.tensor];
    printer_printf(p, "};\n%s%d(v[%d", e->dbl ? "reference_fp64_" : "reference", fn,
                   2 * o->model_tensor + o->is_grad);
    if (dvalue && dvalue[0])
        printer_printf(p, " + l * %d", dvalue[0]);
    printer_printf(p, "], in, zero);\n");
    printer_indent(p, -1);
    printer_printf(p, "}\n");
}

/* The dense reference: every compute phase over whole values, in the
 * schedule's order, the copies of a repeated layer as a loop. */
static void emit_reference(Emitter *e, const PhaseRuns *runs, const int *reference_of) {
    const Schedule *s = e->s;
    Printer *p = &e->p;
    printer_printf(p, e->dbl ? "static void reference_fp64(double *const *v)\n{\n"
                             : "static void reference(float *const *v)\n{\n");
    printer_indent(p, 1);
    printer_printf(p, "static const long zero[8] = {0};\n");
    for (int r = 0; r < runs->nruns; ++r) {
        const PhaseRun *pr = &runs->runs[r];
        int loop = pr->repeat > 1;
        if (loop) {
            printer_printf(p, "for (long l = 0; l < %ld; ++l) {\n", pr->repeat);
            printer_indent(p, 1);
        }
        for (int k = pr->first; k < pr->first + pr->len; ++k) {
            const PhaseSched *ph = s->phases.items[k];
            if (ph->kind == PHASE_FWD || ph->kind == PHASE_BWD || ph->kind == PHASE_GRAD)
                emit_reference_call(e, ph, reference_of[k],
                                    loop ? &pr->dvalue[(k - pr->first) * FORM_RUN_OPERANDS] : NULL);
        }
        if (loop) {
            printer_indent(p, -1);
            printer_printf(p, "}\n");
        }
    }
    printer_indent(p, -1);
    printer_printf(p, "}\n\n");
}

/* A tensor descriptor's layout field: tables or a form. */
static void print_layout_ref(Emitter *e, const char *tname, const char *what,
                             const PrimeLayoutForm *f) {
    if (f)
        printer_printf(&e->p, "{NULL, NULL, NULL, &%s_%s_form}", tname, what);
    else
        printer_printf(&e->p, "{%s_%s_count, %s_%s_tiles, %s_%s_slots, NULL}", tname, what, tname,
                       what, tname, what);
}

/* The scale of each weight's random initial values under --init fan-in:
 * U(-1, 1) times sqrt(3 / fan_in), so that their variance is 1 / fan_in,
 * where fan_in is the product of the weight's dimensions that the
 * operators reading it sum over (the input dimensions of a projection).
 * Weights nothing sums over (biases, gains) and inputs keep U(-1, 1).
 * scale[t] per model tensor, in one pass over the instances. */
static void init_scales(const Model *m, double *scale) {
    long *fan_in = calloc((size_t)m->ntensors + 1, sizeof(long));
    if (!fan_in)
        ICE("out of memory");
    for (int i = 0; i < m->ninstances; ++i) {
        const Instance *inst = &m->instances[i];
        for (int a = 0; a < inst->op->ninputs; ++a) {
            const OpTensor *in = &inst->op->inputs[a], *out = &inst->op->output;
            long f = 1;
            for (int x = 0; x < in->ndims; ++x) {
                int summed = 1;
                for (int y = 0; y < out->ndims; ++y)
                    summed &= out->dims[y] != in->dims[x];
                if (summed)
                    f *= inst->dim_sizes[in->dims[x]];
            }
            int t = inst->args[a];
            fan_in[t] = f > fan_in[t] ? f : fan_in[t];
        }
    }
    for (int t = 0; t < m->ntensors; ++t)
        scale[t] = m->tensors[t].role == TENSOR_WEIGHT && fan_in[t] > 1
                       ? sqrt(3.0 / (double)fan_in[t])
                       : 1.0;
    free(fan_in);
}

/* Element counts of the values, runs of a repeated layer's once:
 * value_runs[r] = {first, len, repeat} over value_elems. Returns the
 * number of runs. */
static int emit_values(Emitter *e) {
    const Model *m = e->s->model;
    Printer *p = &e->p;
    int n = 2 * m->ntensors;
    long *elems = calloc((size_t)n + 1, sizeof(long));
    double *scale = calloc((size_t)n + 1, sizeof(double));
    double *tensor_scale = calloc((size_t)m->ntensors + 1, sizeof(double));
    unsigned char *weight = calloc((size_t)n + 1, 1);
    if (!elems || !scale || !tensor_scale || !weight)
        ICE("out of memory");
    init_scales(m, tensor_scale);
    for (int t = 0; t < m->ntensors; ++t) {
        long k = 1;
        for (int x = 0; x < m->tensors[t].ndims; ++x)
            k *= m->tensors[t].sizes[x];
        elems[2 * t] = elems[2 * t + 1] = k;
        scale[2 * t] = tensor_scale[t];
        scale[2 * t + 1] = 1.0;
        weight[2 * t] = m->tensors[t].role == TENSOR_WEIGHT;
    }
    printer_printf(p, "static const long value_elems[] = {");
    Printer runs, scales, weights;
    printer_init(&runs);
    printer_init(&scales);
    printer_init(&weights);
    int nruns = 0, emitted = 0;
    for (int v = 0; v < n;) {
        int best_len = 1;
        long best_reps = 1;
        /* A period is a layer's values: try the distances to the next
         * equal counts. */
        for (int q = v + 1, tried = 0; q < n && q - v <= (n - v) / 2 && tried < 16; ++q) {
            if (elems[q] != elems[v])
                continue;
            ++tried;
            int len = q - v;
            long reps = 1;
            while (v + (reps + 1) * len <= n &&
                   memcmp(elems + v, elems + v + reps * len, sizeof(long) * (size_t)len) == 0 &&
                   memcmp(scale + v, scale + v + reps * len, sizeof(double) * (size_t)len) == 0 &&
                   memcmp(weight + v, weight + v + reps * len, (size_t)len) == 0)
                ++reps;
            if (reps >= 2 && reps * len > best_reps * best_len)
                best_len = len, best_reps = reps;
        }
        for (int j = 0; j < best_len; ++j) {
            printer_printf(p, "%s%ld", emitted + j ? ", " : "", elems[v + j]);
            printer_printf(&scales, "%s%.17g", emitted + j ? ", " : "", scale[v + j]);
            printer_printf(&weights, "%s%d", emitted + j ? ", " : "", weight[v + j]);
        }
        printer_printf(&runs, "{%d, %d, %ld},\n", emitted, best_len, best_reps);
        emitted += best_len;
        ++nruns;
        v += (int)(best_len * best_reps);
    }
    printer_printf(p, "%s};\n", emitted ? "" : "0");
    size_t len;
    char *text = printer_take(&scales, &len);
    printer_printf(p, "/* --init fan-in: the scale of each value's U(-1, 1) values. */\n");
    printer_printf(p, "static const double value_scale[] = {%s%s};\n", text, emitted ? "" : "0");
    free(text);
    text = printer_take(&weights, &len);
    printer_printf(p, "/* --weights: 1 for each value that is a weight. */\n");
    printer_printf(p, "static const unsigned char value_weight[] = {%s%s};\n", text,
                   emitted ? "" : "0");
    free(text);
    text = printer_take(&runs, &len);
    printer_printf(p, "static const PrimeValueRun value_runs[] = {\n%s};\n\n", text);
    free(text);
    printer_free(&runs);
    printer_free(&scales);
    printer_free(&weights);
    free(elems);
    free(scale);
    free(weight);
    free(tensor_scale);
    return nruns;
}

/* The tensor descriptors, the first copy of each run of a repeated
 * layer's tensors only, with the layouts they point at. */
static void emit_tensors(Emitter *e, const TensorRuns *truns) {
    const Schedule *s = e->s;
    const ScheduleForm *form = e->form;
    Printer *p = &e->p;
    for (int r = 0; r < truns->nruns; ++r)
        for (int k = truns->runs[r].first; k < truns->runs[r].first + truns->runs[r].len; ++k) {
            int t = form->tensor_at[k];
            const SchedTensor *ts = &s->tensors[t];
            if (ts->fill_phase >= 0)
                emit_layout(e, ts->name, "fill", &s->home[t], form->home[t]);
            if (ts->check)
                emit_layout(e, ts->name, "final", &s->final[t], form->final[t]);
        }
    printer_printf(p, "\nstatic const PrimeTensorDesc tensors[] = {\n");
    printer_indent(p, 1);
    for (int r = 0; r < truns->nruns; ++r) {
        const TensorRun *tr = &truns->runs[r];
        for (int j = 0; j < tr->len; ++j) {
            int t = form->tensor_at[tr->first + j];
            const SchedTensor *ts = &s->tensors[t];
            printer_printf(p, "{\"%s\", %d, {", tr->repeat > 1 ? tr->name_format[j] : ts->name,
                           ts->ndims);
            for (int x = 0; x < ts->ndims; ++x)
                printer_printf(p, "%s%ld", x ? ", " : "", ts->shape[x]);
            printer_printf(p, "}, {");
            for (int x = 0; x < ts->ndims; ++x)
                printer_printf(p, "%s%ld", x ? ", " : "", ts->extent[x]);
            printer_printf(p, "}, {");
            for (int x = 0; x < ts->ndims; ++x)
                printer_printf(p, "%s%ld", x ? ", " : "", ts->nslices[x]);
            printer_printf(p, "}, %d, %d, %d, %d, ", ts->max_slots, ts->fill_phase, ts->check,
                           2 * ts->model_tensor + ts->is_grad);
            if (ts->fill_phase >= 0)
                print_layout_ref(e, ts->name, "fill", form->home[t]);
            else
                printer_printf(p, "{NULL, NULL, NULL, NULL}");
            printer_printf(p, ", ");
            if (ts->check)
                print_layout_ref(e, ts->name, "final", form->final[t]);
            else
                printer_printf(p, "{NULL, NULL, NULL, NULL}");
            printer_printf(p, ", %ld, %ld, %d},\n", tr->repeat > 1 ? tr->name_base[j] : 0,
                           tr->repeat > 1 ? tr->name_step[j] : 0,
                           tr->repeat > 1 ? tr->dvalue[j] : 0);
        }
    }
    printer_indent(p, -1);
    printer_printf(p, "};\n");
    printer_printf(p, "/* Tensor runs: {first, len, repeat}. */\n");
    printer_printf(p, "static const PrimeTensorRun tensor_runs[] = {\n");
    printer_indent(p, 1);
    for (int r = 0, first = 0; r < truns->nruns; ++r) {
        const TensorRun *tr = &truns->runs[r];
        printer_printf(p, "{%d, %d, %ld},\n", first, tr->len, tr->repeat);
        first += tr->len;
    }
    printer_indent(p, -1);
    printer_printf(p, "};\n\n");
}

/* A C string literal of s (the lexer's strings hold no newline or NUL). */
static void print_c_string(Printer *p, const char *s) {
    printer_printf(p, "\"");
    for (; *s; ++s) {
        if (*s == '"' || *s == '\\')
            printer_printf(p, "\\%c", *s);
        else if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            printer_printf(p, "\\%03o", (unsigned char)*s);
        else
            printer_printf(p, "%c", *s);
    }
    printer_printf(p, "\"");
}

/* The model's `from "NAME"` names: one entry per declaration (a repeated
 * layer's weight once, for every copy). Returns the entry count. */
static int emit_weight_sources(Printer *p, const Model *m) {
    int n = 0;
    for (int t = 0; t < m->ntensors; ++t) {
        const ModelTensor *mt = &m->tensors[t];
        if (!mt->file_name)
            continue;
        int seen = 0;
        for (int u = 0; u < t && !seen; ++u)
            seen = m->tensors[u].file_name && m->tensors[u].in_layer && mt->in_layer &&
                   m->tensors[u].base == mt->base;
        if (seen)
            continue;
        if (n++ == 0)
            printer_printf(p, "/* Safetensors names: {name, in a layer, file name, transposed}. "
                              "*/\nstatic const PrimeWeightSource weight_sources[] = {\n");
        printer_printf(p, "    {\"%s\", %d, ", mt->in_layer ? mt->base : mt->name, mt->in_layer);
        print_c_string(p, mt->file_name);
        printer_printf(p, ", %d},\n", mt->file_transposed);
    }
    if (n)
        printer_printf(p, "};\n\n");
    return n;
}

char *emit_c_program(Arena *arena, const Schedule *s, const ScheduleForm *form,
                     const char *source_name, const EmitCHooks *hooks, size_t *len) {
    Emitter e;
    memset(&e, 0, sizeof e);
    printer_init(&e.p);
    e.s = s;
    e.form = form;
    e.arena = arena;
    Printer *p = &e.p;
    const Model *m = s->model;
    const char *base = strrchr(source_name, '/');
    base = base ? base + 1 : source_name;

    printer_printf(p, "/*\n * Generated by primec %s from %s, model '%s'. Do not edit.\n *\n",
                   PRIMEC_VERSION, base, m->name);
    printer_printf(p, " * %d devices (mesh", m->mesh.ndev);
    for (int a = 0; a < m->mesh.naxes; ++a)
        printer_printf(p, " %s:%ld", m->mesh.names[a], m->mesh.sizes[a]);
    printer_printf(p, ").\n");
    /* The repeated layer's first copy (in each micro-batch). */
    int copies = form_layer_copies(m);
    int per_micro =
        m->nmicro > 1 && m->ninstances % m->nmicro == 0 ? m->ninstances / m->nmicro : m->ninstances;
    int layer_end = m->layer_first + m->layer_size * copies;
    for (int i = 0; i < m->ninstances; ++i) {
        const Instance *inst = &m->instances[i];
        int j = i % per_micro;
        if (copies > 1 && j >= m->layer_first + m->layer_size && j < layer_end) {
            if (j == m->layer_first + m->layer_size)
                printer_printf(p, " * ... the layer above repeated %d times in all\n", copies);
            continue;
        }
        printer_printf(p, " * %s = %s(", inst->name, inst->op->name);
        for (int a = 0; a < inst->op->ninputs; ++a)
            printer_printf(p, "%s%s", a ? ", " : "", m->tensors[inst->args[a]].name);
        printer_printf(p, ") under partition '%s', %ld step%s\n", inst->partition->name,
                       inst->steps, inst->steps == 1 ? "" : "s");
    }
    printer_printf(
        p, " */\n#include <math.h>\n#include <stddef.h>\n\n#include \"prime_math.h\"\n#include "
           "\"prime_program.h\"\n#include \"prime_rt.h\"\n#include \"prime_sched.h\"\n\n");
    if (s->gemm_dtype != GEMM_DTYPE_F32)
        printer_printf(p, "#include \"prime_cuda_gemm.h\"\n\n");

    /* The rest goes to a second printer: the tensor names it uses are
     * known only at its end, and the enum of them comes first. */
    Printer head = e.p;
    printer_init(&e.p);
    e.named = ARENA_ARRAY(arena, unsigned char, s->ntensors + 1);
    const TensorRuns *truns = form_fold_tensors(arena, s, form);

    /* Values (model tensors and their gradients) for the reference. */
    printer_printf(
        p,
        "/* Whole values for the dense reference: tensor v is value 2v, its gradient 2v+1. */\n");
    int nvalue_runs = emit_values(&e);

    e.kernel_of = calloc((size_t)s->phases.count + 1, sizeof(int));
    int *reference_of = calloc((size_t)s->phases.count + 1, sizeof(int));
    if (!e.kernel_of || !reference_of)
        ICE("out of memory");
    int *reference64_of = calloc((size_t)s->phases.count + 1, sizeof(int));
    if (!reference64_of)
        ICE("out of memory");
    emit_c_kernels(&e.p, s, 0, 0, e.kernel_of);
    e.fused_of = calloc((size_t)s->phases.count + 1, sizeof(int));
    if (!e.fused_of)
        ICE("out of memory");
    emit_c_fused(&e.p, s, e.fused_of);
    emit_c_kernels(&e.p, s, 1, 0, reference_of);
    e.dbl = 1;
    emit_c_kernels(&e.p, s, 1, 1, reference64_of);
    e.dbl = 0;
    const PhaseRuns *runs = form_fold_layers(e.arena, s, form, e.kernel_of, reference_of);
    emit_reference(&e, runs, reference_of);
    e.dbl = 1;
    emit_reference(&e, runs, reference64_of);
    e.dbl = 0;

    /* The tables, laid out by format.c rather than by clang-format. */
    printer_printf(p, "// clang-format off\n");
    printer_printf(p, "static const PrimeMesh mesh = {%d, {", m->mesh.naxes);
    for (int a = 0; a < m->mesh.naxes; ++a)
        printer_printf(p, "%s%ld", a ? ", " : "", m->mesh.sizes[a]);
    printer_printf(p, "%s}};\n\n", m->mesh.naxes ? "" : "1");
    for (int r = 0; r < runs->nruns; ++r)
        for (int k = runs->runs[r].first; k < runs->runs[r].first + runs->runs[r].len; ++k)
            emit_phase(&e, s->phases.items[k], &form->phases[k], k);
    printer_printf(p, "static const PrimePhase *const phases[] = {");
    for (int r = 0, n = 0; r < runs->nruns; ++r)
        for (int k = runs->runs[r].first; k < runs->runs[r].first + runs->runs[r].len; ++k)
            printer_printf(p, "%s&phase%d", n++ ? ", " : "", k);
    printer_printf(p, "};\n");
    printer_printf(p,
                   "/* The order phases run in: {first, len, repeat, dtensor, dtag, orig}. */\n");
    printer_printf(p, "static const PrimePhaseRun runs[] = {\n");
    printer_indent(p, 1);
    for (int r = 0, first = 0; r < runs->nruns; ++r) {
        const PhaseRun *pr = &runs->runs[r];
        printer_printf(p, "{%d, %d, %ld, %d, %d, %d},\n", first, pr->len, pr->repeat, pr->dtensor,
                       pr->dtag, pr->first);
        first += pr->len;
    }
    printer_indent(p, -1);
    printer_printf(p, "};\n\n");

    emit_tensors(&e, truns);

    int ndev = m->mesh.ndev;
    printer_printf(p, "/* Predicted by primec: bytes sent per rank (shift, collective, "
                      "redistribution)\n * and peak bytes allocated per rank. */\n");
    int nrows = form->predicted_uniform ? 1 : ndev;
    if (form->predicted_uniform)
        printer_printf(p, "/* Every rank's counts are the same. */\n");
    printer_printf(p, "static const long predicted_bytes[] = {\n");
    printer_indent(p, 1);
    for (int r = 0; r < nrows; ++r) {
        for (int kind = 0; kind < PRIME_BYTES_KIND_COUNT; ++kind)
            printer_printf(p, "%s%ld", kind ? ", " : "", s->pred_bytes[kind][r]);
        printer_printf(p, ",\n");
    }
    printer_indent(p, -1);
    printer_printf(p, "};\nstatic const long predicted_peak[] = {");
    for (int r = 0; r < nrows; ++r)
        printer_printf(p, "%s%ld", r ? ", " : "", s->pred_peak[r]);
    printer_printf(p, "};\n\n");
    int nsources = emit_weight_sources(p, m);
    printer_printf(p, "// clang-format on\n");
    printer_printf(p,
                   "static const PrimeProgram program = {\"%s\", %d, TENSOR_COUNT, tensors, %d, "
                   "value_elems, %d, phases, reference, predicted_bytes, predicted_peak, %g, "
                   "&mesh, %d, %d, runs, %d, %s, %d, value_runs, value_scale, reference_fp64, "
                   "value_weight, %d, %s};\n\n",
                   m->name, ndev, 2 * m->ntensors, runs->nemitted, 4.0, form->predicted_uniform,
                   runs->nruns, truns->nruns, truns->nruns ? "tensor_runs" : "NULL", nvalue_runs,
                   nsources, nsources ? "weight_sources" : "NULL");
    /* The program's descriptor for a caller that links the model as a
     * library (`primec build --library`, which compiles without the main). */
    printer_printf(p, "const PrimeProgram *prime_model_%s(void);\n", m->name);
    printer_printf(p, "const PrimeProgram *prime_model_%s(void)\n{\n    return &program;\n}\n\n",
                   m->name);
    if (hooks && hooks->print_main) {
        hooks->print_main(p, s);
    } else {
        printer_printf(p, "#ifndef PRIME_MODEL_LIBRARY\n");
        printer_printf(p, "int main(int argc, char **argv)\n{\n    return "
                          "prime_program_main(&program, argc, argv);\n}\n");
        printer_printf(p, "#endif\n");
    }
    free(e.kernel_of);
    free(e.fused_of);
    free(reference_of);
    free(reference64_of);
    for (int i = 0; i < e.nslots; ++i)
        free(e.slots[i]);
    free(e.slots);
    free(e.slots_hash);

    size_t body_len;
    char *body = printer_take(&e.p, &body_len);
    printer_free(&e.p);
    e.p = head;
    p = &e.p;
    printer_printf(p, "enum {\n");
    printer_indent(p, 1);
    for (int k = 0; k < s->ntensors; ++k)
        if (e.named[form->tensor_at[k]])
            printer_printf(p, "T_%s = %d,\n", s->tensors[form->tensor_at[k]].name, k);
    printer_printf(p, "TENSOR_COUNT = %d\n", s->ntensors);
    printer_indent(p, -1);
    printer_printf(p, "};\n\n");
    char *text = printer_take(p, len);
    printer_free(p);
    char *all = malloc(*len + body_len + 1);
    if (!all)
        ICE("out of memory");
    memcpy(all, text, *len);
    memcpy(all + *len, body, body_len + 1);
    *len += body_len;
    free(text);
    free(body);
    return all;
}
