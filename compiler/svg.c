/*
 * svg.c — mesh pictures of a schedule (see svg.h), and the helpers the
 * timeline shares.
 *
 * A panel draws the mesh as a grid: a 1-D mesh as one row, a mesh of
 * two or more axes with the first axis down and the others, row-major,
 * across (so grid position and rank agree: rank = row * cols + col).
 * Every device is a box of `slots` squares; in a step panel square k is
 * operand k (the inputs in order, then the output). An arrow leaves the
 * sender's box and points along the mesh offset to the receiver's, each
 * axis wrapped into (-size/2, size/2] as explain prints it: an offset
 * that wraps around the grid's edge points out of the grid (the ring's
 * way round), one that passes other devices is an arc.
 */
#define _POSIX_C_SOURCE 200809L
#include "svg.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "partition.h"

/* ------------------------------------------------------------------ */
/* Shared helpers                                                      */

void svg_text(FILE *out, const char *text) {
    for (const char *p = text; p && *p; ++p) {
        switch (*p) {
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '&':
            fputs("&amp;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        default:
            fputc(*p, out);
        }
    }
}

void svg_colour(long id, char buf[8]) {
    /* Hues 137.5 degrees apart (integers, so the text is the same on
     * every machine); three lightness levels tell neighbours apart. */
    long h = (id % 1000 * 1375 / 10) % 360;
    double l = (id % 3 == 0) ? 0.62 : (id % 3 == 1) ? 0.72 : 0.52, sat = 0.65;
    double c = (1 - fabs(2 * l - 1)) * sat;
    double hp = (double)h / 60.0;
    double x = c * (1 - fabs(fmod(hp, 2.0) - 1));
    double r = 0, g = 0, b = 0;
    if (hp < 1)
        r = c, g = x;
    else if (hp < 2)
        r = x, g = c;
    else if (hp < 3)
        g = c, b = x;
    else if (hp < 4)
        g = x, b = c;
    else if (hp < 5)
        r = x, b = c;
    else
        r = c, b = x;
    double m = l - c / 2;
    snprintf(buf, 8, "#%02x%02x%02x", (int)lround((r + m) * 255), (int)lround((g + m) * 255),
             (int)lround((b + m) * 255));
}

FILE *svg_begin(const char *path, double width, double height) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "primec: error: cannot write '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"11\">\n"
            "<defs><marker id=\"head\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" "
            "markerWidth=\"6\" markerHeight=\"6\" orient=\"auto-start-reverse\">"
            "<path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"context-stroke\"/></marker></defs>\n"
            "<rect class=\"background\" width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            width, height, width, height);
    return f;
}

int svg_end(FILE *f, const char *path) {
    fprintf(f, "</svg>\n");
    int ok = !ferror(f);
    ok &= fclose(f) == 0;
    if (!ok)
        fprintf(stderr, "primec: error: cannot write '%s': %s\n", path, strerror(errno));
    return ok;
}

int svg_prepare_dir(const char *dir) {
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf) {
        fprintf(stderr, "primec: error: bad --svg directory '%s'\n", dir);
        return 0;
    }
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; ++i) {
        if (buf[i] != '/' && buf[i] != 0)
            continue;
        char c = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "primec: error: cannot create '%s': %s\n", buf, strerror(errno));
            return 0;
        }
        buf[i] = c;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "primec: error: cannot write into '%s': not a directory\n", dir);
        return 0;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "primec: error: cannot write into '%s': %s\n", dir, strerror(errno));
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* Geometry                                                            */

enum {
    CELL = 30,
    CELL_GAP = 2,
    DEV_PAD = 3,
    LABEL_H = 12,
    DEV_GAP = 30,
    MARGIN = 26,
    TITLE_H = 30
};

typedef struct Geo {
    const Schedule *s;
    const Mesh *mesh;
    int rows, cols;
    int slots; /* squares per device box */
    double dev_w, dev_h;
    double panel_w, panel_h;
} Geo;

