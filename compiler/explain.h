/*
 * explain.h — what a schedule does, for people (text) and tools (JSON).
 *
 * Per instance: the partition's DSIs and slice counts; per phase: the
 * einsum, the sweep order chosen, and per step which tile every device
 * computes; every move between steps (kind, direction on the mesh,
 * bytes), every collective (kind, group, bytes), every redistribution at
 * a phase boundary (both layouts and why); memory per device (peak) and
 * each tensor's replication. The byte and memory figures are the
 * predictions the emitted program's counters are checked against.
 */
#ifndef PRIMEC_EXPLAIN_H
#define PRIMEC_EXPLAIN_H

#include <jansson.h>
#include <stdio.h>

#include "schedule.h"

/* ranks: how many ranks (0, 1, ...) to list device by device; -1: all;
 * EXPLAIN_RANKS_DEFAULT: 16, or none on a mesh of more than
 * SCHEDULE_SUMMARY_DEVICES devices (per-device detail there is asked
 * for). The rest are summarised (counts, the largest per-device
 * figures), so a report on thousands of devices stays small. */
enum { EXPLAIN_RANKS_DEFAULT = -2 };
void explain_text(const Schedule *s, Arena *arena, FILE *out, int ranks);
void explain_json(const Schedule *s, Arena *arena, FILE *out, int ranks);
/* The JSON report as a value (explain_json writes it). */
json_t *explain_json_value(const Schedule *s, Arena *arena, int ranks);

#endif
