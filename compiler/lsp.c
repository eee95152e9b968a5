/*
 * lsp.c — the language server's loop: framing errors, JSON-RPC checks,
 * the lifecycle (initialize, initialized, shutdown, exit), the document
 * store (didOpen, didChange with full sync, didClose) and the dispatch
 * of hover, definition and completion (lsp.h).
 *
 * Bad input never stops the server: a malformed header or a body that is
 * not JSON is answered with a parse error (-32700), a body that is not a
 * JSON-RPC request with -32600, an unknown method with -32601, a request
 * with unusable params with -32602; each with "id": null when the id is
 * unknown. Unknown notifications are ignored, as the protocol asks.
 */
#define _POSIX_C_SOURCE 200809L
#include "lsp.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lsp_internal.h"
#include "lsp_rpc.h"

typedef struct Server {
    FILE *out;
    int initialized; /* `initialize` answered */
    int shutdown;    /* `shutdown` answered */
    int exited;
    LspDoc **docs;
    int ndocs, cap;
} Server;

static LspDoc **find_doc(Server *sv, const char *uri) {
    for (int i = 0; i < sv->ndocs; ++i)
        if (strcmp(sv->docs[i]->uri, uri) == 0)
            return &sv->docs[i];
    return NULL;
}

static void publish(Server *sv, const LspDoc *doc) {
    rpc_notify(sv->out, "textDocument/publishDiagnostics", lsp_diagnostics(doc));
}

/* params.textDocument.uri, or NULL. */
static const char *doc_uri(json_t *params) {
    return json_string_value(json_object_get(json_object_get(params, "textDocument"), "uri"));
}

static void did_open(Server *sv, json_t *params) {
    json_t *td = json_object_get(params, "textDocument");
    const char *uri = json_string_value(json_object_get(td, "uri"));
    json_t *text = json_object_get(td, "text");
    if (!uri || !json_is_string(text))
        return;
    LspDoc **old = find_doc(sv, uri);
    if (old) {
        lsp_doc_update(*old, json_string_value(text), json_string_length(text));
        publish(sv, *old);
        return;
    }
    LspDoc *doc = lsp_doc_open(uri, json_string_value(text), json_string_length(text));
    if (!doc)
        return;
    if (sv->ndocs == sv->cap) {
        int cap = sv->cap ? 2 * sv->cap : 8;
        LspDoc **docs = realloc(sv->docs, sizeof *docs * (size_t)cap);
        if (!docs) {
            lsp_doc_free(doc);
            return;
        }
        sv->docs = docs;
        sv->cap = cap;
    }
    sv->docs[sv->ndocs++] = doc;
    publish(sv, doc);
}

/* Full sync: the last change's text is the document. */
static void did_change(Server *sv, json_t *params) {
    const char *uri = doc_uri(params);
    LspDoc **doc = uri ? find_doc(sv, uri) : NULL;
    json_t *changes = json_object_get(params, "contentChanges");
    size_t n = json_array_size(changes);
    json_t *text = n ? json_object_get(json_array_get(changes, n - 1), "text") : NULL;
    if (!doc || !json_is_string(text))
        return;
    lsp_doc_update(*doc, json_string_value(text), json_string_length(text));
    publish(sv, *doc);
}

static void did_close(Server *sv, json_t *params) {
    const char *uri = doc_uri(params);
    LspDoc **doc = uri ? find_doc(sv, uri) : NULL;
    if (!doc)
        return;
    /* The client clears a closed file's diagnostics itself; say so too. */
    rpc_notify(sv->out, "textDocument/publishDiagnostics",
               json_pack("{s:s, s:[]}", "uri", (*doc)->uri, "diagnostics"));
    lsp_doc_free(*doc);
    *doc = sv->docs[--sv->ndocs];
}

static json_t *capabilities(void) {
    return json_pack("{s:{s:{s:b, s:i}, s:b, s:b, s:{s:[s]}}, s:{s:s, s:s}}", "capabilities",
                     "textDocumentSync", "openClose", 1, "change", 1, "hoverProvider", 1,
                     "definitionProvider", 1, "completionProvider", "triggerCharacters", " ",
                     "serverInfo", "name", "primec", "version", PRIMEC_VERSION);
}

typedef json_t *(*PositionFn)(const LspDoc *doc, int line, int character);

/* hover, definition, completion: params {textDocument, position}. */
static void position_request(Server *sv, json_t *id, json_t *params, PositionFn fn) {
    const char *uri = doc_uri(params);
    json_t *pos = json_object_get(params, "position");
    json_t *line = json_object_get(pos, "line"), *ch = json_object_get(pos, "character");
    if (!uri || !json_is_integer(line) || !json_is_integer(ch)) {
        rpc_error(sv->out, id, RPC_INVALID_PARAMS, "expected textDocument.uri and position");
        return;
    }
    LspDoc **doc = find_doc(sv, uri);
    if (!doc) {
        rpc_error(sv->out, id, RPC_INVALID_PARAMS, "the document is not open");
        return;
    }
    long l = (long)json_integer_value(line), c = (long)json_integer_value(ch);
    l = l < 0 ? 0 : l > 1L << 30 ? 1L << 30 : l;
    c = c < 0 ? 0 : c > 1L << 30 ? 1L << 30 : c;
    rpc_respond(sv->out, id, fn(*doc, (int)l, (int)c));
}