static void geo_init(Geo *g, const Schedule *s, int slots) {
    g->s = s;
    g->mesh = &s->model->mesh;
    g->rows = g->mesh->naxes < 2 ? 1 : (int)g->mesh->sizes[0];
    g->cols = g->mesh->ndev / g->rows;
    g->slots = slots;
    g->dev_w = slots * (CELL + CELL_GAP) - CELL_GAP + 2 * DEV_PAD;
    g->dev_h = LABEL_H + CELL + 2 * DEV_PAD;
    g->panel_w = 2 * MARGIN + g->cols * (g->dev_w + DEV_GAP) - DEV_GAP;
    g->panel_h = TITLE_H + 2 * MARGIN + g->rows * (g->dev_h + DEV_GAP) - DEV_GAP;
}

/* Top-left corner of a device box in its panel. */
static void dev_xy(const Geo *g, int rank, double *x, double *y) {
    *x = MARGIN + (rank % g->cols) * (g->dev_w + DEV_GAP);
    *y = TITLE_H + MARGIN + (rank / g->cols) * (g->dev_h + DEV_GAP);
}

/* Centre of square `slot` of a device. */
static void cell_centre(const Geo *g, int rank, int slot, double *x, double *y) {
    dev_xy(g, rank, x, y);
    *x += DEV_PAD + slot * (CELL + CELL_GAP) + CELL / 2.0;
    *y += LABEL_H + DEV_PAD + CELL / 2.0;
}

/* The grid offset (rows, columns) from src to dst, each mesh axis
 * wrapped into (-size/2, size/2]. */
static void grid_offset(const Geo *g, int src, int dst, long *drow, long *dcol) {
    const Mesh *m = g->mesh;
    long cs[IR_MAX_AXES], cd[IR_MAX_AXES], d[IR_MAX_AXES];
    mesh_coords(m, src, cs);
    mesh_coords(m, dst, cd);
    for (int a = 0; a < m->naxes; ++a) {
        d[a] = ((cd[a] - cs[a]) % m->sizes[a] + m->sizes[a]) % m->sizes[a];
        if (d[a] > m->sizes[a] / 2)
            d[a] -= m->sizes[a];
    }
    if (m->naxes < 2) {
        *drow = 0;
        *dcol = d[0];
    } else if (m->naxes == 2) {
        *drow = d[0];
        *dcol = d[1];
    } else {
        *drow = d[0];
        *dcol = dst % g->cols - src % g->cols;
    }
}

/* "1,0": a tile's slice index per dimension. */
static const char *tile_coords(Arena *arena, const SchedTensor *t, long tile) {
    char buf[128];
    size_t n = 0;
    buf[0] = 0;
    for (int x = 0; x < t->ndims && n < sizeof buf - 24; ++x)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%ld", x ? "," : "",
                              sched_tile_coord(t, tile, x));
    return arena_strdup(arena, buf);
}

static void tile_fill(int tensor, long tile, char buf[8]) {
    svg_colour(tile + 7L * tensor, buf);
}

/* ------------------------------------------------------------------ */
/* Elements                                                            */

static void device_box(FILE *out, const Geo *g, int rank) {
    double x, y;
    dev_xy(g, rank, &x, &y);
    fprintf(out,
            "<rect class=\"device\" data-rank=\"%d\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
            "height=\"%.1f\" rx=\"3\" fill=\"#f4f4f4\" stroke=\"#555\"/>\n",
            rank, x, y, g->dev_w, g->dev_h);
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" fill=\"#333\">%d</text>\n",
            x + DEV_PAD, y + LABEL_H - 2, rank);
}

static void tile_cell(FILE *out, const Geo *g, Arena *arena, int rank, int slot, int tensor,
                      long tile) {
    const SchedTensor *t = &g->s->tensors[tensor];
    double cx, cy;
    char fill[8];
    cell_centre(g, rank, slot, &cx, &cy);
    tile_fill(tensor, tile, fill);
    const char *coords = tile_coords(arena, t, tile);
    fprintf(out, "<rect class=\"tile\" data-rank=\"%d\" data-slot=\"%d\" data-tensor=\"", rank,
            slot);
    svg_text(out, t->name);
    fprintf(out,
            "\" data-tile=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"%s\" "
            "stroke=\"#333\" stroke-width=\"0.5\"/>\n",
            coords, cx - CELL / 2.0, cy - CELL / 2.0, CELL, CELL, fill);
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"8\" text-anchor=\"middle\">", cx, cy - 3);
    svg_text(out, t->name);
    fprintf(out,
            "</text><text x=\"%.1f\" y=\"%.1f\" font-size=\"8\" text-anchor=\"middle\">%s</text>\n",
            cx, cy + 8, coords);
}

