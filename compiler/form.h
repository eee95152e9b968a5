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
} PhaseForm;

typedef struct ScheduleForm {
    PrimeMesh mesh;
    PhaseForm *phases;       /* per phase of the schedule */
    PrimeLayoutForm **home;  /* per tensor; NULL: per-rank tables */
    PrimeLayoutForm **final; /* per tensor; NULL: per-rank tables */
    int predicted_uniform;   /* every rank's predicted counts are equal */
    int nfallback;           /* phases with per-rank tables */
    int nlayout_fallback;    /* layouts with per-rank tables */
} ScheduleForm;

/* Finds and proves the forms of every phase and layout of s. */
ScheduleForm *form_build(Arena *arena, const Schedule *s);

#endif
