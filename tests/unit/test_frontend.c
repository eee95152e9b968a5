/*
 * test_frontend.c — unit tests of the front end: arena, source map,
 * diagnostics, lexer, parser and AST printing.
 *
 * Diagnostics are captured by pointing the sink at an open_memstream
 * buffer, so the tests assert the exact text a user would see.
 *
 * Built twice (tests/frontend.cmake): as test_frontend against
 * primec_core, and with FRONTEND_ARENA_ONLY as a check of the arena in
 * PRIMEC_ARENA_MALLOC mode whatever mode primec_core was built in.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"

#ifndef FRONTEND_ARENA_ONLY
#include "ast.h"
#include "diag.h"
#include "parse.h"
#include "parser.h"
#include "source.h"
#include "stdlib_embed.h"
#endif

/* ---- arena ------------------------------------------------------------ */

static void test_arena_intern(void **state) {
    (void)state;
    Arena *a = arena_create();
    char buf1[] = "matmul", buf2[] = "matmul_extra";
    const char *x = arena_intern(a, buf1, 6);
    const char *y = arena_intern(a, buf2, 6); /* the prefix "matmul" */
    const char *z = arena_intern(a, buf2, 12);
    assert_ptr_equal(x, y);
    assert_ptr_not_equal(x, z);
    assert_string_equal(x, "matmul");
    assert_string_equal(z, "matmul_extra");
    assert_ptr_not_equal(x, buf1); /* a copy, owned by the arena */
    /* Equality survives the table growing. */
    const char *names[2000];
    for (int i = 0; i < 2000; i++) {
        char tmp[32];
        int n = snprintf(tmp, sizeof tmp, "n%d", i);
        names[i] = arena_intern(a, tmp, (size_t)n);
    }
    for (int i = 0; i < 2000; i++) {
        char tmp[32];
        int n = snprintf(tmp, sizeof tmp, "n%d", i);
        assert_ptr_equal(arena_intern(a, tmp, (size_t)n), names[i]);
        assert_string_equal(names[i], tmp);
    }
    assert_ptr_equal(arena_intern(a, "matmul", 6), x);
    assert_ptr_equal(arena_intern(a, "", 0), arena_intern(a, "x", 0));
    arena_destroy(a);
}

static void test_arena_alloc(void **state) {
    (void)state;
    Arena *a = arena_create();
    /* Sizes around and far beyond a chunk; every block is zeroed,
     * aligned and writable to its last byte. */
    size_t sizes[] = {0, 1, 3, 8, 15, 16, 17, 100, 4096, 65535, 65536, 65537, 300000, 7};
    for (int round = 0; round < 50; round++) {
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i];
            unsigned char *p = arena_alloc(a, n);
            assert_non_null(p);
            assert_int_equal((uintptr_t)p % _Alignof(max_align_t), 0);
            for (size_t j = 0; j < n; j++)
                assert_int_equal(p[j], 0);
            if (n)
                memset(p, 0xAB, n);
        }
    }
    char *s = arena_strndup(a, "abcdef", 3);
    assert_string_equal(s, "abc");
    assert_string_equal(arena_strdup(a, "xyz"), "xyz");
    assert_string_equal(arena_printf(a, "%s-%d", "k", 42), "k-42");
    PtrVec v = {0};
    for (int i = 0; i < 1000; i++)
        ptrvec_push(a, &v, (void *)(intptr_t)(i + 1));
    assert_int_equal(v.count, 1000);
    for (int i = 0; i < 1000; i++)
        assert_int_equal((intptr_t)v.items[i], i + 1);
    arena_destroy(a);
    arena_destroy(NULL);
}

#ifndef FRONTEND_ARENA_ONLY

/* ---- fixture: one source text parsed with captured diagnostics -------- */

typedef struct Fx {
    Arena *arena;
    SourceMap map;
    DiagSink sink;
    FILE *fp;
    char *out;
    size_t outlen;
    uint32_t file;
    Program *program;
} Fx;

static Fx *fx_new(const char *name, const char *text, size_t len) {
    Fx *fx = calloc(1, sizeof(Fx));
    assert_non_null(fx);
    fx->arena = arena_create();
    source_map_init(&fx->map, fx->arena);
    fx->fp = open_memstream(&fx->out, &fx->outlen);
    assert_non_null(fx->fp);
    diag_init(&fx->sink, &fx->map, fx->arena, fx->fp);
    fx->file = source_add(&fx->map, name, text, len);
    return fx;
}

static Fx *fx_parse(const char *text) {
    Fx *fx = fx_new("t.prime", text, strlen(text));
    fx->program = parse_file(fx->arena, &fx->map, fx->file, &fx->sink);
    assert_non_null(fx->program);
    return fx;
}

/* Everything printed so far, with diag_finish's summary when finish. */
static const char *fx_output(Fx *fx, int finish) {
    if (finish)
        diag_finish(&fx->sink);
    fflush(fx->fp);
    return fx->out ? fx->out : "";
}

static char *fx_dump(Fx *fx) {
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    ast_dump_program(fx->program, fp);
    fclose(fp);
    return buf;
}

static void fx_free(Fx *fx) {
    fclose(fx->fp);
    free(fx->out);
    arena_destroy(fx->arena);
    free(fx);
}

static void assert_parses_to(const char *text, const char *dump) {
    Fx *fx = fx_parse(text);
    assert_string_equal(fx_output(fx, 0), "");
    assert_int_equal(fx->sink.error_count, 0);
    char *got = fx_dump(fx);
    assert_string_equal(got, dump);
    free(got);
    fx_free(fx);
}

