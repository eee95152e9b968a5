/*
 * prime_weights.c — --weights, --weights-map and --save-grads of an
 * emitted program (prime_weights.h, docs/weights.md).
 */
#define _POSIX_C_SOURCE 200809L
#include "prime_weights.h"

#include "prime_devops.h"

#include "safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_weight(const PrimeProgram *prog, int v) {
    return prog->value_weight && prog->value_weight[v];
}

/* The program's name of value v: its first filled tensor's. */
static const char *own_name(const PrimeProgram *prog, int v) {
    for (int t = 0; t < prog->ntensors; ++t)
        if (prog->tensors[t].value == v && prog->tensors[t].fill_after >= 0)
            return prog->tensors[t].name;
    return "";
}

/* Reads `prime_name safetensors_name` lines into names. */
static int read_map(const PrimeProgram *prog, const char *path, PrimeWeightNames *names) {
    FILE *in = fopen(path, "r");
    if (!in) {
        fprintf(stderr, "%s: cannot read '%s': %s\n", prog->name, path, strerror(errno));
        return 2;
    }
    char line[1024];
    int rc = 0;
    for (int lineno = 1; rc == 0 && fgets(line, sizeof line, in); ++lineno) {
        char a[512], b[512], extra[2];
        int k = sscanf(line, " %511s %511s %1s", a, b, extra);
        if (k <= 0 || a[0] == '#')
            continue;
        if (k != 2) {
            fprintf(stderr, "%s:%d:1: error: expected `prime_name safetensors_name`\n", path,
                    lineno);
            rc = 2;
            break;
        }
        int v = 0;
        while (v < names->nvalues && !(names->name[v] && strcmp(own_name(prog, v), a) == 0))
            ++v;
        if (v == names->nvalues) {
            fprintf(stderr, "%s:%d:1: error: '%s' is no weight or input of %s\n", path, lineno, a,
                    prog->name);
            rc = 2;
        } else {
            char *dup = strdup(b);
            if (!dup) {
                rc = 3;
                break;
            }
            free(names->name[v]);
            names->name[v] = dup;
        }
    }
    fclose(in);
    return rc;
}

/* The model's source of a value named `own`: a declaration `name`
 * outside a layer, or name_L of a layer copy (*layer = L). */
static const PrimeWeightSource *source_of(const PrimeProgram *prog, const char *own, long *layer) {
    for (int i = 0; i < prog->nweight_sources; ++i) {
        const PrimeWeightSource *ws = &prog->weight_sources[i];
        size_t n = strlen(ws->name);
        if (!ws->in_layer && strcmp(own, ws->name) == 0) {
            *layer = -1;
            return ws;
        }
        if (ws->in_layer && strncmp(own, ws->name, n) == 0 && own[n] == '_' && own[n + 1]) {
            char *end;
            long l = strtol(own + n + 1, &end, 10);
            if (*end == '\0' && l >= 0) {
                *layer = l;
                return ws;
            }
        }
    }
    return NULL;
}

/* file_name with every `{layer}` replaced by layer. */
static char *expand_source(const char *file_name, long layer) {
    char num[32];
    snprintf(num, sizeof num, "%ld", layer);
    size_t n = strlen(file_name) + 1;
    for (const char *c = strstr(file_name, "{layer}"); c; c = strstr(c + 7, "{layer}"))
        n += strlen(num);
    char *out = malloc(n), *o = out;
    if (!out)
        return NULL;
    for (const char *c = file_name; *c;) {
        if (strncmp(c, "{layer}", 7) == 0) {
            o += sprintf(o, "%s", num);
            c += 7;
        } else {
            *o++ = *c++;
        }
    }
    *o = '\0';
    return out;
}

int prime_weight_names(const PrimeProgram *prog, const char *map_file, PrimeWeightNames *out) {
    out->nvalues = prog->nvalues;
    out->name = calloc((size_t)prog->nvalues + 1, sizeof(char *));
    out->transposed = calloc((size_t)prog->nvalues + 1, 1);
    if (!out->name || !out->transposed)
        return 3;
    for (int t = 0; t < prog->ntensors; ++t) {
        const PrimeTensorDesc *d = &prog->tensors[t];
        if (d->fill_after < 0 || d->value < 0 || d->value >= prog->nvalues || out->name[d->value])
            continue;
        long layer;
        const PrimeWeightSource *ws = source_of(prog, d->name, &layer);
        out->name[d->value] = ws ? expand_source(ws->file_name, layer) : strdup(d->name);
        if (!out->name[d->value])
            return 3;
        out->transposed[d->value] = ws && ws->transposed && d->ndims == 2;
    }
    /* The map names by the program's names: read it once all are known. */
    return map_file ? read_map(prog, map_file, out) : 0;
}

