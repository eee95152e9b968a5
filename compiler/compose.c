/*
 * compose.c — composite operators (see compose.h).
 *
 * A composite is checked once, where it is declared, by dimension names:
 * each part's operator (primitive or composite) binds its dimensions to
 * the composite's names through the part's arguments, so the result of
 * every part has named dimensions and the composite's result must come
 * out with the dimensions it declares. A use then only binds the
 * composite's dimension names to sizes (compose_check_use), and its parts
 * agree by construction.
 */
#include "compose.h"

#include <string.h>

/* The most instances one use may expand into (composites that use others
 * twice at every level grow exponentially). */
#define COMPOSE_MAX_PARTS 10000

typedef struct Composite {
    const OpDecl *decl;
    int ok;    /* signature and parts checked, no cycle */
    int state; /* cycle search: 0 not seen, 1 on the path, 2 done */
} Composite;

/* A tensor of a composite's body: a parameter or a part's result, with
 * the composite's names for its dimensions. */
typedef struct Local {
    Sym name;
    Span span;
    int ndims;
    Sym dims[IR_MAX_DIMS];
    int used;
} Local;

/* The signature of a part's operator: dimension names of each input and
 * of the result. */
typedef struct Callee {
    Sym name;
    Span span;
    int ninputs;
    int ndims[64];
    Sym dims[64][IR_MAX_DIMS];
    int nout;
    Sym out[IR_MAX_DIMS];
} Callee;

static Composite *find_composite(const Resolver *r, Sym name) {
    for (int i = 0; i < r->composites.count; ++i) {
        Composite *c = r->composites.items[i];
        if (c->decl->name.name == name)
            return c;
    }
    return NULL;
}

int compose_is_composite(const Resolver *r, Sym name) {
    return find_composite(r, name) != NULL;
}

/* ------------------------------------------------------------------ */
/* Declarations                                                        */

static int tensor_dims(const TensorParam *tp, Sym *dims) {
    for (int i = 0; i < tp->dims.count; ++i)
        dims[i] = ((const Ident *)tp->dims.items[i])->name;
    return tp->dims.count;
}

/* The signature of an operator or composite named so; 0 when neither
 * exists, -1 for a composite in error (reported at it). */
static int callee_of(const Resolver *r, Sym name, Callee *out) {
    const Op *op = module_find_op(r->module, name);
    const Composite *c = op ? NULL : find_composite(r, name);
    if (!op && !c)
        return 0;
    if (c && !c->ok)
        return -1;
    out->name = name;
    if (op) {
        out->span = op->decl->name.span;
        out->ninputs = op->ninputs;
        for (int i = 0; i < op->ninputs; ++i) {
            out->ndims[i] = op->inputs[i].ndims;
            for (int x = 0; x < op->inputs[i].ndims; ++x)
                out->dims[i][x] = op->dims[op->inputs[i].dims[x]];
        }
        out->nout = op->output.ndims;
        for (int x = 0; x < op->output.ndims; ++x)
            out->out[x] = op->dims[op->output.dims[x]];
        return 1;
    }
    out->span = c->decl->name.span;
    out->ninputs = c->decl->params.count;
    for (int i = 0; i < out->ninputs; ++i)
        out->ndims[i] = tensor_dims(c->decl->params.items[i], out->dims[i]);
    out->nout = tensor_dims(c->decl->result, out->out);
    return 1;
}