static void assert_errors(const char *text, const char *expected) {
    Fx *fx = fx_parse(text);
    assert_string_equal(fx_output(fx, 1), expected);
    fx_free(fx);
}

static void span_line_col(Fx *fx, Span s, int *line, int *col) {
    source_line_col(source_get(&fx->map, s.file), s.lo, line, col);
}

static char *span_text(Fx *fx, Span s) {
    const SourceFile *f = source_get(&fx->map, s.file);
    return arena_strndup(fx->arena, f->text + s.lo, s.hi - s.lo);
}

static char *expr_text(const Expr *e) {
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    ast_print_expr(e, fp);
    fclose(fp);
    return buf;
}

/* ---- lexer ------------------------------------------------------------ */

typedef struct Lexed {
    int kind;
    Span span;
    YYSTYPE val;
} Lexed;

static int lex_all(Fx *fx, Lexed *toks, int max) {
    ParseCtx ctx;
    parse_ctx_init(&ctx, fx->arena, &fx->map, fx->file, &fx->sink);
    int n = 0;
    for (;;) {
        assert_true(n < max);
        toks[n].kind = yylex(&toks[n].val, &toks[n].span, &ctx);
        if (toks[n++].kind == TOK_YYEOF)
            return n;
    }
}

static void test_lex_tokens(void **state) {
    (void)state;
    const char *text = "op partition of on mesh steps model param input weight use strict import\n"
                       "x_1 _Y9 42 \"a\\\"b\\\\c\" ( ) [ ] { } , ; : = += -> + - * / % ^ // c\n"
                       "/* block\n comment */ opx 007";
    Fx *fx = fx_new("t.prime", text, strlen(text));
    Lexed t[64];
    int n = lex_all(fx, t, 64);
    const int kinds[] = {TOK_OP,     TOK_PARTITION, TOK_OF,    TOK_ON,      TOK_MESH,   TOK_STEPS,
                         TOK_MODEL,  TOK_PARAM,     TOK_INPUT, TOK_WEIGHT,  TOK_USE,    TOK_STRICT,
                         TOK_IMPORT, TOK_IDENT,     TOK_IDENT, TOK_INT,     TOK_STRING, '(',
                         ')',        '[',           ']',       '{',         '}',        ',',
                         ';',        ':',           '=',       TOK_PLUS_EQ, TOK_ARROW,  '+',
                         '-',        '*',           '/',       '%',         '^',        TOK_IDENT,
                         TOK_INT,    TOK_YYEOF};
    int nk = (int)(sizeof kinds / sizeof kinds[0]);
    assert_int_equal(n, nk);
    for (int i = 0; i < nk; i++)
        assert_int_equal(t[i].kind, kinds[i]);
    assert_string_equal(t[13].val.sym, "x_1");
    assert_string_equal(t[14].val.sym, "_Y9");
    assert_int_equal(t[15].val.num, 42);
    assert_string_equal(t[16].val.str, "a\"b\\c");
    assert_string_equal(t[35].val.sym, "opx"); /* a keyword prefix is no keyword */
    assert_int_equal(t[36].val.num, 7);
    /* Spans are byte ranges: "steps" is bytes 24..29 of line 1. */
    assert_int_equal(t[5].span.lo, 24);
    assert_int_equal(t[5].span.hi, 29);
    /* The string's span includes its quotes. */
    assert_string_equal(span_text(fx, t[16].span), "\"a\\\"b\\\\c\"");
    assert_string_equal(span_text(fx, t[27].span), "+=");
    int line, col;
    span_line_col(fx, t[35].span, &line, &col);
    assert_int_equal(line, 4);
    assert_int_equal(col, 13);
    /* Identifiers are interned. */
    assert_ptr_equal(t[13].val.sym, arena_intern(fx->arena, "x_1", 3));
    assert_int_equal(fx->sink.error_count, 0);
    fx_free(fx);
}

static void test_lex_eof_span(void **state) {
    (void)state;
    /* End of file is placed just after the last line's text. */
    Fx *fx = fx_new("t.prime", "x\n", 2);
    Lexed t[4];
    int n = lex_all(fx, t, 4);
    assert_int_equal(n, 2);
    assert_int_equal(t[1].kind, TOK_YYEOF);
    assert_int_equal(t[1].span.lo, 1);
    assert_int_equal(t[1].span.hi, 1);
    fx_free(fx);
}

static void test_lex_unknown_char(void **state) {
    (void)state;
    assert_errors("op f(X[m]) -> Y[m] { Y = X @ X; }\n",
                  "t.prime:1:28: error: unexpected character '@'\n"
                  "op f(X[m]) -> Y[m] { Y = X @ X; }\n"
                  "                           ^\n"
                  "t.prime:1:30: error: unexpected identifier 'X', expecting ';' or '(' or '[' or "
                  "an operator\n"
                  "op f(X[m]) -> Y[m] { Y = X @ X; }\n"
                  "                             ^\n"
                  "2 errors generated.\n");
    /* Non-printable bytes are escaped; a NUL inside the file is not its
     * end; UTF-8 is named by code point; lexing continues after each. */
    static const char text[] = "model m { \x01 strict; \0 \xe2\x80\x8b strict; \xff }";
    Fx *fx = fx_new("t.prime", text, sizeof text - 1);
    fx->program = parse_file(fx->arena, &fx->map, fx->file, &fx->sink);
    assert_int_equal(fx->sink.error_count, 4);
    assert_string_equal(fx->sink.items[0].message, "unexpected character '\\x01'");
    assert_string_equal(fx->sink.items[1].message, "unexpected character '\\0'");
    assert_string_equal(fx->sink.items[2].message, "unexpected character U+200B");
    assert_int_equal(fx->sink.items[2].span.hi - fx->sink.items[2].span.lo, 3);
    assert_string_equal(fx->sink.items[3].message, "unexpected character '\\xff'");
    assert_int_equal(fx->program->decls.count, 1);
    assert_int_equal(((Decl *)fx->program->decls.items[0])->model->items.count, 2);
    fx_free(fx);
    /* Inside a comment any byte is just text. */
    static const char commented[] = "// \0 \x01 @\n/* \0 \xff */ model m { }";
    fx = fx_new("t.prime", commented, sizeof commented - 1);
    fx->program = parse_file(fx->arena, &fx->map, fx->file, &fx->sink);
    assert_int_equal(fx->sink.count, 0);
    assert_int_equal(fx->program->decls.count, 1);
    fx_free(fx);
}

