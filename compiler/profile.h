/*
 * profile.h — hardware profiles: what the cost model (cost.h) knows about
 * a machine.
 *
 * A profile is a small line-oriented text file (profiles/<name>.profile,
 * format in docs/cost-model.md): per device its peak GEMM and vector
 * FLOP/s, memory bandwidth and capacity, a GEMM efficiency curve and a
 * per-kernel overhead; how many devices share a node; and, for every
 * communication kind (point-to-point shift, all-reduce, reduce-scatter,
 * all-gather) and link class (intra-node, inter-node), a latency alpha
 * and a bandwidth beta fitted by linear regression from measurements
 * (`primec calibrate`) or taken from datasheets (marked "nominal").
 *
 * Loading reports malformed files as `file:line: error: message`; a
 * profile is complete or it is refused (every key and every link row is
 * required, so a typo cannot silently leave a zero bandwidth behind).
 */
#ifndef PRIMEC_PROFILE_H
#define PRIMEC_PROFILE_H

#include <stddef.h>
#include <stdio.h>

/* X(KIND, "file name", "alias") — communication kinds of a profile. The
 * alias is accepted when reading. */
#define PROFILE_COMM_LIST(X)                                                                       \
    X(COMM_P2P, "p2p", "shift")                                                                    \
    X(COMM_ALLREDUCE, "allreduce", "all_reduce")                                                   \
    X(COMM_REDUCE_SCATTER, "reduce_scatter", "reducescatter")                                      \
    X(COMM_ALLGATHER, "allgather", "all_gather")

typedef enum CommKind {
#define PROFILE_X(kind, name, alias) kind,
    PROFILE_COMM_LIST(PROFILE_X)
#undef PROFILE_X
        COMM_KIND_COUNT
} CommKind;

typedef enum LinkClass { LINK_INTRA, LINK_INTER, LINK_CLASS_COUNT } LinkClass;

const char *comm_kind_name(CommKind kind);
const char *link_class_name(LinkClass link);

/* time(bytes) = alpha_us + bytes / beta, where `bytes` is the volume one
 * device sends (for collectives: the ring volume, e.g. 2(g-1)/g of the
 * buffer for an all-reduce; see cost.h). */
typedef struct LinkCost {
    double alpha_us;
    double beta_GBps; /* 1e9 bytes per second */
} LinkCost;

#define PROFILE_NAME_MAX 64
#define PROFILE_TEXT_MAX 256

typedef struct Profile {
    char name[PROFILE_NAME_MAX];
    char description[PROFILE_TEXT_MAX];
    int devices_per_node;
    double peak_tflops;        /* dense GEMM peak (tensor cores where they exist) */
    double vector_tflops;      /* everything that is not a GEMM */
    double mem_bandwidth_GBps; /* device memory */
    double mem_capacity_GB;    /* per device, 1e9 bytes */
    /* GEMM efficiency: eff(d) = gemm_eff_max * d / (d + gemm_half_dim),
     * d the smallest of M, N, K. */
    double gemm_eff_max;
    double gemm_half_dim;
    double kernel_overhead_us; /* per kernel launch */
    LinkCost link[COMM_KIND_COUNT][LINK_CLASS_COUNT];
} Profile;

/* Parses profile text. `filename` names it in errors. Returns 1, or 0
 * with "filename:line: error: ..." in err. */
int profile_parse(const char *text, const char *filename, Profile *out, char *err, size_t errlen);

/* Loads a profile from a path (anything containing '/' or ending in
 * ".profile") or by name: "v100" finds v100*.profile in profile_dir()
 * (an exact "<name>.profile" wins over a prefix; two prefix matches are
 * an error naming both). Returns 1, or 0 with a message in err. */
int profile_load(const char *path_or_name, Profile *out, char *err, size_t errlen);

/* Writes a profile in the format profile_parse reads, preceded by the
 * comment lines in `comment` (each line gets a "# "; NULL for none). */
void profile_write(const Profile *p, const char *comment, FILE *out);

/* The directory profiles are looked up in by name. */
const char *profile_dir(void);

/* eff(d) of the profile's GEMM efficiency curve, in (0, 1]. */
double profile_gemm_efficiency(const Profile *p, double min_dim);

#endif
