/*
 * kernel_fuse.c — fusion across instances (see kernel_fuse.h).
 */
#include "kernel_fuse.h"

#include <stdlib.h>
#include <string.h>

#include "kernel_accum.h"
#include "kernel_c.h"
#include "sched_internal.h"

static int is_compute(const PhaseSched *ph) {
    return ph->kind == PHASE_FWD || ph->kind == PHASE_BWD || ph->kind == PHASE_GRAD;
}

/* The one KERNEL action of rank r in ph, or NULL. */
static const PrimeAction *kernel_action(const PhaseSched *ph, int r) {
    for (int i = 0; i < ph->nactions[r]; ++i)
        if (ph->actions[r][i].op == PRIME_ACT_KERNEL)
            return &ph->actions[r][i];
    return NULL;
}

/* Whether rank r's actions are one step of: the allocation of the
 * kernel's output, the kernel, waits, frees and adds. */
static int simple_actions(const PhaseSched *ph, int r) {
    int steps = 0, kernels = 0, alloc = 0;
    const PrimeAction *k = kernel_action(ph, r);
    if (!k)
        return 0;
    for (int i = 0; i < ph->nactions[r]; ++i) {
        const PrimeAction *a = &ph->actions[r][i];
        switch (a->op) {
        case PRIME_ACT_STEP:
            steps += 1 + (a->arg != 0);
            break;
        case PRIME_ACT_KERNEL:
            if (!alloc)
                return 0;
            kernels++;
            break;
        case PRIME_ACT_ALLOC:
            if (a->tensor != k->tensor || a->slot != k->slot || kernels)
                return 0;
            alloc++;
            break;
        case PRIME_ACT_ADD:
            if (a->kind != PRIME_COMBINE_SUM || a->nin != 1)
                return 0;
            break;
        case PRIME_ACT_WAIT:
        case PRIME_ACT_FREE:
            break;
        default:
            return 0;
        }
    }
    return steps == 1 && kernels == 1 && alloc == 1;
}

/* Whether phase ph can be a member: one step, no communication, a kernel
 * of one loop node whose loops are every dimension of extent > 1 (the
 * last one the inner loop), elementwise or reducing over the inner
 * dimension, and the same simple actions on every rank that computes.
 * phase_candidate: the conditions on the phase alone (a compute phase
 * without communication); candidate: the others, on its kernel k. */
static int phase_candidate(const PhaseSched *ph) {
    return is_compute(ph) && !ph->moves.count && !ph->boundary.count && !ph->collectives.count &&
           !ph->groups.count && !ph->nboxes && ph->nin <= PRIME_MAX_KERNEL_INPUTS;
}

/* The tensor input i of phase ph's kernel reads: its KERNEL action's
 * (the same on every rank), which is the operand's unless a copy's
 * readers read its source instead (kernel_copy.h). */
static int input_tensor(const Schedule *s, const PhaseSched *ph, int i) {
    for (int r = 0; r < s->model->mesh.ndev; ++r) {
        const PrimeAction *k = kernel_action(ph, r);
        if (k && sched_device_computes(s, ph, r) && i < k->nin)
            return k->in_tensor[i];
    }
    return ph->in[i].tensor;
}

/* Whether ph is a compute phase whose actions on every rank are steps,
 * waits and frees only: no kernel. */
static int no_kernel(const Schedule *s, const PhaseSched *ph) {
    if (!phase_candidate(ph))
        return 0;
    for (int r = 0; r < s->model->mesh.ndev; ++r)
        for (int i = 0; i < ph->nactions[r]; ++i) {
            int op = ph->actions[r][i].op;
            if (op != PRIME_ACT_STEP && op != PRIME_ACT_WAIT && op != PRIME_ACT_FREE)
                return 0;
        }
    return 1;
}

/* Whether k is a column sum a group can take: over a tile of two
 * dimensions, summing the strided one into a row of the other. */
static int column_sum(const Kernel *k) {
    const KernelLoop *l = &k->nodes[0].loop;
    return l->nloops == 2 && l->nreduce == 1 && kernel_c_column_dim(k) == l->loop_dim[0];
}

