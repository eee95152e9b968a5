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

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

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

uint64_t prime_clock_ns(void) {
    return prime_rt_now_ns();
}

PrimeStatus prime_rt_fail(PrimeDev *dev, PrimeStatus status) {
    if (dev && status != PRIME_OK && dev->status == PRIME_OK)
        dev->status = status;
    return status;
}

/* The process default of prime_set_default_timeout, in nanoseconds. Set
 * before worlds are created, from the main thread. */
static uint64_t default_timeout_ns = (uint64_t)(PRIME_RT_DEFAULT_TIMEOUT_S * 1e9);

/* Seconds to nanoseconds; 0 on a bad value (checked by the callers). A
 * timeout beyond a century is as good as none. */
static int timeout_from_seconds(double seconds, uint64_t *ns) {
    if (!(seconds >= 0) || !isfinite(seconds))
        return 0;
    *ns = seconds > 3.2e9 ? 0 : (uint64_t)(seconds * 1e9);
    if (seconds > 0 && *ns == 0)
        *ns = 1;
    return 1;
}

PrimeStatus prime_set_default_timeout(double seconds) {
    return timeout_from_seconds(seconds, &default_timeout_ns) ? PRIME_OK : PRIME_ERR_ARG;
}

PrimeStatus prime_world_set_timeout(PrimeWorld *world, double seconds) {
    if (!world)
        return PRIME_ERR_ARG;
    return timeout_from_seconds(seconds, &world->timeout_ns) ? PRIME_OK : PRIME_ERR_ARG;
}

double prime_world_timeout(const PrimeWorld *world) {
    return world ? (double)world->timeout_ns / 1e9 : 0;
}

uint64_t prime_rt_default_timeout_ns(void) {
    return default_timeout_ns;
}

uint64_t prime_rt_deadline(uint64_t timeout_ns) {
    return timeout_ns ? prime_rt_now_ns() + timeout_ns : 0;
}

const char *prime_world_failure(const PrimeWorld *world, int rank) {
    if (!world || rank < 0 || rank >= world->ndev)
        return NULL;
    const PrimeDev *dev = &world->devs[rank];
    return dev->failure[0] ? dev->failure : dev->note[0] ? dev->note : NULL;
}

void prime_dev_set_context(PrimeDev *dev, const char *phase, int step, int action,
                           const char *what) {
    if (!dev)
        return;
    atomic_store_explicit(&dev->ctx_phase, phase, memory_order_relaxed);
    atomic_store_explicit(&dev->ctx_step, step, memory_order_relaxed);
    atomic_store_explicit(&dev->ctx_action, action, memory_order_relaxed);
    atomic_store_explicit(&dev->ctx_what, what, memory_order_relaxed);
}

void prime_rt_context_text(const PrimeDev *dev, char *buf, size_t cap) {
    const char *phase = atomic_load_explicit(&dev->ctx_phase, memory_order_relaxed);
    const char *what = atomic_load_explicit(&dev->ctx_what, memory_order_relaxed);
    int step = atomic_load_explicit(&dev->ctx_step, memory_order_relaxed);
    int action = atomic_load_explicit(&dev->ctx_action, memory_order_relaxed);
    buf[0] = '\0';
    if (!phase && !what)
        return;
    size_t at = 0;
    if (phase)
        at += (size_t)snprintf(buf + at, cap - at, " in phase '%s'", phase);
    if (at < cap && step >= 0)
        at += (size_t)snprintf(buf + at, cap - at, "%s step %d", at ? "," : " in", step);
    if (at < cap && action >= 0)
        at += (size_t)snprintf(buf + at, cap - at, "%s action %d", at ? "," : " at", action);
    if (at < cap && what)
        snprintf(buf + at, cap - at, " (%s)", what);
}

PrimeStatus prime_rt_note_timeout(PrimeDev *dev, const char *fmt, ...) {
    if (!dev->failure[0]) {
        char ctx[200], detail[160];
        prime_rt_context_text(dev, ctx, sizeof ctx);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
        snprintf(dev->failure, sizeof dev->failure, "rank %d: no answer within %g s%s: %s",
                 dev->rank, (double)dev->world->timeout_ns / 1e9, ctx, detail);
    }
    return prime_rt_fail(dev, PRIME_ERR_TIMEOUT);
}

/* PRIME_FAULT=stall:RANK[:N]; anything else leaves fault injection off. */
static void read_fault(PrimeWorld *w) {
    w->fault_rank = -1;
    const char *spec = getenv("PRIME_FAULT");
    if (!spec || strncmp(spec, "stall:", 6) != 0)
        return;
    char *end = NULL;
    errno = 0;
    long rank = strtol(spec + 6, &end, 10);
    if (errno || end == spec + 6 || rank < 0 || rank >= w->ndev)
        return;
    unsigned long long after = 0;
    if (*end == ':') {
        const char *n = end + 1;
        if (*n < '0' || *n > '9')
            return;
        after = strtoull(n, &end, 10);
        if (errno)
            return;
    }
    if (*end != '\0')
        return;
    w->fault_rank = (int)rank;
    w->fault_after = after;
}