/* The stroke of operand slot k's arrows. */
static const char *slot_stroke(int k) {
    static const char *const strokes[] = {"#1f5fa8", "#c0392b", "#1e8449", "#7d3c98", "#b9770e"};
    return strokes[k % 5];
}

/* Distance from a box's centre to its border along the unit vector u. */
static double to_border(double hw, double hh, double ux, double uy) {
    double a = fabs(ux) > 1e-9 ? hw / fabs(ux) : 1e30, b = fabs(uy) > 1e-9 ? hh / fabs(uy) : 1e30;
    return a < b ? a : b;
}

typedef struct ArrowStyle {
    int slot;           /* the square a local transfer's dot sits on */
    double side;        /* sideways offset */
    const char *stroke; /* colour */
    int acc;            /* an accumulator: dashed */
} ArrowStyle;

/* An arrow from device src towards dst (see the top of the file), from
 * border to border, moved sideways (st->side) so that the arrows of
 * several operands run side by side; a transfer to the device itself is
 * a dot on its square. */
static void arrow(FILE *out, const Geo *g, const char *cls, int tensor, int src, int dst,
                  const ArrowStyle *st) {
    const int slot = st->slot, acc = st->acc;
    const char *name = g->s->tensors[tensor].name;
    if (src == dst) {
        double cx, cy;
        cell_centre(g, src, slot < g->slots ? slot : 0, &cx, &cy);
        fprintf(out, "<circle class=\"%s-local\" data-tensor=\"", cls);
        svg_text(out, name);
        fprintf(out,
                "\" data-src=\"%d\" data-dst=\"%d\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" "
                "fill=\"#222\"/>\n",
                src, dst, cx, cy - CELL / 2.0 + 4);
        return;
    }
    long drow, dcol;
    grid_offset(g, src, dst, &drow, &dcol);
    long row = src / g->cols + drow, col = src % g->cols + dcol;
    double px = g->dev_w + DEV_GAP, py = g->dev_h + DEV_GAP;
    double bx, by, hw = g->dev_w / 2, hh = g->dev_h / 2;
    dev_xy(g, src, &bx, &by);
    double x0 = bx + hw, y0 = by + hh;
    double vx = (double)dcol * px, vy = (double)drow * py, len = hypot(vx, vy);
    double ux = vx / len, uy = vy / len;
    double side = st->side;
    double start = to_border(hw, hh, ux, uy), end;
    int wraps = row < 0 || row >= g->rows || col < 0 || col >= g->cols;
    if (wraps)
        end = start + MARGIN * 0.6 + (ux != 0 && uy != 0 ? DEV_GAP : 0); /* around the edge */
    else
        end = len - to_border(hw, hh, ux, uy) - 1;
    if (end < start + 4)
        end = start + 4;
    double nx = -uy * side, ny = ux * side;
    /* Past other devices: an arc, bowing to the left of its direction
     * (so the two ways between a pair part). */
    double bow = 0;
    if (!wraps && labs(drow) + labs(dcol) > 1) {
        /* The curve's peak is half the bow: clear of the boxes between. */
        bow = 0.25 * (end - start);
        double clear = 2 * (fabs(ux) > fabs(uy) ? hh : hw) + 14;
        bow = bow < clear ? clear : bow;
    }
    double ax = x0 + ux * start + nx, ay = y0 + uy * start + ny;
    double bx2 = x0 + ux * end + nx, by2 = y0 + uy * end + ny;
    double cx = (ax + bx2) / 2 + uy * bow, cy = (ay + by2) / 2 - ux * bow;
    fprintf(out, "<path class=\"%s\" data-tensor=\"", cls);
    svg_text(out, name);
    fprintf(out,
            "\" data-src=\"%d\" data-dst=\"%d\"%s d=\"M %.1f %.1f Q %.1f %.1f %.1f %.1f\" "
            "fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s marker-end=\"url(#head)\"/>\n",
            src, dst, acc ? " data-acc=\"1\"" : "", ax, ay, cx, cy, bx2, by2, st->stroke,
            acc ? " stroke-dasharray=\"4 2\"" : "");
}

