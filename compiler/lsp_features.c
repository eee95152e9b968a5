/*
 * lsp_features.c — go-to-definition and completion (lsp_internal.h).
 *
 * Definition reads the document's syntax tree: an operator's name (in a
 * model's call or a partition's `of`) leads to its `op`, a tensor or
 * dimension in an operator's body to its parameter or first mention, a partition's
 * name after `use` to the `partition` of that operator, a tensor's name
 * to the input, weight, instance or layer that introduces it in the
 * enclosing scope, a size parameter to its `param`.
 *
 * Completion after `use` lists the partitions of the operator the
 * statement calls, every file of the compilation included (the standard
 * library's too). The statement does not parse while the name is being
 * typed, so the document is analysed again up to resolve with the
 * unfinished `use ...` cut out (and a ';' put in its place when the
 * statement has none yet).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "lsp_internal.h"

const Instance *lsp_instance_at(const Compilation *c, uint32_t file, uint32_t offset,
                                const Model **model) {
    for (int i = 0; i < c->module.models.count; ++i) {
        const Model *m = c->module.models.items[i];
        if (!m->decl || m->decl->span.file != file)
            continue;
        for (int k = 0; k < m->ninstances; ++k) {
            if (lsp_span_has(m->instances[k].span, file, offset)) {
                *model = m;
                return &m->instances[k];
            }
        }
    }
    return NULL;
}

static const Program *doc_program(const Compilation *c, uint32_t file) {
    for (int i = 0; i < c->programs.count; ++i) {
        const Program *p = c->programs.items[i];
        if (p && p->file == file)
            return p;
    }
    return NULL;
}

static const OpDecl *find_op(const Compilation *c, const char *name) {
    for (int i = 0; i < c->programs.count; ++i) {
        const Program *p = c->programs.items[i];
        for (int k = 0; p && k < p->decls.count; ++k) {
            const Decl *d = p->decls.items[k];
            if (d->kind == DECL_OP && strcmp(d->op->name.name, name) == 0)
                return d->op;
        }
    }
    return NULL;
}

/* Does the partition's `of` list name op (any operator when op is NULL)? */
static int partition_of(const PartitionDecl *p, const char *op) {
    if (!op)
        return 1;
    for (int i = 0; i < p->of_ops.count; ++i)
        if (strcmp(((const Ident *)p->of_ops.items[i])->name, op) == 0)
            return 1;
    return 0;
}

/* The partition `name` of operator `op` (any operator when op is NULL):
 * one that names op after `of`, else a partition by role of that name. */
static const PartitionDecl *find_partition(const Compilation *c, const char *name, const char *op) {
    const PartitionDecl *role = NULL;
    for (int i = 0; i < c->programs.count; ++i) {
        const Program *p = c->programs.items[i];
        for (int k = 0; p && k < p->decls.count; ++k) {
            const Decl *d = p->decls.items[k];
            if (d->kind != DECL_PARTITION || strcmp(d->partition->name.name, name) != 0)
                continue;
            if (!d->partition->of_ops.count && !role)
                role = d->partition;
            else if (d->partition->of_ops.count && partition_of(d->partition, op))
                return d->partition;
        }
    }
    return role;
}

/* Model scopes: a model's items, then each enclosing layer's. */
#define SCOPE_MAX 32
typedef struct Scope {
    const PtrVec *items[SCOPE_MAX];
    const ModelItem *layer[SCOPE_MAX]; /* the layer whose items these are; NULL for the model */
    int depth;
} Scope;