PrimeStatus prime_rt_fault_point(PrimeDev *dev) {
    PrimeWorld *w = dev->world;
    if (w->fault_rank != dev->rank || dev->comm_calls++ != w->fault_after)
        return PRIME_OK;
    char ctx[200];
    prime_rt_context_text(dev, ctx, sizeof ctx);
    snprintf(dev->failure, sizeof dev->failure,
             "rank %d: stopped answering%s (PRIME_FAULT=stall:%d:%llu)", dev->rank, ctx, dev->rank,
             (unsigned long long)w->fault_after);
    prime_rt_stall(dev);
    return prime_rt_fail(dev, PRIME_ERR_ABORTED);
}

static PrimeTileFill read_tile_fill(void);

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
    w->timeout_ns = default_timeout_ns;
    for (int i = 0; i < ndev; i++) {
        w->devs[i].world = w;
        w->devs[i].rank = i;
        atomic_init(&w->devs[i].ctx_phase, NULL);
        atomic_init(&w->devs[i].ctx_what, NULL);
        atomic_init(&w->devs[i].ctx_step, -1);
        atomic_init(&w->devs[i].ctx_action, -1);
    }
    read_fault(w);
    w->tile_fill = read_tile_fill();
    return w;
}

void prime_rt_world_delete(PrimeWorld *world) {
    if (!world)
        return;
    for (int i = 0; i < world->ndev; i++) {
        prime_rt_trace_free(&world->devs[i].trace);
        prime_rt_kept_free(&world->devs[i]);
    }
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

/* Tiles of every size are allocated and freed at each step. glibc maps
 * a fresh region for each one above its threshold (128 KiB at first) and
 * returns freed memory to the system, so the next step's tile faults in
 * fresh pages again (a page fault and a flush of every core's TLB per
 * 4 KiB page): the largest threshold it allows, and no trimming, keep
 * the memory in the process for the next step. */
void prime_rt_tune_memory(void) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

/* Kept tiles are poisoned for AddressSanitizer, so a use of a freed tile
 * is still found while it waits in the cache. */
#if defined(__SANITIZE_ADDRESS__)
#define PRIME_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PRIME_ASAN 1
#endif
#endif
#ifdef PRIME_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, bytes) ASAN_POISON_MEMORY_REGION((p), (bytes))
#define UNPOISON(p, bytes) ASAN_UNPOISON_MEMORY_REGION((p), (bytes))
#else
#define POISON(p, bytes) ((void)(p), (void)(bytes))
#define UNPOISON(p, bytes) ((void)(p), (void)(bytes))
#endif

static size_t kept_size(size_t nfloats) {
    return (nfloats ? nfloats : 1) * sizeof(float);
}

/* Releases kept tiles, the oldest first, until at most `keep` bytes are kept. */
static void kept_release(PrimeDev *dev, uint64_t keep) {
    int drop = 0;
    while (drop < dev->nkept && dev->kept_bytes > keep) {
        struct PrimeKept *k = &dev->kept[drop++];
        UNPOISON(k->p, kept_size(k->nfloats));
        free(k->p);
        dev->kept_bytes -= (uint64_t)k->nfloats * sizeof(float);
    }
    if (drop) {
        memmove(dev->kept, dev->kept + drop, (size_t)(dev->nkept - drop) * sizeof *dev->kept);
        dev->nkept -= drop;
    }
}

/* A kept tile of exactly nfloats, zeroed when `zero`, or NULL; the newest
 * first. */
static float *kept_take(PrimeDev *dev, size_t nfloats, int zero) {
    for (int i = dev->nkept - 1; i >= 0; --i) {
        if (dev->kept[i].nfloats != nfloats)
            continue;
        float *p = dev->kept[i].p;
        memmove(dev->kept + i, dev->kept + i + 1, (size_t)(dev->nkept - i - 1) * sizeof *dev->kept);
        dev->nkept--;
        dev->kept_bytes -= (uint64_t)nfloats * sizeof(float);
        UNPOISON(p, kept_size(nfloats));
        if (zero)
            memset(p, 0, kept_size(nfloats));
        return p;
    }
    return NULL;
}

/* Enough kept tiles for a search to stay short; more go back to malloc. */
#define KEPT_MAX 512

static int kept_put(PrimeDev *dev, float *p, size_t nfloats) {
    uint64_t bytes = (uint64_t)nfloats * sizeof(float);
    if (nfloats == 0 || dev->cur_bytes + dev->kept_bytes + bytes > dev->high_bytes)
        return 0;
    if (dev->nkept == KEPT_MAX)
        kept_release(dev, dev->kept_bytes - (uint64_t)dev->kept[0].nfloats * sizeof(float));
    if (dev->nkept == dev->kept_cap) {
        int cap = dev->kept_cap ? 2 * dev->kept_cap : 16;
        struct PrimeKept *grown = realloc(dev->kept, (size_t)cap * sizeof *grown);
        if (!grown)
            return 0;
        dev->kept = grown;
        dev->kept_cap = cap;
    }
    POISON(p, kept_size(nfloats));
    dev->kept[dev->nkept++] = (struct PrimeKept){nfloats, p};
    dev->kept_bytes += bytes;
    return 1;
}

void prime_rt_kept_free(PrimeDev *dev) {
    kept_release(dev, 0);
    free(dev->kept);
    dev->kept = NULL;
    dev->nkept = dev->kept_cap = 0;
}

/* A request for zero floats still returns a distinct pointer (and counts
 * nothing), so NULL always means failure. A kept tile of the same size
 * where there is one, otherwise malloc's, after releasing kept tiles so
 * that live and kept bytes stay within the most ever live at once;
 * zeroed when `zero`. */
static float *alloc_tile(PrimeDev *dev, size_t nfloats, int zero) {
    if (!dev)
        return NULL;
    if (nfloats > SIZE_MAX / sizeof(float)) {
        prime_rt_fail(dev, PRIME_ERR_NOMEM);
        return NULL;
    }
    uint64_t bytes = (uint64_t)nfloats * sizeof(float);
    float *p = nfloats ? kept_take(dev, nfloats, zero) : NULL;
    if (!p) {
        uint64_t high =
            dev->cur_bytes + bytes > dev->high_bytes ? dev->cur_bytes + bytes : dev->high_bytes;
        if (dev->cur_bytes + dev->kept_bytes + bytes > high)
            kept_release(dev, high - dev->cur_bytes - bytes);
        /* Zeroed by writing: calloc's untouched pages would map the zero
         * page on the first read (an accumulating kernel reads first) and
         * fault again, flushing every core's TLB, on the first write. */
        p = malloc(kept_size(nfloats));
        if (p && zero)
            memset(p, 0, kept_size(nfloats));
    }
    if (!p) {
        prime_rt_fail(dev, PRIME_ERR_NOMEM);
        return NULL;
    }
    dev->cur_bytes += bytes;
    if (dev->cur_bytes > dev->peak_bytes)
        dev->peak_bytes = dev->cur_bytes;
    if (dev->cur_bytes > dev->high_bytes)
        dev->high_bytes = dev->cur_bytes;
    return p;
}

float *prime_alloc(PrimeDev *dev, size_t nfloats) {
    return alloc_tile(dev, nfloats, 1);
}

/* PRIME_TILE_FILL, read at world creation: "eager", "nan" or the default
 * (lazy; nan in builds with assertions or AddressSanitizer, so that their
 * tests prove no tile is read before it is written). */
static PrimeTileFill read_tile_fill(void) {
    const char *v = getenv("PRIME_TILE_FILL");
    if (v && strcmp(v, "eager") == 0)
        return PRIME_TILE_FILL_EAGER;
    if (v && strcmp(v, "nan") == 0)
        return PRIME_TILE_FILL_NAN;
    if (v && strcmp(v, "lazy") == 0)
        return PRIME_TILE_FILL_LAZY;
#if defined(PRIME_ASAN) || !defined(NDEBUG)
    return PRIME_TILE_FILL_NAN;
#else
    return PRIME_TILE_FILL_LAZY;
#endif
}

/* A quiet NaN with a payload that says where it came from. */
static void fill_nan(float *p, size_t n) {
    const uint32_t bits = 0x7fc0dead;
    for (size_t i = 0; i < n; ++i)
        memcpy(&p[i], &bits, sizeof bits);
}

float *prime_alloc_uninit(PrimeDev *dev, size_t nfloats) {
    float *p = alloc_tile(dev, nfloats, 0);
    if (p && dev->world->tile_fill == PRIME_TILE_FILL_NAN)
        fill_nan(p, nfloats);
    return p;
}

PrimeTileFill prime_dev_tile_fill(const PrimeDev *dev) {
    return dev ? dev->world->tile_fill : PRIME_TILE_FILL_EAGER;
}

/* Freeing more than is allocated is recorded as PRIME_ERR_ARG and leaves
 * the current count at zero. */
void prime_free(PrimeDev *dev, float *p, size_t nfloats) {
    if (!p)
        return;
    if (!dev) {
        free(p);
        return;
    }
    uint64_t bytes = (uint64_t)nfloats * sizeof(float);
    if (bytes > dev->cur_bytes) {
        free(p);
        prime_rt_fail(dev, PRIME_ERR_ARG);
        dev->cur_bytes = 0;
        return;
    }
    dev->cur_bytes -= bytes;
    if (!kept_put(dev, p, nfloats))
        free(p);
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
    if (dev && dev->be && prime_rt_fault_point(dev) != PRIME_OK) {
        if (req)
            req->impl = NULL;
        return PRIME_ERR_ABORTED;
    }
    return prime_rt_post_send(dev, dst, tag, PRIME_RT_CHAN_P2P, buf, n, kind, req);
}

PrimeStatus prime_irecv(PrimeDev *dev, int src, int tag, float *buf, size_t n, PrimeReq *req) {
    if (dev && dev->be && prime_rt_fault_point(dev) != PRIME_OK) {
        if (req)
            req->impl = NULL;
        return PRIME_ERR_ABORTED;
    }
    return prime_rt_post_recv(dev, src, tag, PRIME_RT_CHAN_P2P, buf, n, req);
}
