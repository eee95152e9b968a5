/*
 * lsp_doc.c — the language server's documents: analysis of the text in
 * memory, LSP positions and URIs, and diagnostics (see lsp_internal.h).
 */
#define _XOPEN_SOURCE 700
#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lsp_internal.h"
#include "stdlib_embed.h"

/* Runs the pipeline to `last`; 0 when an internal error stopped it,
 * with its message in `rec` and the pass in c->pass. */
static int run_recovering(Compilation *c, const char *last, IceRecovery *rec) {
    diag_ice_set_recovery(rec);
    if (setjmp(rec->env)) {
        /* diag_ice cleared the recovery point before returning here. */
        return 0;
    }
    pipeline_run(c, last);
    diag_ice_set_recovery(NULL);
    return 1;
}

static Compilation *new_analysis(const char *path, const char *text, size_t len) {
    Compilation *c = malloc(sizeof *c);
    if (!c)
        return NULL;
    compilation_init(c, path, NULL); /* diagnostics stored, not printed */
    c->input_text = text;
    c->input_len = len;
    return c;
}

Compilation *lsp_analyse(const char *path, const char *text, size_t len, const char *last,
                         const SourceFile **sf, uint32_t *file) {
    Compilation *c = new_analysis(path, text, len);
    if (!c)
        return NULL;
    /* An internal error leaves the compilation's IR half built: the
     * analysis is run again, up to the pass before the one that failed,
     * and the error becomes a diagnostic, so the server keeps running. */
    IceRecovery rec;
    char failed[sizeof rec.message + 64] = "";
    while (!run_recovering(c, last, &rec)) {
        const char *pass = c->pass;
        fprintf(stderr, "primec lsp: internal compiler error in pass '%s' %s\n", pass, rec.message);
        if (!failed[0])
            snprintf(failed, sizeof failed, "internal compiler error in pass '%s' %s", pass,
                     rec.message);
        lsp_analysis_free(c);
        last = pipeline_pass_before(pass);
        c = new_analysis(path, text, len);
        if (!c)
            return NULL;
        if (!last)
            break; /* the parser itself failed: an empty analysis */
    }
    *sf = NULL;
    *file = 0;
    for (int i = stdlib_file_count; i < c->sources.count; ++i) {
        if (strcmp(c->sources.files[i]->name, path) == 0) {
            *sf = c->sources.files[i];
            *file = (uint32_t)i;
            break;
        }
    }
    if (failed[0]) {
        if (*sf)
            diag_error(&c->sink, (Span){*file, 0, 0}, "%s", failed);
        else
            diag_error_plain(&c->sink, "%s", failed);
    }
    return c;
}

void lsp_analysis_free(Compilation *c) {
    if (!c)
        return;
    compilation_free(c);
    free(c);
}

/* ------------------------------------------------------------------ */
/* Documents */

static void analyse_doc(LspDoc *doc) {
    lsp_analysis_free(doc->c);
    doc->c = lsp_analyse(doc->path, doc->text, doc->len, "schedule", &doc->sf, &doc->file);
}

static char *copy_text(const char *text, size_t len) {
    char *t = malloc(len + 1);
    if (t) {
        memcpy(t, text, len);
        t[len] = 0;
    }
    return t;
}

LspDoc *lsp_doc_open(const char *uri, const char *text, size_t len) {
    LspDoc *doc = calloc(1, sizeof *doc);
    if (!doc)
        return NULL;
    doc->uri = strdup(uri);
    doc->path = lsp_uri_to_path(uri);
    doc->text = copy_text(text, len);
    doc->len = len;
    if (!doc->uri || !doc->path || !doc->text) {
        lsp_doc_free(doc);
        return NULL;
    }
    analyse_doc(doc);
    return doc;
}

void lsp_doc_update(LspDoc *doc, const char *text, size_t len) {
    char *t = copy_text(text, len);
    if (!t)
        return;
    free(doc->text);
    doc->text = t;
    doc->len = len;
    analyse_doc(doc);
}

void lsp_doc_free(LspDoc *doc) {
    if (!doc)
        return;
    lsp_analysis_free(doc->c);
    free(doc->uri);
    free(doc->path);
    free(doc->text);
    free(doc);
}

/* ------------------------------------------------------------------ */
/* Positions: lines from 0, characters in UTF-16 code units. */

static int utf16_units(unsigned char lead) {
    return lead >= 0xF0 ? 2 : 1;
}

uint32_t lsp_offset(const SourceFile *f, int line, int character) {
    if (line < 0)
        return 0;
    if (line >= f->nlines)
        return (uint32_t)f->len;
    size_t len;
    const char *t = source_line_text(f, line + 1, &len);
    size_t i = 0;
    for (int u = 0; i < len && u < character;) {
        u += utf16_units((unsigned char)t[i++]);
        while (i < len && ((unsigned char)t[i] & 0xC0) == 0x80)
            i++;
    }
    return f->line_starts[line] + (uint32_t)i;
}

json_t *lsp_position(const SourceFile *f, uint32_t offset) {
    int line, col;
    source_line_col(f, offset, &line, &col);
    size_t len;
    const char *t = source_line_text(f, line, &len);
    int u = 0;
    for (size_t i = 0; i < (size_t)(col - 1) && i < len; ++i)
        if (((unsigned char)t[i] & 0xC0) != 0x80)
            u += utf16_units((unsigned char)t[i]);
    return json_pack("{s:i, s:i}", "line", line - 1, "character", u);
}

json_t *lsp_range(const SourceFile *f, Span span) {
    return json_pack("{s:o, s:o}", "start", lsp_position(f, span.lo), "end",
                     lsp_position(f, span.hi > span.lo ? span.hi : span.lo));
}

