/*
 * form_internal.h — what the form pass (form.c) shares with its step
 * loops (form_steps.c).
 */
#ifndef PRIMEC_FORM_INTERNAL_H
#define PRIMEC_FORM_INTERNAL_H

#include "form.h"

/* Room that fold_steps reuses from phase to phase (its trials' loop
 * forms; the arena would keep every phase's). */
typedef struct FitScratch {
    PrimeActionForm *loop;
    PrimeOffsetForm *loop_off;
    PrimeAffine *loop_slots; /* 1 + PRIME_MAX_KERNEL_INPUTS per loop form */
    int cap;
    int *lcs; /* the table of align_steps (form_steps.c) */
    size_t lcs_cap;
    PrimeActionForm *runs; /* fold_runs' output and marks (form_steps.c) */
    unsigned char *runs_looped;
    int runs_cap;
    PrimeActionForm *forms; /* fit_phase's forms of one action each */
    int forms_cap;
    PrimeActionForm *steps; /* fold_step_loops' output */
    int steps_cap;
} FitScratch;

/* A zeroed room of n + 1 forms in *buf (grown as needed; the caller frees
 * it). */
PrimeActionForm *form_scratch_forms(PrimeActionForm **buf, int *cap, int n);

typedef struct Fit {
    Arena *arena;
    FitScratch *scratch;
    const Schedule *s;
    const PrimeMesh *mesh;
    int ndev;
    long coords0[PRIME_MAX_AXES];
    const long *coords;       /* rank r's coordinates at coords + r * mesh->naxes */
    int unit[PRIME_MAX_AXES]; /* the rank one step along axis a from the origin; -1 if size 1 */
    /* Fitting the ranks of one slice of the mesh (a pipeline stage's,
     * form.c's fit_slice): ranks are numbered among the slice's, rank r
     * being the mesh's rank_of[r]; the origin is the slice's first rank
     * (at coords0) and unit[slice axis] is -1. NULL: the whole mesh. */
    const int *rank_of;
    int mesh_ndev; /* the mesh's ranks */
} Fit;

/* Folds runs of steps that repeat with fields in progression into step
 * loops (PrimeActionForm.repeat); returns the new number of forms. */
int form_fold_steps(const Fit *f, PhaseForm *pf, PrimeActionForm *forms, int n,
                    PrimeOffsetForm *offs);

#endif
