/*
 * fuzz_gen_compose.c — the generator's newer features (fuzz_gen.h):
 * composites (the stdlib's, read from its parsed programs, and the
 * program's own), partitions by role and their renamings at a use
 * (`use r0(m = s)`), weight sources (`from "NAME" [transposed]`) and
 * plans whose rules name instances and the parts of composite instances.
 *
 * The same principle as fuzz_gen.c: every choice reads a byte, 0 is the
 * plain valid option, and the deliberate mistakes go through oops().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_gen_internal.h"

/* ------------------------------------------------------------------ */
/* The stdlib's composites */

static void partition_of(FuzzPartition *to, const Partition *p) {
    to->name = p->name;
    to->naxes = p->naxes;
    for (int a = 0; a < p->naxes && a < IR_MAX_AXES; ++a)
        to->axis[a] = p->axes[a]->name.name;
}

static int same_partition(const FuzzPartition *a, const FuzzPartition *b) {
    if (strcmp(a->name, b->name) != 0 || a->naxes != b->naxes)
        return 0;
    for (int k = 0; k < a->naxes; ++k)
        if (strcmp(a->axis[k], b->axis[k]) != 0)
            return 0;
    return 1;
}

/* Keeps the partitions of (part, *npart) that `with` has too. */
static void intersect(FuzzPartition *part, int *npart, const FuzzPartition *with, int nwith) {
    int n = 0;
    for (int k = 0; k < *npart; ++k) {
        int found = 0;
        for (int j = 0; j < nwith && !found; ++j)
            found = same_partition(&part[k], &with[j]);
        if (found)
            part[n++] = part[k];
    }
    *npart = n;
}

static int dim_index(FuzzSig *s, const char *name) {
    for (int d = 0; d < s->ndims; ++d)
        if (strcmp(s->dims[d], name) == 0)
            return d;
    if (s->ndims >= IR_MAX_DIMS)
        return -1;
    s->dims[s->ndims] = name;
    return s->ndims++;
}

static int tensor_of(FuzzSig *s, FuzzTensor *to, const TensorParam *tp) {
    to->name = tp->name.name;
    to->ndims = tp->dims.count;
    if (to->ndims > IR_MAX_DIMS)
        return 0;
    for (int d = 0; d < to->ndims; ++d) {
        const Ident *id = tp->dims.items[d];
        to->dims[d] = dim_index(s, id->name);
        if (to->dims[d] < 0)
            return 0;
    }
    return 1;
}

static int inner_ninst(const FuzzTable *t, const char *name) {
    for (int j = 0; j < t->ncomps; ++j)
        if (strcmp(t->comps[j].sig.name, name) == 0)
            return t->comps[j].ninst;
    return 1;
}

/* The signature, parts and common partitions of one composite; 0 if the
 * generator cannot use it. */
static int composite_of(const FuzzTable *t, FuzzComposite *c, const OpDecl *op) {
    memset(c, 0, sizeof *c);
    c->sig.name = op->name.name;
    if (op->params.count > FUZZ_MAX_INPUTS || op->parts.count > FUZZ_MAX_PIECES ||
        op->parts.count == 0)
        return 0;
    c->sig.ninputs = op->params.count;
    for (int i = 0; i < op->params.count; ++i)
        if (!tensor_of(&c->sig, &c->sig.inputs[i], op->params.items[i]))
            return 0;
    if (!tensor_of(&c->sig, &c->sig.output, op->result))
        return 0;
    for (int k = 0; k < op->parts.count; ++k) {
        const ModelItem *it = op->parts.items[k];
        FuzzPiece *pc = &c->pieces[c->npieces++];
        pc->name = it->name.name;
        pc->op = -1;
        FuzzPartition part[FUZZ_MAX_PARTITIONS];
        int npart = 0;
        for (int i = 0; i < t->nops && pc->op < 0; ++i)
            if (strcmp(t->ops[i]->name, it->op.name) == 0)
                pc->op = i;
        if (pc->op >= 0) {
            for (int j = 0; j < t->npart[pc->op] && npart < FUZZ_MAX_PARTITIONS; ++j)
                partition_of(&part[npart++], t->parts[pc->op][j]);
        } else {
            const FuzzComposite *inner = NULL;
            for (int j = 0; j < t->ncomps && !inner; ++j)
                if (strcmp(t->comps[j].sig.name, it->op.name) == 0)
                    inner = &t->comps[j];
            if (!inner)
                return 0;
            npart = inner->npart;
            memcpy(part, inner->part, sizeof part);
        }
        c->ninst += pc->op >= 0 ? 1 : inner_ninst(t, it->op.name);
        if (k == 0) {
            c->npart = npart;
            memcpy(c->part, part, sizeof part);
        } else {
            intersect(c->part, &c->npart, part, npart);
        }
    }
    return 1;
}

