/*
 * sched_orbit.h — the schedule of a plan with data-parallel replicas from
 * the simulation of one replica (see sched_orbit.c; private to the
 * schedule pass, whose interface is schedule.h).
 */
#ifndef PRIMEC_SCHED_ORBIT_H
#define PRIMEC_SCHED_ORBIT_H

#include "sched_internal.h"

/* The folded schedule (Schedule.folded) of a model from one replica's
 * simulation, expanded to the whole mesh (Schedule.orbit_replicas set);
 * NULL when the model has no replica axis, the proof fails, the reduced
 * run reports anything, or PRIMEC_FULL_SIMULATION is set: the caller then
 * simulates every rank. Reports nothing. */
Schedule *sched_orbit_check(Arena *arena, DiagSink *sink, const Model *m,
                            const SliceTable *const *slices, const PhaseList *phases);

/* schedule.c: the folded schedule of the reduced model (slices and phases
 * as schedule_check_from's) with the replica rules of `o` on; *broken set
 * when a choice could not be shown to commute with the replicas. */
Schedule *sched_build_orbit(Arena *arena, DiagSink *sink, const Model *reduced,
                            const SliceTable *const *slices, const PhaseList *phases,
                            const SchedOrbit *o, int *broken);

#endif