/* Where `name` is introduced, innermost scope first. */
static const Ident *scope_find(const Scope *sc, const char *name) {
    for (int s = sc->depth - 1; s >= 0; --s) {
        const PtrVec *items = sc->items[s];
        for (int i = 0; i < items->count; ++i) {
            const ModelItem *it = items->items[i];
            int intro = it->kind == MITEM_INPUT || it->kind == MITEM_WEIGHT ||
                        it->kind == MITEM_INSTANCE || it->kind == MITEM_PARAM;
            if (intro && strcmp(it->name.name, name) == 0)
                return &it->name;
            if (it->kind == MITEM_LAYER && strcmp(it->layer_out.name, name) == 0)
                return &it->layer_out;
        }
        if (sc->layer[s] && strcmp(sc->layer[s]->layer_in.name, name) == 0)
            return &sc->layer[s]->layer_in;
    }
    return NULL;
}

static int ident_has(const Ident *id, uint32_t file, uint32_t off) {
    return id->name && lsp_span_has(id->span, file, off);
}

/* The declaration a name at `off` in a model's items refers to. */
static const Ident *items_definition(const Compilation *c, Scope *sc, const PtrVec *items,
                                     const ModelItem *layer, uint32_t file, uint32_t off) {
    if (sc->depth == SCOPE_MAX)
        return NULL;
    sc->items[sc->depth] = items;
    sc->layer[sc->depth] = layer;
    sc->depth++;
    const Ident *found = NULL;
    for (int i = 0; i < items->count && !found; ++i) {
        const ModelItem *it = items->items[i];
        if (!lsp_span_has(it->span, file, off))
            continue;
        if (it->kind == MITEM_INSTANCE) {
            const OpDecl *op = it->op.name ? find_op(c, it->op.name) : NULL;
            if (ident_has(&it->op, file, off))
                found = op ? &op->name : NULL;
            else if (it->use && ident_has(&it->use->partition, file, off)) {
                const PartitionDecl *p = find_partition(c, it->use->partition.name, it->op.name);
                found = p ? &p->name : NULL;
            }
            for (int a = 0; a < it->args.count && !found; ++a) {
                const Ident *arg = it->args.items[a];
                if (ident_has(arg, file, off))
                    found = scope_find(sc, arg->name);
            }
        } else if (it->kind == MITEM_INPUT || it->kind == MITEM_WEIGHT) {
            for (int x = 0; x < it->dims.count && !found; ++x) {
                const Expr *e = it->dims.items[x];
                if (e->kind == EXPR_NAME && lsp_span_has(e->span, file, off))
                    found = scope_find(sc, e->name);
            }
        } else if (it->kind == MITEM_LAYER) {
            if (ident_has(&it->layer_in, file, off)) {
                sc->depth--;
                found = scope_find(sc, it->layer_in.name);
                sc->depth++;
            } else {
                found = items_definition(c, sc, &it->items, it, file, off);
            }
        }
        if (!found && ident_has(&it->name, file, off))
            found = &it->name;
    }
    sc->depth--;
    return found;
}

/* In an operator: a tensor's name leads to its parameter or result, a
 * dimension's name to its first mention in the signature. */
static const Ident *op_tensor(const OpDecl *op, const char *name) {
    for (int i = 0; i < op->params.count; ++i) {
        const TensorParam *tp = op->params.items[i];
        if (strcmp(tp->name.name, name) == 0)
            return &tp->name;
    }
    return op->result && strcmp(op->result->name.name, name) == 0 ? &op->result->name : NULL;
}

static const Ident *op_dim(const OpDecl *op, const char *name) {
    for (int i = 0; i <= op->params.count; ++i) {
        const TensorParam *tp = i < op->params.count ? op->params.items[i] : op->result;
        for (int x = 0; tp && x < tp->dims.count; ++x) {
            const Ident *d = tp->dims.items[x];
            if (strcmp(d->name, name) == 0)
                return d;
        }
    }
    return NULL;
}

static const Ident *dims_definition(const OpDecl *op, const PtrVec *dims, uint32_t file,
                                    uint32_t off) {
    for (int x = 0; x < dims->count; ++x)
        if (ident_has(dims->items[x], file, off))
            return op_dim(op, ((const Ident *)dims->items[x])->name);
    return NULL;
}

