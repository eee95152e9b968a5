/*
 * profile.c — reading and writing hardware profiles (profile.h).
 *
 * The format is one setting per line, `key value`, plus one row per
 * communication kind and link class:
 *
 *     link intra allreduce alpha_us 12.0 beta_GBps 130
 *
 * '#' starts a comment anywhere on a line. Every key and every row is
 * required exactly once; errors carry the line number.
 */
#define _POSIX_C_SOURCE 200809L
#include "profile.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "paths.h"

static const char *const comm_names[] = {
#define PROFILE_X(kind, name, alias) name,
    PROFILE_COMM_LIST(PROFILE_X)
#undef PROFILE_X
};
static const char *const comm_aliases[] = {
#define PROFILE_X(kind, name, alias) alias,
    PROFILE_COMM_LIST(PROFILE_X)
#undef PROFILE_X
};
static const char *const link_names[] = {"intra", "inter"};

const char *comm_kind_name(CommKind kind) {
    return kind < COMM_KIND_COUNT ? comm_names[kind] : "?";
}

const char *link_class_name(LinkClass link) {
    return link < LINK_CLASS_COUNT ? link_names[link] : "?";
}

const char *profile_dir(void) {
    return primec_paths()->profile_dir;
}

double profile_gemm_efficiency(const Profile *p, double min_dim) {
    if (min_dim < 1)
        min_dim = 1;
    return p->gemm_eff_max * min_dim / (min_dim + p->gemm_half_dim);
}

/* ------------------------------------------------------------------ */
/* Parsing                                                             */

/* How a numeric key's value is checked. */
typedef enum Range { RANGE_POSITIVE, RANGE_NONNEG, RANGE_UNIT, RANGE_COUNT_INT } Range;

typedef struct Key {
    const char *name;
    size_t offset; /* of the double (or int, for RANGE_COUNT_INT) in Profile */
    Range range;
} Key;

#define KEY(field, range)                                                                          \
    { #field, offsetof(Profile, field), range }
static const Key keys[] = {
    KEY(devices_per_node, RANGE_COUNT_INT), KEY(peak_tflops, RANGE_POSITIVE),
    KEY(vector_tflops, RANGE_POSITIVE),     KEY(mem_bandwidth_GBps, RANGE_POSITIVE),
    KEY(mem_capacity_GB, RANGE_POSITIVE),   KEY(gemm_eff_max, RANGE_UNIT),
    KEY(gemm_half_dim, RANGE_NONNEG),       KEY(kernel_overhead_us, RANGE_NONNEG),
};
#undef KEY
enum { NKEYS = sizeof keys / sizeof keys[0] };

typedef struct Parser {
    const char *filename;
    int line;
    char *err;
    size_t errlen;
    int key_line[NKEYS];
    int name_line, desc_line;
    int link_line[COMM_KIND_COUNT][LINK_CLASS_COUNT];
} Parser;

__attribute__((format(printf, 2, 3))) static int fail(Parser *p, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->line > 0)
        snprintf(p->err, p->errlen, "%s:%d: error: %s", p->filename, p->line, msg);
    else
        snprintf(p->err, p->errlen, "%s: error: %s", p->filename, msg);
    return 0;
}

#define MAX_TOKENS 16
#define TOKEN_MAX 128

/* Splits a line (without its comment) into tokens. */
static int tokenize(Parser *p, const char *line, size_t len, char tok[][TOKEN_MAX], int *ntok) {
    *ntok = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
            i++;
        if (i == len)
            break;
        size_t start = i;
        while (i < len && line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
            i++;
        if (*ntok == MAX_TOKENS)
            return fail(p, "too many words on one line (at most %d)", MAX_TOKENS);
        if (i - start >= TOKEN_MAX)
            return fail(p, "word '%.20s...' is too long", line + start);
        memcpy(tok[*ntok], line + start, i - start);
        tok[*ntok][i - start] = '\0';
        (*ntok)++;
    }
    return 1;
}

