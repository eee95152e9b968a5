/*
 * allreduce.c — time prime_allreduce_sum on a threads world (bench/collectives.sh).
 *
 *   allreduce DEVICES FLOATS REPEAT
 *
 * Every device all-reduces FLOATS floats over the whole world REPEAT times;
 * prints the mean time of one all-reduce.
 */
#define _POSIX_C_SOURCE 200809L

#include "prime_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static size_t nfloats;
static int ndev, repeat;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void rank_fn(PrimeDev *dev, void *arg) {
    (void)arg;
    int group[64];
    for (int i = 0; i < ndev; ++i)
        group[i] = i;
    float *buf = prime_alloc(dev, nfloats);
    for (int r = 0; r < repeat && buf; ++r)
        prime_allreduce_sum(dev, group, ndev, buf, nfloats, 7);
    prime_free(dev, buf, nfloats);
}

int main(int argc, char **argv) {
    if (argc != 4)
        return 2;
    ndev = atoi(argv[1]);
    nfloats = (size_t)atol(argv[2]);
    repeat = atoi(argv[3]);
    if (ndev < 1 || ndev > 64 || repeat < 1)
        return 2;
    PrimeWorld *w = NULL;
    if (prime_world_create(ndev, &w) != PRIME_OK)
        return 1;
    double t = now_s();
    PrimeStatus st = prime_world_run(w, rank_fn, NULL);
    t = now_s() - t;
    prime_world_destroy(w);
    if (st != PRIME_OK)
        return 1;
    printf("%d devices, %zu floats: %.3f ms per all-reduce\n", ndev, nfloats, t / repeat * 1e3);
    return 0;
}