/* Names, dimensions and the result's dimensions of a composite's signature. */
static int check_signature(Resolver *r, const OpDecl *decl) {
    for (int i = 0; i <= decl->params.count; ++i) {
        const TensorParam *tp = i < decl->params.count ? decl->params.items[i] : decl->result;
        for (int j = 0; j < i; ++j) {
            const TensorParam *prev = decl->params.items[j];
            if (prev->name.name == tp->name.name) {
                diag_error(r->sink, tp->name.span,
                           i < decl->params.count ? "tensor '%s' declared twice"
                                                  : "result '%s' has the name of an input",
                           tp->name.name);
                diag_note(r->sink, prev->name.span, "previous declaration");
                return 0;
            }
        }
        if (tp->dims.count > IR_MAX_DIMS) {
            diag_error(r->sink, tp->span, "tensor '%s' has %d dimensions; at most %d are supported",
                       tp->name.name, tp->dims.count, IR_MAX_DIMS);
            return 0;
        }
        for (int x = 0; x < tp->dims.count; ++x) {
            const Ident *dim = tp->dims.items[x];
            for (int y = 0; y < x; ++y) {
                if (((const Ident *)tp->dims.items[y])->name == dim->name) {
                    diag_error(r->sink, dim->span, "dimension '%s' appears twice in tensor '%s'",
                               dim->name, tp->name.name);
                    return 0;
                }
            }
            int in_input = i < decl->params.count;
            for (int j = 0; j < decl->params.count && !in_input; ++j) {
                const TensorParam *p = decl->params.items[j];
                for (int y = 0; y < p->dims.count; ++y)
                    in_input |= ((const Ident *)p->dims.items[y])->name == dim->name;
            }
            if (!in_input) {
                diag_error(r->sink, dim->span, "dimension '%s' of result '%s' appears in no input",
                           dim->name, tp->name.name);
                return 0;
            }
        }
    }
    if (decl->params.count > 64) {
        diag_error(r->sink, decl->name.span, "composite '%s' has %d inputs; at most 64",
                   decl->name.name, decl->params.count);
        return 0;
    }
    if (!decl->parts.count) {
        diag_error(r->sink, decl->name.span, "composite '%s' has no parts", decl->name.name);
        return 0;
    }
    return 1;
}

static Local *find_local(Local *locals, int n, Sym name) {
    for (int i = 0; i < n; ++i)
        if (locals[i].name == name)
            return &locals[i];
    return NULL;
}

/* Binds the callee's dimension names through one part's arguments and
 * writes the part's result into *out; 0 after reporting. */
static int bind_part(Resolver *r, const OpDecl *decl, const ModelItem *part, Local *locals,
                     int nlocals, Local *out) {
    Callee cal;
    int known = callee_of(r, part->op.name, &cal);
    if (known <= 0) {
        if (!known)
            diag_error(r->sink, part->op.span, "unknown operator '%s'", part->op.name);
        return 0;
    }
    if (part->args.count != cal.ninputs) {
        diag_error(r->sink, part->span, "operator '%s' takes %d inputs, %d given", cal.name,
                   cal.ninputs, part->args.count);
        diag_note(r->sink, cal.span, "'%s' is declared here", cal.name);
        return 0;
    }
    Sym from[IR_MAX_DIMS * 64], to[IR_MAX_DIMS * 64];
    const Ident *by[IR_MAX_DIMS * 64];
    int nmap = 0;
    for (int a = 0; a < part->args.count; ++a) {
        const Ident *arg = part->args.items[a];
        Local *l = find_local(locals, nlocals, arg->name);
        if (!l) {
            int later = 0;
            for (int i = 0; i < decl->parts.count; ++i)
                later |= ((const ModelItem *)decl->parts.items[i])->name.name == arg->name;
            diag_error(r->sink, arg->span,
                       later ? "'%s' is used before it is defined: the parts of a composite are "
                               "an acyclic graph in definition order"
                             : "unknown tensor '%s' in composite '%s'",
                       arg->name, decl->name.name);
            return 0;
        }
        l->used = 1;
        if (l->ndims != cal.ndims[a]) {
            diag_error(r->sink, arg->span, "'%s' has %d dimensions but input %d of '%s' has %d",
                       arg->name, l->ndims, a + 1, cal.name, cal.ndims[a]);
            diag_note(r->sink, l->span, "'%s' is declared here", arg->name);
            return 0;
        }
        for (int x = 0; x < l->ndims; ++x) {
            int k = 0;
            while (k < nmap && from[k] != cal.dims[a][x])
                k++;
            if (k == nmap) {
                from[nmap] = cal.dims[a][x];
                to[nmap] = l->dims[x];
                by[nmap++] = arg;
            } else if (to[k] != l->dims[x]) {
                diag_error(r->sink, arg->span,
                           "dimension '%s' of '%s' is '%s' in '%s' but '%s' in '%s' (a "
                           "composite's dimensions agree by name)",
                           from[k], cal.name, l->dims[x], arg->name, to[k], by[k]->name);
                diag_note(r->sink, by[k]->span, "'%s' gives '%s' = '%s' here", by[k]->name, from[k],
                          to[k]);
                return 0;
            }
        }
    }
    out->name = part->name.name;
    out->span = part->name.span;
    out->ndims = cal.nout;
    for (int x = 0; x < cal.nout; ++x) {
        int k = 0;
        while (k < nmap && from[k] != cal.out[x])
            k++;
        out->dims[x] = k < nmap ? to[k] : cal.out[x]; /* bound: every result dim is an input's */
    }
    return 1;
}

