/*
 * lsp.h — `primec lsp`: a Language Server Protocol server over stdio.
 *
 * Messages are JSON-RPC 2.0 bodies, each after a `Content-Length: N`
 * header and a blank line (lsp_rpc.c). Documents are synced in full; on
 * every open and change the whole pipeline (parse ... schedule) runs on
 * the editor's text in memory and its diagnostics are published with
 * their ranges. Hover, go-to-definition and completion read the last
 * analysis of the document (lsp_features.c, lsp_hover.c). docs/lsp.md
 * describes what a client sees.
 */
#ifndef PRIMEC_LSP_H
#define PRIMEC_LSP_H

#include <stdio.h>

/* Serves requests from `in`, answers on `out` until `exit` or the end of
 * `in`. Returns the process exit code: 0 after shutdown + exit or EOF, 1
 * after an exit without shutdown. */
int lsp_serve(FILE *in, FILE *out);

/* `primec lsp [--help]`: lsp_serve on stdin and stdout (stdout is kept
 * for the protocol alone: anything else printed goes to stderr). */
int lsp_main(int argc, char **argv);

#endif
