/*
 * import_hf.c — `primec import`: a Hugging Face config.json as a .prime
 * model (import_hf.h).
 *
 * The file is read into a SourceMap, so that diagnostics go through the
 * one diagnostics path with the line of the file and an underline, and is
 * parsed by jansson. jansson keeps no positions of values, so
 * field_span() finds a top-level field in the text (which jansson has
 * already accepted as JSON) to point at it.
 *
 * Each family is a table: the names its configs give each field (BLOOM's
 * early configs write n_embed and n_head, later ones hidden_size), the
 * defaults of optional fields, and the layer body of its example's
 * Megatron-LM model. Reading a config fills one ImportShape; checking it
 * reports every field that is wrong before anything is written.
 */
#define _POSIX_C_SOURCE 200809L
#include "import_hf.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "source.h"

enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_USAGE = 2 };

/* The largest value a size field may take: far above any published model
 * (vocabularies of 256k, contexts of 128k), low enough that products of
 * a few sizes stay exact in the compiler's 64-bit arithmetic. */
#define IMPORT_MAX_SIZE (1L << 24)

typedef enum Family { FAMILY_OPT, FAMILY_LLAMA, FAMILY_BLOOM, FAMILY_COUNT } Family;

/* A size field: the names configs use for it, first the preferred one. */
typedef struct Field {
    const char *names[3];
} Field;

typedef struct FamilyInfo {
    const char *model_type;   /* config.json's "model_type" */
    const char *architecture; /* the usual "architectures" entry */
    const char *title;        /* "OPT" */
    const char *example;      /* the example with this layer */
    Field hidden, heads, kv_heads, head_dim, ffn, layers, vocab, positions;
    const char *const *body; /* the layer's statements, one per line */
} FamilyInfo;

static const char *const opt_body[] = {"weight g1[h];",
                                       "weight b1[h];",
                                       "weight wq[h, a, e];",
                                       "weight bq[a, e];",
                                       "weight wk[h, a, e];",
                                       "weight wv[h, a, e];",
                                       "weight bv[a, e];",
                                       "weight wo[a, e, h];",
                                       "weight bo[h];",
                                       "weight g2[h];",
                                       "weight b2[h];",
                                       "weight w1[h, f];",
                                       "weight c1[f];",
                                       "weight w2[f, h];",
                                       "weight c2[h];",
                                       "m1 = norm_mean(x) use replicate;",
                                       "v1 = norm_var(x, m1) use replicate;",
                                       "n1 = norm_apply(x, m1, v1) use replicate;",
                                       "l1 = scale_shift(n1, g1, b1) use replicate;",
                                       "q = proj_heads_bias(l1, wq, bq) use heads;",
                                       "k = proj_heads(l1, wk) use heads;",
                                       "v = proj_heads_bias(l1, wv, bv) use heads;",
                                       "sc = scores(q, k) use heads;",
                                       "sb = causal_bound(sc) use heads;",
                                       "ex = causal_exp_shift(sc, sb) use heads;",
                                       "z = softmax_sum(ex) use heads;",
                                       "pr = softmax_div(ex, z) use heads;",
                                       "o = attend(pr, v) use heads;",
                                       "ao = out_heads(o, wo) use heads;",
                                       "at = bias(ao, bo) use replicate;",
                                       "r1 = add(at, x) use replicate;",
                                       "m2 = norm_mean(r1) use replicate;",
                                       "v2 = norm_var(r1, m2) use replicate;",
                                       "n2 = norm_apply(r1, m2, v2) use replicate;",
                                       "l2 = scale_shift(n2, g2, b2) use replicate;",
                                       "hd = linear(l2, w1, c1) use column;",
                                       "ac = relu(hd) use cols;",
                                       "mo = matmul(ac, w2) use row;",
                                       "ml = bias(mo, c2) use replicate;",
                                       "y = add(ml, r1) use replicate;",
                                       NULL};