static void panel_begin(FILE *out, const Geo *g, double x, double y, const char *kind,
                        const char *attrs, const char *title) {
    fprintf(out, "<g class=\"panel\" data-kind=\"%s\"%s transform=\"translate(%.1f,%.1f)\">\n",
            kind, attrs, x, y);
    fprintf(
        out,
        "<rect x=\"2\" y=\"2\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#bbb\"/>\n",
        g->panel_w - 4, g->panel_h - 4);
    fprintf(out, "<text x=\"8\" y=\"17\" font-size=\"11\">");
    svg_text(out, title);
    fprintf(out, "</text>\n");
}

/* ------------------------------------------------------------------ */
/* Panels                                                              */

static const char *phase_title(const Schedule *s, Arena *arena, const PhaseSched *ph) {
    if (ph->inst < 0)
        return phase_name(ph->kind);
    const char *inst = s->model->instances[ph->inst].name;
    if (ph->kind == PHASE_FWD)
        return arena_printf(arena, "%s of %s", phase_name(ph->kind), inst);
    return arena_printf(arena, "%s of %s -> %s", phase_name(ph->kind), inst,
                        s->tensors[ph->out.tensor].name);
}

static int is_compute(const PhaseSched *ph) {
    return ph->kind == PHASE_FWD || ph->kind == PHASE_BWD || ph->kind == PHASE_GRAD;
}

/* Operand k of a phase: the inputs, then the output. */
static const Operand *operand(const PhaseSched *ph, int k) {
    return k < ph->nin ? &ph->in[k] : &ph->out;
}

static int operand_slot(const PhaseSched *ph, int tensor) {
    for (int k = 0; k <= ph->nin; ++k)
        if (operand(ph, k)->tensor == tensor)
            return k;
    return 0;
}

#define SVG_MAX_ARROWS 1024

static void step_panel(FILE *out, const Geo *g, Arena *arena, const PhaseSched *ph, long st,
                       double x, double y) {
    const Schedule *s = g->s;
    long t = sched_op_step(s, ph, st);
    char title[512];
    size_t n = (size_t)snprintf(title, sizeof title, "step %ld (t = %ld)", st, t);
    for (int i = 0, first = 1; i < ph->moves.count && n < sizeof title - 64; ++i) {
        const Move *mv = ph->moves.items[i];
        if (mv->step != st)
            continue;
        n += (size_t)snprintf(title + n, sizeof title - n, "%s%s %s%s", first ? "; then " : ", ",
                              s->tensors[mv->tensor].name, mv->is_acc ? "accumulator " : "",
                              move_kind_name(mv->kind));
        first = 0;
    }
    panel_begin(out, g, x, y, "step",
                arena_printf(arena, " data-step=\"%ld\" data-t=\"%ld\"", st, t), title);
    for (int d = 0; d < s->model->mesh.ndev; ++d) {
        device_box(out, g, d);
        for (int k = 0; k <= ph->nin && sched_device_computes(s, ph, d); ++k)
            tile_cell(out, g, arena, d, k, operand(ph, k)->tensor,
                      sched_operand_tile(s, ph, operand(ph, k), d, t));
    }
    int drawn = 0, left = 0;
    for (int i = 0; i < ph->moves.count; ++i) {
        const Move *mv = ph->moves.items[i];
        if (mv->step != st)
            continue;
        const char *cls = mv->kind == MOVE_SHIFT         ? "shift"
                          : mv->kind == MOVE_PERMUTATION ? "permutation"
                                                         : "exchange";
        for (int k = 0; k < mv->ntransfers; ++k) {
            if (drawn == SVG_MAX_ARROWS) {
                left++;
                continue;
            }
            int slot = operand_slot(ph, mv->tensor);
            ArrowStyle style = {slot, (slot - ph->nin / 2.0) * 7, slot_stroke(slot), mv->is_acc};
            arrow(out, g, cls, mv->tensor, mv->transfers[k].src, mv->transfers[k].dst, &style);
            drawn++;
        }
    }
    if (left)
        fprintf(out, "<text x=\"8\" y=\"%.1f\">%d more transfers not drawn</text>\n",
                g->panel_h - 8, left);
    fprintf(out, "</g>\n");
}