void prime_weight_names_free(PrimeWeightNames *n) {
    for (int v = 0; n->name && v < n->nvalues; ++v)
        free(n->name[v]);
    free(n->name);
    free(n->transposed);
    n->name = NULL;
    n->transposed = NULL;
}

void prime_weights_list(const PrimeProgram *prog, const PrimeWeightNames *names) {
    for (int v = 0; v < prog->nvalues; ++v) {
        if (!names->name[v])
            continue;
        const char *own = own_name(prog, v);
        const PrimeTensorDesc *d = NULL;
        for (int t = 0; t < prog->ntensors && !d; ++t)
            if (prog->tensors[t].value == v && prog->tensors[t].fill_after >= 0)
                d = &prog->tensors[t];
        printf("%s %s %s [", is_weight(prog, v) ? "weight" : "input", own, names->name[v]);
        for (int x = 0; x < d->ndims; ++x)
            printf("%s%ld", x ? ", " : "", d->shape[x]);
        if (names->transposed[v])
            printf("] transposed [%ld, %ld] in the file\n", d->shape[1], d->shape[0]);
        else
            printf("]\n");
    }
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.safetensors files of dir, opened, in name order. */
static int open_dir(const PrimeProgram *prog, const char *dir, PrimeStFile **files, int *nfiles) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "%s: cannot read the weights directory '%s': %s\n", prog->name, dir,
                strerror(errno));
        return 2;
    }
    char **paths = NULL;
    int n = 0, cap = 0, rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        size_t k = strlen(e->d_name), suf = strlen(".safetensors");
        if (k <= suf || strcmp(e->d_name + k - suf, ".safetensors") != 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            char **grown = realloc(paths, sizeof(char *) * (size_t)cap);
            if (!grown) {
                rc = 3;
                break;
            }
            paths = grown;
        }
        paths[n] = malloc(strlen(dir) + k + 2);
        if (!paths[n]) {
            rc = 3;
            break;
        }
        sprintf(paths[n++], "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (rc == 0 && n == 0) {
        fprintf(stderr, "%s: no .safetensors file in '%s'\n", prog->name, dir);
        rc = 2;
    }
    if (n)
        qsort(paths, (size_t)n, sizeof(char *), cmp_str);
    *files = rc == 0 ? calloc((size_t)n, sizeof **files) : NULL;
    if (rc == 0 && !*files)
        rc = 3;
    for (int i = 0; i < n && rc == 0; ++i) {
        char err[512];
        if (prime_st_open(paths[i], &(*files)[i], err, sizeof err) != 0) {
            fprintf(stderr, "%s: error: %s\n", paths[i], err);
            rc = 2;
        }
        *nfiles = i + 1;
    }
    for (int i = 0; i < n; ++i)
        free(paths[i]);
    free(paths);
    return rc;
}

static void print_shape(const long *shape, int ndims) {
    fprintf(stderr, "[");
    for (int x = 0; x < ndims; ++x)
        fprintf(stderr, "%s%ld", x ? ", " : "", shape[x]);
    fprintf(stderr, "]");
}

/* The file tensor named `name`, or NULL; *dup when two files hold it. */
static const PrimeStTensor *find(PrimeStFile *files, int nfiles, const char *name, int *dup,
                                 unsigned char **used) {
    const PrimeStTensor *hit = NULL;
    for (int f = 0; f < nfiles; ++f)
        for (int i = 0; i < files[f].ntensors; ++i)
            if (strcmp(files[f].tensors[i].name, name) == 0) {
                *dup |= hit != NULL;
                hit = &files[f].tensors[i];
                used[f][i] = 1;
            }
    return hit;
}

struct PrimeWeightFiles {
    PrimeStFile *files;
    int nfiles;
    int nvalues;
    const PrimeStTensor **of;        /* per value: its tensor in the files, or NULL */
    const unsigned char *transposed; /* per value (the names') */
};