void fuzz_table_add_composites(FuzzTable *t, const PtrVec *programs) {
    int n = 0;
    for (int i = 0; i < programs->count; ++i) {
        const Program *p = programs->items[i];
        for (int k = 0; k < p->decls.count; ++k) {
            const Decl *d = p->decls.items[k];
            n += d->kind == DECL_OP && d->op->is_composite;
        }
    }
    t->comps = calloc((size_t)n + 1, sizeof *t->comps);
    if (!t->comps)
        abort();
    for (int i = 0; i < programs->count; ++i) {
        const Program *p = programs->items[i];
        for (int k = 0; k < p->decls.count; ++k) {
            const Decl *d = p->decls.items[k];
            if (d->kind == DECL_OP && d->op->is_composite &&
                composite_of(t, &t->comps[t->ncomps], d->op))
                t->ncomps++;
        }
    }
}

/* ------------------------------------------------------------------ */
/* The program's composites */

/* Does op map a tensor of `out`'s dimensions to the same (elementwise,
 * one or two inputs)? */
static int keeps_shape(const FuzzSig *u, int rank) {
    if (u->ninputs < 1 || u->ninputs > 2 || u->output.ndims != rank || u->ndims != rank)
        return 0;
    for (int i = 0; i < u->ninputs; ++i) {
        if (u->inputs[i].ndims != rank)
            return 0;
        for (int d = 0; d < rank; ++d)
            if (u->inputs[i].dims[d] != u->output.dims[d])
                return 0;
    }
    return 1;
}

/* `op cN(inputs of S) -> Y[...] = { part0 = S(inputs); part1 = U(part0);
 * ...; Y = U(...); }`: S is any operator or composite so far, each U a
 * stdlib operator that keeps S's result shape (elementwise, the second
 * argument of a binary one an earlier part). Its partitions are those
 * every part has. Mistakes: S is the composite itself (a cycle), an
 * argument unknown, one too many or too few, a part nobody uses. */
void gen_user_composite(Gen *g, GOp *op, int n) {
    Reader *r = g->r;
    const GOp *s = &g->ops[pick(r, (unsigned)g->nops)];
    const char *name = user_name(g, "c%d", n);
    memset(op, 0, sizeof *op);
    op->sig = s->sig;
    op->sig.name = name;
    op->is_comp = 1;
    op->ninst = s->ninst;
    op->npart = s->npart;
    memcpy(op->part, s->part, sizeof op->part);
    const FuzzSig *sig = &op->sig;
    int rank = sig->output.ndims;

    put(g->out, "op %s(", name);
    for (int i = 0; i < sig->ninputs; ++i) {
        put(g->out, "%s", i ? ", " : "");
        put_ref(g, sig, i);
    }
    put(g->out, ") -> %s[", sig->output.name);
    for (int d = 0; d < rank; ++d)
        put(g->out, "%s%s", d ? ", " : "", sig->dims[sig->output.dims[d]]);
    put(g->out, "] = {\n");

    int keep[64], nkeep = 0;
    for (int i = 0; i < g->t->nops && nkeep < 64; ++i)
        if (keeps_shape(&g->ops[i].sig, rank))
            keep[nkeep++] = i;
    /* The steps, each keeping some partition every part so far has (where
     * there is one), so that a use can name it. */
    int want = nkeep ? (int)pick(r, 4) : 0, nsteps = 0;
    const GOp *step[4];
    for (int k = 0; k < want; ++k) {
        const GOp *u = &g->ops[keep[pick(r, (unsigned)nkeep)]];
        GPart part[MAX_PARTS];
        int npart = op->npart;
        memcpy(part, op->part, sizeof part);
        intersect(part, &npart, u->part, u->npart);
        if (npart == 0 && op->npart > 0)
            continue;
        op->npart = npart;
        memcpy(op->part, part, sizeof part);
        step[nsteps++] = u;
    }
    op->ninst += nsteps;

    /* The first part: S over the inputs. */
    int self = oops(r);
    int nargs = sig->ninputs;
    if (oops(r))
        nargs += pick(r, 2) ? 1 : -1;
    int unknown = oops(r) ? (int)pick(r, (unsigned)sig->ninputs) : -1;
    if (nsteps == 0)
        put(g->out, "    %s = ", sig->output.name);
    else
        put(g->out, "    part0 = ");
    put(g->out, "%s(", self ? name : s->sig.name);
    for (int i = 0; i < nargs; ++i)
        put(g->out, "%s%s", i ? ", " : "",
            i == unknown ? "zz" : sig->inputs[i < sig->ninputs ? i : 0].name);
    put(g->out, ");\n");

    /* Then the shape-keeping steps; the last computes the result. */
    for (int k = 1; k <= nsteps; ++k) {
        const GOp *u = step[k - 1];
        if (k == nsteps && oops(r)) /* a part no later one uses */
            put(g->out, "    unused = %s(part%d%s);\n", u->sig.name, k - 1,
                u->sig.ninputs == 2 ? ", part0" : "");
        if (k == nsteps)
            put(g->out, "    %s = %s(part%d", sig->output.name, u->sig.name, k - 1);
        else
            put(g->out, "    part%d = %s(part%d", k, u->sig.name, k - 1);
        if (u->sig.ninputs == 2)
            put(g->out, ", part%u", pick(r, (unsigned)k));
        put(g->out, ");\n");
    }
    put(g->out, "}\n");
}

