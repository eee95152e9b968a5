/*
 * calibrate_main.c — primec-calibrate, the helper that `primec calibrate`
 * runs: the only part of primec that runs the runtime (device threads,
 * transfers, BLAS GEMMs), so that the compiler itself links neither.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <unistd.h>

#include "calibrate.h"
#include "prime_rt.h"

int main(int argc, char **argv) {
    /* One GEMM per device thread: OpenBLAS starts its worker threads when
     * it is loaded, before main, and they spin while idle; the only way to
     * not start them is its environment variable, so set it and
     * re-execute once. */
    if (!getenv("OPENBLAS_NUM_THREADS")) {
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        /* The kernels this processor runs best, in the same execution
         * (prime_blas_choose_core). */
        const char *better = prime_blas_better_core();
        if (better)
            setenv("OPENBLAS_CORETYPE", better, 1);
        execv("/proc/self/exe", argv);
        /* No /proc: go on with the threads idle. */
    }
    prime_blas_choose_core(argv);
    prime_set_blas_threads(1);
    return calibrate_main(argc, argv);
}