/* Matches the values with the files' tensors: of[v] for each one found. */
static int match_values(const PrimeProgram *prog, const PrimeWeightNames *names,
                        PrimeWeightFiles *w, unsigned char **used) {
    int rc = 0;
    for (int v = 0; v < prog->nvalues; ++v) {
        if (!names->name[v])
            continue;
        const PrimeTensorDesc *d = NULL;
        for (int t = 0; t < prog->ntensors && !d; ++t)
            if (prog->tensors[t].value == v && prog->tensors[t].fill_after >= 0)
                d = &prog->tensors[t];
        int dup = 0;
        const PrimeStTensor *st = find(w->files, w->nfiles, names->name[v], &dup, used);
        const char *kind = is_weight(prog, v) ? "weight" : "input";
        if (!st) {
            if (is_weight(prog, v)) {
                fprintf(stderr, "%s: error: weight '%s' is missing from the files\n", prog->name,
                        names->name[v]);
                rc = 2;
            }
            continue;
        }
        /* The shape the file must hold: the value's, or its transpose. */
        int tr = names->transposed[v];
        long want[PRIME_MAX_DIMS];
        for (int x = 0; x < d->ndims; ++x)
            want[x] = d->shape[tr ? d->ndims - 1 - x : x];
        int same = st->ndims == d->ndims;
        for (int x = 0; same && x < d->ndims; ++x)
            same = st->shape[x] == want[x];
        if (dup) {
            fprintf(stderr, "%s: error: %s '%s' is in more than one file\n", prog->name, kind,
                    names->name[v]);
            rc = 2;
        } else if (!same) {
            fprintf(stderr, "%s: error: %s '%s' has shape ", prog->name, kind, names->name[v]);
            print_shape(st->shape, st->ndims);
            fprintf(stderr, " (%s) in the file; %s needs ", prime_st_dtype_name(st->dtype),
                    d->name);
            print_shape(want, d->ndims);
            fprintf(stderr, "%s\n", tr ? " (its transpose: `from ... transposed`)" : "");
            rc = 2;
        } else {
            w->of[v] = st;
        }
    }
    return rc;
}

int prime_weights_open(const PrimeProgram *prog, const PrimeWeightNames *names, const char *dir,
                       PrimeWeightFiles **out) {
    *out = NULL;
    PrimeWeightFiles *w = calloc(1, sizeof *w);
    if (!w)
        return 3;
    w->nvalues = prog->nvalues;
    w->transposed = names->transposed;
    w->of = calloc((size_t)prog->nvalues + 1, sizeof *w->of);
    int rc = w->of ? open_dir(prog, dir, &w->files, &w->nfiles) : 3;
    unsigned char **used = rc == 0 ? calloc((size_t)w->nfiles + 1, sizeof *used) : NULL;
    if (rc == 0 && !used)
        rc = 3;
    for (int f = 0; rc == 0 && f < w->nfiles; ++f)
        if (!(used[f] = calloc((size_t)w->files[f].ntensors + 1, 1)))
            rc = 3;
    if (rc == 0)
        rc = match_values(prog, names, w, used);
    /* Tensors of the files the program has no use for: a warning (a
     * checkpoint often holds more than one model's part). */
    for (int f = 0; rc == 0 && f < w->nfiles; ++f)
        for (int i = 0; i < w->files[f].ntensors; ++i)
            if (!used[f][i])
                fprintf(stderr, "%s: warning: '%s' in the weights is no weight or input of %s\n",
                        prog->name, w->files[f].tensors[i].name, prog->name);
    for (int f = 0; used && f < w->nfiles; ++f)
        free(used[f]);
    free(used);
    if (rc != 0) {
        prime_weights_close(w);
        return rc;
    }
    *out = w;
    return 0;
}

int prime_weights_has(const PrimeWeightFiles *w, int v) {
    return w && v >= 0 && v < w->nvalues && w->of[v] != NULL;
}

