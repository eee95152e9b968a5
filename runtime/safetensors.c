/*
 * safetensors.c — the safetensors reader and writer (safetensors.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The largest header accepted, as the reference implementation does. */
#define HEADER_MAX ((uint64_t)100 << 20)

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int
fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

const char *prime_st_dtype_name(PrimeStDtype d) {
    return d == PRIME_ST_F32 ? "F32" : d == PRIME_ST_F16 ? "F16" : "BF16";
}

static size_t dtype_size(PrimeStDtype d) {
    return d == PRIME_ST_F32 ? 4 : 2;
}

static int parse_dtype(const char *s, PrimeStDtype *d) {
    if (strcmp(s, "F32") == 0)
        *d = PRIME_ST_F32;
    else if (strcmp(s, "F16") == 0)
        *d = PRIME_ST_F16;
    else if (strcmp(s, "BF16") == 0)
        *d = PRIME_ST_BF16;
    else
        return 0;
    return 1;
}

/* Checks one header entry and fills t (its data inside data[0, ndata)). */
static int parse_entry(const char *name, json_t *v, const unsigned char *data, size_t ndata,
                       PrimeStTensor *t, char *err, size_t errlen) {
    if (!json_is_object(v))
        return fail(err, errlen, "tensor '%s': its entry is not an object", name);
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
           *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off))
        return fail(err, errlen, "tensor '%s': needs \"dtype\", \"shape\" and \"data_offsets\"",
                    name);
    if (!parse_dtype(json_string_value(dt), &t->dtype))
        return fail(err, errlen, "tensor '%s': dtype '%s' is not F32, F16 or BF16", name,
                    json_string_value(dt));
    size_t nd = json_array_size(sh);
    if (nd > PRIME_ST_MAX_DIMS)
        return fail(err, errlen, "tensor '%s': %zu dimensions, at most %d", name, nd,
                    PRIME_ST_MAX_DIMS);
    uint64_t elems = 1;
    for (size_t i = 0; i < nd; ++i) {
        json_t *s = json_array_get(sh, i);
        json_int_t k = json_is_integer(s) ? json_integer_value(s) : -1;
        if (k < 0 || (uint64_t)k > ((uint64_t)1 << 40))
            return fail(err, errlen, "tensor '%s': shape[%zu] is not a size", name, i);
        if (k && elems > (((uint64_t)1 << 62) / (uint64_t)k))
            return fail(err, errlen, "tensor '%s': too many elements", name);
        elems *= (uint64_t)k;
        t->shape[i] = (long)k;
    }
    t->ndims = (int)nd;
    json_t *b = json_array_get(off, 0), *e = json_array_get(off, 1);
    if (json_array_size(off) != 2 || !json_is_integer(b) || !json_is_integer(e))
        return fail(err, errlen, "tensor '%s': data_offsets is not [begin, end]", name);
    json_int_t begin = json_integer_value(b), end = json_integer_value(e);
    if (begin < 0 || end < begin || (uint64_t)end > ndata)
        return fail(err, errlen,
                    "tensor '%s': data_offsets [%lld, %lld] outside the data (%zu bytes)", name,
                    (long long)begin, (long long)end, ndata);
    uint64_t want = elems * dtype_size(t->dtype);
    if ((uint64_t)(end - begin) != want)
        return fail(err, errlen, "tensor '%s': %lld bytes of data, its shape and dtype need %llu",
                    name, (long long)(end - begin), (unsigned long long)want);
    t->data = data + begin;
    t->nbytes = (size_t)want;
    t->name = strdup(name);
    return t->name ? 0 : fail(err, errlen, "out of memory");
}

static int parse_header(PrimeStFile *f, const char *hdr, size_t n, char *err, size_t errlen) {
    json_error_t je;
    json_t *root = json_loadb(hdr, n, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return fail(err, errlen, "bad JSON header at byte %d: %s", je.position, je.text);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = fail(err, errlen, "the JSON header is not an object");
    } else {
        f->tensors = calloc(json_object_size(root) + 1, sizeof *f->tensors);
        if (!f->tensors)
            rc = fail(err, errlen, "out of memory");
        const unsigned char *data = (const unsigned char *)f->map + 8 + n;
        size_t ndata = f->size - 8 - n;
        const char *key;
        json_t *v;
        json_object_foreach(root, key, v) {
            if (rc != 0)
                break;
            if (strcmp(key, "__metadata__") == 0)
                continue;
            rc = parse_entry(key, v, data, ndata, &f->tensors[f->ntensors], err, errlen);
            if (rc == 0)
                ++f->ntensors;
        }
    }
    json_decref(root);
    return rc;
}

