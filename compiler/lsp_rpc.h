/*
 * lsp_rpc.h — JSON-RPC 2.0 messages with LSP's `Content-Length` framing.
 *
 * A message is a header block (`Name: value` lines ended by CRLF, then an
 * empty line) and a body of exactly Content-Length bytes. Bad framing is
 * reported to the caller (which answers with a JSON-RPC error) and the
 * reader resynchronises on the next header block; it never aborts.
 */
#ifndef PRIMEC_LSP_RPC_H
#define PRIMEC_LSP_RPC_H

#include <jansson.h>
#include <stdio.h>

/* JSON-RPC error codes. */
enum {
    RPC_PARSE_ERROR = -32700,
    RPC_INVALID_REQUEST = -32600,
    RPC_METHOD_NOT_FOUND = -32601,
    RPC_INVALID_PARAMS = -32602,
    RPC_SERVER_NOT_INITIALIZED = -32002
};

/* The largest body accepted (bigger ones are read and dropped). */
#define RPC_MAX_BODY (64L << 20)

typedef enum RpcRead {
    RPC_READ_OK,         /* *body holds a malloc'd, NUL-terminated body */
    RPC_READ_EOF,        /* the input ended (between messages or inside one) */
    RPC_READ_BAD_HEADER, /* a header line that is not `Name: value`, or no usable Content-Length */
    RPC_READ_TOO_LARGE   /* Content-Length over RPC_MAX_BODY; the body was skipped */
} RpcRead;

/* Reads one framed message. On RPC_READ_BAD_HEADER, *why says what was
 * wrong (a static string). */
RpcRead rpc_read(FILE *in, char **body, size_t *len, const char **why);

/* Writes `msg` compactly with its header and flushes; takes the
 * reference. Returns 0 if the output failed. */
int rpc_write(FILE *out, json_t *msg);

/* {"jsonrpc": "2.0", "id": id, "result": result}; takes result. */
int rpc_respond(FILE *out, json_t *id, json_t *result);
/* An error response; id NULL writes "id": null. */
int rpc_error(FILE *out, json_t *id, int code, const char *message);
/* A notification; takes params. */
int rpc_notify(FILE *out, const char *method, json_t *params);

#endif
