/*
 * svg.h — pictures of a schedule: per instance and phase, the device mesh
 * at every step (svg.c), and a timeline of a training step from the cost
 * model (svg_timeline.c). See docs/svg.md.
 *
 * A mesh picture is one SVG per phase that computes or redistributes,
 * with one panel per step: every device as a box holding one square per
 * operand, filled with the colour of the tile it holds (a tile's colour
 * is a function of its id alone, the same in every panel and file), the
 * transfers after the step as arrows along the mesh, then a panel with
 * the phase's collectives (a numbered mark on every member) and one per
 * redistribution at its boundary (the layout needed, an arrow per
 * transfer). Output is bounded: meshes of at most SVG_MAX_SIDE devices
 * per row and column are drawn, at most SVG_MAX_STEP_PANELS steps (and
 * SVG_MAX_STEP_DEVICES device boxes in them) and SVG_MAX_REDIST_PANELS
 * redistributions per phase; whatever is left out
 * is said in the picture. Elements carry data- attributes (rank, step,
 * tensor, tile) so tools and tests can read them back. The output is
 * deterministic.
 */
#ifndef PRIMEC_SVG_H
#define PRIMEC_SVG_H

#include <stdio.h>

#include "cost.h"
#include "schedule.h"

#define SVG_MAX_SIDE 16
#define SVG_MAX_STEP_PANELS 16
#define SVG_MAX_STEP_DEVICES 2048 /* device boxes in a file's step panels (at least 2 steps) */
#define SVG_MAX_REDIST_PANELS 8
#define SVG_MAX_LEGEND_TILES 64
#define SVG_MAX_TIMELINE_RANKS 16

/* Creates DIR (and its parents) if needed and checks that it is a
 * writable directory; reports why not on stderr and returns 0. */
int svg_prepare_dir(const char *dir);

/* Writes the mesh pictures of s into dir: DIR/MODEL.NN.KIND[.INSTANCE].svg
 * for phase NN (two digits at least). Prints every path written, one a
 * line, on `list` (unless NULL), and a line for a mesh too large to draw. Returns 0
 * after reporting a write error on stderr. */
int svg_write_mesh(const Schedule *s, Arena *arena, const char *dir, FILE *list);

/* One timeline of a training step: a schedule priced with
 * CostOptions.record_events. */
typedef struct SvgTimeline {
    const char *title;
    const CostReport *report;
} SvgTimeline;

/* Writes n timelines, one under the other on one time scale, to path:
 * per rank (the first SVG_MAX_TIMELINE_RANKS) a compute lane and a
 * communication lane, the phases as columns. Returns 0 after reporting
 * a write error on stderr. */
int svg_write_timeline(const char *path, const char *title, const SvgTimeline *lines, int n);

/* `primec explain --svg DIR`: the mesh pictures of s and its timeline,
 * DIR/MODEL.timeline.svg, priced on `profile`. Prints every path
 * written on `list`; 0 after a reported write error. */
int svg_explain(const Schedule *s, Arena *arena, const char *dir, const Profile *profile,
                FILE *list);

/* ---- Shared by the drawings. ---- */

/* Text with XML's special characters escaped. */
void svg_text(FILE *out, const char *text);
/* "#rrggbb": the colour of tile `id` (golden-angle hues). */
void svg_colour(long id, char buf[8]);
/* Opens path for writing and writes the SVG header; NULL after a report. */
FILE *svg_begin(const char *path, double width, double height);
/* Writes the footer and closes; 0 after a report. */
int svg_end(FILE *f, const char *path);

#endif