static int parse_number(Parser *p, const char *what, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v))
        return fail(p, "%s expects a number, got '%s'", what, s);
    *out = v;
    return 1;
}

static int parse_key(Parser *p, Profile *out, int k, char tok[][TOKEN_MAX], int ntok) {
    const Key *key = &keys[k];
    if (p->key_line[k])
        return fail(p, "'%s' given twice (first on line %d)", key->name, p->key_line[k]);
    if (ntok != 2)
        return fail(p, "'%s' takes one value, got %d", key->name, ntok - 1);
    double v = 0;
    if (!parse_number(p, key->name, tok[1], &v))
        return 0;
    switch (key->range) {
    case RANGE_POSITIVE:
        if (!(v > 0))
            return fail(p, "'%s' must be positive, got %s", key->name, tok[1]);
        break;
    case RANGE_NONNEG:
        if (v < 0)
            return fail(p, "'%s' must not be negative, got %s", key->name, tok[1]);
        break;
    case RANGE_UNIT:
        if (!(v > 0 && v <= 1))
            return fail(p, "'%s' must be in (0, 1], got %s", key->name, tok[1]);
        break;
    case RANGE_COUNT_INT:
        if (!(v >= 1 && v <= 1 << 20 && v == floor(v)))
            return fail(p, "'%s' must be a whole number of at least 1, got %s", key->name, tok[1]);
        *(int *)((char *)out + key->offset) = (int)v;
        p->key_line[k] = p->line;
        return 1;
    }
    *(double *)((char *)out + key->offset) = v;
    p->key_line[k] = p->line;
    return 1;
}

/* link CLASS KIND alpha_us A beta_GBps B */
static int parse_link(Parser *p, Profile *out, char tok[][TOKEN_MAX], int ntok) {
    if (ntok < 3)
        return fail(p, "expected 'link CLASS KIND alpha_us A beta_GBps B'");
    int cls = -1, kind = -1;
    for (int c = 0; c < LINK_CLASS_COUNT; ++c)
        if (strcmp(tok[1], link_names[c]) == 0)
            cls = c;
    if (cls < 0)
        return fail(p, "unknown link class '%s' (expected intra or inter)", tok[1]);
    for (int k = 0; k < COMM_KIND_COUNT; ++k)
        if (strcmp(tok[2], comm_names[k]) == 0 || strcmp(tok[2], comm_aliases[k]) == 0)
            kind = k;
    if (kind < 0)
        return fail(p,
                    "unknown communication kind '%s' (expected p2p, allreduce, reduce_scatter or "
                    "allgather)",
                    tok[2]);
    if (p->link_line[kind][cls])
        return fail(p, "'link %s %s' given twice (first on line %d)", link_names[cls],
                    comm_names[kind], p->link_line[kind][cls]);
    if (ntok != 7 || strcmp(tok[3], "alpha_us") != 0 || strcmp(tok[5], "beta_GBps") != 0)
        return fail(p, "expected 'link %s %s alpha_us A beta_GBps B'", link_names[cls],
                    comm_names[kind]);
    LinkCost lc;
    if (!parse_number(p, "alpha_us", tok[4], &lc.alpha_us) ||
        !parse_number(p, "beta_GBps", tok[6], &lc.beta_GBps))
        return 0;
    if (lc.alpha_us < 0)
        return fail(p, "alpha_us must not be negative, got %s", tok[4]);
    if (!(lc.beta_GBps > 0))
        return fail(p, "beta_GBps must be positive, got %s", tok[6]);
    out->link[kind][cls] = lc;
    p->link_line[kind][cls] = p->line;
    return 1;
}

/* `name` and `description`: the rest of the line, trimmed. */
static int parse_text(Parser *p, const char *what, int *seen, const char *line, size_t len,
                      char *dst, size_t cap) {
    if (*seen)
        return fail(p, "'%s' given twice (first on line %d)", what, *seen);
    size_t i = strlen(what);
    while (i < len && (line[i] == ' ' || line[i] == '\t'))
        i++;
    while (len > i && (line[len - 1] == ' ' || line[len - 1] == '\t' || line[len - 1] == '\r'))
        len--;
    if (len == i)
        return fail(p, "'%s' needs a value", what);
    if (len - i >= cap)
        return fail(p, "'%s' is longer than %zu characters", what, cap - 1);
    memcpy(dst, line + i, len - i);
    dst[len - i] = '\0';
    *seen = p->line;
    return 1;
}