static void collective_panel(FILE *out, const Geo *g, Arena *arena, const PhaseSched *ph, double x,
                             double y) {
    const Schedule *s = g->s;
    const int ndev = s->model->mesh.ndev;
    const Instance *inst = &s->model->instances[ph->inst];
    long t = sched_op_step(s, ph, inst->steps - 1);
    int ng = ph->collectives.count;
    char title[256];
    snprintf(title, sizeof title, "after the last step: %d collective%s (mark: group number)", ng,
             ng == 1 ? "" : "s");
    panel_begin(out, g, x, y, "collectives", "", title);
    int *marks = ARENA_ARRAY(arena, int, ndev);
    memset(marks, 0, sizeof(int) * (size_t)ndev);
    for (int d = 0; d < ndev; ++d) {
        device_box(out, g, d);
        if (sched_device_computes(s, ph, d))
            tile_cell(out, g, arena, d, 0, ph->out.tensor,
                      sched_operand_tile(s, ph, &ph->out, d, t));
    }
    for (int i = 0; i < ng; ++i) {
        const Collective *c = ph->collectives.items[i];
        char colour[8];
        svg_colour(3L * i + 1, colour);
        double *px = ARENA_ARRAY(arena, double, c->gsize),
               *py = ARENA_ARRAY(arena, double, c->gsize);
        for (int m = 0; m < c->gsize; ++m) {
            int r = c->group[m], k = marks[r]++;
            dev_xy(g, r, &px[m], &py[m]);
            px[m] += DEV_PAD + CELL + 12 + (k % 6) * 13;
            py[m] += LABEL_H + 8 + (k / 6 % 2) * 14;
        }
        /* The group: a line through its members, under their marks. */
        fprintf(out, "<polyline class=\"collective-group\" data-group=\"%d\" points=\"", i);
        for (int m = 0; m < c->gsize; ++m)
            fprintf(out, "%s%.1f,%.1f", m ? " " : "", px[m], py[m]);
        fprintf(out, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" stroke-opacity=\"0.7\"/>\n",
                colour);
        for (int m = 0; m < c->gsize; ++m) {
            fprintf(out,
                    "<circle class=\"collective\" data-group=\"%d\" data-rank=\"%d\" "
                    "data-kind=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"%s\" "
                    "stroke=\"#222\"/>\n",
                    i, c->group[m], sched_collective_kind(c), px[m], py[m], colour);
            fprintf(
                out,
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"7\" text-anchor=\"middle\">%d</text>\n",
                px[m], py[m] + 2.5, i);
        }
    }
    fprintf(out, "</g>\n");
}

static void redist_panel(FILE *out, const Geo *g, Arena *arena, const Move *mv, int legend_index,
                         double x, double y) {
    const Schedule *s = g->s;
    char title[512];
    snprintf(title, sizeof title, "redistribution of %s (%s): %s", s->tensors[mv->tensor].name,
             mv->kind == MOVE_CONVERSION ? mv->pattern : move_kind_name(mv->kind), mv->reason);
    panel_begin(out, g, x, y, "redistribution",
                arena_printf(arena, " data-tensor=\"%s\"", s->tensors[mv->tensor].name), title);
    for (int d = 0; d < s->model->mesh.ndev; ++d) {
        device_box(out, g, d);
        int n = d < mv->need.ndev ? mv->need.count[d] : 0;
        for (int i = 0; i < n && i < g->slots; ++i)
            tile_cell(out, g, arena, d, i, mv->tensor, mv->need.tiles[d][i]);
        if (n > g->slots) {
            double dx, dy;
            dev_xy(g, d, &dx, &dy);
            fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"8\">+%d</text>\n",
                    dx + g->dev_w - 16, dy + LABEL_H - 2, n - g->slots);
        }
    }
    int left = 0;
    for (int k = 0; k < mv->ntransfers; ++k) {
        if (k >= SVG_MAX_ARROWS) {
            left++;
            continue;
        }
        ArrowStyle style = {0, 0, slot_stroke(legend_index), 0};
        arrow(out, g, "redist", mv->tensor, mv->transfers[k].src, mv->transfers[k].dst, &style);
    }
    if (left)
        fprintf(out, "<text x=\"8\" y=\"%.1f\">%d more transfers not drawn</text>\n",
                g->panel_h - 8, left);
    fprintf(out, "</g>\n");
}