/* The parts of a composite, by dimension names. */
static int check_parts(Resolver *r, const OpDecl *decl) {
    int cap = decl->params.count + decl->parts.count;
    Local *locals = ARENA_ARRAY(r->arena, Local, cap + 1);
    int n = 0;
    for (int i = 0; i < decl->params.count; ++i) {
        const TensorParam *tp = decl->params.items[i];
        locals[n].name = tp->name.name;
        locals[n].span = tp->span;
        locals[n].ndims = tensor_dims(tp, locals[n].dims);
        locals[n].used = 1; /* an unused input is allowed */
        n++;
    }
    const Local *result = NULL;
    const ModelItem *result_part = NULL;
    for (int i = 0; i < decl->parts.count; ++i) {
        const ModelItem *part = decl->parts.items[i];
        const Local *prev = find_local(locals, n, part->name.name);
        if (prev) {
            diag_error(r->sink, part->name.span, "tensor '%s' defined twice", part->name.name);
            diag_note(r->sink, prev->span, "previous definition");
            return 0;
        }
        if (!bind_part(r, decl, part, locals, n, &locals[n]))
            return 0;
        if (part->name.name == decl->result->name.name) {
            result = &locals[n];
            result_part = part;
        }
        n++;
    }
    if (!result) {
        diag_error(r->sink, decl->result->name.span,
                   "composite '%s' never computes its result '%s'", decl->name.name,
                   decl->result->name.name);
        return 0;
    }
    Sym declared[IR_MAX_DIMS];
    int nd = tensor_dims(decl->result, declared);
    int same = nd == result->ndims;
    for (int x = 0; same && x < nd; ++x)
        same = declared[x] == result->dims[x];
    if (!same) {
        char got[256];
        size_t len = 0;
        got[0] = 0;
        for (int x = 0; x < result->ndims && len < sizeof got - 64; ++x)
            len += (size_t)snprintf(got + len, sizeof got - len, "%s%s", x ? ", " : "",
                                    result->dims[x]);
        diag_error(r->sink, result_part->span,
                   "this part computes '%s' with dimensions [%s], not those composite '%s' "
                   "declares",
                   result->name, got, decl->name.name);
        diag_note(r->sink, decl->result->span, "declared here");
        return 0;
    }
    for (int i = decl->params.count; i < n; ++i) {
        if (!locals[i].used && locals[i].name != decl->result->name.name) {
            diag_error(r->sink, locals[i].span,
                       "'%s' is computed but never used: every part of a composite feeds its "
                       "result",
                       locals[i].name);
            return 0;
        }
    }
    return 1;
}

/* Depth-first search for cycles of composites through their parts;
 * each cycle is reported once, at the part that closes it. */
static void find_cycles(Resolver *r, Composite *c, Composite **path, int depth) {
    c->state = 1;
    path[depth] = c;
    for (int i = 0; i < c->decl->parts.count; ++i) {
        const ModelItem *part = c->decl->parts.items[i];
        Composite *next = find_composite(r, part->op.name);
        if (!next)
            continue;
        if (next->state == 1) {
            int from = depth;
            while (path[from] != next)
                from--;
            const char *text = next->decl->name.name;
            for (int k = from + 1; k <= depth; ++k)
                text = arena_printf(r->arena, "%s -> %s", text, path[k]->decl->name.name);
            diag_error(r->sink, part->op.span,
                       "composite '%s' uses itself: %s -> %s is a cycle of composites",
                       next->decl->name.name, text, next->decl->name.name);
            for (int k = from; k <= depth; ++k)
                path[k]->ok = 0;
            continue;
        }
        if (next->state == 0)
            find_cycles(r, next, path, depth + 1);
        if (!next->ok)
            c->ok = 0;
    }
    c->state = 2;
}

