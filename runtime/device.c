/*
 * device.c — what both backends share about devices: names of statuses
 * and byte kinds, the clock, sticky errors, counted allocation, the
 * counter getters, and the point-to-point entry points (which only pick
 * the matching namespace and hand over to the backend's transport).
 *
 * Counters and the sticky status of a device are written only by the
 * device's own thread during a run and read by the world's owner after
 * it, so they need no lock. With MPI, the counters of other ranks are
 * mirrors the backend fills at the end of each run (see internal.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "prime_rt.h"

#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    }
    return "unknown status";
}

const char *prime_byte_kind_name(PrimeByteKind kind) {
    switch (kind) {
    case PRIME_BYTES_SHIFT:
        return "shift";
    case PRIME_BYTES_COLLECTIVE:
        return "collective";
    case PRIME_BYTES_REDIST:
        return "redist";
    case PRIME_BYTES_KIND_COUNT:
        break;
    }
    return "unknown";
}

uint64_t prime_rt_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

PrimeStatus prime_rt_fail(PrimeDev *dev, PrimeStatus status) {
    if (dev && status != PRIME_OK && dev->status == PRIME_OK)
        dev->status = status;
    return status;
}

PrimeWorld *prime_rt_world_new(int ndev) {
    PrimeWorld *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->devs = calloc((size_t)ndev, sizeof *w->devs);
    if (!w->devs) {
        free(w);
        return NULL;
    }
    w->ndev = ndev;
    for (int i = 0; i < ndev; i++) {
        w->devs[i].world = w;
        w->devs[i].rank = i;
    }
    return w;
}

void prime_rt_world_delete(PrimeWorld *world) {
    if (!world)
        return;
    for (int i = 0; i < world->ndev; i++)
        prime_rt_trace_free(&world->devs[i].trace);
    free(world->devs);
    free(world);
}

/* Zeroes the bytes sent and lowers each peak to the current allocation;
 * neither statuses nor traces are touched. Between runs only. */
void prime_world_reset_counters(PrimeWorld *world) {
    if (!world)
        return;
    for (int i = 0; i < world->ndev; i++) {
        PrimeDev *dev = &world->devs[i];
        memset(dev->bytes_sent, 0, sizeof dev->bytes_sent);
        dev->peak_bytes = dev->cur_bytes;
    }
}

int prime_world_size(const PrimeWorld *world) {
    return world ? world->ndev : 0;
}

int prime_dev_rank(const PrimeDev *dev) {
    return dev ? dev->rank : -1;
}

int prime_dev_count(const PrimeDev *dev) {
    return dev ? dev->world->ndev : 0;
}

PrimeStatus prime_dev_status(const PrimeDev *dev) {
    return dev ? dev->status : PRIME_ERR_ARG;
}

/* A request for zero floats still returns a distinct pointer (and counts
 * nothing), so NULL always means failure. */
float *prime_alloc(PrimeDev *dev, size_t nfloats) {
    if (!dev)
        return NULL;
    if (nfloats > SIZE_MAX / sizeof(float)) {
        prime_rt_fail(dev, PRIME_ERR_NOMEM);
        return NULL;
    }
    float *p = calloc(nfloats ? nfloats : 1, sizeof(float));
    if (!p) {
        prime_rt_fail(dev, PRIME_ERR_NOMEM);
        return NULL;
    }
    dev->cur_bytes += (uint64_t)nfloats * sizeof(float);
    if (dev->cur_bytes > dev->peak_bytes)
        dev->peak_bytes = dev->cur_bytes;
    return p;
}

/* Freeing more than is allocated is recorded as PRIME_ERR_ARG and leaves
 * the current count at zero. */
void prime_free(PrimeDev *dev, float *p, size_t nfloats) {
    if (!p)
        return;
    free(p);
    if (!dev)
        return;
    uint64_t bytes = (uint64_t)nfloats * sizeof(float);
    if (bytes > dev->cur_bytes) {
        prime_rt_fail(dev, PRIME_ERR_ARG);
        dev->cur_bytes = 0;
        return;
    }
    dev->cur_bytes -= bytes;
}

uint64_t prime_world_bytes_sent(const PrimeWorld *world, int rank, PrimeByteKind kind) {
    if (!world || rank < 0 || rank >= world->ndev || (int)kind < 0 ||
        kind >= PRIME_BYTES_KIND_COUNT)
        return 0;
    return world->devs[rank].bytes_sent[kind];
}

uint64_t prime_world_peak_bytes(const PrimeWorld *world, int rank) {
    if (!world || rank < 0 || rank >= world->ndev)
        return 0;
    return world->devs[rank].peak_bytes;
}

uint64_t prime_world_current_bytes(const PrimeWorld *world, int rank) {
    if (!world || rank < 0 || rank >= world->ndev)
        return 0;
    return world->devs[rank].cur_bytes;
}

PrimeStatus prime_isend(PrimeDev *dev, int dst, int tag, const float *buf, size_t n,
                        PrimeByteKind kind, PrimeReq *req) {
    return prime_rt_post_send(dev, dst, tag, PRIME_RT_CHAN_P2P, buf, n, kind, req);
}

PrimeStatus prime_irecv(PrimeDev *dev, int src, int tag, float *buf, size_t n, PrimeReq *req) {
    return prime_rt_post_recv(dev, src, tag, PRIME_RT_CHAN_P2P, buf, n, req);
}