static void request(Server *sv, const char *method, json_t *id, json_t *params) {
    if (strcmp(method, "initialize") == 0) {
        sv->initialized = 1;
        rpc_respond(sv->out, id, capabilities());
    } else if (sv->shutdown) {
        rpc_error(sv->out, id, RPC_INVALID_REQUEST, "the server is shut down");
    } else if (strcmp(method, "shutdown") == 0) {
        sv->shutdown = 1;
        rpc_respond(sv->out, id, NULL);
    } else if (!sv->initialized) {
        rpc_error(sv->out, id, RPC_SERVER_NOT_INITIALIZED, "initialize first");
    } else if (strcmp(method, "textDocument/hover") == 0) {
        position_request(sv, id, params, lsp_hover);
    } else if (strcmp(method, "textDocument/definition") == 0) {
        position_request(sv, id, params, lsp_definition);
    } else if (strcmp(method, "textDocument/completion") == 0) {
        position_request(sv, id, params, lsp_completion);
    } else {
        char msg[256];
        snprintf(msg, sizeof msg, "unknown method '%.200s'", method);
        rpc_error(sv->out, id, RPC_METHOD_NOT_FOUND, msg);
    }
}

static void notification(Server *sv, const char *method, json_t *params) {
    if (strcmp(method, "exit") == 0)
        sv->exited = 1;
    else if (!sv->initialized || sv->shutdown)
        return; /* notifications before initialize or after shutdown are dropped */
    else if (strcmp(method, "textDocument/didOpen") == 0)
        did_open(sv, params);
    else if (strcmp(method, "textDocument/didChange") == 0)
        did_change(sv, params);
    else if (strcmp(method, "textDocument/didClose") == 0)
        did_close(sv, params);
    /* initialized, $/..., and anything else: nothing to do */
}

/* One message body. */
static void handle(Server *sv, const char *body, size_t len) {
    json_error_t err;
    json_t *msg = json_loadb(body, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    if (!msg) {
        char text[256];
        snprintf(text, sizeof text, "parse error: %s (byte %d)", err.text, err.position);
        rpc_error(sv->out, NULL, RPC_PARSE_ERROR, text);
        return;
    }
    json_t *id = json_object_get(msg, "id");
    int bad_id = id && !json_is_string(id) && !json_is_integer(id) && !json_is_null(id);
    if (bad_id)
        id = NULL;
    const char *version = json_string_value(json_object_get(msg, "jsonrpc"));
    const char *method = json_string_value(json_object_get(msg, "method"));
    json_t *params = json_object_get(msg, "params");
    if (json_is_null(params))
        params = NULL;
    if (!json_is_object(msg) || !version || strcmp(version, "2.0") != 0) {
        rpc_error(sv->out, id, RPC_INVALID_REQUEST, "not a JSON-RPC 2.0 message");
    } else if (bad_id) {
        rpc_error(sv->out, NULL, RPC_INVALID_REQUEST, "'id' must be a string or an integer");
    } else if (!method) {
        /* A response to a request of ours (we send none) or garbage. */
        if (!json_object_get(msg, "result") && !json_object_get(msg, "error"))
            rpc_error(sv->out, id, RPC_INVALID_REQUEST, "a request needs a string 'method'");
    } else if (params && !json_is_object(params) && !json_is_array(params)) {
        if (id)
            rpc_error(sv->out, id, RPC_INVALID_REQUEST, "'params' must be an object or array");
    } else if (id) {
        request(sv, method, id, params);
    } else {
        notification(sv, method, params);
    }
    json_decref(msg);
}

int lsp_serve(FILE *in, FILE *out) {
    Server sv = {.out = out};
    while (!sv.exited) {
        char *body = NULL;
        size_t len = 0;
        const char *why = NULL;
        RpcRead r = rpc_read(in, &body, &len, &why);
        if (r == RPC_READ_EOF)
            break;
        if (r == RPC_READ_BAD_HEADER) {
            char text[256];
            snprintf(text, sizeof text, "parse error: %s", why);
            rpc_error(out, NULL, RPC_PARSE_ERROR, text);
        } else if (r == RPC_READ_TOO_LARGE) {
            rpc_error(out, NULL, RPC_INVALID_REQUEST, "message too large");
        } else {
            handle(&sv, body, len);
            free(body);
        }
    }
    for (int i = 0; i < sv.ndocs; ++i)
        lsp_doc_free(sv.docs[i]);
    free(sv.docs);
    return sv.exited && !sv.shutdown ? 1 : 0;
}

int lsp_main(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: primec lsp\n\n"
                   "A Language Server Protocol server for .prime files on stdin and stdout\n"
                   "(Content-Length framing): diagnostics, hover, go-to-definition and\n"
                   "completion of partitions. See docs/lsp.md.\n");
            return 0;
        }
        if (strcmp(argv[i], "--stdio") != 0) { /* what some clients pass */
            fprintf(stderr, "primec: error: unexpected argument '%s' (usage: primec lsp)\n",
                    argv[i]);
            return 2;
        }
    }
    /* The protocol owns stdout: keep it as `out` and send fd 1 to stderr,
     * so that nothing else printed can corrupt a message. */
    fflush(stdout);
    int fd = dup(1);
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!out || dup2(2, 1) < 0) {
        fprintf(stderr, "primec: error: cannot set up stdout for the protocol\n");
        return 2;
    }
    int rc = lsp_serve(stdin, out);
    fclose(out);
    return rc;
}
