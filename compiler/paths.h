/*
 * paths.h — where primec finds what `primec build` compiles against and
 * the hardware profiles: next to its own binary when it is installed,
 * else in the build tree it was built in.
 *
 * An installed primec (`cmake --install`, docs/cmake.md) is relocatable:
 * the prefix is the directory above the binary's (found through
 * /proc/self/exe), and the headers, libraries and profiles lie at the
 * paths relative to the binary's directory that the build recorded
 * (PRIMEC_INSTALL_*_REL: `../include/primec`, `../lib`,
 * `../share/primec/profiles` for the default layout). A binary whose
 * relative include directory holds no prime_rt.h is the one in the build
 * tree, and uses the build tree's absolute paths.
 */
#ifndef PRIMEC_PATHS_H
#define PRIMEC_PATHS_H

typedef struct PrimecPaths {
    int installed;               /* 1: relative to the installed binary */
    const char *runtime_include; /* the directory of prime_rt.h */
    const char *runtime_lib;     /* libprime_rt.a */
    const char *runtime_mpi_lib; /* libprime_rt_mpi.a, or NULL without MPI */
    /* libprime_rt_cuda.a, or NULL (built without nvcc) */
    const char *runtime_cuda_lib;
    const char *profile_dir; /* the directory of the .profile files */
} PrimecPaths;

/* The paths of this process's primec, worked out on the first call. */
const PrimecPaths *primec_paths(void);

#endif