static void test_lex_unterminated_comment(void **state) {
    (void)state;
    assert_errors(
        "op f(X[m]) -> Y[m] {\n  Y = X; /* note\n  more\n",
        "t.prime:2:10: error: unterminated /* comment\n"
        "  Y = X; /* note\n"
        "         ^~\n"
        "t.prime:3:7: error: unexpected end of file, expecting identifier or 'grad' or '}'\n"
        "  more\n"
        "      ^\n"
        "t.prime:1:20: note: to match this '{'\n"
        "op f(X[m]) -> Y[m] {\n"
        "                   ^\n"
        "2 errors generated.\n");
}

static void test_lex_int_overflow(void **state) {
    (void)state;
    Fx *fx = fx_parse("model m { param a = 9223372036854775807, b = 9223372036854775808; }");
    assert_int_equal(fx->sink.error_count, LONG_MAX == 9223372036854775807L ? 1 : 2);
    if (LONG_MAX == 9223372036854775807L) {
        assert_string_equal(fx_output(fx, 0),
                            "t.prime:1:46: error: integer literal is too large (the largest is "
                            "9223372036854775807)\n"
                            "model m { param a = 9223372036854775807, b = 9223372036854775808; }\n"
                            "                                             ^~~~~~~~~~~~~~~~~~~\n");
        ModelDecl *m = ((Decl *)fx->program->decls.items[0])->model;
        assert_int_equal(((ModelItem *)m->items.items[0])->value->value, LONG_MAX);
    }
    fx_free(fx);
}

static void test_lex_strings(void **state) {
    (void)state;
    Fx *fx = fx_parse("import \"dir/a b.prime\";\nimport \"q\\\"\\\\\";\nimport \"x\\n\";\n"
                      "import \"open\n");
    assert_int_equal(fx->program->decls.count, 3);
    Decl *d = fx->program->decls.items[0];
    assert_int_equal(d->kind, DECL_IMPORT);
    assert_string_equal(d->import->path, "dir/a b.prime");
    assert_string_equal(span_text(fx, d->import->path_span), "\"dir/a b.prime\"");
    assert_string_equal(span_text(fx, d->span), "import \"dir/a b.prime\";");
    d = fx->program->decls.items[1];
    assert_string_equal(d->import->path, "q\"\\");
    assert_string_equal(fx_output(fx, 1),
                        "t.prime:3:10: error: unknown escape sequence '\\n' (only \\\" and \\\\ "
                        "are known)\n"
                        "import \"x\\n\";\n"
                        "         ^~\n"
                        "t.prime:4:8: error: unterminated string literal\n"
                        "import \"open\n"
                        "       ^\n"
                        "t.prime:4:13: error: unexpected end of file, expecting ';'\n"
                        "import \"open\n"
                        "            ^\n"
                        "3 errors generated.\n");
    fx_free(fx);
}

/* ---- parser: constructs ----------------------------------------------- */

static const StdlibFile *find_stdlib(const char *name) {
    for (int i = 0; i < stdlib_file_count; i++)
        if (strcmp(stdlib_files[i].name, name) == 0)
            return &stdlib_files[i];
    return NULL;
}

static void test_parse_stdlib_matmul(void **state) {
    (void)state;
    const StdlibFile *sf = find_stdlib("<stdlib>/matmul.prime");
    assert_non_null(sf);
    Fx *fx = fx_new(sf->name, sf->text, sf->len);
    fx->program = parse_file(fx->arena, &fx->map, fx->file, &fx->sink);
    assert_string_equal(fx_output(fx, 0), "");
    Program *p = fx->program;
    assert_int_equal(p->decls.count, 8); /* matmul and its seven partitions */
    Decl *d0 = p->decls.items[0];
    assert_int_equal(d0->kind, DECL_OP);
    assert_string_equal(d0->op->name.name, "matmul");
    assert_int_equal(d0->op->params.count, 2);
    assert_int_equal(d0->op->body.count, 1);
    Stmt *s = d0->op->body.items[0];
    assert_int_equal(s->kind, STMT_ACCUM);
    assert_int_equal(s->has_dims, 1);
    assert_int_equal(s->target_dims.count, 2);
    const char *names[] = {"replicate", "data", "column", "row", "square", "ring"};
    for (int i = 1; i < 7; i++) {
        Decl *d = p->decls.items[i];
        assert_int_equal(d->kind, DECL_PARTITION);
        assert_string_equal(d->partition->name.name, names[i - 1]);
        /* The operator's name and the partition's "of" are one symbol. */
        assert_ptr_equal(d->partition->of_op.name, d0->op->name.name);
    }
    PartitionDecl *sq = ((Decl *)p->decls.items[5])->partition;
    assert_int_equal(sq->mesh.count, 2);
    assert_non_null(sq->steps);
    assert_string_equal(sq->steps->name.name, "t");
    assert_int_equal(sq->dsis.count, 3);
    DsiAssign *k = sq->dsis.items[2];
    char *txt = expr_text(k->value);
    assert_string_equal(txt, "(i + j + t) % P");
    free(txt);
    assert_string_equal(span_text(fx, k->value->span), "(i + j + t) % P");
    assert_null(((Decl *)p->decls.items[1])->partition->steps);
    assert_int_equal(((Decl *)p->decls.items[1])->partition->dsis.count, 0);

    /* The same text from disk, through source_load. */
    int id = source_load(&fx->map, PRIMEC_STDLIB_DIR "/matmul.prime");
    assert_true(id >= 0);
    const SourceFile *disk = source_get(&fx->map, (uint32_t)id);
    assert_int_equal(disk->len, sf->len);
    assert_memory_equal(disk->text, sf->text, sf->len);
    assert_int_equal(source_load(&fx->map, PRIMEC_STDLIB_DIR "/no-such-file.prime"), -1);
    fx_free(fx);
}