/* 1 if ph can be a row member, 2 a column sum, 0 neither. */
static int candidate(const Schedule *s, const PhaseSched *ph, const Kernel *k) {
    if (k->nnodes != 1 || k->nodes[0].kind != KNODE_LOOP)
        return 0;
    const KernelLoop *l = &k->nodes[0].loop;
    if (l->nloops < 1 || l->nreduce > 1 || l->scale != 1 ||
        (l->nreduce == 0 && l->combiner == KCOMB_MAX))
        return 0;
    int looped = 0;
    for (int d = 0; d < k->ndims; ++d)
        looped += k->extent[d] > 1;
    int inner = l->loop_dim[l->nloops - 1], cols = column_sum(k);
    if (looped != l->nloops)
        return 0;
    /* The inner loop reads and writes contiguous rows (a sum over a
     * strided dimension accumulates rows of its own, kernel_c.c). */
    unsigned ops = 0;
    for (int t = 0; t < l->nterms; ++t)
        ops |= kernel_expr_operands(k, l->terms[t].expr);
    if (k->stride[KERNEL_OUT][inner] > 1 && !cols)
        return 0;
    for (int i = 0; i < ph->nin; ++i)
        if (((ops >> i) & 1u) && k->stride[i][inner] > 1 && !cols)
            return 0;
    int ndev = s->model->mesh.ndev, any = 0;
    for (int r = 0; r < ndev; ++r) {
        if (!sched_device_computes(s, ph, r)) {
            if (ph->nactions[r])
                return 0;
            continue;
        }
        if (!simple_actions(ph, r))
            return 0;
        any = 1;
    }
    return any ? 1 + cols : 0;
}

/* Whether ph (kernel k) has the dimensions, loops, devices and tile
 * origins of the group's first member (phase f, kernel kf). */
static int compatible(const Schedule *s, const PhaseSched *f, const Kernel *kf,
                      const PhaseSched *ph, const Kernel *k) {
    if (k->ndims != kf->ndims)
        return 0;
    for (int d = 0; d < k->ndims; ++d)
        if (strcmp(k->inst->op->dims[d], kf->inst->op->dims[d]) != 0 ||
            k->extent[d] != kf->extent[d])
            return 0;
    const KernelLoop *l = &k->nodes[0].loop, *lf = &kf->nodes[0].loop;
    if (column_sum(k)) {
        /* It sums the group's one row dimension into a row of its inner
         * one. */
        if (lf->nloops != 2 || l->loop_dim[0] != lf->loop_dim[1] ||
            l->loop_dim[1] != lf->loop_dim[0])
            return 0;
    } else if (l->nloops != lf->nloops ||
               memcmp(l->loop_dim, lf->loop_dim, sizeof(int) * (size_t)l->nloops) != 0) {
        return 0;
    }
    for (int r = 0; r < s->model->mesh.ndev; ++r) {
        int c = sched_device_computes(s, ph, r);
        if (c != sched_device_computes(s, f, r))
            return 0;
        if (!c)
            continue;
        const PrimeAction *a = kernel_action(ph, r), *b = kernel_action(f, r);
        long none[8] = {0};
        const long *oa = ph->noffsets ? ph->offsets[a->arg] : none;
        const long *ob = f->noffsets ? f->offsets[b->arg] : none;
        if (memcmp(oa, ob, sizeof none) != 0)
            return 0;
    }
    return 1;
}

/* The member of g (before index upto, or upto itself when self) whose
 * output is tensor t in slot `slot` on every computing rank; -1 if none. */
static int producer(const Schedule *s, const FuseGroup *g, int upto, int tensor,
                    const int *slot_of_rank) {
    for (int m = upto - 1; m >= 0; --m) {
        const PhaseSched *q = s->phases.items[g->phase[m]];
        if (q->out.tensor != tensor)
            continue;
        for (int r = 0; r < s->model->mesh.ndev; ++r)
            if (slot_of_rank[r] >= 0 && kernel_action(q, r)->slot != slot_of_rank[r])
                return -1;
        return m;
    }
    return -1;
}

/* Whether tensor t is what a member of g before j accumulates into. */
static int accumulated(const FuseGroup *g, int j, int t) {
    for (int m = 0; m < j; ++m)
        if (g->into[m] == t)
            return 1;
    return 0;
}