/* ------------------------------------------------------------------ */
/* Partitions by role and renamings */

/* `partition rN on mesh(d: P) { DIM = d; }` or over (i, j) with two
 * dimensions; the dimensions are those of one stdlib operator, so the
 * partition fits at least that one by its own names. */
void gen_role_partition(Gen *g, int n) {
    Reader *r = g->r;
    if (g->nroles >= MAX_ROLES)
        return;
    const FuzzSig *of = &g->ops[pick(r, (unsigned)g->t->nops)].sig;
    int two = of->ndims >= 2 && pick(r, 3) == 2;
    GRole *role = &g->roles[g->nroles++];
    static const char *const axes[2][2] = {{"d"}, {"i", "j"}};
    role->part.name = user_name(g, "r%d", n);
    role->part.naxes = two ? 2 : 1;
    for (int a = 0; a < role->part.naxes; ++a)
        role->part.axis[a] = axes[two][a];
    unsigned first = pick(r, (unsigned)of->ndims);
    role->ndsi = role->part.naxes;
    role->dsi[0] = of->dims[first];
    if (two)
        role->dsi[1] =
            of->dims[(first + 1 + pick(r, (unsigned)of->ndims - 1)) % (unsigned)of->ndims];
    put(g->out, "partition %s on mesh(", role->part.name);
    for (int a = 0; a < role->part.naxes; ++a)
        put(g->out, "%s%s: P", a ? ", " : "", role->part.axis[a]);
    put(g->out, ") {");
    for (int k = 0; k < role->ndsi; ++k)
        put(g->out, " %s = %s;", role->dsi[k], role->part.axis[k]);
    put(g->out, " }\n");
}

/* `(renames, AXIS: MESH_AXIS, ...)`: the axes bound by name where the
 * partition has fewer than the mesh (or sometimes anyway). */
static void put_bindings(Gen *g, const GPart *p, const char *renames) {
    Reader *r = g->r;
    int axes = p->naxes < g->mesh_naxes || pick(r, 4) == 3;
    if (!axes && !renames)
        return;
    put(g->out, "(%s", renames ? renames : "");
    if (axes) {
        unsigned off = pick(r, (unsigned)g->mesh_naxes);
        for (int a = 0; a < p->naxes; ++a)
            put(g->out, "%s%s: %s", a || renames ? ", " : "", p->axis[a],
                g->mesh_axis[(off + (unsigned)a) % (unsigned)g->mesh_naxes]);
    }
    put(g->out, ")");
}