int prime_weights_read_box(const PrimeWeightFiles *w, int v, const PrimeTensorDesc *d,
                           const long *off, const long *box, float *dst) {
    const PrimeStTensor *st = w->of[v];
    int nd = d->ndims;
    if (w->transposed[v] && nd == 2) {
        /* The file holds [c, r] for the value's [r, c]: value row i of the
         * box is column off[0] + i of the file. */
        long rows = d->shape[0];
        float *col = malloc(sizeof(float) * (size_t)box[0] + 1);
        if (!col)
            return 3;
        for (long j = 0; j < box[1]; ++j) {
            prime_st_read_f32(st, (size_t)((off[1] + j) * rows + off[0]), (size_t)box[0], col);
            for (long i = 0; i < box[0]; ++i)
                dst[i * box[1] + j] = col[i];
        }
        free(col);
        return 0;
    }
    /* Rows of the box along the last dimension, contiguous in the file. */
    long rows = 1, idx[PRIME_MAX_DIMS] = {0};
    for (int x = 0; x + 1 < nd; ++x)
        rows *= box[x];
    long row_len = nd ? box[nd - 1] : 1;
    for (long r = 0; r < rows; ++r) {
        long at = 0;
        for (int x = 0; x < nd; ++x)
            at = at * d->shape[x] + off[x] + (x + 1 < nd ? idx[x] : 0);
        prime_st_read_f32(st, (size_t)at, (size_t)row_len, dst + r * row_len);
        for (int x = nd - 2; x >= 0; --x) {
            if (++idx[x] < box[x])
                break;
            idx[x] = 0;
        }
    }
    return 0;
}

void prime_weights_close(PrimeWeightFiles *w) {
    if (!w)
        return;
    for (int f = 0; f < w->nfiles; ++f)
        prime_st_close(&w->files[f]);
    free(w->files);
    free(w->of);
    free(w);
}

int prime_weights_load(const PrimeProgram *prog, const PrimeWeightNames *names, const char *dir,
                       float *const *whole) {
    PrimeWeightFiles *w;
    int rc = prime_weights_open(prog, names, dir, &w);
    static const long zero[PRIME_MAX_DIMS] = {0};
    for (int v = 0; rc == 0 && v < prog->nvalues; ++v) {
        if (!prime_weights_has(w, v))
            continue;
        const PrimeTensorDesc *d = NULL;
        for (int t = 0; t < prog->ntensors && !d; ++t)
            if (prog->tensors[t].value == v && prog->tensors[t].fill_after >= 0)
                d = &prog->tensors[t];
        rc = prime_weights_read_box(w, v, d, zero, d->shape, whole[v]);
    }
    prime_weights_close(w);
    return rc;
}

int prime_grads_init(PrimeGrads *g, const PrimeProgram *prog, const PrimeWeightNames *names) {
    memset(g, 0, sizeof *g);
    size_t n = (size_t)prog->nvalues + 1;
    g->value = calloc(n, sizeof(int));
    g->tensor = calloc(n, sizeof(int));
    g->off = calloc(n, sizeof(size_t));
    if (!g->value || !g->tensor || !g->off)
        return 3;
    /* Value 2t is model tensor t, 2t + 1 its gradient (emit_c.c). */
    for (int v = 0; v + 1 < prog->nvalues; v += 2) {
        if (!names->name[v])
            continue;
        int grad = -1;
        for (int t = 0; t < prog->ntensors && grad < 0; ++t)
            if (prog->tensors[t].value == v + 1 && prog->tensors[t].check)
                grad = t;
        if (grad < 0)
            continue;
        g->value[g->n] = v;
        g->tensor[g->n] = grad;
        g->off[g->n++] = g->total;
        g->total += (size_t)prog->value_elems[v + 1];
    }
    g->buf = calloc((size_t)prog->ndev * g->total + 1, sizeof(float));
    return g->buf ? 0 : 3;
}

void prime_grads_free(PrimeGrads *g) {
    free(g->value);
    free(g->tensor);
    free(g->off);
    free(g->buf);
    memset(g, 0, sizeof *g);
}

/* With st: copies the tiles of gradient i that rank holds at the end
 * from its store into its block; without: from its block into dense. */
/* Tiles of gradient i: from device `dev`'s store st into the rank's block
 * (through `host` and dev's download where its tiles are not host memory),
 * or, with st NULL, from the rank's block into the dense tensor. */
