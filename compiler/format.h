/*
 * format.h — formats emitted C with clang-format.
 *
 * The emitters print readable, indented code; this pass runs LLVM's
 * clang-format (the tool found at configure time, PRIMEC_CLANG_FORMAT)
 * over it with the project's fixed style, so emitted files look like
 * hand-written ones and are byte-for-byte reproducible. libclang's C API
 * has no formatting entry point, so the tool is run as a subprocess.
 *
 * The data tables an emitter prints between a line "// clang-format off"
 * and a line "// clang-format on" never reach clang-format (which spent
 * most of a small layer's build reading them): format_c lays them out
 * itself, each line broken after the commas of its outermost braces (then
 * one level deeper, for a piece too long alone) at the same 100 columns,
 * continuation lines indented by 4. clang-format run over the result
 * changes nothing (the compile/format tests).
 */
#ifndef PRIMEC_FORMAT_H
#define PRIMEC_FORMAT_H

#include <stddef.h>

/* The style emitted code is formatted with. */
extern const char *const format_style;

/* Formats text; returns a malloc'ed result, or NULL with a message in
 * *error (static text) when clang-format could not be run. */
char *format_c(const char *text, size_t len, size_t *out_len, const char **error);

#endif
