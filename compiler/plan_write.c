/*
 * plan_write.c — a chosen plan as .prime text (see plan_write.h).
 */
#define _DEFAULT_SOURCE /* realpath */
#include "plan_write.h"

#include <stdlib.h>
#include <string.h>

/* One written instance: the model's instance items in order, and for
 * each the `use` text its copies were given. */
typedef struct Written {
    const ModelItem *item;
    const PtrVec *block;
    const char *use;
    int copies_differ; /* copies of a layer were given different partitions */
} Written;

typedef struct Walk {
    Written *w;
    int n, cap;
    int next;       /* the next resolved instance */
    int body_first; /* the layer body's first written instance */
    const Model *m;
    const char *const *uses;
} Walk;

static void walk_block(Walk *wk, const PtrVec *block) {
    for (int i = 0; i < block->count; ++i) {
        const ModelItem *it = block->items[i];
        if (it->kind == MITEM_INSTANCE && wk->n < wk->cap) {
            Written *w = &wk->w[wk->n++];
            w->item = it;
            w->block = block;
            w->use = wk->next < wk->m->ninstances ? wk->uses[wk->next] : NULL;
            wk->next++;
        } else if (it->kind == MITEM_LAYER) {
            int first = wk->n;
            wk->body_first = first;
            walk_block(wk, &it->items);
            int size = wk->n - first;
            /* The other copies: the same written instances again. */
            int copies = wk->m->layer_count > 0 ? wk->m->layer_count : 1;
            for (int l = 1; l < copies; ++l) {
                for (int k = 0; k < size; ++k, ++wk->next) {
                    Written *w = &wk->w[first + k];
                    if (wk->next < wk->m->ninstances && w->use &&
                        strcmp(w->use, wk->uses[wk->next]))
                        w->copies_differ = 1;
                }
            }
        }
    }
}

static int count_items(const PtrVec *block) {
    int n = 0;
    for (int i = 0; i < block->count; ++i) {
        const ModelItem *it = block->items[i];
        n += it->kind == MITEM_INSTANCE;
        if (it->kind == MITEM_LAYER)
            n += count_items(&it->items);
    }
    return n;
}

/* The parameter the model's first input's first dimension is (the
 * tokens a data-parallel replica divides), or NULL. */
static Sym token_param(const PtrVec *items) {
    for (int i = 0; i < items->count; ++i) {
        const ModelItem *it = items->items[i];
        if (it->kind == MITEM_INPUT && it->dims.count) {
            const Expr *d = it->dims.items[0];
            return d->kind == EXPR_NAME ? d->name : NULL;
        }
    }
    return NULL;
}

/* The name of a parameter that a model's layer block repeats by, or NULL
 * (no layer block, or a count that is not a parameter's name). */
static Sym layer_param(const PtrVec *items) {
    for (int i = 0; i < items->count; ++i) {
        const ModelItem *it = items->items[i];
        if (it->kind == MITEM_LAYER)
            return it->repeat && it->repeat->kind == EXPR_NAME ? it->repeat->name : NULL;
    }
    return NULL;
}

/* A mesh axis name the mesh does not have, for the stages. */
static const char *stage_axis_name(const Mesh *mesh) {
    static const char *const names[] = {"p", "stage", "pipe"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; ++k) {
        int taken = 0;
        for (int a = 0; a < mesh->naxes; ++a)
            taken |= !strcmp(mesh->names[a], names[k]);
        if (!taken)
            return names[k];
    }
    return "pipeline_stage";
}