void compose_declare(Resolver *r) {
    for (int f = 0; f < r->nprograms; ++f) {
        for (int i = 0; i < r->programs[f]->decls.count; ++i) {
            const Decl *d = r->programs[f]->decls.items[i];
            if (d->kind != DECL_OP || !d->op->is_composite)
                continue;
            const Op *op = module_find_op(r->module, d->op->name.name);
            const Composite *prev = find_composite(r, d->op->name.name);
            if (op || prev) {
                diag_error(r->sink, d->op->name.span, "operator '%s' is defined twice",
                           d->op->name.name);
                diag_note(r->sink, op ? op->decl->name.span : prev->decl->name.span,
                          "previous definition");
                continue;
            }
            Composite *c = ARENA_NEW(r->arena, Composite);
            c->decl = d->op;
            ptrvec_push(r->arena, &r->composites, c);
        }
    }
    for (int i = 0; i < r->composites.count; ++i) {
        Composite *c = r->composites.items[i];
        c->ok = check_signature(r, c->decl);
    }
    /* Parts are checked against signatures only, so an error in one
     * composite's parts does not hide those of another. */
    for (int i = 0; i < r->composites.count; ++i) {
        Composite *c = r->composites.items[i];
        c->ok = c->ok && check_parts(r, c->decl);
    }
    Composite **path = ARENA_ARRAY(r->arena, Composite *, r->composites.count + 1);
    for (int i = 0; i < r->composites.count; ++i) {
        Composite *c = r->composites.items[i];
        if (c->state == 0)
            find_cycles(r, c, path, 0);
    }
}

/* ------------------------------------------------------------------ */
/* Uses                                                                */