/* BLOOM's layer is OPT's with ALiBi in the softmax and GELU in the MLP. */
static const char *const bloom_body[] = {"weight g1[h];",
                                         "weight b1[h];",
                                         "weight wq[h, a, e];",
                                         "weight bq[a, e];",
                                         "weight wk[h, a, e];",
                                         "weight wv[h, a, e];",
                                         "weight bv[a, e];",
                                         "weight wo[a, e, h];",
                                         "weight bo[h];",
                                         "weight g2[h];",
                                         "weight b2[h];",
                                         "weight w1[h, f];",
                                         "weight c1[f];",
                                         "weight w2[f, h];",
                                         "weight c2[h];",
                                         "m1 = norm_mean(x) use replicate;",
                                         "v1 = norm_var(x, m1) use replicate;",
                                         "n1 = norm_apply(x, m1, v1) use replicate;",
                                         "l1 = scale_shift(n1, g1, b1) use replicate;",
                                         "q = proj_heads_bias(l1, wq, bq) use heads;",
                                         "k = proj_heads(l1, wk) use heads;",
                                         "v = proj_heads_bias(l1, wv, bv) use heads;",
                                         "sc = scores(q, k) use heads;",
                                         "sb = alibi_causal_bound(sc) use heads;",
                                         "ex = alibi_causal_exp_shift(sc, sb) use heads;",
                                         "z = softmax_sum(ex) use heads;",
                                         "pr = softmax_div(ex, z) use heads;",
                                         "o = attend(pr, v) use heads;",
                                         "ao = out_heads(o, wo) use heads;",
                                         "at = bias(ao, bo) use replicate;",
                                         "r1 = add(at, x) use replicate;",
                                         "m2 = norm_mean(r1) use replicate;",
                                         "v2 = norm_var(r1, m2) use replicate;",
                                         "n2 = norm_apply(r1, m2, v2) use replicate;",
                                         "l2 = scale_shift(n2, g2, b2) use replicate;",
                                         "hd = linear(l2, w1, c1) use column;",
                                         "ac = gelu(hd) use cols;",
                                         "mo = matmul(ac, w2) use row;",
                                         "ml = bias(mo, c2) use replicate;",
                                         "y = add(ml, r1) use replicate;",
                                         NULL};

static const char *const llama_body[] = {"weight g1[h];",
                                         "weight wq[h, g, r, c, p];",
                                         "weight wk[h, g, c, p];",
                                         "weight wv[h, g, e];",
                                         "weight wo[g, r, e, h];",
                                         "weight g2[h];",
                                         "weight w1[h, f];",
                                         "weight w3[h, f];",
                                         "weight w2[f, h];",
                                         "ms1 = rms_meansq(x) use replicate;",
                                         "l1 = rms_apply(x, ms1, g1) use replicate;",
                                         "q = proj_q(l1, wq) use heads;",
                                         "k = proj_k(l1, wk) use heads;",
                                         "v = proj_heads(l1, wv) use heads;",
                                         "sc = scores_rope_gqa(q, k) use heads;",
                                         "sb = causal_bound_gqa(sc) use heads;",
                                         "ex = causal_exp_shift_gqa(sc, sb) use heads;",
                                         "z = softmax_sum_gqa(ex) use heads;",
                                         "pr = softmax_div_gqa(ex, z) use heads;",
                                         "o = attend_gqa(pr, v) use heads;",
                                         "at = out_gqa(o, wo) use heads;",
                                         "r1 = add(at, x) use replicate;",
                                         "ms2 = rms_meansq(r1) use replicate;",
                                         "l2 = rms_apply(r1, ms2, g2) use replicate;",
                                         "u1 = matmul(l2, w1) use column;",
                                         "u3 = matmul(l2, w3) use column;",
                                         "sw = swiglu(u1, u3) use cols;",
                                         "ml = matmul(sw, w2) use row;",
                                         "y = add(ml, r1) use replicate;",
                                         NULL};

#define F(...)                                                                                     \
    {                                                                                              \
        { __VA_ARGS__ }                                                                            \
    }