static void test_parse_op(void **state) {
    (void)state;
    assert_parses_to("op matmul(X[m, k], W[k, n]) -> Y[m, n] {\n"
                     "    Y[m, n] += X[m, k] * W[k, n];\n"
                     "}\n"
                     "op gelu(X[m, n]) -> Y[m, n] { Y = gelu(X); }\n"
                     "op norm(X[m, h], g[h], eps[]) -> Y[m, h] {\n"
                     "    s[m] += X[m, h] * X[m, h];\n"
                     "    r[m] = rsqrt(s[m] / 4096 + eps[]);\n"
                     "    t[] = -x ^ y + 1 - -2 * (a - b) % c;\n"
                     "    Y[m, h] = max(X[m, h] * r[m], g[h]);\n"
                     "    u = (dp, i) + (a, b, c * 2);\n"
                     "}\n",
                     "(program\n"
                     "  (op matmul\n"
                     "    (in X [m k])\n"
                     "    (in W [k n])\n"
                     "    (out Y [m n])\n"
                     "    (+= Y [m n] (* (index X m k) (index W k n))))\n"
                     "  (op gelu\n"
                     "    (in X [m n])\n"
                     "    (out Y [m n])\n"
                     "    (= Y (call gelu X)))\n"
                     "  (op norm\n"
                     "    (in X [m h])\n"
                     "    (in g [h])\n"
                     "    (in eps [])\n"
                     "    (out Y [m h])\n"
                     "    (+= s [m] (* (index X m h) (index X m h)))\n"
                     "    (= r [m] (call rsqrt (+ (/ (index s m) 4096) (index eps))))\n"
                     "    (= t [] (^ (neg x) (- (+ y 1) (% (* (neg 2) (- a b)) c))))\n"
                     "    (= Y [m h] (call max (* (index X m h) (index r m)) (index g h)))\n"
                     "    (= u (+ (radix dp i) (radix a b (* c 2))))))\n");
}

static void test_parse_partition(void **state) {
    (void)state;
    assert_parses_to("partition cannon of matmul on mesh(i: p, j: 4) steps(t: p) {\n"
                     "    m = i;  n = j;  k = (i + j + t) % p;\n"
                     "}\n"
                     "partition dp of matmul on mesh(d: P) { m = (d, i); }\n",
                     "(program\n"
                     "  (partition cannon (of matmul)\n"
                     "    (mesh (i p) (j 4))\n"
                     "    (steps (t p))\n"
                     "    (dsi m i)\n"
                     "    (dsi n j)\n"
                     "    (dsi k (% (+ (+ i j) t) p)))\n"
                     "  (partition dp (of matmul)\n"
                     "    (mesh (d P))\n"
                     "    (dsi m (radix d i))))\n");
}

static void test_parse_model(void **state) {
    (void)state;
    assert_parses_to("import \"nn.prime\";\n"
                     "model mm {\n"
                     "    param m = 96, k = 64, n = 2 * 40;\n"
                     "    mesh(i: 2, j: 2);\n"
                     "    input x[m, k];\n"
                     "    weight w[k, n];\n"
                     "    weight b[16];\n"
                     "    y = matmul(x, w) use square;\n"
                     "    z = matmul(y, w) use square(i: j, j: i);\n"
                     "    u = relu(z);\n"
                     "    v = zero();\n"
                     "    strict;\n"
                     "}\n",
                     "(program\n"
                     "  (import \"nn.prime\")\n"
                     "  (model mm\n"
                     "    (param m 96)\n"
                     "    (param k 64)\n"
                     "    (param n (* 2 40))\n"
                     "    (mesh (i 2) (j 2))\n"
                     "    (input x [m k])\n"
                     "    (weight w [k n])\n"
                     "    (weight b [16])\n"
                     "    (instance y (matmul x w) (use square))\n"
                     "    (instance z (matmul y w) (use square (i j) (j i)))\n"
                     "    (instance u (relu z))\n"
                     "    (instance v (zero))\n"
                     "    (strict)))\n");
}

