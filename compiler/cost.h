/*
 * cost.h — predict the time, traffic and memory of a schedule on a
 * machine described by a profile (profile.h).
 *
 * The model prices exactly what the emitted program does: it interprets
 * every rank's action lists (schedule.h, prime_sched.h) as a small
 * discrete-event simulation, one clock per device plus one communication
 * engine per device.
 *
 *   compute   a kernel costs launch overhead + max(flops / rate, bytes /
 *             memory bandwidth) (roofline). A product of two operands is
 *             a GEMM: 2 flops per point of the einsum, at the profile's
 *             peak times eff(smallest of M, N, K); anything else counts
 *             one flop per operator and intrinsic per point (plus the
 *             accumulation) at the vector rate. Adds, box copies and
 *             the zero fill of every newly allocated tile are
 *             memory-bound. A group of phases the kernels pass fuses
 *             (kernel_fuse.h) is one kernel: one launch, its members'
 *             flops, the tiles it reads from outside once and the
 *             outputs it stores once (cost_kernel.h).
 *   shifts    a send is posted at the device's clock and arrives
 *             alpha + bytes / beta later, alpha and beta of the link
 *             class of its two ranks (intra-node when rank / devices per
 *             node agree; ranks are row-major over the mesh axes). Sends
 *             of one device share its engine's bandwidth (bytes / beta
 *             queue), while their latencies overlap. A wait
 *             ends when the device's sends are out and its receives are
 *             in, so a step costs max(compute, transfers posted for the
 *             next step): the overlap of a temporal phase.
 *   all-reduce blocks its group: it starts when the last member arrives
 *             and takes alpha + 2(g-1)/g n / beta (ring volume), inter-
 *             node when the group spans nodes.
 * Redistributions at phase boundaries are sends like shifts and add to
 * the critical path where nothing overlaps them. Memory is the
 * schedule's own per-device peak (exact for the emitted program), scaled
 * to the element size, and the training state of the weights each
 * device holds (16 bytes per parameter with mixed-precision Adam).
 */
#ifndef PRIMEC_COST_H
#define PRIMEC_COST_H

#include <jansson.h>
#include <stdio.h>

#include "profile.h"
#include "schedule.h"

typedef struct CostOptions {
    int elem_bytes;       /* bytes per element: 4 (the fp32 programs primec emits), 2 (fp16/bf16) */
    int devices_per_node; /* 0: the profile's */
    int record_events;    /* fill CostReport.events (for timelines) */
    /* Price every phase's kernel alone (what a --no-fuse build runs);
     * by default a schedule is priced with the kernels pass's fusion
     * (cost_kernel.h), as the built program runs it. */
    int no_fuse;
} CostOptions;

/* elem_bytes 4, the profile's devices per node, fused. */
void cost_options_default(CostOptions *opt);

typedef struct StepCost {
    double time_us;    /* advance of the critical path over the step */
    double compute_us; /* slowest device's compute in the step */
    double comm_us;    /* slowest device's transfer time posted in the step */
} StepCost;

typedef struct PhaseCost {
    const PhaseSched *phase;
    const char *name;     /* "forward of y", "gradient of y -> dw" */
    double time_us;       /* advance of the critical path over the phase */
    double prologue_us;   /* before the first step (input redistribution) */
    double compute_us;    /* slowest device's compute */
    double shift_us;      /* slowest device's shift transfer time */
    double collective_us; /* slowest device's collective time */
    double redist_us;     /* slowest device's redistribution transfer time */
    double exposed_us;    /* time_us - compute_us */
    double flops;         /* over all devices */
    long shift_bytes, collective_bytes, redist_bytes; /* over all devices */
    long peak_bytes;                                  /* largest device peak in the phase */
    int nsteps;
    StepCost *steps;
} PhaseCost;

/* Optimizer state per weight parameter that the schedule does not hold:
 * the fp32 master copy and Adam's two moments. */
#define COST_ADAM_STATE_BYTES 12

/* Training state of the weights, per device, from the weights' home
 * layouts: fp16 weight (2) + fp16 gradient (2) + fp32 master copy (4) +
 * two fp32 Adam moments (8) = 16 bytes per parameter. */
