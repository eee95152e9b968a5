/*
 * lexer.re — the tokens of .prime files (re2c, compiled with -W).
 *
 * The whole file is one NUL-terminated buffer (SourceFile.text); the
 * lexer never refills. The NUL at text[len] ends the input; a NUL byte
 * inside the file is an unexpected character like any other. Every token
 * gets a Span of byte offsets. Lexical errors (an unknown character, an
 * unterminated comment or string, an integer too large) are reported
 * through the DiagSink and lexing goes on, so the parser still sees a
 * plausible token stream.
 *
 * The lexer also remembers the last two token ends and the unclosed
 * '{'s; the parser's error reporter uses them for hints.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "parser.h"

void parse_ctx_init(ParseCtx *ctx, Arena *arena, const SourceMap *sources, uint32_t file,
                    DiagSink *sink) {
    memset(ctx, 0, sizeof(*ctx));
    ctx->arena = arena;
    ctx->sink = sink;
    ctx->file = file;
    ctx->src = source_get(sources, file);
    ctx->base = (const unsigned char *)ctx->src->text;
    ctx->cur = ctx->base;
    ctx->end = ctx->base + ctx->src->len;
    ctx->program = ARENA_NEW(arena, Program);
    ctx->program->file = file;
}

static Span span_of(const ParseCtx *ctx, const unsigned char *lo, const unsigned char *hi) {
    Span s = {ctx->file, (uint32_t)(lo - ctx->base), (uint32_t)(hi - ctx->base)};
    return s;
}

/* Records a token about to be returned. */
static int token(ParseCtx *ctx, Span *lloc, const unsigned char *tok, int kind) {
    *lloc = span_of(ctx, tok, ctx->cur);
    ctx->prev_hi = ctx->last_hi;
    ctx->last_lo = lloc->lo;
    ctx->last_hi = lloc->hi;
    ctx->ntokens++;
    enum { MAX_BRACES = sizeof ctx->braces / sizeof ctx->braces[0] };
    if (kind == '{') {
        if (ctx->brace_depth < MAX_BRACES)
            ctx->braces[ctx->brace_depth] = lloc->lo;
        ctx->brace_depth++;
    } else if (kind == '}' && ctx->brace_depth > 0) {
        ctx->brace_depth--;
    }
    return kind;
}

/* A byte as it reads in a message: '@', '\'', '\0', '\x01'. */
static void describe_byte(unsigned char c, char out[8]) {
    if (c == '\'' || c == '\\')
        snprintf(out, 8, "'\\%c'", c);
    else if (c > 0x20 && c < 0x7f)
        snprintf(out, 8, "'%c'", c);
    else if (c == 0)
        snprintf(out, 8, "'\\0'");
    else
        snprintf(out, 8, "'\\x%02x'", c);
}

static void unexpected_byte(ParseCtx *ctx, const unsigned char *tok) {
    char what[8];
    describe_byte(*tok, what);
    diag_error(ctx->sink, span_of(ctx, tok, tok + 1), "unexpected character %s", what);
}

/* A well-formed UTF-8 sequence of 2 to 4 bytes. */
static void unexpected_utf8(ParseCtx *ctx, const unsigned char *tok, const unsigned char *end) {
    size_t n = (size_t)(end - tok);
    unsigned long cp = tok[0] & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
    for (size_t i = 1; i < n; i++)
        cp = (cp << 6) | (tok[i] & 0x3F);
    diag_error(ctx->sink, span_of(ctx, tok, end), "unexpected character U+%04lX", cp);
}

/* Skips the rest of a line comment (a NUL byte in it is just text). */
static void skip_line_comment(ParseCtx *ctx) {
    const unsigned char *p = ctx->cur;
    while (p < ctx->end && *p != '\n')
        p++;
    ctx->cur = p;
}

/* Skips a block comment whose opening ends at ctx->cur. */
static void skip_block_comment(ParseCtx *ctx, const unsigned char *tok) {
    const unsigned char *p = ctx->cur;
    while (p < ctx->end && !(p[0] == '*' && p[1] == '/'))
        p++;
    if (p >= ctx->end) {
        diag_error(ctx->sink, span_of(ctx, tok, tok + 2), "unterminated /* comment");
        ctx->cur = ctx->end;
    } else {
        ctx->cur = p + 2;
    }
}

/* The value of a decimal literal; too large is an error (value 0). */
static long int_value(ParseCtx *ctx, const unsigned char *tok) {
    long v = 0;
    for (const unsigned char *p = tok; p < ctx->cur; p++) {
        int d = *p - '0';
        if (v > (LONG_MAX - d) / 10) {
            diag_error(ctx->sink, span_of(ctx, tok, ctx->cur),
                       "integer literal is too large (the largest is %ld)", LONG_MAX);
            return 0;
        }
        v = v * 10 + d;
    }
    return v;
}

/* The contents of a string literal between tok+1 and end, unescaped. */
static const char *string_value(ParseCtx *ctx, const unsigned char *lo, const unsigned char *hi) {
    char *s = arena_alloc(ctx->arena, (size_t)(hi - lo) + 1);
    size_t n = 0;
    for (const unsigned char *p = lo; p < hi; p++) {
        if (*p == '\\' && p + 1 < hi) {
            p++;
            if (*p != '"' && *p != '\\') {
                if (*p > 0x20 && *p < 0x7f)
                    diag_error(ctx->sink, span_of(ctx, p - 1, p + 1),
                               "unknown escape sequence '\\%c' (only \\\" and \\\\ are known)", *p);
                else
                    diag_error(ctx->sink, span_of(ctx, p - 1, p + 1),
                               "unknown escape sequence (only \\\" and \\\\ are known)");
            }
        }
        s[n++] = (char)*p;
    }
    s[n] = '\0';
    return s;
}