static PrimeStatus copy_tiles(const PrimeGrads *g, const PrimeProgram *prog, int i, int rank,
                              PrimeDev *dev, PrimeStore *st, float *host, float *dense) {
    const PrimeTensorDesc *t = &prog->tensors[g->tensor[i]];
    static const long zero[PRIME_MAX_DIMS] = {0};
    const float *block = g->buf + (size_t)rank * g->total + g->off[i];
    const PrimeDevOps *ops = dev ? prime_dev_ops(dev) : NULL;
    size_t tile_n = 1;
    for (int d = 0; d < t->ndims; ++d)
        tile_n *= (size_t)t->tile[d];
    for (int k = 0; k < prime_layout_count(prog, &t->final_layout, rank); ++k) {
        long id, off[PRIME_MAX_DIMS];
        int s;
        prime_layout_tile(prog, &t->final_layout, rank, k, &id, &s);
        prime_tile_offset(t, id, off);
        if (st) {
            const float *slot = prime_store_tile(dev, st, g->tensor[i], s);
            if (slot && ops && ops->download) {
                PrimeStatus status = ops->download(dev, host, slot, tile_n);
                if (status != PRIME_OK)
                    return status;
                slot = host;
            }
            if (slot)
                prime_copy_box(t->ndims, t->tile, slot, t->tile, zero,
                               g->buf + (size_t)rank * g->total + g->off[i], t->shape, off);
        } else {
            prime_copy_box(t->ndims, t->tile, block, t->shape, off, dense, t->shape, off);
        }
    }
    return PRIME_OK;
}

PrimeStatus prime_grads_collect(PrimeGrads *g, const PrimeProgram *prog, PrimeDev *dev,
                                PrimeStore *st) {
    const int rank = prime_dev_rank(dev);
    const PrimeDevOps *ops = prime_dev_ops(dev);
    float *host = NULL;
    if (ops->download) {
        size_t most = 1;
        for (int i = 0; i < g->n; ++i) {
            const PrimeTensorDesc *t = &prog->tensors[g->tensor[i]];
            size_t n = 1;
            for (int d = 0; d < t->ndims; ++d)
                n *= (size_t)t->tile[d];
            most = n > most ? n : most;
        }
        host = malloc(most * sizeof(float));
        if (!host)
            return prime_dev_fail_text(dev, PRIME_ERR_NOMEM,
                                       "out of memory for a gradient tile's download");
    }
    PrimeStatus status = PRIME_OK;
    for (int i = 0; i < g->n && status == PRIME_OK; ++i)
        status = copy_tiles(g, prog, i, rank, dev, st, host, NULL);
    free(host);
    return status;
}

int prime_grads_write(const PrimeGrads *g, const PrimeProgram *prog, const PrimeWeightNames *names,
                      const char *dir) {
    PrimeStOut *out = calloc((size_t)g->n + 1, sizeof *out);
    float *dense = calloc(g->total + 1, sizeof(float));
    /* Gradients of values the file holds transposed are written
     * transposed, as the weights are read. */
    float *flipped = calloc(g->total + 1, sizeof(float));
    long(*shapes)[2] = calloc((size_t)g->n + 1, sizeof *shapes);
    char *path = malloc(strlen(dir) + sizeof "/grads.safetensors");
    int rc = out && dense && flipped && shapes && path ? 0 : 3;
    for (int i = 0; rc == 0 && i < g->n; ++i) {
        const PrimeTensorDesc *t = &prog->tensors[g->tensor[i]];
        for (int r = 0; r < prog->ndev; ++r)
            copy_tiles(g, prog, i, r, NULL, NULL, NULL, dense + g->off[i]);
        out[i].name = names->name[g->value[i]];
        out[i].ndims = t->ndims;
        out[i].shape = t->shape;
        out[i].data = dense + g->off[i];
        if (names->transposed[g->value[i]] && t->ndims == 2) {
            long rows = t->shape[0], cols = t->shape[1];
            const float *a = dense + g->off[i];
            float *b = flipped + g->off[i];
            for (long x = 0; x < rows; ++x)
                for (long y = 0; y < cols; ++y)
                    b[y * rows + x] = a[x * cols + y];
            shapes[i][0] = cols;
            shapes[i][1] = rows;
            out[i].shape = shapes[i];
            out[i].data = b;
        }
    }
    char err[512];
    if (rc == 0) {
        sprintf(path, "%s/grads.safetensors", dir);
        if (prime_st_write(path, out, g->n, err, sizeof err) != 0) {
            fprintf(stderr, "%s: cannot write '%s': %s\n", prog->name, path, err);
            rc = 2;
        }
    } else {
        fprintf(stderr, "%s: out of memory\n", prog->name);
    }
    free(out);
    free(dense);
    free(flipped);
    free(shapes);
    free(path);
    return rc;
}
