/*
 * svg_timeline.c — a training step as the cost model runs it (svg.h).
 *
 * Time runs to the right on one scale for every timeline of the file (so
 * a plan and the pinned partitions compare by length). Each rank has two
 * lanes: compute above, communication below (shifts, collectives and
 * redistributions in their own colours); a transfer drawn under a
 * compute bar is overlapped with it, one under a gap is exposed. The
 * phases are bands across all ranks, named where they are wide enough.
 */
#include <string.h>

#include "svg.h"

enum { WIDTH = 1100, LEFT = 70, RIGHT = 20, LANE = 10, RANK_GAP = 5, HEAD = 34, AXIS = 26 };

static const char *const event_class[COST_EV_KIND_COUNT] = {"compute", "shift", "collective",
                                                            "redist"};
static const char *const event_colour[COST_EV_KIND_COUNT] = {"#4e79a7", "#f28e2b", "#e15759",
                                                             "#9c6fb0"};

static int ranks_drawn(const CostReport *r) {
    return r->ndev < SVG_MAX_TIMELINE_RANKS ? r->ndev : SVG_MAX_TIMELINE_RANKS;
}

static double line_height(const CostReport *r) {
    return HEAD + ranks_drawn(r) * (2 * LANE + RANK_GAP) + AXIS +
           (r->ndev > ranks_drawn(r) ? 14 : 0);
}

/* A round step for the axis's ticks: 1, 2 or 5 times a power of ten. */
static double tick_step(double span) {
    double raw = span / 8, p = 1;
    while (p * 10 <= raw)
        p *= 10;
    while (p > raw && p > 1e-6)
        p /= 10;
    return raw >= 5 * p ? 5 * p : raw >= 2 * p ? 2 * p : p;
}

static void draw_line(FILE *out, const SvgTimeline *tl, double y, double scale) {
    const CostReport *r = tl->report;
    const int nr = ranks_drawn(r);
    const double plot_h = nr * (2 * LANE + RANK_GAP);
    fprintf(out,
            "<g class=\"timeline\" data-step-us=\"%.6g\" data-compute-us=\"%.6g\" "
            "data-ranks=\"%d\" data-ranks-drawn=\"%d\" transform=\"translate(0,%.1f)\">\n",
            r->step_us, r->compute_us, r->ndev, nr, y);
    fprintf(out, "<text x=\"10\" y=\"14\" font-size=\"12\">");
    svg_text(out, tl->title);
    fprintf(out, "</text>\n");
    /* Phases: bands with their names where there is room. */
    double at = 0;
    for (int q = 0; q < r->nphases; ++q) {
        const PhaseCost *pc = &r->phases[q];
        double x = LEFT + at * scale, w = pc->time_us * scale;
        fprintf(out,
                "<rect class=\"phase\" data-phase=\"%d\" data-start-us=\"%.6g\" "
                "data-end-us=\"%.6g\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%.1f\" "
                "fill=\"%s\"><title>",
                q, at, at + pc->time_us, x, HEAD - 14, w, plot_h + 14,
                q % 2 ? "#ececec" : "#f8f8f8");
        svg_text(out, pc->name);
        fprintf(out, "</title></rect>\n");
        if (w > 7.0 * (double)strlen(pc->name)) {
            fprintf(out, "<text x=\"%.2f\" y=\"%d\" font-size=\"9\" fill=\"#444\">", x + 2,
                    HEAD - 4);
            svg_text(out, pc->name);
            fprintf(out, "</text>\n");
        }
        at += pc->time_us;
    }
    for (int d = 0; d < nr; ++d)
        fprintf(out, "<text x=\"10\" y=\"%.1f\" font-size=\"9\">rank %d</text>\n",
                HEAD + d * (2 * LANE + RANK_GAP) + LANE + 3.0, d);
    for (int i = 0; i < r->nevents; ++i) {
        const CostEvent *e = &r->events[i];
        if (e->rank >= nr)
            continue;
        double x = LEFT + e->start_us * scale, w = (e->end_us - e->start_us) * scale;
        double ey =
            HEAD + e->rank * (2 * LANE + RANK_GAP) + (e->kind == COST_EV_COMPUTE ? 0 : LANE);
        fprintf(out,
                "<rect class=\"%s\" data-rank=\"%d\" data-phase=\"%d\" data-step=\"%d\" "
                "data-start-us=\"%.6g\" data-end-us=\"%.6g\" x=\"%.2f\" y=\"%.1f\" "
                "width=\"%.2f\" height=\"%d\" fill=\"%s\"%s/>\n",
                event_class[e->kind], e->rank, e->phase, e->step, e->start_us, e->end_us, x, ey,
                w < 0.4 ? 0.4 : w, LANE - 1, event_colour[e->kind],
                e->kind == COST_EV_COMPUTE ? "" : " fill-opacity=\"0.85\"");
    }
    /* The time axis. */
    double ay = HEAD + plot_h + 4;
    double span = (WIDTH - LEFT - RIGHT) / scale, step = tick_step(span);
    fprintf(out, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\"/>\n", LEFT, ay,
            WIDTH - RIGHT, ay);
    for (double t = 0; t <= span + 1e-9; t += step)
        fprintf(out,
                "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#333\"/>"
                "<text x=\"%.2f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"middle\">%g</text>\n",
                LEFT + t * scale, ay, LEFT + t * scale, ay + 4, LEFT + t * scale, ay + 14, t);
    fprintf(out,
            "<text x=\"%d\" y=\"%.1f\" font-size=\"9\" text-anchor=\"end\">us; step %.1f us, "
            "compute %.1f us, exposed communication %.1f us</text>\n",
            WIDTH - RIGHT, ay + 24, r->step_us, r->compute_us, r->exposed_comm_us);
    if (r->ndev > nr)
        fprintf(out, "<text x=\"10\" y=\"%.1f\" font-size=\"9\">ranks 0 to %d of %d drawn</text>\n",
                ay + 24, nr - 1, r->ndev);
    fprintf(out, "</g>\n");
}