/* Expressions are at most AST_MAX_EXPR_DEPTH deep (the parser's limit). */
static const Ident *expr_definition(const OpDecl *op, const Expr *e, uint32_t file, uint32_t off) {
    if (!e || !lsp_span_has(e->span, file, off))
        return NULL;
    switch (e->kind) {
    case EXPR_NAME: {
        const Ident *t = op_tensor(op, e->name);
        return t ? t : op_dim(op, e->name);
    }
    case EXPR_INDEX:
        if (lsp_span_has(e->name_span, file, off))
            return op_tensor(op, e->name);
        return dims_definition(op, &e->args, file, off);
    case EXPR_BINARY: {
        const Ident *l = expr_definition(op, e->lhs, file, off);
        return l ? l : expr_definition(op, e->rhs, file, off);
    }
    case EXPR_NEG:
        return expr_definition(op, e->lhs, file, off);
    case EXPR_CALL:
    case EXPR_RADIX:
        for (int i = 0; i < e->args.count; ++i) {
            const Ident *a = expr_definition(op, e->args.items[i], file, off);
            if (a)
                return a;
        }
        return NULL;
    default:
        return NULL;
    }
}

/* In a composite's parts: an operator, an input or an earlier part. */
static const Ident *part_definition(const Compilation *c, const OpDecl *op, uint32_t file,
                                    uint32_t off) {
    for (int i = 0; i < op->parts.count; ++i) {
        const ModelItem *part = op->parts.items[i];
        if (!lsp_span_has(part->span, file, off))
            continue;
        if (ident_has(&part->name, file, off))
            return &part->name;
        if (ident_has(&part->op, file, off)) {
            const OpDecl *callee = find_op(c, part->op.name);
            return callee ? &callee->name : NULL;
        }
        for (int a = 0; a < part->args.count; ++a) {
            const Ident *arg = part->args.items[a];
            if (!ident_has(arg, file, off))
                continue;
            for (int k = 0; k < i; ++k)
                if (((const ModelItem *)op->parts.items[k])->name.name == arg->name)
                    return &((const ModelItem *)op->parts.items[k])->name;
            const Ident *t = op_tensor(op, arg->name);
            return t;
        }
    }
    return NULL;
}

static const Ident *op_definition(const Compilation *c, const OpDecl *op, uint32_t file,
                                  uint32_t off) {
    if (op->is_composite) {
        const Ident *p = part_definition(c, op, file, off);
        if (p)
            return p;
    }
    if (ident_has(&op->name, file, off))
        return &op->name;
    for (int i = 0; i <= op->params.count; ++i) {
        const TensorParam *tp = i < op->params.count ? op->params.items[i] : op->result;
        if (!tp)
            continue;
        if (ident_has(&tp->name, file, off))
            return &tp->name;
        const Ident *d = dims_definition(op, &tp->dims, file, off);
        if (d)
            return d;
    }
    for (int i = 0; i < op->body.count; ++i) {
        const Stmt *st = op->body.items[i];
        if (!lsp_span_has(st->span, file, off))
            continue;
        if (ident_has(&st->target, file, off))
            return op_tensor(op, st->target.name);
        const Ident *d = dims_definition(op, &st->target_dims, file, off);
        return d ? d : expr_definition(op, st->value, file, off);
    }
    return NULL;
}

static const Ident *definition_at(const Compilation *c, uint32_t file, uint32_t off) {
    const Program *prog = doc_program(c, file);
    for (int i = 0; prog && i < prog->decls.count; ++i) {
        const Decl *d = prog->decls.items[i];
        if (!lsp_span_has(d->span, file, off))
            continue;
        if (d->kind == DECL_PARTITION) {
            const PartitionDecl *p = d->partition;
            for (int o = 0; o < p->of_ops.count; ++o) {
                const Ident *of = p->of_ops.items[o];
                if (ident_has(of, file, off)) {
                    const OpDecl *op = find_op(c, of->name);
                    return op ? &op->name : NULL;
                }
            }
            if (ident_has(&p->name, file, off))
                return &p->name;
        } else if (d->kind == DECL_OP) {
            return op_definition(c, d->op, file, off);
        } else if (d->kind == DECL_MODEL) {
            Scope sc = {.depth = 0};
            const Ident *found = items_definition(c, &sc, &d->model->items, NULL, file, off);
            if (found)
                return found;
            if (ident_has(&d->model->name, file, off))
                return &d->model->name;
        }
    }
    return NULL;
}