int prime_st_open(const char *path, PrimeStFile *f, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return fail(err, errlen, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return fail(err, errlen, "not a regular file");
    }
    f->size = (size_t)sb.st_size;
    if (f->size < 8) {
        close(fd);
        return fail(err, errlen, "truncated: %zu bytes, shorter than the header length", f->size);
    }
    f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        return fail(err, errlen, "cannot map: %s", strerror(errno));
    }
    const unsigned char *p = f->map;
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
        n = n << 8 | p[i];
    int rc;
    if (n > HEADER_MAX)
        rc = fail(err, errlen, "header length %llu is larger than %llu bytes",
                  (unsigned long long)n, (unsigned long long)HEADER_MAX);
    else if (n > f->size - 8)
        rc = fail(err, errlen, "truncated: header length %llu, but %zu bytes follow it",
                  (unsigned long long)n, f->size - 8);
    else
        rc = parse_header(f, (const char *)p + 8, (size_t)n, err, errlen);
    if (rc != 0)
        prime_st_close(f);
    return rc;
}

void prime_st_close(PrimeStFile *f) {
    for (int i = 0; f->tensors && i < f->ntensors; ++i)
        free(f->tensors[i].name);
    free(f->tensors);
    if (f->map)
        munmap(f->map, f->size);
    memset(f, 0, sizeof *f);
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | man << 13; /* inf, nan */
    } else if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                ++e;
                man <<= 1;
            } while (!(man & 0x400u));
            bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
        }
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float out;
    memcpy(&out, &bits, sizeof out);
    return out;
}

void prime_st_read_f32(const PrimeStTensor *t, size_t first, size_t n, float *out) {
    const unsigned char *p = t->data + first * dtype_size(t->dtype);
    if (t->dtype == PRIME_ST_F32) {
        for (size_t i = 0; i < n; ++i) {
            uint32_t b = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                         (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
            memcpy(&out[i], &b, sizeof b);
        }
        return;
    }
    for (size_t i = 0; i < n; ++i) {
        uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
        if (t->dtype == PRIME_ST_F16) {
            out[i] = half_to_float(h);
        } else {
            uint32_t b = (uint32_t)h << 16;
            memcpy(&out[i], &b, sizeof b);
        }
    }
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const PrimeStOut *)a)->name, ((const PrimeStOut *)b)->name);
}

/* The header of n tensors (sorted), padded with spaces to 8 bytes. */
static char *write_header(const PrimeStOut *t, int n, size_t *len) {
    json_t *root = json_object();
    uint64_t at = 0;
    for (int i = 0; root && i < n; ++i) {
        json_t *shape = json_array();
        uint64_t elems = 1;
        for (int x = 0; x < t[i].ndims; ++x) {
            json_array_append_new(shape, json_integer(t[i].shape[x]));
            elems *= (uint64_t)t[i].shape[x];
        }
        json_t *e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", "F32", "shape", shape,
                              "data_offsets", (json_int_t)at, (json_int_t)(at + 4 * elems));
        if (!e || json_object_set_new(root, t[i].name, e) != 0) {
            json_decref(root);
            return NULL;
        }
        at += 4 * elems;
    }
    char *text = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (!text)
        return NULL;
    size_t k = strlen(text), padded = (k + 7) / 8 * 8;
    char *out = realloc(text, padded + 1);
    if (!out) {
        free(text);
        return NULL;
    }
    memset(out + k, ' ', padded - k);
    out[padded] = 0;
    *len = padded;
    return out;
}

int prime_st_write(const char *path, const PrimeStOut *t, int n, char *err, size_t errlen) {
    PrimeStOut *sorted = malloc(sizeof *sorted * (size_t)(n + 1));
    if (!sorted)
        return fail(err, errlen, "out of memory");
    memcpy(sorted, t, sizeof *sorted * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, by_name);
    size_t len = 0;
    char *hdr = write_header(sorted, n, &len);
    FILE *out = hdr ? fopen(path, "wb") : NULL;
    int rc = 0;
    if (!hdr) {
        rc = fail(err, errlen, "out of memory");
    } else if (!out) {
        rc = fail(err, errlen, "cannot write: %s", strerror(errno));
    } else {
        unsigned char lenb[8];
        for (int i = 0; i < 8; ++i)
            lenb[i] = (unsigned char)((uint64_t)len >> (8 * i));
        fwrite(lenb, 1, 8, out);
        fwrite(hdr, 1, len, out);
        for (int i = 0; i < n; ++i) {
            size_t elems = 1;
            for (int x = 0; x < sorted[i].ndims; ++x)
                elems *= (size_t)sorted[i].shape[x];
            for (size_t e = 0; e < elems; ++e) {
                uint32_t b;
                memcpy(&b, &sorted[i].data[e], sizeof b);
                unsigned char le[4] = {(unsigned char)b, (unsigned char)(b >> 8),
                                       (unsigned char)(b >> 16), (unsigned char)(b >> 24)};
                fwrite(le, 1, 4, out);
            }
        }
        int bad = ferror(out);
        if (fclose(out) != 0 || bad)
            rc = fail(err, errlen, "cannot write: %s", strerror(errno));
    }
    free(hdr);
    free(sorted);
    return rc;
}
