/*
 * safetensors.h — reading and writing safetensors files.
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes
 * of a JSON object {"name": {"dtype": ..., "shape": [...],
 * "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data,
 * the offsets counted from the end of the header. prime_st_open maps the
 * file and checks everything before any tensor is used: the header length
 * within the file, the JSON (duplicate names refused), each entry's
 * fields, its dtype (F32, F16 or BF16), its shape (at most PRIME_ST_MAX_DIMS
 * non-negative sizes), and its byte range (inside the data, and exactly
 * product(shape) times the dtype's size). A bad file is an error with a
 * message, never a read outside the mapping.
 *
 * Errors: functions return 0 on success and -1 with a message in err.
 */
#ifndef PRIME_SAFETENSORS_H
#define PRIME_SAFETENSORS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PRIME_ST_MAX_DIMS 8

typedef enum PrimeStDtype { PRIME_ST_F32, PRIME_ST_F16, PRIME_ST_BF16 } PrimeStDtype;

typedef struct PrimeStTensor {
    char *name;
    PrimeStDtype dtype;
    int ndims;
    long shape[PRIME_ST_MAX_DIMS];
    const unsigned char *data; /* inside the mapping; not aligned */
    size_t nbytes;
} PrimeStTensor;

typedef struct PrimeStFile {
    void *map;
    size_t size;
    int ntensors;
    PrimeStTensor *tensors; /* in the header's order */
} PrimeStFile;

int prime_st_open(const char *path, PrimeStFile *f, char *err, size_t errlen);
void prime_st_close(PrimeStFile *f);
const char *prime_st_dtype_name(PrimeStDtype d);
/* n elements of t from element `first`, converted to fp32. */
void prime_st_read_f32(const PrimeStTensor *t, size_t first, size_t n, float *out);

/* One tensor to write (F32). */
typedef struct PrimeStOut {
    const char *name;
    int ndims;
    const long *shape;
    const float *data;
} PrimeStOut;

/* Writes n tensors as F32, the header sorted by name. */
int prime_st_write(const char *path, const PrimeStOut *t, int n, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
