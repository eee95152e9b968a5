/*
 * sched_test.c — see sched_test.h.
 */
#include "sched_test.h"

#include <string.h>

int sched_test_compile(Compilation *c, char *file, size_t cap, const char *path, int predict_only) {
    const char *at = strchr(path, '@');
    size_t len = at ? (size_t)(at - path) : strlen(path);
    if (len >= cap) /* no such file: the pipeline says so */
        len = cap - 1;
    memcpy(file, path, len);
    file[len] = 0;
    compilation_init(c, file, NULL);
    c->model_name = at ? at + 1 : NULL;
    c->sink.out = NULL; /* diagnostics stored, not printed */
    c->predict_only = predict_only;
    return pipeline_run(c, "schedule");
}
