/*
 * test_frontend_fuzz.c — robustness of the lexer and parser on broken
 * input: every prefix of stdlib/matmul.prime and a few thousand random
 * mutations of it (fixed seed, so failures reproduce) must parse without
 * crashing, report problems only through the sink, and leave a tree
 * whose spans lie inside the file and which the dump and printer can
 * walk. CI runs it under ASan/UBSan with PRIMEC_ARENA_MALLOC.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "diag.h"
#include "parse.h"
#include "stdlib_embed.h"

static FILE *devnull;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rng(void) {
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

static void check_span(Span s, uint32_t file, size_t len) {
    assert_int_equal(s.file, file);
    assert_true(s.lo <= s.hi);
    assert_true(s.hi <= len);
}

static void check_expr(const Expr *e, uint32_t file, size_t len) {
    assert_non_null(e);
    check_span(e->span, file, len);
    switch (e->kind) {
    case EXPR_BINARY:
        check_expr(e->lhs, file, len);
        check_expr(e->rhs, file, len);
        break;
    case EXPR_NEG:
        check_expr(e->lhs, file, len);
        break;
    case EXPR_CALL:
    case EXPR_RADIX:
        for (int i = 0; i < e->args.count; i++)
            check_expr(e->args.items[i], file, len);
        break;
    case EXPR_INDEX:
        for (int i = 0; i < e->args.count; i++)
            check_span(((const Ident *)e->args.items[i])->span, file, len);
        break;
    default:
        break;
    }
}

static void check_program(const Program *p, uint32_t file, size_t len) {
    for (int i = 0; i < p->decls.count; i++) {
        const Decl *d = p->decls.items[i];
        check_span(d->span, file, len);
        if (d->kind == DECL_OP) {
            assert_non_null(d->op->result);
            for (int j = 0; j < d->op->body.count; j++) {
                const Stmt *s = d->op->body.items[j];
                check_span(s->span, file, len);
                check_expr(s->value, file, len);
            }
        } else if (d->kind == DECL_PARTITION) {
            for (int j = 0; j < d->partition->mesh.count; j++)
                check_expr(((const AxisDecl *)d->partition->mesh.items[j])->size, file, len);
            for (int j = 0; j < d->partition->dsis.count; j++)
                check_expr(((const DsiAssign *)d->partition->dsis.items[j])->value, file, len);
        } else if (d->kind == DECL_MODEL) {
            for (int j = 0; j < d->model->items.count; j++) {
                const ModelItem *it = d->model->items.items[j];
                check_span(it->span, file, len);
                if (it->kind == MITEM_PARAM)
                    check_expr(it->value, file, len);
            }
        }
    }
}

/* Parses text; returns the number of errors. */
static int parse_one(const char *text, size_t len) {
    Arena *a = arena_create();
    SourceMap map;
    source_map_init(&map, a);
    DiagSink sink;
    diag_init(&sink, &map, a, devnull);
    uint32_t f = source_add(&map, "fuzz.prime", text, len);
    Program *p = parse_file(a, &map, f, &sink);
    assert_non_null(p);
    check_program(p, f, len);
    ast_dump_program(p, devnull);
    /* Every error was stored (up to the cap) with its message. */
    int errors = 0;
    for (int i = 0; i < sink.count; i++) {
        assert_non_null(sink.items[i].message);
        if (sink.items[i].level == DIAG_ERROR)
            errors++;
    }
    assert_int_equal(errors, sink.error_count);
    diag_finish(&sink);
    arena_destroy(a);
    return errors;
}

static const StdlibFile *matmul(void) {
    for (int i = 0; i < stdlib_file_count; i++)
        if (strcmp(stdlib_files[i].name, "<stdlib>/matmul.prime") == 0)
            return &stdlib_files[i];
    fail_msg("<stdlib>/matmul.prime is not embedded");
    return NULL;
}

static void test_prefixes(void **state) {
    (void)state;
    const StdlibFile *sf = matmul();
    assert_int_equal(parse_one(sf->text, sf->len), 0);
    for (size_t n = 0; n < sf->len; n++) {
        int errors = parse_one(sf->text, n);
        /* A cut just before a closing brace is always an error. */
        if (sf->text[n] == '}')
            assert_true(errors > 0);
    }
}

static void test_mutations(void **state) {
    (void)state;
    const StdlibFile *sf = matmul();
    static const char interesting[] = "(){}[],;:=+-*/%^\"@\\\n\t 0123456789xyz_/*";
    size_t cap = sf->len * 2 + 64;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (int iter = 0; iter < 4000; iter++) {
        size_t len = sf->len;
        memcpy(buf, sf->text, len);
        int edits = 1 + (int)(rng() % 8);
        for (int e = 0; e < edits; e++) {
            size_t at = len ? rng() % len : 0;
            switch (rng() % 5) {
            case 0: /* replace with a punctuation or digit */
                if (len)
                    buf[at] = interesting[rng() % (sizeof interesting - 1)];
                break;
            case 1: /* replace with any byte, NUL included */
                if (len)
                    buf[at] = (char)(rng() & 0xFF);
                break;
            case 2: /* delete a run */
                if (len) {
                    size_t n = 1 + rng() % 16;
                    if (n > len - at)
                        n = len - at;
                    memmove(buf + at, buf + at + n, len - at - n);
                    len -= n;
                }
                break;
            case 3: /* insert a byte */
                if (len + 1 < cap) {
                    memmove(buf + at + 1, buf + at, len - at);
                    buf[at] = interesting[rng() % (sizeof interesting - 1)];
                    len++;
                }
                break;
            default: { /* duplicate a chunk from elsewhere */
                size_t from = len ? rng() % len : 0;
                size_t n = 1 + rng() % 32;
                if (n > len - from)
                    n = len - from;
                if (len + n < cap) {
                    char tmp[32];
                    memcpy(tmp, buf + from, n);
                    memmove(buf + at + n, buf + at, len - at);
                    memcpy(buf + at, tmp, n);
                    len += n;
                }
                break;
            }
            }
        }
        parse_one(buf, len);
    }
    free(buf);
}

int main(void) {
    devnull = fopen("/dev/null", "w");
    if (!devnull)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefixes),
        cmocka_unit_test(test_mutations),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fclose(devnull);
    return rc;
}