/* Whether a column sum of g before member j reads member m's output. */
static int read_by_column(const Schedule *s, const FuseGroup *g, int j, int m) {
    for (int c = 0; c < j; ++c) {
        const PhaseSched *q = s->phases.items[g->phase[c]];
        for (int i = 0; i < q->nin && g->cols[c]; ++i)
            if (g->from[c][i] == m)
                return 1;
    }
    return 0;
}

/* The bytes of one group's column sums' double accumulators, at most (on
 * the kernel's stack; the rows have the rest of KFUSE_ROW_BYTES). */
#define KFUSE_COLS_BYTES (KFUSE_ROW_BYTES / 2)

/* Adds phase p (kernel k, cols: a column sum) to g as member j =
 * g->nmembers: its inputs from earlier members and its ADDs. 0 when an
 * ADD is neither between two members' outputs nor the one of a
 * contribution to a tile from outside (into), or when the member would
 * read what the group cannot give it row by row. */
static int link(const Schedule *s, FuseGroup *g, int p, const Kernel *k, int cols, int *slots) {
    const PhaseSched *ph = s->phases.items[p];
    int ndev = s->model->mesh.ndev, j = g->nmembers;
    g->phase[j] = p;
    g->cols[j] = cols;
    g->into[j] = -1;
    /* Its output is allocated at the first phase: no earlier member (nor
     * a phase without a kernel between members) may free a tile of that
     * tensor (its slot could be the one reused). */
    for (int m = j ? g->phase[0] : p; m < p; ++m) {
        const PhaseSched *q = s->phases.items[m];
        for (int r = 0; r < ndev; ++r)
            for (int i = 0; i < q->nactions[r]; ++i)
                if (q->actions[r][i].op == PRIME_ACT_FREE &&
                    q->actions[r][i].tensor == ph->out.tensor)
                    return 0;
    }
    for (int i = 0; i < ph->nin; ++i) {
        for (int r = 0; r < ndev; ++r)
            slots[r] = sched_device_computes(s, ph, r) ? kernel_action(ph, r)->in_slot[i] : -1;
        int t = input_tensor(s, ph, i);
        int m = g->from[j][i] = producer(s, g, j, t, slots);
        /* A column sum's value is whole after the last row only. A column
         * sum reads tiles: from outside, which no member writes, or an
         * earlier member's output (then stored, and added to by no ADD
         * after it), whole when the rows are done. */
        if ((m >= 0 && g->cols[m]) || accumulated(g, j, t))
            return 0;
    }
    if (cols) {
        /* Every column sum of the group has a row of the inner extent. */
        long e = k->extent[k->nodes[0].loop.loop_dim[0]], used = e;
        for (int m = 0; m < j; ++m)
            used += g->cols[m] ? e : 0;
        if (8 * used > KFUSE_COLS_BYTES)
            return 0;
    }
    int first = -1;
    for (int r = 0; r < ndev && first < 0; ++r)
        if (sched_device_computes(s, ph, r))
            first = r;
    int nadds = 0, folded = 0;
    for (int i = 0; i < ph->nactions[first]; ++i) {
        const PrimeAction *a = &ph->actions[first][i];
        if (a->op != PRIME_ACT_ADD)
            continue;
        int dst = -1, src = -1;
        for (int m = 0; m <= j; ++m) {
            const PhaseSched *q = s->phases.items[g->phase[m]];
            dst = q->out.tensor == a->tensor ? m : dst;
            src = q->out.tensor == a->in_tensor[0] ? m : src;
        }
        if (cols || (dst >= 0 && g->cols[dst]) || (src >= 0 && g->cols[src]))
            return 0;
        if (dst < 0 && src == j && !folded && !k->nodes[0].loop.nreduce &&
            kernel_accum_tensor(s, ph) == a->tensor) {
            /* A contribution to a tile from outside: the member adds its
             * value to that tile's row. Nothing in the group reads the
             * tile (a member before it would see the sum of other rows'
             * contributions so far). */
            for (int m = 0; m <= j; ++m) {
                const PhaseSched *q = s->phases.items[g->phase[m]];
                for (int x = 0; x < q->nin; ++x)
                    if (input_tensor(s, q, x) == a->tensor)
                        return 0;
            }
            g->into[j] = a->tensor;
            folded = 1;
            continue;
        }
        if (dst < 0 || src < 0 || g->nadds + nadds >= KFUSE_MAX || read_by_column(s, g, j, dst))
            return 0;
        g->adds[g->nadds + nadds++] = (FuseAdd){j, dst, src};
    }
    /* Every rank adds the same (tensor ids are the ranks' alike). */
    for (int r = 0; r < ndev; ++r) {
        if (!sched_device_computes(s, ph, r))
            continue;
        int n = 0;
        for (int i = 0; i < ph->nactions[r]; ++i)
            n += ph->actions[r][i].op == PRIME_ACT_ADD;
        if (n != nadds + folded)
            return 0;
    }
    g->nadds += nadds;
    g->nmembers++;
    return 1;
}

