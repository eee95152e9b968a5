/*
 * json_out.h — how primec writes JSON: every report is a jansson value
 * (explain, plan and cost --json, the language server), dumped with one
 * layout: two-space indentation, keys in the order they were added.
 */
#ifndef PRIMEC_JSON_OUT_H
#define PRIMEC_JSON_OUT_H

#include <jansson.h>
#include <stdio.h>

#define PRIMEC_JSON_FLAGS (JSON_INDENT(2) | JSON_PRESERVE_ORDER)

/* Writes `value` and a newline with PRIMEC_JSON_FLAGS plus `flags` (e.g.
 * JSON_REAL_PRECISION(6)), then releases it. A value that could not be
 * built (NULL) is an internal error. */
void json_out(FILE *out, json_t *value, size_t flags);

#endif
