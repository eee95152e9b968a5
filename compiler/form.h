/*
 * form.h — the rank-parametric form of a schedule (runtime/prime_form.h).
 *
 * The schedule pass lists every rank's actions; this pass finds, per
 * phase, one list of action forms whose rank-dependent fields are
 * functions of the mesh coordinates (peers as mesh shifts, kernel tile
 * origins as affine-modular functions, collective groups as sub-meshes),
 * and the same for the layouts the driver fills and checks. Each form is
 * proven before it is kept: the runtime's own expansion
 * (prime_rank_phase, prime_layout_form_tile) is run for every rank and
 * must give back exactly that rank's schedule. A phase that does not fit
 * keeps its per-rank tables, and `fallback` says why.
 */
#ifndef PRIMEC_FORM_H
#define PRIMEC_FORM_H

#include "prime_form.h"
#include "schedule.h"

typedef struct PhaseForm {
    const char *fallback; /* NULL: in form; else why the phase keeps per-rank tables */
    PrimePhaseForm form;
    int noffset_forms;
    int ngroup_forms;
    int uses_offsets; /* kernel args index the phase's offsets table */
    int ntables;      /* fields left as per-rank tables */
    int reordered;    /* the form follows form_canonical_phase's order */
    int layer_loops;  /* loops over a repeated layer's copies (form_fold.h) */
    /* The per-rank lists the form was proven against: the phase's, or
     * their canonical order when reordered. */
    const PhaseSched *sched;
    /* A phase split by slices (form.c's fit_split): the piece of the next
     * slice, whose form form.next points to; NULL: none. Each piece has
     * its own offset and group forms, tables and loops. */
    struct PhaseForm *next;
} PhaseForm;

typedef struct ScheduleForm {
    PrimeMesh mesh;
    PhaseForm *phases;       /* per phase of the schedule */
    PrimeLayoutForm **home;  /* per tensor; NULL: per-rank tables */
    PrimeLayoutForm **final; /* per tensor; NULL: per-rank tables */
    int predicted_uniform;   /* every rank's predicted counts are equal */
    int nfallback;           /* phases with per-rank tables */
    /* The program's numbering of the storage tensors: the tensors of
     * each copy of a repeated layer in one block, in the same order in
     * every copy, so that copy l's are copy 0's plus l * block. */
    int *tensor_number;   /* per storage tensor */
    int *tensor_at;       /* per number: the storage tensor */
    int layer_block;      /* the tensors of the layer's second copy (0: none) */
    int nlayout_fallback; /* layouts with per-rank tables */
} ScheduleForm;

/* The phase with every rank's runs of posts (allocations, sends,
 * receives, box copies between two other actions) in a canonical order:
 * allocations, box copies, receives, then sends, each by tensor and by
 * the peer's offset from the rank, messages to one peer in their order.
 * Nothing in such a run is freed or waited for, so the order changes
 * neither results nor counters; ranks that post the same messages in a
 * rotated order then run the same list. */
PhaseSched *form_canonical_phase(Arena *arena, const PhaseSched *ph, const PrimeMesh *mesh,
                                 int ndev);

/* The copies of the model's repeated layer (in each micro-batch, for a
 * staged run with micro-batches, whose Model.layer_count is 0); 0: none. */
int form_layer_copies(const Model *m);

/* Finds and proves the forms of every phase and layout of s. */
ScheduleForm *form_build(Arena *arena, const Schedule *s);

#endif