static void test_parse_model_fields(void **state) {
    (void)state;
    Fx *fx = fx_parse("model mm { param m = 96, k = 64; input x[m, 8];\n"
                      "  y = matmul(x, w) use square(i: a); }");
    assert_int_equal(fx->sink.error_count, 0);
    ModelDecl *m = ((Decl *)fx->program->decls.items[0])->model;
    assert_int_equal(m->items.count, 4);
    ModelItem *p0 = m->items.items[0], *p1 = m->items.items[1];
    assert_int_equal(p0->kind, MITEM_PARAM);
    assert_int_equal(p1->kind, MITEM_PARAM);
    assert_string_equal(span_text(fx, p0->span), "m = 96");
    assert_string_equal(span_text(fx, p1->span), "k = 64");
    ModelItem *in = m->items.items[2];
    assert_int_equal(in->kind, MITEM_INPUT);
    assert_int_equal(in->dims.count, 2);
    assert_int_equal(((Expr *)in->dims.items[0])->kind, EXPR_NAME);
    assert_int_equal(((Expr *)in->dims.items[1])->kind, EXPR_INT);
    assert_int_equal(((Expr *)in->dims.items[1])->value, 8);
    ModelItem *y = m->items.items[3];
    assert_int_equal(y->kind, MITEM_INSTANCE);
    assert_string_equal(y->name.name, "y");
    assert_string_equal(y->op.name, "matmul");
    assert_int_equal(y->args.count, 2);
    assert_non_null(y->use);
    assert_string_equal(span_text(fx, y->use->span), "use square(i: a)");
    AxisBinding *b = y->use->bindings.items[0];
    assert_string_equal(b->part_axis.name, "i");
    assert_string_equal(b->mesh_axis.name, "a");
    assert_string_equal(span_text(fx, y->span), "y = matmul(x, w) use square(i: a);");
    fx_free(fx);
}

static void test_parse_empty(void **state) {
    (void)state;
    assert_parses_to("", "(program)\n");
    assert_parses_to("// only a comment\n/* and another */\n", "(program)\n");
    assert_parses_to("model e { }", "(program\n  (model e))\n");
}

/* ---- spans ------------------------------------------------------------ */

static void test_spans(void **state) {
    (void)state;
    Fx *fx = fx_parse("// header\n"
                      "op f(X[m, k]) -> Y[m] {\n"
                      "    Y[m] += X[m, k] * 2;\n"
                      "}\n"
                      "partition p of f on mesh(d: P) steps(t: P) {\n"
                      "\tm = (d + t) % P;\n"
                      "}\n");
    assert_int_equal(fx->sink.error_count, 0);
    int line, col;
    Decl *d = fx->program->decls.items[0];
    span_line_col(fx, d->span, &line, &col);
    assert_int_equal(line, 2);
    assert_int_equal(col, 1);
    assert_string_equal(span_text(fx, d->span),
                        "op f(X[m, k]) -> Y[m] {\n    Y[m] += X[m, k] * 2;\n}");
    span_line_col(fx, d->op->name.span, &line, &col);
    assert_int_equal(line, 2);
    assert_int_equal(col, 4);
    TensorParam *x = d->op->params.items[0];
    assert_string_equal(span_text(fx, x->span), "X[m, k]");
    Ident *k = x->dims.items[1];
    span_line_col(fx, k->span, &line, &col);
    assert_int_equal(col, 11);
    Stmt *s = d->op->body.items[0];
    assert_string_equal(span_text(fx, s->span), "Y[m] += X[m, k] * 2;");
    span_line_col(fx, s->span, &line, &col);
    assert_int_equal(line, 3);
    assert_int_equal(col, 5);
    assert_string_equal(span_text(fx, s->value->span), "X[m, k] * 2");
    assert_string_equal(span_text(fx, s->value->lhs->span), "X[m, k]");
    assert_string_equal(span_text(fx, s->value->lhs->name_span), "X");
    assert_string_equal(span_text(fx, s->value->rhs->span), "2");

    Decl *pd = fx->program->decls.items[1];
    PartitionDecl *p = pd->partition;
    span_line_col(fx, pd->span, &line, &col);
    assert_int_equal(line, 5);
    assert_int_equal(col, 1);
    assert_string_equal(span_text(fx, ((AxisDecl *)p->mesh.items[0])->span), "d: P");
    assert_string_equal(span_text(fx, p->steps->span), "t: P");
    DsiAssign *dsi = p->dsis.items[0];
    span_line_col(fx, dsi->span, &line, &col);
    assert_int_equal(line, 6);
    assert_int_equal(col, 2); /* columns count bytes: the tab is one */
    assert_string_equal(span_text(fx, dsi->span), "m = (d + t) % P;");
    /* Parentheses do not widen the inner expression's span. */
    assert_string_equal(span_text(fx, dsi->value->lhs->span), "d + t");
    fx_free(fx);
}

/* ---- expression printing ---------------------------------------------- */

static void check_print(const char *expr, const char *printed) {
    char text[256];
    snprintf(text, sizeof text, "partition p of f on mesh(d: P) { m = %s; }", expr);
    Fx *fx = fx_parse(text);
    assert_int_equal(fx->sink.error_count, 0);
    DsiAssign *d = ((Decl *)fx->program->decls.items[0])->partition->dsis.items[0];
    char *got = expr_text(d->value);
    assert_string_equal(got, printed);
    free(got);
    fx_free(fx);
}

static void test_print_expr(void **state) {
    (void)state;
    check_print("(i + j + t) % P", "(i + j + t) % P");
    check_print("((i + j) + t) % (P)", "(i + j + t) % P");
    check_print("i + (j + t)", "i + (j + t)");
    check_print("i - (j - t)", "i - (j - t)");
    check_print("(i - j) - t", "i - j - t");
    check_print("a * b + c * d", "a * b + c * d");
    check_print("(a + b) * (c + d)", "(a + b) * (c + d)");
    check_print("a ^ b + c", "a ^ b + c");
    check_print("(a ^ b) + c", "(a ^ b) + c");
    check_print("a ^ (b ^ c)", "a ^ (b ^ c)");
    check_print("-a * b", "-a * b");
    check_print("-(a * b)", "-(a * b)");
    check_print("- -a", "-(-a)");
    check_print("a - -3", "a - -3");
    check_print("(d, i) * 2", "(d, i) * 2");
    check_print("(d, (i + 1) % P)", "(d, (i + 1) % P)");
    check_print("f(X[m, k], 2) + Y[]", "f(X[m, k], 2) + Y[]");
}