static const FamilyInfo families[FAMILY_COUNT] = {
    [FAMILY_OPT] = {"opt", "OPTForCausalLM", "OPT", "examples/opt_layer.prime", F("hidden_size"),
                    F("num_attention_heads"), F(NULL), F(NULL), F("ffn_dim"),
                    F("num_hidden_layers"), F("vocab_size"), F("max_position_embeddings"),
                    opt_body},
    [FAMILY_LLAMA] = {"llama", "LlamaForCausalLM", "Llama", "examples/llama2_layer.prime",
                      F("hidden_size"), F("num_attention_heads"), F("num_key_value_heads"),
                      F("head_dim"), F("intermediate_size"), F("num_hidden_layers"),
                      F("vocab_size"), F("max_position_embeddings", "max_sequence_length"),
                      llama_body},
    [FAMILY_BLOOM] = {"bloom", "BloomForCausalLM", "BLOOM", "examples/bloom_layer.prime",
                      F("hidden_size", "n_embed"), F("n_head", "num_attention_heads"), F(NULL),
                      F(NULL), F("n_inner"), F("n_layer", "num_hidden_layers"), F("vocab_size"),
                      F("seq_length"), bloom_body},
};
#undef F

/* BLOOM uses ALiBi, so its config has no position table: the sequence
 * defaults to the length it was trained on. */
#define BLOOM_SEQ_DEFAULT 2048
/* The RoPE base of the stdlib's attention (stdlib/transformer.prime). */
#define STDLIB_ROPE_THETA 10000.0

/* What the written model needs. */
typedef struct ImportShape {
    Family family;
    const char *architecture; /* architectures[0], or NULL */
    long hidden, heads, kv_heads, head_dim, ffn, layers, vocab, positions;
    int has_positions;
    double rope_theta; /* 0 when the config gives none */
} ImportShape;

/* One config being read. */
typedef struct Reader {
    DiagSink *sink;
    const SourceFile *src;
    uint32_t file;
    json_t *root;
} Reader;

/* ------------------------------------------------------------------ */
/* Positions of fields in the text                                     */