/* Per operand tensor: its tiles' colours (SVG_MAX_LEGEND_TILES at most). */
static double legend(FILE *out, const Schedule *s, Arena *arena, const int *tensors, int n,
                     double y) {
    double name_w = 0;
    for (int i = 0; i < n; ++i)
        if (6.5 * (double)strlen(s->tensors[tensors[i]].name) > name_w)
            name_w = 6.5 * (double)strlen(s->tensors[tensors[i]].name);
    for (int i = 0; i < n; ++i) {
        const SchedTensor *t = &s->tensors[tensors[i]];
        fprintf(out, "<g class=\"legend\" data-tensor=\"");
        svg_text(out, t->name);
        fprintf(out, "\"><text x=\"10\" y=\"%.1f\">", y + 12);
        svg_text(out, t->name);
        fprintf(out,
                "</text><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"2\" marker-end=\"url(#head)\"/>\n",
                16 + name_w, y + 8, 40 + name_w, y + 8, slot_stroke(i));
        long shown = t->ntiles < SVG_MAX_LEGEND_TILES ? t->ntiles : SVG_MAX_LEGEND_TILES;
        for (long k = 0; k < shown; ++k) {
            char fill[8];
            tile_fill(tensors[i], k, fill);
            fprintf(out,
                    "<rect class=\"swatch\" data-tile=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"14\" "
                    "height=\"14\" fill=\"%s\" stroke=\"#333\" stroke-width=\"0.5\"><title>%s "
                    "%s</title></rect>\n",
                    tile_coords(arena, t, k), 48 + name_w + k * 16.0, y + 2, fill, t->name,
                    tile_coords(arena, t, k));
        }
        if (shown < t->ntiles)
            fprintf(out, "<text x=\"%.1f\" y=\"%.1f\">... %ld more tiles</text>\n",
                    52 + name_w + shown * 16.0, y + 12, t->ntiles - shown);
        fprintf(out, "</g>\n");
        y += 18;
    }
    return y;
}

/* ------------------------------------------------------------------ */
/* Files                                                               */

