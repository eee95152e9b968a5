/*
 * parse.h — the one header through which the compiler reaches the
 * generated lexer (grammar/lexer.re, re2c) and parser (grammar/parser.y,
 * Bison: pure, located, %expect 0, detailed errors).
 *
 * Syntax errors are reported through the DiagSink as
 * `file:line:col: error: unexpected 'steps', expecting '{'` with the
 * offending token underlined; the parser recovers at the next
 * declaration where it can, so several errors may be reported.
 */
#ifndef PRIMEC_PARSE_H
#define PRIMEC_PARSE_H

#include "ast.h"
#include "diag.h"

/* Parses one file already in the source map. Always returns a Program
 * (possibly with fewer declarations when there were errors); the caller
 * checks sink->error_count. */
Program *parse_file(Arena *arena, const SourceMap *sources, uint32_t file, DiagSink *sink);

#endif