static size_t skip_ws(const char *t, size_t n, size_t i) {
    while (i < n && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r'))
        ++i;
    return i;
}

/* t[i] is the opening quote; returns the index after the closing one. */
static size_t skip_string(const char *t, size_t n, size_t i) {
    for (++i; i < n && t[i] != '"'; ++i)
        if (t[i] == '\\')
            ++i;
    return i < n ? i + 1 : n;
}

static size_t skip_value(const char *t, size_t n, size_t i) {
    if (i < n && t[i] == '"')
        return skip_string(t, n, i);
    if (i < n && (t[i] == '{' || t[i] == '[')) {
        int depth = 0;
        while (i < n) {
            if (t[i] == '"') {
                i = skip_string(t, n, i);
                continue;
            }
            if (t[i] == '{' || t[i] == '[')
                ++depth;
            else if ((t[i] == '}' || t[i] == ']') && --depth == 0)
                return i + 1;
            ++i;
        }
        return n;
    }
    while (i < n && !strchr(",}] \t\r\n", t[i]))
        ++i;
    return i;
}

/* The span of the top-level object (its opening brace). */
static Span root_span(const Reader *r) {
    uint32_t lo = (uint32_t)skip_ws(r->src->text, r->src->len, 0);
    return (Span){r->file, lo, lo + 1};
}

/* The span of the value of top-level field `key` (a name without
 * escapes), or of the object's opening brace when it is absent. */
static Span field_span(const Reader *r, const char *key) {
    const char *t = r->src->text;
    size_t n = r->src->len, klen = strlen(key);
    size_t i = skip_ws(t, n, 0);
    if (i >= n || t[i] != '{')
        return root_span(r);
    for (i = skip_ws(t, n, i + 1); i < n && t[i] == '"'; i = skip_ws(t, n, i + 1)) {
        size_t key_lo = i + 1;
        i = skip_string(t, n, i);
        int match = i - 1 - key_lo == klen && memcmp(t + key_lo, key, klen) == 0;
        i = skip_ws(t, n, i);
        if (i < n && t[i] == ':')
            i = skip_ws(t, n, i + 1);
        size_t value_lo = i;
        i = skip_value(t, n, i);
        if (match)
            return (Span){r->file, (uint32_t)value_lo, (uint32_t)i};
        i = skip_ws(t, n, i);
        if (i >= n || t[i] != ',')
            break;
    }
    return root_span(r);
}

/* ------------------------------------------------------------------ */
/* Fields                                                              */

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number with a fraction or exponent";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

/* The first of the field's names the config has (null counts as absent),
 * or NULL. */
static const char *field_name(const Reader *r, const Field *f, json_t **value) {
    for (int i = 0; i < 3 && f->names[i]; ++i) {
        json_t *v = json_object_get(r->root, f->names[i]);
        if (v && !json_is_null(v)) {
            *value = v;
            return f->names[i];
        }
    }
    return NULL;
}

/* Reads a size field into *out: 1 if present and valid, 0 if absent
 * (reported when `what` is not NULL, i.e. the field is required), -1 if
 * present but invalid (reported). */
static int read_size(const Reader *r, const Field *f, const char *what, long *out) {
    json_t *v = NULL;
    const char *name = field_name(r, f, &v);
    if (!name) {
        if (what && f->names[0]) {
            Span s = root_span(r);
            if (f->names[1])
                diag_error(r->sink, s, "the config has no '%s' (or '%s'): %s", f->names[0],
                           f->names[1], what);
            else
                diag_error(r->sink, s, "the config has no '%s': %s", f->names[0], what);
        }
        return 0;
    }
    Span s = field_span(r, name);
    if (!json_is_integer(v)) {
        diag_error(r->sink, s, "'%s' must be a positive integer, not %s", name, json_kind(v));
        return -1;
    }
    json_int_t x = json_integer_value(v);
    if (x < 1 || x > IMPORT_MAX_SIZE) {
        diag_error(r->sink, s,
                   "'%s' must be a positive integer of at most %ld, not %" JSON_INTEGER_FORMAT,
                   name, IMPORT_MAX_SIZE, x);
        return -1;
    }
    *out = (long)x;
    return 1;
}

/* A field of the config that selects a variant of the layer the stdlib
 * does not have: a string that must equal `want`, or a boolean. Returns
 * 0 (reported) if it has another value. */
static int check_string(const Reader *r, const char *name, const char *want, const char *why) {
    json_t *v = json_object_get(r->root, name);
    if (!v || json_is_null(v))
        return 1;
    if (!json_is_string(v)) {
        diag_error(r->sink, field_span(r, name), "'%s' must be a string, not %s", name,
                   json_kind(v));
        return 0;
    }
    if (strcmp(json_string_value(v), want) == 0)
        return 1;
    diag_error(r->sink, field_span(r, name), "'%s' is \"%s\": the stdlib's layer %s", name,
               json_string_value(v), why);
    return 0;
}

static int check_bool(const Reader *r, const char *name, int want, const char *why) {
    json_t *v = json_object_get(r->root, name);
    if (!v || json_is_null(v))
        return 1;
    if (!json_is_boolean(v)) {
        diag_error(r->sink, field_span(r, name), "'%s' must be true or false, not %s", name,
                   json_kind(v));
        return 0;
    }
    if (json_is_true(v) == want)
        return 1;
    diag_error(r->sink, field_span(r, name), "'%s' is %s: the stdlib's layer %s", name,
               want ? "false" : "true", why);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Families                                                            */

/* The family from "model_type", else from "architectures"; reported and
 * -1 when neither names one primec reads. */
static int read_family(const Reader *r, ImportShape *shape) {
    json_t *archs = json_object_get(r->root, "architectures");
    if (archs && !json_is_array(archs)) {
        diag_error(r->sink, field_span(r, "architectures"),
                   "'architectures' must be an array of strings, not %s", json_kind(archs));
        return -1;
    }
    json_t *arch0 = archs ? json_array_get(archs, 0) : NULL;
    if (arch0 && !json_is_string(arch0)) {
        diag_error(r->sink, field_span(r, "architectures"),
                   "'architectures' must be an array of strings; its first entry is %s",
                   json_kind(arch0));
        return -1;
    }
    shape->architecture = arch0 ? json_string_value(arch0) : NULL;
    json_t *type = json_object_get(r->root, "model_type");
    if (type && !json_is_string(type)) {
        diag_error(r->sink, field_span(r, "model_type"), "'model_type' must be a string, not %s",
                   json_kind(type));
        return -1;
    }
    const char *field = type ? "model_type" : "architectures";
    const char *name = type ? json_string_value(type) : shape->architecture;
    if (!name) {
        diag_error(r->sink, root_span(r),
                   "the config has no 'model_type' or 'architectures': cannot tell its family "
                   "(primec import reads opt, llama and bloom)");
        return -1;
    }
    for (int f = 0; f < FAMILY_COUNT; ++f) {
        const char *want = type ? families[f].model_type : families[f].architecture;
        if (strcmp(name, want) == 0) {
            shape->family = (Family)f;
            return f;
        }
    }
    diag_error(r->sink, field_span(r, field),
               "unsupported architecture: '%s' is \"%s\" (primec import reads the opt, llama and "
               "bloom families)",
               field, name);
    return -1;
}

/* Reads every field of the family; 0 if any was reported. */
static int read_shape(const Reader *r, ImportShape *shape) {
    const FamilyInfo *fi = &families[shape->family];
    int ok = 1;
    ok &= read_size(r, &fi->hidden, "the hidden size", &shape->hidden) > 0;
    ok &= read_size(r, &fi->heads, "the number of attention heads", &shape->heads) > 0;
    ok &= read_size(r, &fi->layers, "the number of layers", &shape->layers) > 0;
    ok &= read_size(r, &fi->vocab, "the vocabulary size", &shape->vocab) > 0;
    int has_ffn = read_size(r, &fi->ffn, shape->family == FAMILY_BLOOM ? NULL : "the MLP's width",
                            &shape->ffn);
    ok &= has_ffn >= 0 && (has_ffn > 0 || shape->family == FAMILY_BLOOM);
    int has_pos = read_size(r, &fi->positions,
                            shape->family == FAMILY_BLOOM ? NULL : "the number of positions",
                            &shape->positions);
    ok &= has_pos >= 0 && (has_pos > 0 || shape->family == FAMILY_BLOOM);
    shape->has_positions = has_pos > 0;
    int has_kv = read_size(r, &fi->kv_heads, NULL, &shape->kv_heads);
    int has_hd = read_size(r, &fi->head_dim, NULL, &shape->head_dim);
    ok &= has_kv >= 0 && has_hd >= 0;
    if (!ok)
        return 0;
    if (has_kv == 0)
        shape->kv_heads = shape->heads;
    if (shape->family == FAMILY_BLOOM && has_ffn == 0)
        shape->ffn = 4 * shape->hidden; /* BLOOM's n_inner: null means 4h */
    if (has_hd == 0) {
        if (shape->hidden % shape->heads != 0) {
            const char *heads = shape->family == FAMILY_BLOOM && json_object_get(r->root, "n_head")
                                    ? "n_head"
                                    : "num_attention_heads";
            const char *hidden =
                json_object_get(r->root, "hidden_size") ? "hidden_size" : "n_embed";
            diag_error(r->sink, field_span(r, heads),
                       "%ld heads do not divide the hidden size %ld: the heads have no whole "
                       "dimension",
                       shape->heads, shape->hidden);
            diag_note(r->sink, field_span(r, hidden), "the hidden size");
            return 0;
        }
        shape->head_dim = shape->hidden / shape->heads;
    }
    return 1;
}

/* The checks of the values that only together make a model, and of the
 * variants of a family the stdlib's layer is not; 0 if any failed. */
static int check_shape(const Reader *r, ImportShape *shape) {
    int ok = 1;
    switch (shape->family) {
    case FAMILY_OPT:
        ok &= check_bool(r, "do_layer_norm_before", 1,
                         "normalises before attention and MLP (pre-LayerNorm), as every OPT but "
                         "OPT-350m");
        ok &= check_string(r, "activation_function", "relu", "has a ReLU MLP");
        break;
    case FAMILY_BLOOM:
        ok &= check_bool(r, "apply_residual_connection_post_layernorm", 0,
                         "adds the residual before the LayerNorm");
        break;
    case FAMILY_LLAMA:
        ok &= check_string(r, "hidden_act", "silu", "has a SwiGLU MLP (silu)");
        if (shape->heads % shape->kv_heads != 0) {
            diag_error(r->sink, field_span(r, "num_key_value_heads"),
                       "%ld key/value heads do not divide the %ld query heads", shape->kv_heads,
                       shape->heads);
            diag_note(r->sink, field_span(r, "num_attention_heads"), "the query heads");
            ok = 0;
        }
        if (shape->head_dim % 2 != 0) {
            diag_error(r->sink,
                       field_span(r, json_object_get(r->root, "head_dim") ? "head_dim"
                                                                          : "num_attention_heads"),
                       "the head dimension %ld is odd: rotary embeddings rotate pairs",
                       shape->head_dim);
            ok = 0;
        }
        json_t *theta = json_object_get(r->root, "rope_theta");
        if (theta && !json_is_number(theta)) {
            diag_error(r->sink, field_span(r, "rope_theta"),
                       "'rope_theta' must be a number, not %s", json_kind(theta));
            ok = 0;
        } else if (theta) {
            shape->rope_theta = json_number_value(theta);
        }
        break;
    case FAMILY_COUNT:
        break;
    }
    return ok;
}

/* ------------------------------------------------------------------ */
/* The model                                                           */

typedef struct ImportOptions {
    const char *config, *model, *out;
    long devices, seq, layers; /* seq, layers 0: the config's */
} ImportOptions;

/* The dimension the Megatron-LM plan splits over the devices besides the
 * MLP's: the heads, or for Llama the key/value heads (each device keeps
 * the query heads of its groups). */
static long split_heads(const ImportShape *shape) {
    return shape->family == FAMILY_LLAMA ? shape->kv_heads : shape->heads;
}

static void write_model(FILE *out, const ImportShape *sh, const ImportOptions *opt, long seq) {
    const FamilyInfo *fi = &families[sh->family];
    fprintf(out, "// %s model from %s (model_type \"%s\"", fi->title, opt->config, fi->model_type);
    if (sh->architecture)
        fprintf(out, ", %s", sh->architecture);
    fprintf(out,
            "),\n// written by `primec import`: the stdlib's %s decoder layer (as in\n"
            "// %s) at the config's shape, with the Megatron-LM\n// plan on %ld device%s.\n//\n",
            fi->title, fi->example, opt->devices, opt->devices == 1 ? "" : "s");
    if (sh->family == FAMILY_LLAMA)
        fprintf(out, "//   hidden %ld, %ld query heads of %ld in %ld key/value groups of %ld,\n",
                sh->hidden, sh->heads, sh->head_dim, sh->kv_heads, sh->heads / sh->kv_heads);
    else
        fprintf(out, "//   hidden %ld, %ld heads of %ld,\n", sh->hidden, sh->heads, sh->head_dim);
    fprintf(out, "//   ffn %ld, %ld layers, vocabulary %ld,\n", sh->ffn, sh->layers, sh->vocab);
    if (sh->has_positions)
        fprintf(out, "//   %ld positions; sequence s = %ld\n", sh->positions, seq);
    else
        fprintf(out, "//   no position table (ALiBi); sequence s = %ld\n", seq);
    if (sh->rope_theta != 0 && sh->rope_theta != STDLIB_ROPE_THETA)
        fprintf(out,
                "//   rope_theta %g: the stdlib's RoPE uses %g (the shapes, bytes and costs are "
                "the same)\n",
                sh->rope_theta, STDLIB_ROPE_THETA);
    fprintf(out, "model %s {\n", opt->model);
    if (sh->family == FAMILY_LLAMA)
        fprintf(out,
                "    param layers = %ld, s = %ld, h = %ld, g = %ld, r = %ld, e = %ld, c = 2, p = "
                "%ld, f = %ld;\n",
                sh->layers, seq, sh->hidden, sh->kv_heads, sh->heads / sh->kv_heads, sh->head_dim,
                sh->head_dim / 2, sh->ffn);
    else
        fprintf(out, "    param layers = %ld, s = %ld, h = %ld, a = %ld, e = %ld, f = %ld;\n",
                sh->layers, seq, sh->hidden, sh->heads, sh->head_dim, sh->ffn);
    if (sh->has_positions)
        fprintf(out, "    param vocab = %ld, positions = %ld;\n", sh->vocab, sh->positions);
    else
        fprintf(out, "    param vocab = %ld;\n", sh->vocab);
    fprintf(out, "    mesh(d: %ld);\n    input x[s, h];\n    layer(x -> y) repeat layers {\n",
            opt->devices);
    for (const char *const *line = fi->body; *line; ++line)
        fprintf(out, "        %s\n", *line);
    fprintf(out, "    }\n}\n");
}

/* Where jansson stopped: its position is the byte after the token it
 * names in `near 'TOKEN'`, so the span is that token (or the end). */
static Span json_error_span(const Reader *r, const json_error_t *err) {
    size_t hi = err->position > 0 ? (size_t)err->position : 0;
    if (hi > r->src->len)
        hi = r->src->len;
    size_t lo = hi;
    const char *near = strstr(err->text, "near '");
    const char *close = near ? strrchr(near + 6, '\'') : NULL;
    if (close && (size_t)(close - (near + 6)) <= hi)
        lo = hi - (size_t)(close - (near + 6));
    if (lo == hi && lo > 0 && hi == r->src->len)
        --lo; /* the end of the file: its last byte */
    return (Span){r->file, (uint32_t)lo, (uint32_t)(hi > lo ? hi : lo + 1)};
}

/* Reads and checks the config; 1 with *shape filled, else 0 (reported). */
static int read_config(Reader *r, ImportShape *shape, const ImportOptions *opt, long *seq) {
    json_error_t err;
    r->root = json_loadb(r->src->text, r->src->len, JSON_REJECT_DUPLICATES, &err);
    if (!r->root) {
        diag_error(r->sink, json_error_span(r, &err), "not valid JSON: %s", err.text);
        return 0;
    }
    if (!json_is_object(r->root)) {
        diag_error(r->sink, root_span(r), "a config.json is a JSON object, not %s",
                   json_kind(r->root));
        return 0;
    }
    if (read_family(r, shape) < 0 || !read_shape(r, shape) || !check_shape(r, shape))
        return 0;
    if (opt->layers)
        shape->layers = opt->layers;
    *seq = opt->seq ? opt->seq : shape->has_positions ? shape->positions : BLOOM_SEQ_DEFAULT;
    const char *heads = shape->family == FAMILY_LLAMA ? "key/value heads" : "heads";
    if (split_heads(shape) % opt->devices != 0 || shape->ffn % opt->devices != 0) {
        diag_error_plain(r->sink,
                         "--devices %ld must divide the %ld %s and the MLP's width %ld, which "
                         "the Megatron-LM plan splits over the devices",
                         opt->devices, split_heads(shape), heads, shape->ffn);
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* The command line                                                    */

static void import_usage(FILE *out) {
    fputs("usage: primec import CONFIG.json [--model NAME] [--devices N] [--seq N] [--layers N]\n"
          "                     [-o FILE]\n"
          "\n"
          "Writes a .prime model of the stdlib's decoder layer at the shape of a Hugging Face\n"
          "config.json (model_type opt, llama or bloom; see docs/import.md).\n"
          "\n"
          "  --model NAME   the model's name (default: the config's model_type)\n"
          "  --devices N    the Megatron-LM plan's devices, mesh(d: N) (default: 1)\n"
          "  --seq N        the sequence length s (default: the config's positions; BLOOM: 2048)\n"
          "  --layers N     the number of layers (default: the config's)\n"
          "  -o FILE        write FILE instead of standard output\n",
          out);
}

static int is_identifier(const char *s) {
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
        return 0;
    for (; *s; ++s)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9')))
            return 0;
    return 1;
}

static int parse_count(const char *opt, const char *v, long *out) {
    char *end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (!*v || *end || errno || n < 1 || n > IMPORT_MAX_SIZE) {
        fprintf(stderr, "primec: error: %s takes a whole number from 1 to %ld, not '%s'\n", opt,
                IMPORT_MAX_SIZE, v);
        return 0;
    }
    *out = n;
    return 1;
}

/* 1: options read; 0: a usage error (reported); -1: --help (printed). */
static int parse_args(int argc, char **argv, ImportOptions *opt) {
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            import_usage(stdout);
            return -1;
        }
        if (strcmp(a, "--model") == 0 || strcmp(a, "--devices") == 0 || strcmp(a, "--seq") == 0 ||
            strcmp(a, "--layers") == 0 || strcmp(a, "-o") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "primec: error: option '%s' needs a value\n", a);
                return 0;
            }
            const char *v = argv[++i];
            if (strcmp(a, "--model") == 0)
                opt->model = v;
            else if (strcmp(a, "-o") == 0)
                opt->out = v;
            else if (!parse_count(a, v,
                                  strcmp(a, "--seq") == 0      ? &opt->seq
                                  : strcmp(a, "--layers") == 0 ? &opt->layers
                                                               : &opt->devices))
                return 0;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "primec: error: unknown option '%s'\n", a);
            import_usage(stderr);
            return 0;
        } else if (!opt->config) {
            opt->config = a;
        } else {
            fprintf(stderr, "primec: error: unexpected argument '%s'\n", a);
            return 0;
        }
    }
    if (!opt->config) {
        import_usage(stderr);
        return 0;
    }
    if (opt->model && !is_identifier(opt->model)) {
        fprintf(stderr,
                "primec: error: --model takes a name (a letter or '_', then letters, digits or "
                "'_'), not '%s'\n",
                opt->model);
        return 0;
    }
    return 1;
}