int compose_check_use(Resolver *r, const ModelItem *use, const ModelTensor *const *args) {
    const Composite *c = find_composite(r, use->op.name);
    if (!c || !c->ok || !use->composite)
        return 0; /* reported at the composite */
    const OpDecl *decl = c->decl;
    if (use->args.count != decl->params.count) {
        diag_error(r->sink, use->span, "composite '%s' takes %d inputs, %d given", decl->name.name,
                   decl->params.count, use->args.count);
        diag_note(r->sink, decl->name.span, "'%s' is declared here", decl->name.name);
        return 0;
    }
    Sym names[IR_MAX_DIMS * 64];
    long sizes[IR_MAX_DIMS * 64];
    int by[IR_MAX_DIMS * 64];
    int n = 0;
    for (int a = 0; a < use->args.count; ++a) {
        const Ident *arg = use->args.items[a];
        const TensorParam *tp = decl->params.items[a];
        const ModelTensor *t = args[a];
        if (t->ndims != tp->dims.count) {
            diag_error(r->sink, arg->span,
                       "'%s' has %d dimensions but input '%s' of composite '%s' has %d", arg->name,
                       t->ndims, tp->name.name, decl->name.name, tp->dims.count);
            diag_note(r->sink, tp->span, "'%s' is declared here", tp->name.name);
            return 0;
        }
        for (int x = 0; x < t->ndims; ++x) {
            Sym dim = ((const Ident *)tp->dims.items[x])->name;
            int k = 0;
            while (k < n && names[k] != dim)
                k++;
            if (k == n) {
                names[n] = dim;
                sizes[n] = t->sizes[x];
                by[n++] = a;
            } else if (sizes[k] != t->sizes[x]) {
                const Ident *first = use->args.items[by[k]];
                diag_error(r->sink, arg->span,
                           "shape mismatch: dimension '%s' of composite '%s' is %ld in '%s' but "
                           "%ld in '%s'",
                           dim, decl->name.name, t->sizes[x], arg->name, sizes[k], first->name);
                diag_note(r->sink, tp->span, "input '%s' of '%s' is declared here", tp->name.name,
                          decl->name.name);
                return 0;
            }
        }
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* Expansion                                                           */

static int uses_composite(const Resolver *r, const PtrVec *items) {
    for (int i = 0; i < items->count; ++i) {
        const ModelItem *it = items->items[i];
        if (it->kind == MITEM_INSTANCE && find_composite(r, it->op.name))
            return 1;
        if (it->kind == MITEM_LAYER && uses_composite(r, &it->items))
            return 1;
    }
    return 0;
}

static Sym joined(Resolver *r, Sym a, Sym b) {
    const char *s = arena_printf(r->arena, "%s_%s", a, b);
    return arena_intern(r->arena, s, strlen(s));
}

/* What one use expands in: the names its composite's tensors take. The
 * part computing the result is `name`; every other part PART is
 * `prefix_PART`. For a written use both are the use's name; for a
 * composite that is a part PART of another, prefix is the outer
 * prefix_PART and name is the outer name if PART is the outer result
 * (else prefix_PART too), so that no two parts share a name. */
typedef struct Expansion {
    const OpDecl *decl;
    Ident name;               /* the instance computing the result */
    Sym prefix;               /* of the other parts' names */
    const Ident *const *args; /* per param: the use's argument */
    PtrVec groups;            /* Sym: the composite instances the parts belong to */
    const ModelItem *site;    /* the written use */
    UseClause *use;           /* the written use's `use`, given to every part */
    int *budget;              /* instances the use may still expand into */
} Expansion;

/* The name a tensor of the composite's body takes in the expansion. */
static Ident tensor_name(Resolver *r, const Expansion *ex, const Ident *id) {
    for (int i = 0; i < ex->decl->params.count; ++i)
        if (((const TensorParam *)ex->decl->params.items[i])->name.name == id->name)
            return *ex->args[i];
    if (id->name == ex->decl->result->name.name)
        return (Ident){ex->name.name, id->span};
    return (Ident){joined(r, ex->prefix, id->name), id->span};
}

/* Appends the parts of one use to out; returns how many instances. */
static int expand_use(Resolver *r, const Expansion *ex, PtrVec *out) {
    int count = 0;
    for (int i = 0; i < ex->decl->parts.count && *ex->budget >= 0; ++i) {
        const ModelItem *part = ex->decl->parts.items[i];
        Ident name = tensor_name(r, ex, &part->name);
        name.span = ex->site->name.span;
        Sym own = joined(r, ex->prefix, part->name.name); /* == name unless the result */
        const Ident **args = ARENA_ARRAY(r->arena, const Ident *, part->args.count + 1);
        PtrVec argv = {0};
        for (int a = 0; a < part->args.count; ++a) {
            Ident *id = ARENA_NEW(r->arena, Ident);
            *id = tensor_name(r, ex, part->args.items[a]);
            args[a] = id;
            ptrvec_push(r->arena, &argv, id);
        }
        PtrVec groups = {0};
        for (int g = 0; g < ex->groups.count; ++g)
            ptrvec_push(r->arena, &groups, ex->groups.items[g]);
        const Composite *inner = find_composite(r, part->op.name);
        if (inner) {
            ptrvec_push(r->arena, &groups, (void *)own);
            Expansion sub = {inner->decl, name, own, args, groups, ex->site, ex->use, ex->budget};
            count += expand_use(r, &sub, out);
            continue;
        }
        if (--*ex->budget < 0)
            return count;
        ModelItem *it = ast_new_instance_item(r->arena, part->span, name, part->op, argv, ex->use);
        it->site = ex->site;
        it->groups = groups;
        if (name.name != own)
            it->alias = own;
        ptrvec_push(r->arena, out, it);
        count++;
    }
    return count;
}

static PtrVec expand_items(Resolver *r, const PtrVec *items) {
    PtrVec out = {0};
    for (int i = 0; i < items->count; ++i) {
        const ModelItem *it = items->items[i];
        const Composite *c = it->kind == MITEM_INSTANCE ? find_composite(r, it->op.name) : NULL;
        if (it->kind == MITEM_LAYER) {
            ModelItem *copy = ARENA_NEW(r->arena, ModelItem);
            *copy = *it;
            copy->items = expand_items(r, &it->items);
            ptrvec_push(r->arena, &out, copy);
            continue;
        }
        if (!c) {
            ptrvec_push(r->arena, &out, (void *)it);
            continue;
        }
        ModelItem *check = ARENA_NEW(r->arena, ModelItem);
        *check = *it;
        check->kind = MITEM_COMPOSITE;
        check->composite = c->decl;
        ptrvec_push(r->arena, &out, check);
        if (!c->ok || it->args.count != c->decl->params.count)
            continue; /* reported by the check */
        int budget = COMPOSE_MAX_PARTS;
        Expansion ex = {c->decl, it->name, it->name.name, (const Ident *const *)it->args.items,
                        {0},     it,       it->use,       &budget};
        ptrvec_push(r->arena, &ex.groups, (void *)it->name.name);
        check->nparts = expand_use(r, &ex, &out);
        if (budget < 0) {
            diag_error(r->sink, it->span, "composite '%s' expands into more than %d instances",
                       c->decl->name.name, COMPOSE_MAX_PARTS);
            out.count -= check->nparts; /* the check alone remains, and fails */
            check->nparts = 0;
            check->composite = NULL;
        }
    }
    return out;
}

const ModelDecl *compose_model(Resolver *r, const ModelDecl *decl) {
    for (int i = 0; i + 1 < r->composed.count; i += 2)
        if (r->composed.items[i] == decl)
            return r->composed.items[i + 1];
    if (!uses_composite(r, &decl->items))
        return decl;
    ModelDecl *copy = ARENA_NEW(r->arena, ModelDecl);
    *copy = *decl;
    copy->items = expand_items(r, &decl->items);
    ptrvec_push(r->arena, &r->composed, (void *)decl);
    ptrvec_push(r->arena, &r->composed, copy);
    return copy;
}