static void test_dump_expr(void **state) {
    (void)state;
    Fx *fx = fx_parse("partition p of f on mesh(d: P) { m = -(d, t) ^ g(x)[0]; }");
    /* g(x)[0] is not an expression: one syntax error, then a clean dump. */
    assert_int_equal(fx->sink.error_count, 1);
    fx_free(fx);
    fx = fx_parse("partition p of f on mesh(d: P) { m = -(d, t) ^ g(x, X[a]); }");
    DsiAssign *d = ((Decl *)fx->program->decls.items[0])->partition->dsis.items[0];
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    ast_dump_expr(d->value, fp);
    fclose(fp);
    assert_string_equal(buf, "(^ (neg (radix d t)) (call g x (index X a)))");
    free(buf);
    assert_string_equal(ast_expr_kind_name(EXPR_RADIX), "radix");
    assert_string_equal(ast_expr_kind_name(EXPR_INT), "int");
    fx_free(fx);
}

/* ---- syntax errors ---------------------------------------------------- */

static void test_error_expecting(void **state) {
    (void)state;
    assert_errors("partition p of matmul on mesh(d: P) steps {\n    m = d;\n}\n",
                  "t.prime:1:43: error: unexpected '{', expecting '('\n"
                  "partition p of matmul on mesh(d: P) steps {\n"
                  "                                          ^\n"
                  "1 error generated.\n");
    assert_errors("partition p of matmul on mesh(d: P) {\n    m = d;\n} steps\n",
                  "t.prime:3:3: error: unexpected 'steps', expecting a declaration\n"
                  "} steps\n"
                  "  ^~~~~\n"
                  "1 error generated.\n");
    assert_errors("op f(X[m]) -> Y[m] { Y = X; }\nmodel m { y = f(x) use p(i j); }\n",
                  "t.prime:2:28: error: unexpected identifier 'j', expecting '=' or ':'\n"
                  "model m { y = f(x) use p(i j); }\n"
                  "                           ^\n"
                  "1 error generated.\n");
}

static void test_error_missing_semicolon(void **state) {
    (void)state;
    assert_errors("op f(X[m]) -> Y[m] {\n"
                  "    Y[m] = X[m]\n"
                  "    Z[m] = X[m];\n"
                  "}\n",
                  "t.prime:3:5: error: unexpected identifier 'Z', expecting ';' or an operator\n"
                  "    Z[m] = X[m];\n"
                  "    ^\n"
                  "t.prime:2:16: note: is a ';' missing here?\n"
                  "    Y[m] = X[m]\n"
                  "               ^\n"
                  "1 error generated.\n");
    assert_errors("partition p of f on mesh(d: P) { m = 3 }\n",
                  "t.prime:1:40: error: unexpected '}', expecting ';' or an operator\n"
                  "partition p of f on mesh(d: P) { m = 3 }\n"
                  "                                       ^\n"
                  "t.prime:1:39: note: is a ';' missing here?\n"
                  "partition p of f on mesh(d: P) { m = 3 }\n"
                  "                                      ^\n"
                  "1 error generated.\n");
}

static void test_error_keyword_as_name(void **state) {
    (void)state;
    assert_errors("op steps(X[m]) -> Y[m] { Y = X; }\n",
                  "t.prime:1:4: error: unexpected 'steps', expecting identifier\n"
                  "op steps(X[m]) -> Y[m] { Y = X; }\n"
                  "   ^~~~~\n"
                  "note: 'steps' is a keyword and cannot be used as a name\n"
                  "1 error generated.\n");
}

static void test_error_model_item(void **state) {
    (void)state;
    assert_errors("model m {\n  op f;\n}\n",
                  "t.prime:2:3: error: unexpected 'op', expecting '}' or a model item\n"
                  "  op f;\n"
                  "  ^~\n"
                  "1 error generated.\n");
}

static void test_error_recovery(void **state) {
    (void)state;
    /* Four independent errors: in an op body, in a partition header, in a
     * model item, and in a DSI; everything else still parses. */
    Fx *fx = fx_parse("op f(X[m]) -> Y[m] {\n"
                      "    Y = X * ;\n"
                      "    Z = X;\n"
                      "}\n"
                      "partition a of f on mesh(d P) { m = d; }\n"
                      "partition b of f on mesh(d: P) { m = d; n = ); k = d; }\n"
                      "model mm {\n"
                      "    input x[m, k;\n"
                      "    weight w[k];\n"
                      "    y = f(x);\n"
                      "}\n"
                      "op g(X[m]) -> Y[m] { Y = X; }\n");
    assert_int_equal(fx->sink.error_count, 4);
    assert_string_equal(fx->sink.items[0].message,
                        "unexpected ';', expecting identifier or integer or '-' or '('");
    assert_string_equal(fx->sink.items[1].message, "unexpected identifier 'P', expecting ':'");
    assert_string_equal(fx->sink.items[2].message,
                        "unexpected ')', expecting identifier or integer or '-' or '('");
    assert_string_equal(fx->sink.items[3].message, "unexpected ';', expecting ',' or ']'");
    static const int lines[] = {2, 5, 6, 8};
    int line, col;
    for (int i = 0; i < 4; i++) {
        span_line_col(fx, fx->sink.items[i].span, &line, &col);
        assert_int_equal(line, lines[i]);
    }
    Program *p = fx->program;
    assert_int_equal(p->decls.count, 4); /* f, b, mm, g: a was skipped */
    Decl *f = p->decls.items[0];
    assert_int_equal(f->op->body.count, 1); /* Z = X */
    PartitionDecl *b = ((Decl *)p->decls.items[1])->partition;
    assert_string_equal(b->name.name, "b");
    assert_int_equal(b->dsis.count, 2); /* m and k */
    ModelDecl *mm = ((Decl *)p->decls.items[2])->model;
    assert_int_equal(mm->items.count, 2); /* w and y */
    assert_string_equal(((Decl *)p->decls.items[3])->op->name.name, "g");
    char *dump = fx_dump(fx);
    free(dump);
    fx_free(fx);
}