static void write_header(FILE *f, const Model *m, const Mesh *mesh, const PlanWriteSpec *w,
                         int merged) {
    int dp = w->dp;
    if (w->stages > 0)
        fprintf(f,
                "// Training plan chosen by `primec plan --training` for '%s': %ld layers on\n"
                "// %d devices, %d pipeline stage%s%s%s of %d device%s each, times %d\n"
                "// data-parallel replica%s%s%s;\n"
                "// %ld micro-batch%s of %ld %s%s in 1F1B's order%s.\n"
                "// Check it with `primec check`.\n",
                m->name, w->layers, mesh->ndev * w->stages * dp, w->stages,
                w->stages == 1 ? "" : "s", w->stages > 1 ? " along mesh axis " : "",
                w->stages > 1 ? stage_axis_name(mesh) : "", mesh->ndev, mesh->ndev == 1 ? "" : "s",
                dp, dp == 1 ? "" : "s", merged ? " along mesh axis " : "",
                merged ? mesh->names[w->replica_axis] : "", w->micro_batches,
                w->micro_batches == 1 ? "" : "es", w->micro_tokens, w->batch ? "sequence" : "token",
                w->micro_tokens == 1 ? "" : "s",
                w->recompute ? ",\n// each stage's forward recomputed before its backward" : "");
    else if (merged)
        fprintf(f,
                "// Plan chosen by `primec plan` for '%s': %d devices as %d data-parallel\n"
                "// replicas of the searched mesh, written as its axis %s %d times longer:\n"
                "// every instance splits the tokens along it, so the program runs all the\n"
                "// replicas and all-reduces the weight gradients across them. Check it with\n"
                "// `primec check`.\n",
                m->name, mesh->ndev * dp, dp, mesh->names[w->replica_axis], dp);
    else
        fprintf(f,
                "// Plan chosen by `primec plan` for '%s': %d devices as %d data-parallel\n"
                "// replica%s of the mesh below. Check it with `primec check`.\n",
                m->name, mesh->ndev * dp, dp, dp == 1 ? "" : "s");
    if (merged && w->stages > 0)
        fprintf(f, "// The batch is split over the replicas and the program all-reduces the\n"
                   "// weight gradients across them.\n");
    if (dp > 1 && !merged)
        fprintf(f,
                "// The run is one replica: its activations hold 1/%d of the tokens. The\n"
                "// all-reduce of weight gradients across the replicas is in the plan's cost\n"
                "// but not in this program.\n",
                dp);
    if (w->stages > 0)
        fprintf(f, "// The optimizer step%s is in the plan's cost but not in this program.\n",
                w->vocab ? " and the LM head" : "");
}