/* Whether member m's output is freed by a phase of g on every rank that
 * computes: then no phase after the group reads it. */
static int freed_in_group(const Schedule *s, const FuseGroup *g, int m) {
    const PhaseSched *q = s->phases.items[g->phase[m]];
    for (int r = 0; r < s->model->mesh.ndev; ++r) {
        if (!sched_device_computes(s, q, r))
            continue;
        int slot = kernel_action(q, r)->slot, freed = 0;
        for (int j = m; j < g->nmembers && !freed; ++j) {
            const PhaseSched *ph = s->phases.items[g->phase[j]];
            for (int i = 0; i < ph->nactions[r]; ++i) {
                const PrimeAction *a = &ph->actions[r][i];
                freed |= a->op == PRIME_ACT_FREE && a->tensor == q->out.tensor && a->slot == slot;
            }
        }
        if (!freed)
            return 0;
    }
    return 1;
}

/* Whether member kernel k reduces over the inner dimension (one value
 * per row). */
static int kfuse_reduces(const Kernel *k) {
    return k->nodes[0].loop.nreduce == 1;
}

/* Which members' outputs are stored: every one the group does not free,
 * and every one that a row on the stack cannot hold (an elementwise
 * output not contiguous in the inner dimension, a reader or an ADD that
 * indexes it otherwise). */
static void choose_stored(const Schedule *s, FuseGroup *g, const Kernel *ks) {
    int inner = g->inner;
    for (int m = 0; m < g->nmembers; ++m) {
        const Kernel *k = &ks[m];
        long own = k->stride[KERNEL_OUT][inner];
        /* A column sum's row and the tile a contribution is added to are
         * tiles. */
        int ok = freed_in_group(s, g, m) && (own == 1 || own == 0) &&
                 !s->tensors[k->ph->out.tensor].check && !g->cols[m] && g->into[m] < 0 &&
                 !read_by_column(s, g, g->nmembers, m);
        for (int j = m + 1; j < g->nmembers && ok; ++j)
            for (int i = 0; i < ks[j].ph->nin; ++i)
                if (g->from[j][i] == m && ks[j].stride[i][inner] != own)
                    ok = 0;
        for (int a = 0; a < g->nadds && ok; ++a)
            if ((g->adds[a].dst == m || g->adds[a].src == m) && own != 1 &&
                !(own == 0 && kfuse_reduces(k)))
                ok = 0;
        g->stored[m] = !ok;
    }
}

/* The bytes of the rows the C kernel keeps on its stack for g
 * (kernel_c_fused): a float per element of each row not stored (one for
 * a reduction), a double per element of each column sum. */
static long kept_bytes(const FuseGroup *g, const Kernel *ks) {
    long e = ks[0].extent[g->inner], bytes = 0;
    for (int m = 0; m < g->nmembers; ++m) {
        if (g->cols[m])
            bytes += 8 * e;
        else if (!g->stored[m])
            bytes += 4 * (kfuse_reduces(&ks[m]) ? 1 : e);
    }
    return bytes;
}

/* Stores the rows of g's members, the last first, until the rest fit in
 * KFUSE_ROW_BYTES: a stored output is a tile (allocated at the group's
 * first phase and freed where it was), which any member may have. The
 * column sums take at most half of it (link), so the rest always fits;
 * rows of at most 4096 elements always fit (16 rows of 16 KiB). */
static void fit_rows(FuseGroup *g, const Kernel *ks) {
    for (int m = g->nmembers - 1; m >= 0 && kept_bytes(g, ks) > KFUSE_ROW_BYTES; --m)
        if (!g->stored[m] && !kfuse_reduces(&ks[m]))
            g->stored[m] = 1;
}