json_t *lsp_string(const char *s) {
    json_t *j = json_string(s);
    if (j)
        return j;
    char *copy = strdup(s);
    if (!copy)
        return json_string("");
    for (char *p = copy; *p; ++p)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    j = json_string(copy);
    free(copy);
    return j ? j : json_string("");
}

/* ------------------------------------------------------------------ */
/* URIs */

static int hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

char *lsp_uri_to_path(const char *uri) {
    if (strncmp(uri, "file://", 7) != 0)
        return strdup(uri);
    const char *p = uri + 7;
    if (strncmp(p, "localhost/", 10) == 0)
        p += 9;
    char *out = malloc(strlen(p) + 1), *o = out;
    if (!out)
        return NULL;
    for (; *p; ++p) {
        int hi, lo;
        if (*p == '%' && (hi = hexval(p[1])) >= 0 && (lo = hexval(p[2])) >= 0) {
            *o++ = (char)(hi * 16 + lo);
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = 0;
    return out;
}

/* "file://" and the path, percent-encoded; malloc'd. */
static char *path_to_uri(const char *path) {
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(7 + 3 * strlen(path) + 1), *o = out;
    if (!out)
        return NULL;
    memcpy(o, "file://", 7);
    o += 7;
    for (const unsigned char *p = (const unsigned char *)path; *p; ++p) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("/._~-", *p)) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = 0;
    return out;
}

/* The URI of a source of c: the document's own, the standard library's
 * files in the source tree primec was built from, an import's real
 * path. NULL when the file is nowhere on disk. */
static char *file_uri(const LspDoc *doc, const Compilation *c, uint32_t file) {
    const SourceFile *f = source_get(&c->sources, file);
    if (strcmp(f->name, doc->path) == 0)
        return strdup(doc->uri);
    char path[PATH_MAX];
    if (strncmp(f->name, "<stdlib>/", 9) == 0) {
        snprintf(path, sizeof path, "%s/%s", PRIMEC_STDLIB_SOURCE_DIR, f->name + 9);
        return access(path, R_OK) == 0 ? path_to_uri(path) : NULL;
    }
    return realpath(f->name, path) ? path_to_uri(path) : NULL;
}

json_t *lsp_location(const LspDoc *doc, const Compilation *c, Span span) {
    char *uri = file_uri(doc, c, span.file);
    if (!uri)
        return NULL;
    json_t *loc = json_pack("{s:s, s:o}", "uri", uri, "range",
                            lsp_range(source_get(&c->sources, span.file), span));
    free(uri);
    return loc;
}

/* ------------------------------------------------------------------ */
/* Diagnostics */

static int severity(DiagLevel level) {
    switch (level) {
    case DIAG_ERROR:
        return 1;
    case DIAG_WARNING:
        return 2;
    case DIAG_NOTE:
    case DIAG_REMARK:
        return 3;
    }
    return 1;
}

/* Where a diagnostic about another file (an import) or no file shows in
 * the document: its first character, the place in the message. */
static json_t *diagnostic_of(const LspDoc *doc, const Diagnostic *d) {
    const Compilation *c = doc->c;
    json_t *range;
    const char *message = d->message;
    char *owned = NULL;
    if (d->has_span && doc->sf && d->span.file == doc->file) {
        range = lsp_range(doc->sf, d->span);
    } else {
        Span none = {doc->file, 0, 0};
        range = doc->sf ? lsp_range(doc->sf, none)
                        : json_pack("{s:{s:i,s:i}, s:{s:i,s:i}}", "start", "line", 0, "character",
                                    0, "end", "line", 0, "character", 0);
        if (d->has_span) {
            const SourceFile *f = source_get(&c->sources, d->span.file);
            int line, col;
            source_line_col(f, d->span.lo, &line, &col);
            size_t n = strlen(f->name) + strlen(message) + 32;
            owned = malloc(n);
            if (owned) {
                snprintf(owned, n, "%s:%d:%d: %s", f->name, line, col, message);
                message = owned;
            }
        }
    }
    json_t *j = json_pack("{s:o, s:i, s:s, s:o}", "range", range, "severity", severity(d->level),
                          "source", "primec", "message", lsp_string(message));
    free(owned);
    return j;
}

json_t *lsp_diagnostics(const LspDoc *doc) {
    json_t *list = json_array();
    const DiagSink *sink = doc->c ? &doc->c->sink : NULL;
    json_t *last = NULL; /* the error or warning a note belongs to */
    for (int i = 0; sink && i < sink->count; ++i) {
        const Diagnostic *d = &sink->items[i];
        json_t *loc = d->level == DIAG_NOTE && d->has_span && last
                          ? lsp_location(doc, doc->c, d->span)
                          : NULL;
        if (loc) {
            json_t *rel = json_object_get(last, "relatedInformation");
            if (!rel) {
                rel = json_array();
                json_object_set_new(last, "relatedInformation", rel);
            }
            json_array_append_new(
                rel, json_pack("{s:o, s:o}", "location", loc, "message", lsp_string(d->message)));
        } else if (d->level == DIAG_NOTE && last) {
            const char *m = json_string_value(json_object_get(last, "message"));
            size_t n = strlen(m) + strlen(d->message) + 16;
            char *joined = malloc(n);
            if (joined) {
                snprintf(joined, n, "%s\nnote: %s", m, d->message);
                json_object_set_new(last, "message", lsp_string(joined));
                free(joined);
            }
        } else {
            last = diagnostic_of(doc, d);
            json_array_append_new(list, last);
        }
    }
    return json_pack("{s:s, s:o}", "uri", doc->uri, "diagnostics", list);
}