static void test_error_eof(void **state) {
    (void)state;
    assert_errors("model m {\n  strict;",
                  "t.prime:2:10: error: unexpected end of file, expecting '}' or a model item\n"
                  "  strict;\n"
                  "         ^\n"
                  "t.prime:1:9: note: to match this '{'\n"
                  "model m {\n"
                  "        ^\n"
                  "1 error generated.\n");
    assert_errors("op", "t.prime:1:3: error: unexpected end of file, expecting identifier\n"
                        "op\n"
                        "  ^\n"
                        "1 error generated.\n");
}

static void test_error_deep_nesting(void **state) {
    (void)state;
    size_t depth = 20000;
    const char *head = "partition p of f on mesh(d: P) { m = ";
    size_t n = strlen(head) + 2 * depth + 8;
    char *text = malloc(n);
    strcpy(text, head);
    size_t len = strlen(text);
    memset(text + len, '(', depth);
    len += depth;
    text[len++] = 'd';
    memset(text + len, ')', depth);
    len += depth;
    strcpy(text + len, "; }");
    Fx *fx = fx_parse(text);
    assert_int_equal(fx->sink.error_count, 1);
    assert_string_equal(fx->sink.items[0].message, "expression nested too deeply");
    fx_free(fx);
    free(text);
}

/* ---- diagnostics ------------------------------------------------------ */

static void test_diag_caret_tab(void **state) {
    (void)state;
    const char *text = "op\tf(X[m]) -> Y[m] {\n\tY = X\t@ 1;\n}\n";
    Fx *fx = fx_new("tab.prime", text, strlen(text));
    uint32_t at = (uint32_t)(strstr(text, "X\t@") - text);
    Span s = {fx->file, at, at + 3}; /* "X\t@" */
    diag_error(&fx->sink, s, "look at %s", "this");
    Span w = {fx->file, at + 2, at + 5}; /* "@ 1" */
    diag_warning(&fx->sink, w, "and this");
    assert_string_equal(fx_output(fx, 1), "tab.prime:2:6: error: look at this\n"
                                          "\tY = X\t@ 1;\n"
                                          "\t    ^~~\n"
                                          "tab.prime:2:8: warning: and this\n"
                                          "\tY = X\t@ 1;\n"
                                          "\t     \t^~~\n"
                                          "1 warning and 1 error generated.\n");
    fx_free(fx);
}

static void test_diag_spans_and_lines(void **state) {
    (void)state;
    /* A span over several lines underlines to the end of its first line;
     * an empty span still gets a caret; CRLF line ends are not shown;
     * non-ASCII text before the caret counts once per character. */
    static const char text[] = "ab cd\r\nx = \xc3\xa9t\xc3\xa9 + y\r\nlast";
    Fx *fx = fx_new("u.prime", text, sizeof text - 1);
    diag_error(&fx->sink, (Span){fx->file, 3, 12}, "multi");
    diag_note(&fx->sink, (Span){fx->file, 5, 5}, "empty");
    diag_note(&fx->sink, (Span){fx->file, 17, 18}, "after utf8");
    diag_note(&fx->sink, (Span){fx->file, (uint32_t)(sizeof text - 1), (uint32_t)(sizeof text - 1)},
              "at end");
    assert_string_equal(fx_output(fx, 1), "u.prime:1:4: error: multi\n"
                                          "ab cd\n"
                                          "   ^~\n"
                                          "u.prime:1:6: note: empty\n"
                                          "ab cd\n"
                                          "     ^\n"
                                          "u.prime:2:11: note: after utf8\n"
                                          "x = \xc3\xa9t\xc3\xa9 + y\n"
                                          "        ^\n"
                                          "u.prime:3:5: note: at end\n"
                                          "last\n"
                                          "    ^\n"
                                          "1 error generated.\n");
    fx_free(fx);
}

static void test_diag_plain_and_count(void **state) {
    (void)state;
    Fx *fx = fx_new("p.prime", "", 0);
    diag_error_plain(&fx->sink, "cannot open '%s': %s", "x.prime", "No such file or directory");
    diag_note_plain(&fx->sink, "searched %d places", 2);
    assert_int_equal(fx->sink.count, 2);
    assert_int_equal(fx->sink.items[0].has_span, 0);
    assert_int_equal(fx->sink.items[0].level, DIAG_ERROR);
    assert_int_equal(fx->sink.items[1].level, DIAG_NOTE);
    assert_string_equal(fx_output(fx, 1),
                        "primec: error: cannot open 'x.prime': No such file or directory\n"
                        "note: searched 2 places\n"
                        "1 error generated.\n");
    fx_free(fx);
    /* Nothing printed by diag_finish without errors. */
    fx = fx_new("p.prime", "", 0);
    assert_string_equal(fx_output(fx, 1), "");
    fx_free(fx);
}

