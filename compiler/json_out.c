/*
 * json_out.c — writing JSON reports (json_out.h).
 */
#include "json_out.h"

#include "diag.h"

void json_out(FILE *out, json_t *value, size_t flags) {
    if (!value)
        ICE("a JSON report could not be built");
    json_dumpf(value, out, PRIMEC_JSON_FLAGS | flags);
    fputc('\n', out);
    json_decref(value);
}