int svg_write_timeline(const char *path, const char *title, const SvgTimeline *lines, int n) {
    double longest = 0, height = 60;
    for (int i = 0; i < n; ++i) {
        if (lines[i].report->step_us > longest)
            longest = lines[i].report->step_us;
        height += line_height(lines[i].report) + 16;
    }
    double scale = (WIDTH - LEFT - RIGHT) / (longest > 0 ? longest : 1);
    FILE *out = svg_begin(path, WIDTH, height);
    if (!out)
        return 0;
    fprintf(out, "<text class=\"title\" x=\"10\" y=\"20\" font-size=\"14\">");
    svg_text(out, title);
    fprintf(out, "</text>\n");
    for (int k = 0; k < COST_EV_KIND_COUNT; ++k)
        fprintf(out,
                "<rect x=\"%d\" y=\"30\" width=\"12\" height=\"10\" fill=\"%s\"/><text x=\"%d\" "
                "y=\"39\" font-size=\"10\">%s</text>\n",
                10 + k * 110, event_colour[k], 26 + k * 110, event_class[k]);
    double y = 50;
    for (int i = 0; i < n; ++i) {
        draw_line(out, &lines[i], y, scale);
        y += line_height(lines[i].report) + 16;
    }
    return svg_end(out, path);
}

int svg_explain(const Schedule *s, Arena *arena, const char *dir, const Profile *profile,
                FILE *list) {
    if (!svg_write_mesh(s, arena, dir, list))
        return 0;
    CostOptions opt;
    cost_options_default(&opt);
    opt.record_events = 1;
    CostReport r;
    cost_schedule(s, profile, &opt, arena, &r);
    SvgTimeline tl = {arena_printf(arena, "%s on %d devices", s->model->name, r.ndev), &r};
    const char *path = arena_printf(arena, "%s/%s.timeline.svg", dir, s->model->name);
    if (!svg_write_timeline(
            path,
            arena_printf(arena, "%s: one training step on profile %s", s->model->name, r.profile),
            &tl, 1))
        return 0;
    if (list)
        fprintf(list, "%s\n", path);
    return 1;
}