int plan_write_spec(FILE *f, const Model *m, const char *const *uses, const Mesh *mesh,
                    const PlanWriteSpec *w, const char *source, Arena *arena) {
    const ModelDecl *src = m->source ? m->source : m->decl;
    Walk wk = {0};
    wk.cap = count_items(&src->items);
    wk.w = ARENA_ARRAY(arena, Written, wk.cap + 1);
    wk.m = m;
    wk.uses = uses;
    walk_block(&wk, &src->items);
    const int dp = w->dp;
    const int merged = dp > 1 && w->replica_axis >= 0 && w->replica_axis < mesh->naxes;
    Sym token = token_param(&src->items), layers = layer_param(&src->items);
    if (w->stages > 0 && (!token || !layers))
        return 0;
    write_header(f, m, mesh, w, merged);
    if (wk.next != m->ninstances)
        fprintf(f, "// warning: the model's layers do not map onto its written instances.\n");
    /* The default: the most common partition. */
    const char *dflt = NULL;
    int best = 0;
    for (int i = 0; i < wk.n; ++i) {
        int c = 0;
        for (int j = 0; j < wk.n; ++j)
            c += wk.w[j].use && wk.w[i].use && !strcmp(wk.w[i].use, wk.w[j].use);
        if (c > best) {
            best = c;
            dflt = wk.w[i].use;
        }
    }
    fprintf(f, "import \"%s\";\n\nplan %s_planned of %s on mesh(", source, m->name, src->name.name);
    if (w->stages > 1)
        fprintf(f, "%s: %d, ", stage_axis_name(mesh), w->stages);
    for (int a = 0; a < mesh->naxes; ++a)
        fprintf(f, "%s%s: %ld", a ? ", " : "", mesh->names[a],
                mesh->sizes[a] * (merged && a == w->replica_axis ? dp : 1));
    fprintf(f, ") {\n");
    if (w->stages > 0) {
        if (w->stages > 1)
            fprintf(f, "    stages %s;\n", stage_axis_name(mesh));
        if (w->micro_batches > 1 || w->recompute)
            fprintf(f, "    microbatches %s: %ld order 1f1b%s;\n", token, w->micro_batches,
                    w->recompute ? " recompute" : "");
    }
    if (dflt)
        fprintf(f, "    default use %s;\n", dflt);
    /* Runs of consecutive instances of one block with one partition. */
    for (int i = 0; i < wk.n;) {
        const Written *w = &wk.w[i];
        int j = i;
        while (j + 1 < wk.n && wk.w[j + 1].block == w->block && wk.w[j + 1].use && w->use &&
               !strcmp(wk.w[j + 1].use, w->use) && !wk.w[j + 1].copies_differ)
            ++j;
        if (w->use && (!dflt || strcmp(w->use, dflt))) {
            if (j > i)
                fprintf(f, "    %s .. %s use %s;\n", w->item->name.name, wk.w[j].item->name.name,
                        w->use);
            else
                fprintf(f, "    %s use %s;\n", w->item->name.name, w->use);
        }
        i = j + 1;
    }
    /* Copies of a layer planned apart: a rule for each copy that differs
     * from the first. */
    for (int l = 1; m->layer_count > 1 && l < m->layer_count; ++l) {
        for (int k = 0; k < m->layer_size; ++k) {
            int first = m->layer_first + k, at = first + l * m->layer_size;
            if (at < m->ninstances && strcmp(uses[first], uses[at]))
                fprintf(f, "    %s_%d use %s;\n", wk.w[wk.body_first + k].item->name.name, l,
                        uses[at]);
        }
    }
    fprintf(f, "}\n\nrun %s_planned = %s_planned on %s", m->name, m->name, src->name.name);
    for (int p = 0; p < m->nparams; ++p) {
        long v = m->param_values[p];
        if (w->stages > 0 && m->param_names[p] == layers)
            v = w->layers;
        else if (w->stages > 0 && m->param_names[p] == token)
            v = w->micro_tokens * w->micro_batches;
        else if (m->param_names[p] == token && dp > 1 && !merged)
            v /= dp;
        fprintf(f, "%s%s = %ld", p ? ", " : "(", m->param_names[p], v);
    }
    fprintf(f, "%s;\n", m->nparams ? ")" : "");
    return 1;
}

void plan_write_prime(FILE *f, const Model *m, const char *const *uses, const Mesh *mesh, int dp,
                      int replica_axis, const char *source, Arena *arena) {
    PlanWriteSpec w = {0};
    w.dp = dp;
    w.replica_axis = replica_axis;
    (void)plan_write_spec(f, m, uses, mesh, &w, source, arena);
}

/* Splits an absolute path into its components (in place); their count. */
static int components(char *path, char **out, int cap) {
    int n = 0;
    for (char *tok = strtok(path, "/"); tok && n < cap; tok = strtok(NULL, "/"))
        out[n++] = tok;
    return n;
}

const char *plan_relative_path(Arena *arena, const char *target, const char *from) {
    const char *dir = ".";
    if (from) {
        char *copy = arena_strdup(arena, from);
        char *slash = strrchr(copy, '/');
        if (slash == copy)
            dir = "/";
        else if (slash)
            *slash = '\0', dir = copy;
    }
    char *t = realpath(target, NULL), *d = realpath(dir, NULL);
    const char *rel = target;
    enum { MAX_PARTS = 256 };
    char *tp[MAX_PARTS], *dp[MAX_PARTS];
    if (t && d) {
        int nt = components(t, tp, MAX_PARTS), nd = components(d, dp, MAX_PARTS);
        int common = 0;
        while (common < nt - 1 && common < nd && !strcmp(tp[common], dp[common]))
            ++common;
        rel = "";
        for (int i = common; i < nd; ++i)
            rel = arena_printf(arena, "%s../", rel);
        for (int i = common; i < nt; ++i)
            rel = arena_printf(arena, "%s%s%s", rel, tp[i], i + 1 < nt ? "/" : "");
    }
    free(t);
    free(d);
    return rel;
}