void put_use(Gen *g, const GOp *op, const GPart *p) {
    Reader *r = g->r;
    put(g->out, " use %s", oops(r) ? "square" : p->name);
    char ren[64];
    int bad = oops(r) && op->sig.ndims > 0; /* a renaming of a partition declared `of` */
    if (bad)
        snprintf(ren, sizeof ren, "%s = %s", op->sig.dims[0],
                 op->sig.dims[pick(r, (unsigned)op->sig.ndims)]);
    put_bindings(g, p, bad ? ren : NULL);
}

/* ` use rN(DIM = OP_DIM, ...)`: a partition by role, each of its
 * dimensions op lacks renamed to one op has that no other names. 0 when
 * none fits (nothing written). Mistakes: a dimension the partition does
 * not name, one the operator lacks. */
int put_role_use(Gen *g, const GOp *op) {
    Reader *r = g->r;
    if (op->is_comp && !oops(r)) /* renamed in every part: rarely valid */
        return 0;
    int cand[MAX_ROLES], n = 0;
    for (int k = 0; k < g->nroles; ++k)
        if (g->roles[k].part.naxes <= g->mesh_naxes)
            cand[n++] = k;
    if (n == 0)
        return 0;
    const GRole *role = &g->roles[cand[pick(r, (unsigned)n)]];
    const FuzzSig *sig = &op->sig;
    int taken[IR_MAX_DIMS] = {0}, has[2] = {0, 0};
    for (int k = 0; k < role->ndsi; ++k)
        for (int d = 0; d < sig->ndims; ++d)
            if (strcmp(sig->dims[d], role->dsi[k]) == 0)
                taken[d] = has[k] = 1;
    char ren[96] = "";
    size_t len = 0;
    for (int k = 0; k < role->ndsi; ++k) {
        if (has[k])
            continue;
        int free_dims[IR_MAX_DIMS], nfree = 0;
        for (int d = 0; d < sig->ndims; ++d)
            if (!taken[d])
                free_dims[nfree++] = d;
        if (nfree == 0)
            return 0;
        int d = free_dims[pick(r, (unsigned)nfree)];
        taken[d] = 1;
        const char *from = role->dsi[k], *to = sig->dims[d];
        if (oops(r)) {
            if (pick(r, 2))
                from = "zz";
            else
                to = "zz";
        }
        int w = snprintf(ren + len, sizeof ren - len, "%s%s = %s", len ? ", " : "", from, to);
        if (w < 0 || (size_t)w >= sizeof ren - len)
            return 0;
        len += (size_t)w;
    }
    put(g->out, " use %s", role->part.name);
    put_bindings(g, &role->part, len ? ren : NULL);
    return 1;
}

/* ------------------------------------------------------------------ */
/* Weight sources */

void put_source(Gen *g, const char *name, int rank) {
    Reader *r = g->r;
    unsigned c = pick(r, 4); /* 0: none; 1: by name; 2: transposed; 3: a shared name */
    if (c == 0)
        return;
    char src[64];
    const char *layer = g->depth > 0 ? "layers.{layer}." : "";
    snprintf(src, sizeof src, "%s%s", layer, c == 3 ? "shared" : name);
    if (oops(r)) {
        switch (pick(r, 3)) {
        case 0: /* {layer} outside a layer; a layer's copies under one name */
            snprintf(src, sizeof src, "%s%s", g->depth > 0 ? "" : "layers.{layer}.", name);
            break;
        case 1:
            snprintf(src, sizeof src, "layers.{l}.%s", name);
            break;
        default:
            src[0] = '\0';
            break;
        }
    }
    put(g->out, " from \"%s\"", src);
    if (c == 2 && (rank == 2 || oops(r)))
        put(g->out, " transposed");
}

/* ------------------------------------------------------------------ */
/* Plans */

/* One of op's partitions that fits the mesh, or NULL. */
static const GPart *fitting_part(Gen *g, const GOp *op) {
    int pc[MAX_PARTS], n = 0;
    for (int k = 0; k < op->npart; ++k)
        if (op->part[k].naxes <= g->mesh_naxes)
            pc[n++] = k;
    return n ? &op->part[pc[pick(g->r, (unsigned)n)]] : NULL;
}

/* The partitions every instance in [first, last] of first's block has. */
static int common_parts(Gen *g, int first, int last, GPart *common) {
    int n = g->inst[first].op->npart;
    memcpy(common, g->inst[first].op->part, sizeof(GPart) * MAX_PARTS);
    for (int k = first + 1; k <= last; ++k)
        if (g->inst[k].block == g->inst[first].block)
            intersect(common, &n, g->inst[k].op->part, g->inst[k].op->npart);
    return n;
}

