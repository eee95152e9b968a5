/*
 * trace.c — per-device timelines written as Chrome trace-event JSON.
 *
 * Each device records intervals in its own growable array (device thread
 * only, so no lock); a stack of open intervals allows nesting on the
 * compute row, and prime_trace_span records a closed interval on either
 * row (transfers overlap one another and the kernels, so they cannot
 * nest). Names are copied, cut to at most 63 bytes on a UTF-8 character
 * boundary. The writer emits, for every device that recorded anything,
 * "M" events naming the device (pid = rank) and its rows (tid 0
 * compute, tid 1 communication, as the host saw them; tid 2, where a
 * CUDA backend recorded them, the kernels as the device timed them,
 * from its events, recorded after each run), then one complete ("X") event per
 * closed interval in the order they were recorded, with times in
 * microseconds since world creation printed from integers (no locale, no
 * rounding drift); an interval ended by prime_trace_end_split (a step)
 * carries its kernel, exposed communication and overhead times as args,
 * and every interval of prime_trace_begin (kernels, steps) the processor
 * time of the device's thread in it ("cpu_us"): on a machine with fewer
 * cores than devices a kernel's span also holds the time its thread
 * waited for a core, its cpu_us does not. Intervals still open are left
 * out. Events accumulate across runs until the world is destroyed.
 *
 * Recording is switched between runs only: devices read the flag without
 * a lock, ordered by thread creation.
 *
 * The writer reads every device of the world. With MPI, the other ranks'
 * timelines are the copies world_mpi.c gathers to the root after each run.
 */
#define _POSIX_C_SOURCE 200809L

#include "prime_rt.h"

#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The calling thread's processor time, or 0 where it cannot be read. */
static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void prime_world_enable_trace(PrimeWorld *world, int on) {
    if (world)
        world->trace_on = on != 0;
}

/* Makes room for one more element in an array of `size`-byte elements. */
static int grow(void **items, size_t *cap, size_t count, size_t size) {
    if (count < *cap)
        return 1;
    size_t ncap = *cap ? *cap * 2 : 64;
    if (ncap > SIZE_MAX / size)
        return 0;
    void *p = realloc(*items, ncap * size);
    if (!p)
        return 0;
    *items = p;
    *cap = ncap;
    return 1;
}

static void copy_name(char *out, const char *name) {
    size_t len = name ? strlen(name) : 0;
    if (len > PRIME_RT_TRACE_NAME_MAX) {
        len = PRIME_RT_TRACE_NAME_MAX;
        /* Do not keep half of a multi-byte character. */
        while (len > 0 && ((unsigned char)name[len] & 0xC0u) == 0x80u)
            len--;
    }
    if (len > 0)
        memcpy(out, name, len);
    out[len] = '\0';
}

/* A new event at the end of the device's array, or NULL (and
 * PRIME_ERR_NOMEM recorded) when it cannot grow; with `push`, also room
 * on the stack of open intervals. */
static PrimeTraceEvent *new_event(PrimeDev *dev, const char *name, int push) {
    PrimeTrace *t = &dev->trace;
    void *events = t->events, *open = t->open;
    int ok = grow(&events, &t->cap, t->count, sizeof *t->events);
    t->events = events;
    ok = ok && (!push || grow(&open, &t->open_cap, t->depth, sizeof *t->open));
    t->open = open;
    if (!ok) {
        prime_rt_fail(dev, PRIME_ERR_NOMEM);
        return NULL;
    }
    PrimeTraceEvent *ev = &t->events[t->count];
    memset(ev, 0, sizeof *ev);
    copy_name(ev->name, name);
    return ev;
}

/* Failing to grow the arrays drops the interval and records
 * PRIME_ERR_NOMEM; a NULL name records an empty one. */
void prime_trace_begin(PrimeDev *dev, const char *name) {
    if (!dev || !dev->world->trace_on)
        return;
    PrimeTraceEvent *ev = new_event(dev, name, 1);
    if (!ev)
        return;
    ev->begin_ns = prime_rt_now_ns() - dev->world->t0_ns;
    ev->end_ns = ev->begin_ns;
    ev->row = PRIME_TRACE_COMPUTE;
    ev->has_cpu = 1;
    ev->cpu_ns = thread_cpu_ns();
    dev->trace.open[dev->trace.depth++] = dev->trace.count++;
}

/* Times before the world's creation or an end before the begin are
 * clamped; a bad row records PRIME_ERR_ARG. */
