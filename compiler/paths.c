/*
 * paths.c — the installed or build-tree paths of primec (paths.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "paths.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Defaults for the programs that are built without the compiler's
 * definitions (tools/primec-calibrate-mpi reads profiles only). */
#ifndef PRIMEC_RUNTIME_INCLUDE
#define PRIMEC_RUNTIME_INCLUDE "runtime"
#endif
#ifndef PRIMEC_RUNTIME_LIB
#define PRIMEC_RUNTIME_LIB "libprime_rt.a"
#endif
#ifndef PRIMEC_PROFILE_DIR
#define PRIMEC_PROFILE_DIR "profiles"
#endif
#ifndef PRIMEC_INSTALL_INCLUDE_REL
#define PRIMEC_INSTALL_INCLUDE_REL "../include/primec"
#endif
#ifndef PRIMEC_INSTALL_LIB_REL
#define PRIMEC_INSTALL_LIB_REL "../lib"
#endif
#ifndef PRIMEC_INSTALL_PROFILE_REL
#define PRIMEC_INSTALL_PROFILE_REL "../share/primec/profiles"
#endif

enum { PATH_CAP = 4096 };

static PrimecPaths paths;
static char include_buf[PATH_CAP], lib_buf[PATH_CAP], mpi_lib_buf[PATH_CAP], cuda_lib_buf[PATH_CAP];
static char profile_buf[PATH_CAP];

/* The directory of the running binary, without a trailing '/'; 0 if
 * /proc/self/exe cannot be read. */
static int self_dir(char *buf, size_t cap) {
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    return 1;
}

/* `dir/rel`; 0 if it does not fit. */
static int join(char *out, const char *dir, const char *rel) {
    int n = snprintf(out, PATH_CAP, "%s/%s", dir, rel);
    return n > 0 && n < PATH_CAP;
}

static int find_installed(void) {
    char dir[PATH_CAP], probe[PATH_CAP];
    if (!self_dir(dir, sizeof dir) || !join(include_buf, dir, PRIMEC_INSTALL_INCLUDE_REL) ||
        !join(probe, include_buf, "prime_rt.h") || access(probe, R_OK) != 0)
        return 0;
    char lib_dir[PATH_CAP];
    if (!join(lib_dir, dir, PRIMEC_INSTALL_LIB_REL) || !join(lib_buf, lib_dir, "libprime_rt.a") ||
        !join(mpi_lib_buf, lib_dir, "libprime_rt_mpi.a") ||
        !join(cuda_lib_buf, lib_dir, "libprime_rt_cuda.a") ||
        !join(profile_buf, dir, PRIMEC_INSTALL_PROFILE_REL))
        return 0;
    paths.installed = 1;
    paths.runtime_include = include_buf;
    paths.runtime_lib = lib_buf;
#ifdef PRIMEC_RUNTIME_MPI_LIB
    paths.runtime_mpi_lib = mpi_lib_buf;
#endif
#ifdef PRIMEC_RUNTIME_CUDA_LIB
    paths.runtime_cuda_lib = cuda_lib_buf;
#endif
    paths.profile_dir = profile_buf;
    return 1;
}

const PrimecPaths *primec_paths(void) {
    if (paths.runtime_include)
        return &paths;
    if (find_installed())
        return &paths;
    paths.installed = 0;
    paths.runtime_include = PRIMEC_RUNTIME_INCLUDE;
    paths.runtime_lib = PRIMEC_RUNTIME_LIB;
#ifdef PRIMEC_RUNTIME_MPI_LIB
    paths.runtime_mpi_lib = PRIMEC_RUNTIME_MPI_LIB;
#endif
#ifdef PRIMEC_RUNTIME_CUDA_LIB
    paths.runtime_cuda_lib = PRIMEC_RUNTIME_CUDA_LIB;
#endif
    paths.profile_dir = PRIMEC_PROFILE_DIR;
    return &paths;
}
