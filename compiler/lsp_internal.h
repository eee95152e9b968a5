/*
 * lsp_internal.h — the language server's documents and features, shared
 * by lsp.c (the server loop), lsp_doc.c (documents, positions, URIs,
 * diagnostics), lsp_features.c (definition, completion) and lsp_hover.c.
 *
 * Positions: LSP counts lines from 0 and characters in UTF-16 code
 * units; spans are byte ranges. lsp_offset and lsp_range convert.
 */
#ifndef PRIMEC_LSP_INTERNAL_H
#define PRIMEC_LSP_INTERNAL_H

#include <jansson.h>

#include "pipeline.h"

/* An open document and the last analysis of its text. */
typedef struct LspDoc {
    char *uri;
    char *path; /* the name its diagnostics and imports use (the URI's path) */
    char *text;
    size_t len;
    Compilation *c;       /* parse ... schedule on text */
    const SourceFile *sf; /* the document in c */
    uint32_t file;        /* its source id */
} LspDoc;

LspDoc *lsp_doc_open(const char *uri, const char *text, size_t len);
/* Replaces the text and analyses it again. */
void lsp_doc_update(LspDoc *doc, const char *text, size_t len);
void lsp_doc_free(LspDoc *doc);

/* Runs the pipeline up to `last` on text as the file `path`, diagnostics
 * stored, not printed. The document's source (NULL if the run stopped
 * before it was added) goes to *sf and *file. */
Compilation *lsp_analyse(const char *path, const char *text, size_t len, const char *last,
                         const SourceFile **sf, uint32_t *file);
void lsp_analysis_free(Compilation *c);

/* The byte offset of an LSP position (clamped to the line and the file). */
uint32_t lsp_offset(const SourceFile *f, int line, int character);
json_t *lsp_position(const SourceFile *f, uint32_t offset);
json_t *lsp_range(const SourceFile *f, Span span);
/* {"uri", "range"} of a span of c, or NULL when its file has no URI. */
json_t *lsp_location(const LspDoc *doc, const Compilation *c, Span span);

/* A JSON string of s; bytes that are not UTF-8 become '?'. */
json_t *lsp_string(const char *s);

/* "file:///a%20b/c.prime" -> "/a b/c.prime"; other URIs are kept whole.
 * malloc'd. */
char *lsp_uri_to_path(const char *uri);

/* textDocument/publishDiagnostics params for the document. */
json_t *lsp_diagnostics(const LspDoc *doc);
/* Results of textDocument/hover, definition and completion; JSON null
 * when there is nothing at the position. */
json_t *lsp_hover(const LspDoc *doc, int line, int character);
json_t *lsp_definition(const LspDoc *doc, int line, int character);
json_t *lsp_completion(const LspDoc *doc, int line, int character);

/* The model instance whose statement covers the offset in the document,
 * and its model; NULL if none. */
const Instance *lsp_instance_at(const Compilation *c, uint32_t file, uint32_t offset,
                                const Model **model);

static inline int lsp_span_has(Span s, uint32_t file, uint32_t offset) {
    return s.file == file && s.lo <= offset && offset <= s.hi;
}

#endif