void prime_trace_span(PrimeDev *dev, const char *name, PrimeTraceRow row, uint64_t begin_ns,
                      uint64_t end_ns) {
    if (!dev || !dev->world->trace_on)
        return;
    if (row != PRIME_TRACE_COMPUTE && row != PRIME_TRACE_COMM && row != PRIME_TRACE_DEVICE) {
        prime_rt_fail(dev, PRIME_ERR_ARG);
        return;
    }
    PrimeTraceEvent *ev = new_event(dev, name, 0);
    if (!ev)
        return;
    uint64_t t0 = dev->world->t0_ns;
    ev->begin_ns = begin_ns > t0 ? begin_ns - t0 : 0;
    ev->end_ns = end_ns > t0 ? end_ns - t0 : 0;
    if (ev->end_ns < ev->begin_ns)
        ev->end_ns = ev->begin_ns;
    ev->row = row;
    ev->closed = 1;
    dev->trace.count++;
}

/* Ending with no interval open records PRIME_ERR_ARG. */
static PrimeTraceEvent *end_event(PrimeDev *dev) {
    if (!dev || !dev->world->trace_on)
        return NULL;
    PrimeTrace *t = &dev->trace;
    if (t->depth == 0) {
        prime_rt_fail(dev, PRIME_ERR_ARG);
        return NULL;
    }
    PrimeTraceEvent *ev = &t->events[t->open[--t->depth]];
    /* Read inside the span: the processor time is at most the span. */
    uint64_t cpu = thread_cpu_ns();
    ev->cpu_ns = cpu > ev->cpu_ns ? cpu - ev->cpu_ns : 0;
    ev->end_ns = prime_rt_now_ns() - dev->world->t0_ns;
    ev->closed = 1;
    return ev;
}

void prime_trace_end(PrimeDev *dev) {
    (void)end_event(dev);
}

void prime_trace_end_split(PrimeDev *dev, uint64_t kernel_ns, uint64_t comm_ns) {
    PrimeTraceEvent *ev = end_event(dev);
    if (!ev)
        return;
    ev->split = 1;
    ev->kernel_ns = kernel_ns;
    ev->comm_ns = comm_ns;
}

void prime_rt_trace_free(PrimeTrace *trace) {
    free(trace->events);
    free(trace->open);
    memset(trace, 0, sizeof *trace);
}

static void write_json_string(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", (unsigned)*p);
        else
            fputc(*p, f);
    }
}

static void write_us(FILE *f, uint64_t ns) {
    fprintf(f, "%" PRIu64 ".%03u", ns / 1000u, (unsigned)(ns % 1000u));
}

/* A split interval's args: kernels, exposed communication and the rest
 * (the schedule's overhead; 0 if the parts exceed the interval); the
 * caller closes the object. */
static void write_split(FILE *f, const PrimeTraceEvent *ev) {
    uint64_t dur = ev->end_ns - ev->begin_ns, busy = ev->kernel_ns + ev->comm_ns;
    fputs(",\"args\":{\"kernel_us\":", f);
    write_us(f, ev->kernel_ns);
    fputs(",\"exposed_comm_us\":", f);
    write_us(f, ev->comm_ns);
    fputs(",\"overhead_us\":", f);
    write_us(f, dur > busy ? dur - busy : 0);
}

PrimeStatus prime_world_write_trace(const PrimeWorld *world, const char *path) {
    if (!world || !path)
        return PRIME_ERR_ARG;
    FILE *f = fopen(path, "w");
    if (!f)
        return PRIME_ERR_IO;
    fputs("{\"traceEvents\":[", f);
    int first = 1;
    static const char *const row_name[PRIME_TRACE_ROWS] = {"compute", "communication",
                                                           "device kernels"};
    for (int r = 0; r < world->ndev; r++) {
        const PrimeTrace *t = &world->devs[r].trace;
        if (t->count == 0)
            continue;
        fprintf(f,
                "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":"
                "\"device %d\"}}",
                first ? "" : ",", r, r);
        first = 0;
        int device_row = 0;
        for (size_t i = 0; i < t->count; i++)
            device_row |= t->events[i].row == PRIME_TRACE_DEVICE;
        for (int row = 0; row < (device_row ? PRIME_TRACE_ROWS : 2); row++)
            fprintf(f,
                    ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{"
                    "\"name\":\"%s\"}}",
                    r, row, row_name[row]);
        for (size_t i = 0; i < t->count; i++) {
            const PrimeTraceEvent *ev = &t->events[i];
            if (!ev->closed)
                continue;
            fputs(",\n{\"name\":\"", f);
            write_json_string(f, ev->name);
            fputs("\",\"ph\":\"X\",\"ts\":", f);
            write_us(f, ev->begin_ns);
            fputs(",\"dur\":", f);
            write_us(f, ev->end_ns - ev->begin_ns);
            fprintf(f, ",\"pid\":%d,\"tid\":%d", r, ev->row);
            if (ev->split)
                write_split(f, ev);
            if (ev->has_cpu) {
                fputs(ev->split ? ",\"cpu_us\":" : ",\"args\":{\"cpu_us\":", f);
                write_us(f, ev->cpu_ns);
            }
            if (ev->split || ev->has_cpu)
                fputc('}', f);
            fputc('}', f);
        }
    }
    fputs("\n]}\n", f);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return PRIME_ERR_IO;
    return PRIME_OK;
}