int yylex(YYSTYPE *lval, Span *lloc, ParseCtx *ctx) {
    for (;;) {
        const unsigned char *tok = ctx->cur;
        const unsigned char *marker = tok;
        (void)marker;
        /*!re2c
            re2c:define:YYCTYPE = "unsigned char";
            re2c:define:YYCURSOR = "ctx->cur";
            re2c:define:YYMARKER = "marker";
            re2c:yyfill:enable = 0;
            re2c:indent:string = "    ";
            re2c:indent:top = 2;

            ident   = [A-Za-z_][A-Za-z0-9_]*;
            strchar = [^"\\\n\x00] | "\\" [^\n\x00];
            utf8    = [\xc2-\xdf][\x80-\xbf]
                    | [\xe0][\xa0-\xbf][\x80-\xbf]
                    | [\xe1-\xec\xee\xef][\x80-\xbf]{2}
                    | [\xed][\x80-\x9f][\x80-\xbf]
                    | [\xf0][\x90-\xbf][\x80-\xbf]{2}
                    | [\xf1-\xf3][\x80-\xbf]{3}
                    | [\xf4][\x80-\x8f][\x80-\xbf]{2};

            [\x00] {
                if (tok < ctx->end) {
                    unexpected_byte(ctx, tok);
                    continue;
                }
                /* End of file: point just past the last line's text. */
                ctx->cur = ctx->end;
                const unsigned char *at = ctx->end;
                if (at > ctx->base && at[-1] == '\n')
                    at--;
                if (at > ctx->base && at[-1] == '\r')
                    at--;
                token(ctx, lloc, at, TOK_YYEOF);
                lloc->hi = lloc->lo;
                return TOK_YYEOF;
            }

            [ \t\r\n\v\f]+      { continue; }
            "//"                { skip_line_comment(ctx); continue; }
            "/*"                { skip_block_comment(ctx, tok); continue; }

            "op"                { return token(ctx, lloc, tok, TOK_OP); }
            "partition"         { return token(ctx, lloc, tok, TOK_PARTITION); }
            "of"                { return token(ctx, lloc, tok, TOK_OF); }
            "on"                { return token(ctx, lloc, tok, TOK_ON); }
            "mesh"              { return token(ctx, lloc, tok, TOK_MESH); }
            "steps"             { return token(ctx, lloc, tok, TOK_STEPS); }
            "model"             { return token(ctx, lloc, tok, TOK_MODEL); }
            "shape"             { return token(ctx, lloc, tok, TOK_SHAPE); }
            "plan"              { return token(ctx, lloc, tok, TOK_PLAN); }
            "run"               { return token(ctx, lloc, tok, TOK_RUN); }
            "extends"           { return token(ctx, lloc, tok, TOK_EXTENDS); }
            "default"           { return token(ctx, lloc, tok, TOK_DEFAULT); }
            "param"             { return token(ctx, lloc, tok, TOK_PARAM); }
            "input"             { return token(ctx, lloc, tok, TOK_INPUT); }
            "weight"            { return token(ctx, lloc, tok, TOK_WEIGHT); }
            "use"               { return token(ctx, lloc, tok, TOK_USE); }
            "strict"            { return token(ctx, lloc, tok, TOK_STRICT); }
            "layer"             { return token(ctx, lloc, tok, TOK_LAYER); }
            "grad"              { return token(ctx, lloc, tok, TOK_GRAD); }
            "repeat"            { return token(ctx, lloc, tok, TOK_REPEAT); }
            "import"            { return token(ctx, lloc, tok, TOK_IMPORT); }

            ident {
                lval->sym = arena_intern(ctx->arena, (const char *)tok, (size_t)(ctx->cur - tok));
                return token(ctx, lloc, tok, TOK_IDENT);
            }
            "1f1b" {
                /* The micro-batch order (`microbatches b: M order 1f1b;`): a
                 * name, though it starts with a digit. */
                lval->sym = arena_intern(ctx->arena, (const char *)tok, (size_t)(ctx->cur - tok));
                return token(ctx, lloc, tok, TOK_IDENT);
            }
            [0-9]+ {
                lval->num = int_value(ctx, tok);
                return token(ctx, lloc, tok, TOK_INT);
            }
            ["] strchar* ["] {
                lval->str = string_value(ctx, tok + 1, ctx->cur - 1);
                return token(ctx, lloc, tok, TOK_STRING);
            }
            ["] strchar* {
                diag_error(ctx->sink, span_of(ctx, tok, tok + 1), "unterminated string literal");
                lval->str = string_value(ctx, tok + 1, ctx->cur);
                return token(ctx, lloc, tok, TOK_STRING);
            }

            "+="                { return token(ctx, lloc, tok, TOK_PLUS_EQ); }
            "max="              { return token(ctx, lloc, tok, TOK_MAX_EQ); }
            "->"                { return token(ctx, lloc, tok, TOK_ARROW); }
            ".."                { return token(ctx, lloc, tok, TOK_DOTDOT); }
            [()[\]{},;:=+\-*/%^] { return token(ctx, lloc, tok, *tok); }

            utf8                { unexpected_utf8(ctx, tok, ctx->cur); continue; }
            *                   { unexpected_byte(ctx, tok); continue; }
        */
    }
}