/* One rule: an instance, a part of a composite's instance (`t3_mean`,
 * `t3_y` for the part computing the result), one copy of a layer's
 * instance (`t3_1`, `t3_mean_1`), or a range of instances of one block
 * (`t2 .. t5`); with a partition of its operator (or one by role,
 * renamed). Mistakes: a part the composite does not have, a copy past
 * the layer's last; those of put_use. */
static void put_rule(Gen *g) {
    Reader *r = g->r;
    int first = (int)pick(r, (unsigned)g->ninst);
    const GInst *in = &g->inst[first];
    const GOp *op = in->op;
    put(g->out, "    %s", in->name);
    int whole = 1;
    if (op->comp && pick(r, 2)) {
        const FuzzPiece *pc = &op->comp->pieces[pick(r, (unsigned)op->comp->npieces)];
        if (oops(r)) {
            put(g->out, "_zz");
            whole = 0;
        } else if (pc->op >= 0) {
            op = &g->ops[pc->op];
            put(g->out, "_%s", pc->name);
            whole = 0;
        }
    }
    if (in->copies > 0 && pick(r, 4) == 3) {
        unsigned copy = pick(r, (unsigned)in->copies);
        put(g->out, "_%u", oops(r) ? (unsigned)in->copies : copy);
    } else if (whole && pick(r, 5) == 4) {
        int later[MAX_INSTANCES], nlater = 0;
        for (int k = first + 1; k < g->ninst; ++k)
            if (g->inst[k].block == in->block)
                later[nlater++] = k;
        GPart common[MAX_PARTS];
        int last = nlater ? later[pick(r, (unsigned)nlater)] : first;
        int ncommon = last > first ? common_parts(g, first, last, common) : 0;
        int pc[MAX_PARTS], npc = 0;
        for (int k = 0; k < ncommon; ++k)
            if (common[k].naxes <= g->mesh_naxes)
                pc[npc++] = k;
        if (npc) {
            put(g->out, " .. %s", g->inst[last].name);
            put_use(g, op, &common[pc[pick(r, (unsigned)npc)]]);
            put(g->out, ";\n");
            return;
        }
    }
    const GPart *p = fitting_part(g, op);
    if (g->nroles == 0 || pick(r, 3) != 2 || !put_role_use(g, op)) {
        if (p)
            put_use(g, op, p);
        else
            put(g->out, " use replicate");
    }
    put(g->out, ";\n");
}

/* `plan pN of mN on MESH { rules }` and `run rN = pN;`, sometimes a
 * default every instance's operator has, and sometimes a plan extending
 * it by one rule (`plan pNx extends pN { rule }`) with a run of its own. */
void gen_plan(Gen *g, int n) {
    Reader *r = g->r;
    if (g->ninst == 0 || pick(r, 4) != 3)
        return;
    put(g->out, "plan p%d of %s on %s {\n", n, g->model_name, g->mesh_text);
    if (pick(r, 4) == 3) {
        GPart common[MAX_PARTS];
        int ncommon = common_parts(g, 0, g->ninst - 1, common);
        for (int k = 1; k < g->ninst; ++k) /* the other blocks' instances too */
            if (g->inst[k].block != g->inst[0].block)
                intersect(common, &ncommon, g->inst[k].op->part, g->inst[k].op->npart);
        int pc[MAX_PARTS], npc = 0;
        for (int k = 0; k < ncommon; ++k)
            if (common[k].naxes <= g->mesh_naxes)
                pc[npc++] = k;
        if (npc) {
            put(g->out, "    default");
            put_use(g, g->inst[0].op, &common[pc[pick(r, (unsigned)npc)]]);
            put(g->out, ";\n");
        }
    }
    int nrules = 1 + (int)pick(r, 3);
    for (int k = 0; k < nrules; ++k)
        put_rule(g);
    put(g->out, "}\nrun r%d = p%d;\n", n, n);
    if (pick(r, 4) == 3) {
        put(g->out, "plan p%dx extends p%d {\n", n, n);
        put_rule(g);
        put(g->out, "}\nrun r%dx = p%dx;\n", n, n);
    }
}