int profile_parse(const char *text, const char *filename, Profile *out, char *err, size_t errlen) {
    Parser p;
    memset(&p, 0, sizeof p);
    p.filename = filename ? filename : "<profile>";
    p.err = err;
    p.errlen = errlen;
    memset(out, 0, sizeof *out);

    const char *line = text;
    while (*line) {
        p.line++;
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *hash = memchr(line, '#', len);
        size_t body = hash ? (size_t)(hash - line) : len;
        size_t lead = 0;
        while (lead < body && (line[lead] == ' ' || line[lead] == '\t'))
            lead++;
        const char *s = line + lead;
        size_t n = body - lead;
        size_t w = 0; /* the first word: free text follows name and description */
        while (w < n && s[w] != ' ' && s[w] != '\t' && s[w] != '\r')
            w++;
        char tok[MAX_TOKENS][TOKEN_MAX];
        int ntok = 0;
        if (w == 4 && memcmp(s, "name", 4) == 0) {
            if (!parse_text(&p, "name", &p.name_line, s, n, out->name, sizeof out->name))
                return 0;
        } else if (w == 11 && memcmp(s, "description", 11) == 0) {
            if (!parse_text(&p, "description", &p.desc_line, s, n, out->description,
                            sizeof out->description))
                return 0;
        } else if (!tokenize(&p, s, n, tok, &ntok)) {
            return 0;
        }
        if (ntok > 0) {
            int ok = 1;
            if (strcmp(tok[0], "link") == 0) {
                ok = parse_link(&p, out, tok, ntok);
            } else {
                int k = 0;
                while (k < NKEYS && strcmp(keys[k].name, tok[0]) != 0)
                    k++;
                if (k == NKEYS)
                    return fail(&p, "unknown key '%s'", tok[0]);
                ok = parse_key(&p, out, k, tok, ntok);
            }
            if (!ok)
                return 0;
        }
        if (!nl)
            break;
        line = nl + 1;
    }
    p.line = 0;
    if (!p.name_line)
        return fail(&p, "missing key 'name'");
    for (int k = 0; k < NKEYS; ++k)
        if (!p.key_line[k])
            return fail(&p, "missing key '%s'", keys[k].name);
    for (int c = 0; c < LINK_CLASS_COUNT; ++c)
        for (int k = 0; k < COMM_KIND_COUNT; ++k)
            if (!p.link_line[k][c])
                return fail(&p, "missing row 'link %s %s alpha_us A beta_GBps B'", link_names[c],
                            comm_names[k]);
    return 1;
}

/* ------------------------------------------------------------------ */
/* Loading                                                             */

static char *read_all(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read profile '%s': %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (len + 1 < cap)
            break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        snprintf(err, errlen, "cannot read profile '%s'%s", path, buf ? "" : ": out of memory");
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    if (strlen(buf) != len) {
        snprintf(err, errlen, "cannot read profile '%s': it contains a NUL byte", path);
        free(buf);
        return NULL;
    }
    return buf;
}

