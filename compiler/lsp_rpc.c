/*
 * lsp_rpc.c — reading and writing framed JSON-RPC messages (lsp_rpc.h).
 */
#include "lsp_rpc.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define RPC_MAX_HEADER_LINE 1024

/* Reads one header line without its CR LF into buf. Returns its length,
 * -1 at EOF before any byte, -2 for a line longer than the buffer (the
 * rest of it is consumed). */
static int read_line(FILE *in, char *buf, int cap) {
    int n = 0, c, too_long = 0;
    while ((c = fgetc(in)) != EOF && c != '\n') {
        if (n < cap - 1)
            buf[n++] = (char)c;
        else
            too_long = 1;
    }
    if (c == EOF && n == 0 && !too_long)
        return -1;
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    buf[n] = 0;
    return too_long ? -2 : n;
}

/* Parses the value of a Content-Length header: digits only. */
static int parse_length(const char *v, long *out) {
    while (*v == ' ' || *v == '\t')
        v++;
    if (!isdigit((unsigned char)*v))
        return 0;
    errno = 0;
    char *end;
    long n = strtol(v, &end, 10);
    while (*end == ' ' || *end == '\t')
        end++;
    if (errno || *end || n < 0)
        return 0;
    *out = n;
    return 1;
}

static void skip_bytes(FILE *in, long n) {
    char buf[4096];
    while (n > 0) {
        size_t want = n < (long)sizeof buf ? (size_t)n : sizeof buf;
        size_t got = fread(buf, 1, want, in);
        if (got == 0)
            return;
        n -= (long)got;
    }
}

RpcRead rpc_read(FILE *in, char **body, size_t *len, const char **why) {
    char line[RPC_MAX_HEADER_LINE];
    long length = -1;
    int nlines = 0, bad = 0;
    *why = NULL;
    for (;;) {
        int n = read_line(in, line, sizeof line);
        if (n == -1)
            return RPC_READ_EOF;
        if (n == 0) {
            if (nlines == 0)
                continue; /* blank lines between messages */
            break;
        }
        nlines++;
        char *colon = n > 0 ? strchr(line, ':') : NULL;
        if (n < 0 || !colon || colon == line) {
            bad = 1;
            *why = "malformed header line (expected 'Name: value')";
            continue;
        }
        *colon = 0;
        if (strcasecmp(line, "Content-Length") == 0 && !parse_length(colon + 1, &length)) {
            bad = 1;
            *why = "Content-Length is not a number";
        }
    }
    if (bad)
        return RPC_READ_BAD_HEADER;
    if (length < 0) {
        *why = "missing Content-Length header";
        return RPC_READ_BAD_HEADER;
    }
    if (length > RPC_MAX_BODY) {
        skip_bytes(in, length);
        return RPC_READ_TOO_LARGE;
    }
    char *buf = malloc((size_t)length + 1);
    if (!buf)
        return RPC_READ_TOO_LARGE;
    size_t got = fread(buf, 1, (size_t)length, in);
    if (got != (size_t)length) {
        free(buf);
        return RPC_READ_EOF;
    }
    buf[length] = 0;
    *body = buf;
    *len = (size_t)length;
    return RPC_READ_OK;
}

int rpc_write(FILE *out, json_t *msg) {
    char *text = json_dumps(msg, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(msg);
    if (!text)
        return 0;
    size_t n = strlen(text);
    int ok = fprintf(out, "Content-Length: %zu\r\n\r\n", n) > 0;
    ok = ok && fwrite(text, 1, n, out) == n;
    ok = ok && fflush(out) == 0;
    free(text);
    return ok;
}

int rpc_respond(FILE *out, json_t *id, json_t *result) {
    return rpc_write(out,
                     json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                               "result", result ? result : json_null()));
}

int rpc_error(FILE *out, json_t *id, int code, const char *message) {
    return rpc_write(out,
                     json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
                               id ? id : json_null(), "error", "code", code, "message", message));
}

int rpc_notify(FILE *out, const char *method, json_t *params) {
    return rpc_write(
        out, json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params", params));
}