/* Closes g: a group of two or more members is kept. */
static void close_group(Arena *arena, const Schedule *s, const SourceMap *sources, FusePlan *plan,
                        FuseGroup *g, int *cap) {
    if (g->nmembers >= 2) {
        Kernel *ks = kernel_fuse_members(s, g);
        const KernelLoop *l = &ks[0].nodes[0].loop;
        g->inner = l->loop_dim[l->nloops - 1];
        choose_stored(s, g, ks);
        fit_rows(g, ks);
        /* An ADD in the kernel is a sum of two contiguous rows, or of two
         * reductions' values for the row. */
        int ok = 1;
        for (int a = 0; a < g->nadds; ++a) {
            long sd = ks[g->adds[a].dst].stride[KERNEL_OUT][g->inner];
            long ss = ks[g->adds[a].src].stride[KERNEL_OUT][g->inner];
            ok &=
                (sd == 1 && ss == 1) || (sd == 0 && ss == 0 && kfuse_reduces(&ks[g->adds[a].dst]) &&
                                         kfuse_reduces(&ks[g->adds[a].src]));
        }
        free(ks);
        if (!ok)
            g->nmembers = 0;
    }
    if (g->nmembers >= 2) {
        for (int j = 0; j < g->nmembers; ++j) {
            const Instance *inst =
                &s->model->instances[((PhaseSched *)s->phases.items[g->phase[j]])->inst];
            const SourceFile *f = sources ? source_get(sources, inst->span.file) : NULL;
            g->where[j] = "?";
            if (f) {
                int line, col;
                source_line_col(f, inst->span.lo, &line, &col);
                const char *base = strrchr(f->name, '/');
                g->where[j] = arena_printf(arena, "%s:%d:%d", base ? base + 1 : f->name, line, col);
            }
        }
        if (plan->ngroups == *cap) {
            *cap = *cap ? 2 * *cap : 16;
            FuseGroup *grown = ARENA_ARRAY(arena, FuseGroup, *cap);
            if (plan->ngroups)
                memcpy(grown, plan->groups, sizeof(FuseGroup) * (size_t)plan->ngroups);
            plan->groups = grown;
        }
        int gi = plan->ngroups++;
        plan->groups[gi] = *g;
        plan->group_of[g->phase[0]] = gi;
        for (int j = 0; j < g->nmembers; ++j)
            plan->member_of[g->phase[j]] = gi;
    }
    memset(g, 0, sizeof *g);
}

FusePlan *kernel_fuse_plan(Arena *arena, const Schedule *s, const SourceMap *sources) {
    int n = s->phases.count, cap = 0;
    FusePlan *plan = ARENA_NEW(arena, FusePlan);
    plan->group_of = ARENA_ARRAY(arena, int, n + 1);
    plan->member_of = ARENA_ARRAY(arena, int, n + 1);
    for (int p = 0; p < n; ++p)
        plan->group_of[p] = plan->member_of[p] = -1;
    Kernel *k = malloc(sizeof *k), *first = malloc(sizeof *first);
    int *slots = malloc(sizeof(int) * ((size_t)s->model->mesh.ndev + 1));
    FuseGroup *g = calloc(1, sizeof *g);
    if (!k || !first || !slots || !g)
        ICE("out of memory");
    for (int p = 0; p < n; ++p) {
        const PhaseSched *ph = s->phases.items[p];
        /* A phase that runs no kernel (a copy gone, kernel_copy.h) leaves
         * the group open: its frees run after the group's kernel. */
        if (g->nmembers && g->nmembers < KFUSE_MAX && no_kernel(s, ph))
            continue;
        /* The phase's own conditions first: its kernel is built only when
         * they hold. */
        int cand = phase_candidate(ph);
        if (cand) {
            kernel_build(k, s, ph, 0);
            cand = candidate(s, ph, k);
        }
        if (cand && g->nmembers && g->nmembers < KFUSE_MAX &&
            compatible(s, s->phases.items[g->phase[0]], first, ph, k)) {
            FuseGroup saved = *g;
            if (link(s, g, p, k, cand == 2, slots))
                continue;
            *g = saved;
        }
        close_group(arena, s, sources, plan, g, &cap);
        /* A column sum does not start a group: the first member's loops
         * are the group's rows. */
        if (cand == 1) {
            memcpy(first, k, sizeof *k);
            /* A first member's ADDs would add what no member computed. */
            if (!link(s, g, p, k, 0, slots) || g->nadds)
                memset(g, 0, sizeof *g);
        }
    }
    close_group(arena, s, sources, plan, g, &cap);
    free(k);
    free(first);
    free(slots);
    free(g);
    return plan;
}

