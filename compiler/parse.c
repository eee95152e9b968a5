/*
 * parse.c — runs the generated lexer and parser over one file.
 *
 * The grammar (grammar/parser.y) and the lexer (grammar/lexer.re) share
 * a ParseCtx that lives on this function's stack; the Program they build
 * lives in the arena. A syntax error never stops the parse early unless
 * recovery runs into the end of the file.
 */
#include "parse.h"

#include "parser.h"

Program *parse_file(Arena *arena, const SourceMap *sources, uint32_t file, DiagSink *sink) {
    ParseCtx ctx;
    parse_ctx_init(&ctx, arena, sources, file, sink);
    /* The result needs no check: every error has been reported through
     * the sink, and the Program holds what was parsed. */
    (void)yyparse(&ctx);
    return ctx.program;
}
