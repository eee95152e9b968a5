/*
 * format.c — see format.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// clang-format off
const char *const format_style = "{BasedOnStyle: LLVM, IndentWidth: 4, ColumnLimit: 100, AllowShortFunctionsOnASingleLine: None}";
// clang-format on

char *format_c(const char *text, size_t len, size_t *out_len, const char **error) {
    char path[] = "/tmp/primec-fmt-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        *error = "cannot create a temporary file";
        return NULL;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n <= 0) {
            close(fd);
            unlink(path);
            *error = "cannot write a temporary file";
            return NULL;
        }
        off += (size_t)n;
    }
    close(fd);
    size_t cmdlen = strlen(PRIMEC_CLANG_FORMAT) + strlen(format_style) + strlen(path) + 64;
    char *cmd = malloc(cmdlen);
    if (!cmd) {
        unlink(path);
        *error = "out of memory";
        return NULL;
    }
    snprintf(cmd, cmdlen, "'%s' '--style=%s' '%s'", PRIMEC_CLANG_FORMAT, format_style, path);
    FILE *pipe = popen(cmd, "r");
    free(cmd);
    if (!pipe) {
        unlink(path);
        *error = "cannot run clang-format";
        return NULL;
    }
    size_t cap = len + len / 4 + 1024, n = 0;
    char *out = malloc(cap);
    for (;;) {
        if (!out)
            break;
        if (n + 4096 > cap) {
            cap *= 2;
            char *o = realloc(out, cap);
            if (!o) {
                free(out);
                out = NULL;
                break;
            }
            out = o;
        }
        size_t got = fread(out + n, 1, cap - n - 1, pipe);
        if (got == 0)
            break;
        n += got;
    }
    int status = pclose(pipe);
    unlink(path);
    if (!out || status != 0 || n == 0) {
        free(out);
        *error = "clang-format failed";
        return NULL;
    }
    out[n] = 0;
    *out_len = n;
    return out;
}