Kernel *kernel_fuse_members(const Schedule *s, const FuseGroup *g) {
    Kernel *ks = malloc(sizeof(Kernel) * (size_t)g->nmembers);
    if (!ks)
        ICE("out of memory");
    for (int j = 0; j < g->nmembers; ++j)
        kernel_build(&ks[j], s, s->phases.items[g->phase[j]], 0);
    return ks;
}

/* Whether tensor t is the output of a member of g that has no tile of
 * its own: one not stored, or one that accumulates into a tile from
 * outside. */
static int unstored(const Schedule *s, const FuseGroup *g, int t) {
    for (int j = 0; j < g->nmembers; ++j)
        if ((!g->stored[j] || g->into[j] >= 0) &&
            ((const PhaseSched *)s->phases.items[g->phase[j]])->out.tensor == t)
            return 1;
    return 0;
}

/* Rank r of group g's first phase: its step, the allocations of every
 * stored output, one KERNEL action per member (kind: the operands that
 * are no tile), then its own waits and frees. */
static void rewrite_first(Arena *arena, const Schedule *s, const FuseGroup *g, int r) {
    PhaseSched *f = s->phases.items[g->phase[0]];
    int cap = f->nactions[r] + 2 * g->nmembers + 1, n = 0;
    PrimeAction *out = ARENA_ARRAY(arena, PrimeAction, cap);
    const PrimeAction *k0 = kernel_action(f, r);
    for (int i = 0; i < f->nactions[r]; ++i) {
        const PrimeAction *a = &f->actions[r][i];
        if (a->op == PRIME_ACT_ALLOC || a->op == PRIME_ACT_ADD ||
            (a->op == PRIME_ACT_FREE && unstored(s, g, a->tensor)))
            continue;
        if (a->op != PRIME_ACT_KERNEL) {
            out[n++] = *a;
            continue;
        }
        for (int j = 0; j < g->nmembers; ++j) {
            const PhaseSched *q = s->phases.items[g->phase[j]];
            for (int x = 0; x < q->nactions[r] && g->stored[j] && g->into[j] < 0; ++x)
                if (q->actions[r][x].op == PRIME_ACT_ALLOC)
                    out[n++] = q->actions[r][x];
        }
        for (int j = 0; j < g->nmembers; ++j) {
            const PhaseSched *q = s->phases.items[g->phase[j]];
            PrimeAction ka = *kernel_action(q, r);
            ka.arg = k0->arg;
            ka.kind = g->stored[j] ? 0 : KFUSE_NO_OUT;
            if (g->into[j] >= 0) {
                /* Into the tile its ADD added to, which it reads. */
                int slot = 0;
                if (kernel_accum_into(q, r, &slot) != g->into[j])
                    ICE("a fused contribution's rank differs");
                ka.tensor = g->into[j];
                ka.slot = slot;
                ka.kind = KFUSE_ACCUM;
            }
            for (int i = 0; i < ka.nin; ++i)
                if (g->from[j][i] >= 0 && !g->stored[g->from[j][i]])
                    ka.kind |= KFUSE_NO_IN(i);
            out[n++] = ka;
        }
    }
    f->actions[r] = out;
    f->nactions[r] = n;
}

/* Rank r of a later member's phase: its step, waits and the frees of
 * stored tiles. */
static void rewrite_later(const Schedule *s, const FuseGroup *g, PhaseSched *ph, int r) {
    int n = 0;
    for (int i = 0; i < ph->nactions[r]; ++i) {
        const PrimeAction *a = &ph->actions[r][i];
        if (a->op == PRIME_ACT_ALLOC || a->op == PRIME_ACT_KERNEL || a->op == PRIME_ACT_ADD ||
            (a->op == PRIME_ACT_FREE && unstored(s, g, a->tensor)))
            continue;
        ph->actions[r][n++] = *a;
    }
    ph->nactions[r] = n;
}

