/*
 * abi.c — what the compiler shares with the runtime without running
 * anything: the names of statuses and actions, and the chunking and byte
 * formulas of the ring collectives (so that predicted bytes equal counted
 * ones). The compiler links this and prime_form.c (libprime_abi), not the
 * runtime or BLAS.
 */
#include "internal.h"
#include "prime_sched.h"

/* Start of chunk c: c*n/g without overflowing c*n. */
size_t prime_chunk_lo(size_t n, int g, int c) {
    size_t gg = (size_t)g, cc = (size_t)c;
    return cc * (n / gg) + cc * (n % gg) / gg;
}

size_t prime_chunk_len(size_t n, int g, int c) {
    return prime_chunk_lo(n, g, c + 1) - prime_chunk_lo(n, g, c);
}

size_t prime_collective_scratch(size_t n, int gsize) {
    if (gsize <= 1)
        return 0;
    size_t most = 0;
    for (int c = 0; c < gsize; c++) {
        size_t len = prime_chunk_len(n, gsize, c);
        if (len > most)
            most = len;
    }
    return most;
}

uint64_t prime_reduce_scatter_bytes(size_t n, int gsize, int pos) {
    if (gsize <= 1 || pos < 0 || pos >= gsize)
        return 0;
    return (uint64_t)(n - prime_chunk_len(n, gsize, pos)) * sizeof(float);
}

uint64_t prime_allgather_bytes(size_t n, int gsize, int pos) {
    if (gsize <= 1 || pos < 0 || pos >= gsize)
        return 0;
    return (uint64_t)(n - prime_chunk_len(n, gsize, (pos + 1) % gsize)) * sizeof(float);
}

uint64_t prime_allreduce_bytes(size_t n, int gsize, int pos) {
    return prime_reduce_scatter_bytes(n, gsize, pos) + prime_allgather_bytes(n, gsize, pos);
}

const char *prime_status_name(PrimeStatus status) {
    switch (status) {
    case PRIME_OK:
        return "ok";
    case PRIME_ERR_ARG:
        return "invalid argument";
    case PRIME_ERR_NOMEM:
        return "out of memory";
    case PRIME_ERR_TRANSPORT:
        return "transport failure";
    case PRIME_ERR_IO:
        return "i/o error";
    case PRIME_ERR_TIMEOUT:
        return "timed out waiting for a peer";
    case PRIME_ERR_ABORTED:
        return "aborted after another device timed out";
    case PRIME_ERR_DEVICE:
        return "a device call failed";
    }
    return "unknown status";
}

const char *prime_action_name(int op) {
    static const char *const names[] = {
#define PRIME_X(op, name) name,
        PRIME_ACTION_LIST(PRIME_X)
#undef PRIME_X
    };
    if (op < 0 || op >= PRIME_ACT_COUNT)
        return "?";
    return names[op];
}