static int write_phase(const Schedule *s, Arena *arena, const char *dir, int k, FILE *list) {
    const PhaseSched *ph = s->phases.items[k];
    const int compute = is_compute(ph);
    const Instance *inst = compute ? &s->model->instances[ph->inst] : NULL;
    long nsteps = compute ? inst->steps : 0;
    long cap = SVG_MAX_STEP_DEVICES / s->model->mesh.ndev;
    cap = cap < 2 ? 2 : cap > SVG_MAX_STEP_PANELS ? SVG_MAX_STEP_PANELS : cap;
    long steps_drawn = nsteps < cap ? nsteps : cap;
    int coll = compute && ph->collectives.count > 0;
    int nred =
        ph->boundary.count < SVG_MAX_REDIST_PANELS ? ph->boundary.count : SVG_MAX_REDIST_PANELS;
    int slots = compute ? ph->nin + 1 : 1;
    for (int i = 0; i < nred; ++i) {
        const Move *mv = ph->boundary.items[i];
        for (int d = 0; d < mv->need.ndev; ++d)
            if (mv->need.count[d] > slots)
                slots = mv->need.count[d] < 4 ? mv->need.count[d] : 4;
    }
    Geo g;
    geo_init(&g, s, slots);
    long npanels = steps_drawn + coll + nred;
    int per_row = (int)(1400 / g.panel_w);
    per_row = per_row < 1 ? 1 : per_row > 4 ? 4 : per_row;
    if (per_row > npanels)
        per_row = (int)npanels;
    int tensors[SCHED_MAX_OPERANDS + 1 + SVG_MAX_REDIST_PANELS], nt = 0;
    for (int i = 0; compute && i <= ph->nin; ++i)
        tensors[nt++] = operand(ph, i)->tensor;
    for (int i = 0; i < nred; ++i) {
        int t = ((const Move *)ph->boundary.items[i])->tensor, seen = 0;
        for (int j = 0; j < nt; ++j)
            seen |= tensors[j] == t;
        if (!seen)
            tensors[nt++] = t;
    }
    double head = 56 + 18.0 * nt;
    long prow = (npanels + per_row - 1) / per_row;
    double width = per_row * g.panel_w + 20, height = head + prow * (g.panel_h + 10) + 24;
    if (width < 700)
        width = 700;
    const char *path =
        arena_printf(arena, "%s/%s.%02d.%s%s%s.svg", dir, s->model->name, k, phase_name(ph->kind),
                     compute ? "." : "", compute ? inst->name : "");
    FILE *out = svg_begin(path, width, height);
    if (!out)
        return 0;
    fprintf(out, "<text class=\"title\" x=\"10\" y=\"20\" font-size=\"14\">");
    svg_text(out,
             arena_printf(arena, "%s: phase %d, %s", s->model->name, k, phase_title(s, arena, ph)));
    fprintf(out, "</text>\n<text x=\"10\" y=\"38\">");
    if (compute)
        svg_text(out, arena_printf(arena,
                                   "%ld step%s in %s order; mesh %d x %d; squares: operands, "
                                   "coloured by tile",
                                   nsteps, nsteps == 1 ? "" : "s",
                                   ph->reversed ? "reversed" : "forward", g.rows, g.cols));
    else
        svg_text(out, arena_printf(arena, "redistributions at the phase boundary; mesh %d x %d",
                                   g.rows, g.cols));
    if (steps_drawn < nsteps)
        svg_text(out,
                 arena_printf(arena, "; the first %ld of %ld steps drawn", steps_drawn, nsteps));
    if (nred < ph->boundary.count)
        svg_text(out, arena_printf(arena, "; the first %d of %d redistributions drawn", nred,
                                   ph->boundary.count));
    fprintf(out, "</text>\n");
    legend(out, s, arena, tensors, nt, 46);
    long p = 0;
    for (long st = 0; st < steps_drawn; ++st, ++p)
        step_panel(out, &g, arena, ph, st, 10 + p % per_row * g.panel_w,
                   head + p / per_row * (g.panel_h + 10));
    if (coll) {
        collective_panel(out, &g, arena, ph, 10 + p % per_row * g.panel_w,
                         head + p / per_row * (g.panel_h + 10));
        p++;
    }
    for (int i = 0; i < nred; ++i, ++p) {
        const Move *mv = ph->boundary.items[i];
        int li = 0;
        while (tensors[li] != mv->tensor)
            li++;
        redist_panel(out, &g, arena, mv, li, 10 + p % per_row * g.panel_w,
                     head + p / per_row * (g.panel_h + 10));
    }
    if (!svg_end(out, path))
        return 0;
    if (list)
        fprintf(list, "%s\n", path);
    return 1;
}

int svg_write_mesh(const Schedule *s, Arena *arena, const char *dir, FILE *list) {
    const Mesh *m = &s->model->mesh;
    int rows = m->naxes < 2 ? 1 : (int)m->sizes[0];
    int cols = m->ndev / rows;
    if (rows > SVG_MAX_SIDE || cols > SVG_MAX_SIDE) {
        if (list)
            fprintf(list, "%s: mesh of %d x %d devices not drawn (pictures draw at most %d x %d)\n",
                    s->model->name, rows, cols, SVG_MAX_SIDE, SVG_MAX_SIDE);
        return 1;
    }
    for (int k = 0; k < s->phases.count; ++k) {
        const PhaseSched *ph = s->phases.items[k];
        if (!is_compute(ph) && !ph->boundary.count)
            continue;
        if (!write_phase(s, arena, dir, k, list))
            return 0;
    }
    return 1;
}