typedef struct TrainingMemory {
    int ndev;
    long model_params; /* every weight once */
    long *params;      /* per device: weight elements it holds */
    long *state_bytes; /* per device: 16 bytes per parameter */
    long *total_bytes; /* per device: schedule peak at elem_bytes + 12 bytes per
                        * parameter of fp32 master and moments (which the
                        * schedule does not hold) */
    long max_state_bytes, max_total_bytes;
    double capacity_bytes; /* the profile's, per device */
    int fits;              /* max_total_bytes <= capacity_bytes */
} TrainingMemory;

typedef enum CostEventKind {
    COST_EV_COMPUTE,
    COST_EV_SHIFT,      /* PRIME_BYTES_SHIFT */
    COST_EV_COLLECTIVE, /* PRIME_BYTES_COLLECTIVE */
    COST_EV_REDIST,     /* PRIME_BYTES_REDIST */
    COST_EV_KIND_COUNT
} CostEventKind;

/* A stretch of time one device spends on compute or on one kind of
 * transfer (sends in flight together are merged into one stretch). */
typedef struct CostEvent {
    int rank, phase, step; /* step -1: outside the phase's steps */
    CostEventKind kind;
    double start_us, end_us;
} CostEvent;

typedef struct CostReport {
    const Schedule *schedule;
    char profile[PROFILE_NAME_MAX];
    CostOptions options;
    int ndev;
    int devices_per_node;
    int nphases;
    PhaseCost *phases;
    double step_us;         /* one training step: every phase */
    double compute_us;      /* slowest device's compute */
    double comm_us;         /* slowest device's transfer time (shift + redist + collective) */
    double exposed_comm_us; /* step_us - compute_us: communication not hidden */
    double flops;           /* over all devices */
    long shift_bytes, redist_bytes, collective_bytes; /* over all devices */
    long p2p_bytes;                                   /* shift + redistribution */
    long *peak_bytes;                                 /* per device, at elem_bytes */
    long max_peak_bytes;
    TrainingMemory memory;
    /* With CostOptions.record_events: every rank's stretches, in the
     * order the simulation ran them (per rank in time order). */
    int nevents;
    CostEvent *events;
} CostReport;

/* Prices schedule s on profile p. Everything lives in the arena. An
 * inconsistent schedule (action lists that deadlock) is an internal
 * error. */
void cost_schedule(const Schedule *s, const Profile *p, const CostOptions *opt, Arena *arena,
                   CostReport *out);

/* The per-device training state of s's weights (also in CostReport.memory). */
void cost_training_memory(const Schedule *s, const Profile *p, const CostOptions *opt, Arena *arena,
                          TrainingMemory *out);

void cost_print(const CostReport *r, FILE *out);
/* The report as JSON (cost_json.c): a value, and written with a newline.
 * Its doubles keep 6 significant digits (COST_JSON_FLAGS). */
json_t *cost_json(const CostReport *r);
void cost_print_json(const CostReport *r, FILE *out);
#define COST_JSON_FLAGS JSON_REAL_PRECISION(6)

/* ---- The formulas, for the planner and for tests. Times in µs. ---- */

/* Link class between two ranks / of a group of ranks. */
LinkClass cost_link_between(int devices_per_node, int a, int b);
LinkClass cost_link_of_group(int devices_per_node, const int *group, int gsize);

/* alpha + bytes / beta of one point-to-point message. */
double cost_p2p_us(const Profile *p, LinkClass link, double bytes);
/* One collective over gsize devices on a buffer of `bytes` bytes:
 * alpha + V / beta, V = 2(g-1)/g bytes (all-reduce) or (g-1)/g bytes
 * (reduce-scatter, all-gather); 0 for a group of one. */
double cost_collective_us(const Profile *p, CommKind kind, LinkClass link, double bytes, int gsize);
/* C[m,n] += A[m,k] B[k,n] on one device, batch times. */
double cost_gemm_us(const Profile *p, double m, double n, double k, double batch, int elem_bytes);
/* A kernel that is not a GEMM. */
double cost_vector_us(const Profile *p, double flops, double bytes);
/* FLOPs of one KERNEL action of the phase (0 without a kernel), from its
 * kernel IR: a GEMM node counts 2 m n k per batch, a loop node its points
 * times one plus the operations of its terms. The emitted program reports its
 * achieved GFLOP/s against these (docs/timing.md). */
double cost_kernel_flops(const Schedule *s, const PhaseSched *ph);

#endif