json_t *lsp_definition(const LspDoc *doc, int line, int character) {
    if (!doc->c || !doc->sf)
        return json_null();
    uint32_t off = lsp_offset(doc->sf, line, character);
    const Ident *def = definition_at(doc->c, doc->file, off);
    json_t *loc = def ? lsp_location(doc, doc->c, def->span) : NULL;
    return loc ? loc : json_null();
}

/* ------------------------------------------------------------------ */
/* Completion */

static int is_ident(int ch) {
    return isalnum(ch) || ch == '_';
}

/* If the text before `off` ends in `use NAME-PREFIX`, the offset of `use`
 * and of the prefix. */
static int after_use(const char *text, uint32_t off, uint32_t *use_at, uint32_t *prefix_at) {
    uint32_t p = off;
    while (p > 0 && is_ident((unsigned char)text[p - 1]))
        p--;
    *prefix_at = p;
    uint32_t q = p;
    while (q > 0 && isspace((unsigned char)text[q - 1]))
        q--;
    if (q == p || q < 3 || strncmp(text + q - 3, "use", 3) != 0)
        return 0;
    if (q > 3 && is_ident((unsigned char)text[q - 4]))
        return 0;
    *use_at = q - 3;
    return 1;
}

/* The operator called by the statement that ends before `at`: the
 * NAME of `= NAME(` after the last ';', '{' or '}'. */
static char *called_op(const char *text, uint32_t at) {
    uint32_t start = at;
    while (start > 0 && !strchr(";{}", text[start - 1]))
        start--;
    const char *eq = memchr(text + start, '=', at - start);
    if (!eq)
        return NULL;
    const char *p = eq + 1;
    while (p < text + at && isspace((unsigned char)*p))
        p++;
    const char *name = p;
    while (p < text + at && is_ident((unsigned char)*p))
        p++;
    size_t n = (size_t)(p - name);
    while (p < text + at && isspace((unsigned char)*p))
        p++;
    if (n == 0 || p >= text + at || *p != '(')
        return NULL;
    char *out = malloc(n + 1);
    if (out) {
        memcpy(out, name, n);
        out[n] = 0;
    }
    return out;
}

static char *axes_text(const PtrVec *axes) {
    size_t cap = 64 + 64 * (size_t)axes->count, n = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    out[0] = 0;
    for (int a = 0; a < axes->count; ++a) {
        const AxisDecl *ax = axes->items[a];
        const Expr *sz = ax->size;
        n += (size_t)snprintf(out + n, cap - n, "%s%.40s: ", a ? ", " : "", ax->name.name);
        if (sz->kind == EXPR_INT)
            n += (size_t)snprintf(out + n, cap - n, "%ld", sz->value);
        else
            n += (size_t)snprintf(out + n, cap - n, "%.16s", sz->name ? sz->name : "?");
    }
    return out;
}

/* One completion item for a partition of the operator. */
static json_t *partition_item(const Partition *p) {
    const PartitionDecl *d = p->decl;
    char *mesh = axes_text(&d->mesh);
    char detail[256];
    if (d->steps) {
        PtrVec one = {.items = (void **)&d->steps, .count = 1};
        char *steps = axes_text(&one);
        snprintf(detail, sizeof detail, "partition of %s on mesh(%s) steps(%s)", p->op->name,
                 mesh ? mesh : "", steps ? steps : "");
        free(steps);
    } else {
        snprintf(detail, sizeof detail, "partition of %s on mesh(%s)", p->op->name,
                 mesh ? mesh : "");
    }
    free(mesh);
    /* CompletionItemKind 7: Class, the closest to "a strategy". */
    return json_pack("{s:s, s:i, s:o}", "label", p->name, "kind", 7, "detail", lsp_string(detail));
}