/* Writes the model to opt->out (or stdout); 0 on an I/O error (reported). */
static int emit(const ImportShape *shape, const ImportOptions *opt, long seq) {
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem) {
        fprintf(stderr, "primec: error: out of memory\n");
        return 0;
    }
    write_model(mem, shape, opt, seq);
    int ok = fclose(mem) == 0;
    FILE *out = opt->out ? fopen(opt->out, "wb") : stdout;
    if (ok && out) {
        ok = fwrite(text, 1, len, out) == len;
        ok &= opt->out ? fclose(out) == 0 : fflush(out) == 0 && !ferror(out);
    } else {
        ok = 0;
    }
    if (!ok)
        fprintf(stderr, "primec: error: cannot write '%s': %s\n",
                opt->out ? opt->out : "the output", errno ? strerror(errno) : "write error");
    free(text);
    return ok;
}

int import_main(int argc, char **argv) {
    ImportOptions opt = {NULL, NULL, NULL, 1, 0, 0};
    int parsed = parse_args(argc, argv, &opt);
    if (parsed <= 0)
        return parsed < 0 ? EXIT_OK : EXIT_USAGE;
    Arena *arena = arena_create();
    SourceMap sources;
    source_map_init(&sources, arena);
    int id = source_load(&sources, opt.config);
    if (id < 0) {
        fprintf(stderr, "primec: error: cannot open '%s': %s\n", opt.config, strerror(errno));
        arena_destroy(arena);
        return EXIT_USAGE;
    }
    DiagSink sink;
    diag_init(&sink, &sources, arena, stderr);
    Reader r = {&sink, source_get(&sources, (uint32_t)id), (uint32_t)id, NULL};
    ImportShape shape = {0};
    long seq = 0;
    int rc = EXIT_OK;
    if (!read_config(&r, &shape, &opt, &seq)) {
        diag_finish(&sink);
        rc = EXIT_INPUT;
    } else {
        if (!opt.model)
            opt.model = families[shape.family].model_type;
        errno = 0;
        if (!emit(&shape, &opt, seq))
            rc = EXIT_USAGE;
    }
    json_decref(r.root);
    arena_destroy(arena);
    return rc;
}