static int load_path(const char *path, Profile *out, char *err, size_t errlen) {
    char *text = read_all(path, err, errlen);
    if (!text)
        return 0;
    int ok = profile_parse(text, path, out, err, errlen);
    free(text);
    return ok;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int profile_load(const char *path_or_name, Profile *out, char *err, size_t errlen) {
    size_t n = strlen(path_or_name);
    const char *ext = ".profile";
    size_t elen = strlen(ext);
    int is_path =
        strchr(path_or_name, '/') || (n >= elen && strcmp(path_or_name + n - elen, ext) == 0);
    if (is_path)
        return load_path(path_or_name, out, err, errlen);
    if (n == 0) {
        snprintf(err, errlen, "empty profile name");
        return 0;
    }

    const char *dir = profile_dir();
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "cannot open the profile directory '%s': %s", dir, strerror(errno));
        return 0;
    }
    char *all[256], *match[256];
    int nall = 0, nmatch = 0, exact = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && nall < 256) {
        size_t len = strlen(e->d_name);
        if (len <= elen || strcmp(e->d_name + len - elen, ext) != 0)
            continue;
        char *name = malloc(len - elen + 1);
        if (!name)
            break;
        memcpy(name, e->d_name, len - elen);
        name[len - elen] = '\0';
        all[nall++] = name;
    }
    closedir(d);
    qsort(all, (size_t)nall, sizeof all[0], cmp_str);
    for (int i = 0; i < nall; ++i) {
        if (strncmp(all[i], path_or_name, n) != 0)
            continue;
        if (strlen(all[i]) == n)
            exact = nmatch;
        match[nmatch++] = all[i];
    }
    int ok = 0;
    if (exact >= 0 || nmatch == 1) {
        const char *name = match[exact >= 0 ? exact : 0];
        size_t plen = strlen(dir) + strlen(name) + elen + 2;
        char *path = malloc(plen);
        if (path) {
            snprintf(path, plen, "%s/%s%s", dir, name, ext);
            ok = load_path(path, out, err, errlen);
            free(path);
        } else {
            snprintf(err, errlen, "out of memory");
        }
    } else {
        char list[512] = "";
        size_t used = 0;
        char *const *names = nmatch ? match : all;
        int count = nmatch ? nmatch : nall;
        for (int i = 0; i < count && used + 1 < sizeof list; ++i) {
            int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", names[i]);
            if (w < 0)
                break;
            used += (size_t)w;
        }
        if (nmatch > 1)
            snprintf(err, errlen, "profile name '%s' is ambiguous: %s", path_or_name, list);
        else
            snprintf(err, errlen, "no profile '%s' in %s (profiles: %s)", path_or_name, dir,
                     nall ? list : "none");
    }
    for (int i = 0; i < nall; ++i)
        free(all[i]);
    return ok;
}

/* ------------------------------------------------------------------ */
/* Writing                                                             */

void profile_write(const Profile *p, const char *comment, FILE *out) {
    if (comment) {
        const char *line = comment;
        while (*line) {
            const char *nl = strchr(line, '\n');
            int len = nl ? (int)(nl - line) : (int)strlen(line);
            fprintf(out, len ? "# %.*s\n" : "#\n", len, line);
            if (!nl)
                break;
            line = nl + 1;
        }
        fprintf(out, "\n");
    }
    fprintf(out, "name %s\n", p->name[0] ? p->name : "unnamed");
    if (p->description[0])
        fprintf(out, "description %s\n", p->description);
    fprintf(out, "devices_per_node %d\n", p->devices_per_node);
    fprintf(out, "peak_tflops %.6g\n", p->peak_tflops);
    fprintf(out, "vector_tflops %.6g\n", p->vector_tflops);
    fprintf(out, "mem_bandwidth_GBps %.6g\n", p->mem_bandwidth_GBps);
    fprintf(out, "mem_capacity_GB %.6g\n", p->mem_capacity_GB);
    fprintf(out, "gemm_eff_max %.6g\n", p->gemm_eff_max);
    fprintf(out, "gemm_half_dim %.6g\n", p->gemm_half_dim);
    fprintf(out, "kernel_overhead_us %.6g\n", p->kernel_overhead_us);
    fprintf(out, "\n#    class kind            alpha_us       beta_GBps\n");
    for (int c = 0; c < LINK_CLASS_COUNT; ++c)
        for (int k = 0; k < COMM_KIND_COUNT; ++k)
            fprintf(out, "link %-5s %-15s alpha_us %-8.6g beta_GBps %.6g\n", link_names[c],
                    comm_names[k], p->link[k][c].alpha_us, p->link[k][c].beta_GBps);
}