/* The operators of a composite's primitive parts (nested composites
 * expanded; a cycle, an error the analysis reports, is cut at depth 16). */
static int part_ops(const Compilation *c, const OpDecl *op, const char **ops, int n, int cap,
                    int depth) {
    for (int i = 0; i < op->parts.count && depth < 16; ++i) {
        const ModelItem *part = op->parts.items[i];
        const OpDecl *callee = find_op(c, part->op.name);
        if (callee && callee->is_composite)
            n = part_ops(c, callee, ops, n, cap, depth + 1);
        else if (n < cap)
            ops[n++] = part->op.name;
    }
    return n;
}

static int has_partition_named(const Compilation *c, const char *op, const char *name) {
    for (int i = 0; i < c->module.partitions.count; ++i) {
        const Partition *p = c->module.partitions.items[i];
        if (p->op && strcmp(p->op->name, op) == 0 && strcmp(p->name, name) == 0)
            return 1;
    }
    return 0;
}

/* For a composite's use: the partitions every part's operator has (a
 * `use` on the use is given to each part), from its first part's. */
static void composite_items(const Compilation *c, const OpDecl *op, json_t *items) {
    const char *ops[256];
    int n = part_ops(c, op, ops, 0, 256, 0);
    for (int i = 0; n && i < c->module.partitions.count; ++i) {
        const Partition *p = c->module.partitions.items[i];
        if (!p->op || strcmp(p->op->name, ops[0]) != 0)
            continue;
        int all = 1;
        for (int k = 1; k < n && all; ++k)
            all = has_partition_named(c, ops[k], p->name);
        if (all)
            json_array_append_new(items, json_pack("{s:s, s:i, s:s+}", "label", p->name, "kind", 7,
                                                   "detail", "partition of every part of ",
                                                   op->name.name));
    }
}

json_t *lsp_completion(const LspDoc *doc, int line, int character) {
    json_t *items = json_array();
    if (!doc->c || !doc->sf)
        return items;
    uint32_t off = lsp_offset(doc->sf, line, character);
    uint32_t use_at, prefix_at;
    if (!after_use(doc->text, off, &use_at, &prefix_at))
        return items;
    char *op = called_op(doc->text, use_at);
    if (!op)
        return items;
    /* The text without the unfinished `use NAME`, the statement ended by
     * a ';' if it has none yet. */
    uint32_t end = off;
    while (end < doc->len && is_ident((unsigned char)doc->text[end]))
        end++;
    uint32_t next = end;
    while (next < doc->len && isspace((unsigned char)doc->text[next]))
        next++;
    int add_semi = next >= doc->len || doc->text[next] != ';';
    size_t len = use_at + (size_t)add_semi + (doc->len - end);
    char *text = malloc(len + 1);
    if (!text) {
        free(op);
        return items;
    }
    memcpy(text, doc->text, use_at);
    if (add_semi)
        text[use_at] = ';';
    memcpy(text + use_at + add_semi, doc->text + end, doc->len - end);
    text[len] = 0;
    const SourceFile *sf;
    uint32_t file;
    Compilation *c = lsp_analyse(doc->path, text, len, "resolve", &sf, &file);
    const OpDecl *composite = c ? find_op(c, op) : NULL;
    if (composite && composite->is_composite)
        composite_items(c, composite, items);
    for (int i = 0; c && i < c->module.partitions.count; ++i) {
        const Partition *p = c->module.partitions.items[i];
        if (p->op && strcmp(p->op->name, op) == 0)
            json_array_append_new(items, partition_item(p));
    }
    lsp_analysis_free(c);
    free(text);
    free(op);
    return items;
}