static void test_diag_cap(void **state) {
    (void)state;
    Fx *fx = fx_new("c.prime", "x\n", 2);
    fx->sink.max_errors = 2;
    for (int i = 0; i < 5; i++) {
        diag_error(&fx->sink, (Span){fx->file, 0, 1}, "error %d", i);
        diag_note_plain(&fx->sink, "note %d", i);
    }
    assert_int_equal(fx->sink.error_count, 2);
    assert_int_equal(fx->sink.count, 4);
    assert_int_equal(fx->sink.suppressed, 1);
    assert_string_equal(fx_output(fx, 1), "c.prime:1:1: error: error 0\n"
                                          "x\n"
                                          "^\n"
                                          "note: note 0\n"
                                          "c.prime:1:1: error: error 1\n"
                                          "x\n"
                                          "^\n"
                                          "note: note 1\n"
                                          "primec: fatal: too many errors emitted, stopping now\n"
                                          "2 errors generated.\n");
    fx_free(fx);
    /* The default cap is 20, also for the parser's errors. */
    char text[4096] = "";
    for (int i = 0; i < 30; i++)
        strcat(text, "model m { 3; }\n");
    fx = fx_parse(text);
    assert_int_equal(fx->sink.error_count, 20);
    assert_int_equal(fx->program->decls.count, 30);
    const char *out = fx_output(fx, 1);
    const char *fatal = strstr(out, "primec: fatal: too many errors emitted, stopping now\n");
    assert_non_null(fatal);
    assert_null(strstr(fatal + 1, "primec: fatal"));
    assert_non_null(strstr(out, "20 errors generated.\n"));
    fx_free(fx);
}

static void test_diag_null_out(void **state) {
    (void)state;
    Arena *a = arena_create();
    SourceMap map;
    source_map_init(&map, a);
    DiagSink sink;
    diag_init(&sink, &map, a, NULL);
    uint32_t f = source_add(&map, "n.prime", "op", 2);
    Program *p = parse_file(a, &map, f, &sink);
    assert_int_equal(p->decls.count, 0);
    assert_int_equal(sink.error_count, 1);
    assert_int_equal(sink.count, 1);
    assert_string_equal(sink.items[0].message, "unexpected end of file, expecting identifier");
    diag_finish(&sink);
    arena_destroy(a);
}

static void test_source_lines(void **state) {
    (void)state;
    Arena *a = arena_create();
    SourceMap map;
    source_map_init(&map, a);
    uint32_t f = source_add(&map, "l.prime", "one\n\nthree\n", 11);
    const SourceFile *sf = source_get(&map, f);
    assert_int_equal(sf->nlines, 3);
    int line, col;
    source_line_col(sf, 0, &line, &col);
    assert_int_equal(line, 1);
    assert_int_equal(col, 1);
    source_line_col(sf, 4, &line, &col);
    assert_int_equal(line, 2);
    assert_int_equal(col, 1);
    source_line_col(sf, 8, &line, &col);
    assert_int_equal(line, 3);
    assert_int_equal(col, 4);
    source_line_col(sf, 11, &line, &col); /* the end: a final newline starts no line */
    assert_int_equal(line, 3);
    assert_int_equal(col, 7);
    size_t len;
    const char *t = source_line_text(sf, 2, &len);
    assert_int_equal(len, 0);
    t = source_line_text(sf, 3, &len);
    assert_int_equal(len, 5);
    assert_memory_equal(t, "three", 5);
    Span j = span_join((Span){f, 5, 7}, (Span){f, 2, 6});
    assert_int_equal(j.lo, 2);
    assert_int_equal(j.hi, 7);
    uint32_t g = source_add(&map, "e.prime", "", 0);
    assert_int_equal(g, 1);
    assert_int_equal(source_get(&map, g)->nlines, 1);
    arena_destroy(a);
}

#endif /* !FRONTEND_ARENA_ONLY */

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arena_intern),
        cmocka_unit_test(test_arena_alloc),
#ifndef FRONTEND_ARENA_ONLY
        cmocka_unit_test(test_lex_tokens),
        cmocka_unit_test(test_lex_eof_span),
        cmocka_unit_test(test_lex_unknown_char),
        cmocka_unit_test(test_lex_unterminated_comment),
        cmocka_unit_test(test_lex_int_overflow),
        cmocka_unit_test(test_lex_strings),
        cmocka_unit_test(test_parse_stdlib_matmul),
        cmocka_unit_test(test_parse_op),
        cmocka_unit_test(test_parse_partition),
        cmocka_unit_test(test_parse_model),
        cmocka_unit_test(test_parse_model_fields),
        cmocka_unit_test(test_parse_empty),
        cmocka_unit_test(test_spans),
        cmocka_unit_test(test_print_expr),
        cmocka_unit_test(test_dump_expr),
        cmocka_unit_test(test_error_expecting),
        cmocka_unit_test(test_error_missing_semicolon),
        cmocka_unit_test(test_error_keyword_as_name),
        cmocka_unit_test(test_error_model_item),
        cmocka_unit_test(test_error_recovery),
        cmocka_unit_test(test_error_eof),
        cmocka_unit_test(test_error_deep_nesting),
        cmocka_unit_test(test_diag_caret_tab),
        cmocka_unit_test(test_diag_spans_and_lines),
        cmocka_unit_test(test_diag_plain_and_count),
        cmocka_unit_test(test_diag_cap),
        cmocka_unit_test(test_diag_null_out),
        cmocka_unit_test(test_source_lines),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