void kernel_fuse_apply(Arena *arena, Schedule *s, FusePlan *plan) {
    unsigned char *rewritten = ARENA_ARRAY(arena, unsigned char, s->phases.count + 1);
    for (int gi = 0; gi < plan->ngroups; ++gi) {
        const FuseGroup *g = &plan->groups[gi];
        for (int j = 0; j < g->nmembers; ++j)
            rewritten[g->phase[j]] = 1;
        for (int r = 0; r < s->model->mesh.ndev; ++r) {
            if (!sched_device_computes(s, s->phases.items[g->phase[0]], r))
                continue;
            rewrite_first(arena, s, g, r);
            for (int j = 1; j < g->nmembers; ++j)
                rewrite_later(s, g, s->phases.items[g->phase[j]], r);
        }
        /* The later phases run no kernel: no tile origins either. */
        for (int j = 1; j < g->nmembers; ++j)
            ((PhaseSched *)s->phases.items[g->phase[j]])->noffsets = 0;
    }
    /* The phases kernel_accum_apply rewrote before (it leaves their
     * prediction to this one). */
    int naccum = plan->accum && plan->accum->applied ? plan->accum->count : 0;
    for (int e = 0; e < naccum; ++e)
        rewritten[plan->accum->phase[e]] = 1;
    plan->applied = 1;
    if (plan->ngroups || naccum)
        sched_predict_again(s, arena, rewritten);
}

static const char *member_name(const Schedule *s, const FuseGroup *g, int j) {
    const PhaseSched *ph = s->phases.items[g->phase[j]];
    return s->model->instances[ph->inst].name;
}

void kernel_fuse_dump(const Schedule *s, const FusePlan *plan, FILE *out) {
    for (int gi = 0; gi < plan->ngroups; ++gi) {
        const FuseGroup *g = &plan->groups[gi];
        const PhaseSched *f = s->phases.items[g->phase[0]];
        const Instance *inst = &s->model->instances[f->inst];
        fprintf(out, " fused phases");
        for (int j = 0; j < g->nmembers; ++j)
            fprintf(out, " %d", g->phase[j]);
        fprintf(out, ", run at phase %d:", g->phase[0]);
        for (int j = 0; j < g->nmembers; ++j) {
            const PhaseSched *ph = s->phases.items[g->phase[j]];
            fprintf(out, "%s %s %s -> %s (", j ? "," : "", phase_name(ph->kind),
                    member_name(s, g, j), s->tensors[ph->out.tensor].name);
            if (g->into[j] >= 0)
                fprintf(out, "added to %s", s->tensors[g->into[j]].name);
            else
                fprintf(out, "%s%s", g->cols[j] ? "a column sum, " : "",
                        g->stored[j] ? "stored" : "a row");
            fprintf(out, ")");
        }
        fprintf(out, "\n  rows");
        Kernel *ks = kernel_fuse_members(s, g);
        const KernelLoop *l = &ks[0].nodes[0].loop;
        for (int x = 0; x + 1 < l->nloops; ++x)
            fprintf(out, " %s:%ld", inst->op->dims[l->loop_dim[x]], ks[0].extent[l->loop_dim[x]]);
        fprintf(out, ", inner %s:%ld\n", inst->op->dims[g->inner], ks[0].extent[g->inner]);
        free(ks);
        for (int a = 0; a < g->nadds; ++a) {
            const PhaseSched *d = s->phases.items[g->phase[g->adds[a].dst]];
            const PhaseSched *x = s->phases.items[g->phase[g->adds[a].src]];
            fprintf(out, "  add after %s: %s += %s\n", member_name(s, g, g->adds[a].after),
                    s->tensors[d->out.tensor].name, s->tensors[x->out.tensor].name);
        }
    }
}

void kernel_fuse_comment(const Schedule *s, const FuseGroup *g, Printer *p) {
    printer_printf(p, "/* fused:");
    for (int j = 0; j < g->nmembers; ++j) {
        const PhaseSched *ph = s->phases.items[g->phase[j]];
        const Instance *inst = &s->model->instances[ph->inst];
        printer_printf(p, "%s %s %s = %s at %s", j ? "," : "", phase_name(ph->kind), inst->name,
                       inst->op->name, g->where[j]);
    }
    printer_printf(p, " */\n");
}
