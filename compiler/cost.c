/*
 * cost.c — the cost model (cost.h): a discrete-event interpretation of a
 * schedule's per-rank action lists against a hardware profile.
 *
 * Every device has a clock (its compute stream) and a communication
 * engine (the time its last posted send leaves). Ranks advance one at a
 * time as far as they can; a rank stops at a wait whose messages have not
 * been posted yet, or at an all-reduce its group has not reached. The
 * sweep repeats until every rank is done; no progress in a sweep means
 * the action lists deadlock, which the schedule pass must never produce.
 *
 * Phases run back to back without a barrier, as in the emitted program.
 * The time of a phase (and of a step) is the advance of the latest clock
 * over it, so the phase times add up to the step time.
 */
#include "cost.h"

#include <math.h>
#include <string.h>

#include "cost_kernel.h"
#include "diag.h"
#include "partition.h"

void cost_options_default(CostOptions *opt) {
    opt->elem_bytes = 4;
    opt->devices_per_node = 0;
    opt->record_events = 0;
    opt->no_fuse = 0;
}

/* ------------------------------------------------------------------ */
/* Formulas                                                            */

LinkClass cost_link_between(int devices_per_node, int a, int b) {
    if (devices_per_node < 1)
        return LINK_INTRA;
    return a / devices_per_node == b / devices_per_node ? LINK_INTRA : LINK_INTER;
}

LinkClass cost_link_of_group(int devices_per_node, const int *group, int gsize) {
    for (int i = 1; i < gsize; ++i)
        if (cost_link_between(devices_per_node, group[0], group[i]) == LINK_INTER)
            return LINK_INTER;
    return LINK_INTRA;
}

/* Bytes per µs of a rate in GB/s. */
static double per_us(double GBps) {
    return GBps * 1e3;
}

double cost_p2p_us(const Profile *p, LinkClass link, double bytes) {
    const LinkCost *l = &p->link[COMM_P2P][link];
    return l->alpha_us + bytes / per_us(l->beta_GBps);
}

double cost_collective_us(const Profile *p, CommKind kind, LinkClass link, double bytes,
                          int gsize) {
    if (gsize < 2)
        return 0;
    double g = gsize;
    double volume = kind == COMM_ALLREDUCE ? 2 * (g - 1) / g * bytes
                    : kind == COMM_P2P     ? bytes
                                           : (g - 1) / g * bytes;
    const LinkCost *l = &p->link[kind][link];
    return l->alpha_us + volume / per_us(l->beta_GBps);
}

double cost_gemm_us(const Profile *p, double m, double n, double k, double batch, int elem_bytes) {
    double d = m < n ? m : n;
    d = d < k ? d : k;
    double flops = 2 * m * n * k * batch;
    double bytes = (m * k + k * n + 2 * m * n) * batch * elem_bytes;
    double t_flops = flops / (p->peak_tflops * 1e6 * profile_gemm_efficiency(p, d));
    double t_bytes = bytes / per_us(p->mem_bandwidth_GBps);
    return p->kernel_overhead_us + (t_flops > t_bytes ? t_flops : t_bytes);
}

double cost_vector_us(const Profile *p, double flops, double bytes) {
    double t_flops = flops / (p->vector_tflops * 1e6);
    double t_bytes = bytes / per_us(p->mem_bandwidth_GBps);
    return p->kernel_overhead_us + (t_flops > t_bytes ? t_flops : t_bytes);
}

double cost_kernel_flops(const Schedule *s, const PhaseSched *ph) {
    return cost_phase_kernel(s, ph, NULL, 4).flops;
}

static long box_elems(const PrimeBox *box) {
    long n = 1;
    for (int x = 0; x < box->ndims; ++x)
        n *= box->ext[x];
    return n;
}

/* ------------------------------------------------------------------ */
/* The simulation                                                      */

typedef struct Msg {
    int src, tag;
    double arrival;
    int consumed;
} Msg;

typedef struct MsgQueue {
    Msg *items;
    int count, cap, first_live;
} MsgQueue;

typedef struct PendingRecv {
    int src, tag;
    long unpack_elems; /* RECV_BOX: unpacked at the wait */
} PendingRecv;

typedef struct Rank {
    int phase, pc; /* next action */
    double clock, engine;
    double sends_done; /* latest completion of a send posted since the last wait */
    /* Sends kept past their phase (KEEP): per keep, its tag and when its
     * sends complete; a WAIT_KEPT of the tag waits for them. */
    int *kept_tag;
    double *kept_done;
    int nkept, kept_cap;
    PendingRecv *recv;
    int nrecv, recv_cap;
    int in_collective;    /* registered at the all-reduce at pc */
    int step;             /* current step of the phase, -1 before the first */
    double compute, comm; /* totals */
} Rank;

typedef struct Sim {
    const Schedule *s;
    const Profile *p;
    Arena *arena;
    int eb, dpn, ndev;
    Rank *ranks;
    MsgQueue *inbox;  /* per destination rank */
    CostProgram prog; /* the kernels as the program runs them */
    /* Per phase: arrivals and latest clock per group index. */
    int **coll_arrived;
    double **coll_clock;
    /* Per phase, per rank. */
    double **end;         /* clock leaving the phase */
    double ***step_start; /* [phase][step][rank] */
    double ***step_compute, ***step_comm;
    double **compute, **shift, **coll, **redist;
    CostReport *r;
    int record, event_cap;
    int *last_event; /* per rank and event kind: its latest event, or -1 */
} Sim;

static void inbox_push(Sim *sim, int dst, Msg m) {
    MsgQueue *q = &sim->inbox[dst];
    if (q->count == q->cap) {
        int cap = q->cap ? q->cap * 2 : 64;
        Msg *n = ARENA_ARRAY(sim->arena, Msg, cap);
        if (q->count)
            memcpy(n, q->items, sizeof(Msg) * (size_t)q->count);
        q->items = n;
        q->cap = cap;
    }
    q->items[q->count++] = m;
}

/* The first unconsumed message from src with tag, or NULL. */
static Msg *inbox_find(Sim *sim, int dst, int src, int tag) {
    MsgQueue *q = &sim->inbox[dst];
    while (q->first_live < q->count && q->items[q->first_live].consumed)
        q->first_live++;
    for (int i = q->first_live; i < q->count; ++i)
        if (!q->items[i].consumed && q->items[i].src == src && q->items[i].tag == tag)
            return &q->items[i];
    return NULL;
}

static void recv_push(Sim *sim, Rank *rk, PendingRecv pr) {
    if (rk->nrecv == rk->recv_cap) {
        int cap = rk->recv_cap ? rk->recv_cap * 2 : 16;
        PendingRecv *n = ARENA_ARRAY(sim->arena, PendingRecv, cap);
        if (rk->nrecv)
            memcpy(n, rk->recv, sizeof(PendingRecv) * (size_t)rk->nrecv);
        rk->recv = n;
        rk->recv_cap = cap;
    }
    rk->recv[rk->nrecv++] = pr;
}

/* Records a stretch [start, start + us] of rank r, merged into its
 * previous stretch of the same kind, phase and step when they touch. */
static void record_event(Sim *sim, int r, CostEventKind kind, double start, double us) {
    Rank *rk = &sim->ranks[r];
    CostReport *out = sim->r;
    int *last = &sim->last_event[r * COST_EV_KIND_COUNT + kind];
    if (*last >= 0) {
        CostEvent *e = &out->events[*last];
        if (e->phase == rk->phase && e->step == rk->step && start <= e->end_us + 1e-9) {
            if (start + us > e->end_us)
                e->end_us = start + us;
            return;
        }
    }
    if (out->nevents == sim->event_cap) {
        int cap = sim->event_cap ? sim->event_cap * 2 : 256;
        CostEvent *n = ARENA_ARRAY(sim->arena, CostEvent, cap);
        if (out->nevents)
            memcpy(n, out->events, sizeof(CostEvent) * (size_t)out->nevents);
        out->events = n;
        sim->event_cap = cap;
    }
    CostEvent e = {r, rk->phase, rk->step, kind, start, start + us};
    *last = out->nevents;
    out->events[out->nevents++] = e;
}

/* Time spent by rank r in the current phase on compute (kind -1) or on
 * a transfer of byte kind `kind`, from `start`. */
static void account_at(Sim *sim, int r, int kind, double start, double us) {
    Rank *rk = &sim->ranks[r];
    int p = rk->phase;
    int s = rk->step;
    if (sim->record && us > 0)
        record_event(sim, r, kind < 0 ? COST_EV_COMPUTE : (CostEventKind)(COST_EV_SHIFT + kind),
                     start, us);
    if (kind < 0) {
        rk->compute += us;
        sim->compute[p][r] += us;
        if (s >= 0)
            sim->step_compute[p][s][r] += us;
        return;
    }
    rk->comm += us;
    if (kind == PRIME_BYTES_SHIFT)
        sim->shift[p][r] += us;
    else if (kind == PRIME_BYTES_COLLECTIVE)
        sim->coll[p][r] += us;
    else
        sim->redist[p][r] += us;
    if (s >= 0)
        sim->step_comm[p][s][r] += us;
}

/* The same for time that ends at the rank's clock. */
static void account(Sim *sim, int r, int kind, double us) {
    account_at(sim, r, kind, sim->ranks[r].clock - us, us);
}

static void add_bytes(Sim *sim, int p, int kind, long bytes) {
    PhaseCost *pc = &sim->r->phases[p];
    if (kind == PRIME_BYTES_SHIFT)
        pc->shift_bytes += bytes;
    else if (kind == PRIME_BYTES_COLLECTIVE)
        pc->collective_bytes += bytes;
    else
        pc->redist_bytes += bytes;
}

static double mem_us(const Sim *sim, double bytes) {
    return bytes / per_us(sim->p->mem_bandwidth_GBps);
}

/* Posts a message of `bytes` from r to peer. */
static void post_send(Sim *sim, int r, int peer, int tag, int kind, double bytes) {
    Rank *rk = &sim->ranks[r];
    double start = rk->clock > rk->engine ? rk->clock : rk->engine;
    double dur, busy;
    if (peer == r) {
        dur = busy = mem_us(sim, 2 * bytes); /* a copy */
    } else {
        const LinkCost *l = &sim->p->link[COMM_P2P][cost_link_between(sim->dpn, r, peer)];
        busy = bytes / per_us(l->beta_GBps);
        dur = l->alpha_us + busy;
    }
    /* The engine is busy for the bytes only: latencies of messages
     * posted together overlap (LogGP), bandwidth is shared. */
    double done = start + dur;
    rk->engine = start + busy;
    if (done > rk->sends_done)
        rk->sends_done = done;
    account_at(sim, r, kind, start, dur);
    add_bytes(sim, rk->phase, kind, (long)bytes);
    Msg m = {r, tag, done, 0};
    inbox_push(sim, peer, m);
}

/* Completes every send and receive rank r has posted; returns 0 when a
 * message it receives has not been posted yet. */
static int wait_all(Sim *sim, int r) {
    Rank *rk = &sim->ranks[r];
    double t = rk->clock > rk->sends_done ? rk->clock : rk->sends_done;
    for (int i = 0; i < rk->nrecv; ++i)
        if (!inbox_find(sim, r, rk->recv[i].src, rk->recv[i].tag))
            return 0;
    double unpack = 0;
    for (int i = 0; i < rk->nrecv; ++i) {
        Msg *m = inbox_find(sim, r, rk->recv[i].src, rk->recv[i].tag);
        m->consumed = 1;
        if (m->arrival > t)
            t = m->arrival;
        if (rk->recv[i].unpack_elems)
            unpack += sim->p->kernel_overhead_us +
                      mem_us(sim, 2.0 * (double)rk->recv[i].unpack_elems * sim->eb);
    }
    rk->nrecv = 0;
    rk->sends_done = 0;
    rk->clock = t + unpack;
    if (unpack > 0)
        account(sim, r, -1, unpack);
    return 1;
}

/* KEEP: the sends posted since the last wait complete at a WAIT_KEPT of
 * tag, not at the phase's waits. */
static void keep_sends(Sim *sim, Rank *rk, int tag) {
    if (rk->nkept == rk->kept_cap) {
        int cap = rk->kept_cap ? rk->kept_cap * 2 : 8;
        int *t = ARENA_ARRAY(sim->arena, int, cap);
        double *d = ARENA_ARRAY(sim->arena, double, cap);
        if (rk->nkept) {
            memcpy(t, rk->kept_tag, sizeof(int) * (size_t)rk->nkept);
            memcpy(d, rk->kept_done, sizeof(double) * (size_t)rk->nkept);
        }
        rk->kept_tag = t;
        rk->kept_done = d;
        rk->kept_cap = cap;
    }
    rk->kept_tag[rk->nkept] = tag;
    rk->kept_done[rk->nkept++] = rk->sends_done;
    rk->sends_done = 0;
}

/* WAIT_KEPT: the clock waits for the sends kept under tag. */
static void wait_kept(Rank *rk, int tag) {
    int n = 0;
    for (int k = 0; k < rk->nkept; ++k) {
        if (rk->kept_tag[k] != tag) {
            rk->kept_tag[n] = rk->kept_tag[k];
            rk->kept_done[n++] = rk->kept_done[k];
        } else if (rk->kept_done[k] > rk->clock) {
            rk->clock = rk->kept_done[k];
        }
    }
    rk->nkept = n;
}

/* Advances rank r over one action; returns 0 when it must wait. */
static int step_action(Sim *sim, int r) {
    Rank *rk = &sim->ranks[r];
    const Schedule *s = sim->s;
    const PhaseSched *ph = s->phases.items[rk->phase];
    const PrimeAction *a = &ph->actions[r][rk->pc];
    const int eb = sim->eb;
    switch (a->op) {
    case PRIME_ACT_ALLOC: {
        /* A new tile is zero-filled (accumulators start at zero). The
         * init and dy-in phases only place the step's inputs (weights
         * that persist, dY from the loss): free. */
        double us = ph->inst < 0 || sim->prog.no_alloc[rk->phase]
                        ? 0
                        : mem_us(sim, (double)s->tensors[a->tensor].tile_elems * eb);
        rk->clock += us;
        account(sim, r, -1, us);
        break;
    }
    case PRIME_ACT_FREE:
        break;
    case PRIME_ACT_STEP:
        rk->step = a->arg;
        sim->step_start[rk->phase][a->arg][r] = rk->clock;
        break;
    case PRIME_ACT_SEND:
        post_send(sim, r, a->peer, a->tag, a->kind, (double)s->tensors[a->tensor].tile_elems * eb);
        break;
    case PRIME_ACT_SEND_BOX: {
        double bytes = (double)box_elems(&ph->boxes[a->arg]) * eb;
        double pack = sim->p->kernel_overhead_us + mem_us(sim, 2 * bytes);
        rk->clock += pack;
        account(sim, r, -1, pack);
        post_send(sim, r, a->peer, a->tag, a->kind, bytes);
        break;
    }
    case PRIME_ACT_RECV:
    case PRIME_ACT_RECV_BOX: {
        PendingRecv pr = {a->peer, a->tag,
                          a->op == PRIME_ACT_RECV_BOX ? box_elems(&ph->boxes[a->arg]) : 0};
        recv_push(sim, rk, pr);
        break;
    }
    case PRIME_ACT_WAIT:
        if (!wait_all(sim, r))
            return 0;
        break;
    case PRIME_ACT_KEEP:
        keep_sends(sim, rk, a->tag);
        break;
    case PRIME_ACT_WAIT_KEPT:
        wait_kept(rk, a->tag);
        break;
    case PRIME_ACT_KERNEL: {
        double us = sim->prog.kernel_us[rk->phase];
        /* A fused group's first phase: one call runs every member. */
        for (int i = 0; i < rk->pc && sim->prog.kernel_once[rk->phase] && us > 0; ++i)
            if (ph->actions[r][i].op == PRIME_ACT_KERNEL)
                us = 0;
        rk->clock += us;
        account(sim, r, -1, us);
        break;
    }
    case PRIME_ACT_ADD: {
        double n = (double)s->tensors[a->tensor].tile_elems;
        double us = sim->prog.no_add[rk->phase] ? 0 : cost_vector_us(sim->p, n, 3 * n * eb);
        rk->clock += us;
        account(sim, r, -1, us);
        break;
    }
    case PRIME_ACT_COPY_BOX: {
        double n = (double)box_elems(&ph->boxes[a->arg]);
        double us = sim->p->kernel_overhead_us + mem_us(sim, 2 * n * eb);
        rk->clock += us;
        account(sim, r, -1, us);
        break;
    }
    case PRIME_ACT_ALLREDUCE:
    case PRIME_ACT_REDUCE_SCATTER:
    case PRIME_ACT_ALLGATHER: {
        const Collective *c = ph->groups.items[a->arg];
        CommKind kind = a->op == PRIME_ACT_ALLGATHER        ? COMM_ALLGATHER
                        : a->op == PRIME_ACT_REDUCE_SCATTER ? COMM_REDUCE_SCATTER
                                                            : COMM_ALLREDUCE;
        int *arrived = &sim->coll_arrived[rk->phase][a->arg];
        double *latest = &sim->coll_clock[rk->phase][a->arg];
        if (!rk->in_collective) {
            rk->in_collective = 1;
            double t = rk->clock > rk->engine ? rk->clock : rk->engine;
            if (*arrived == 0 || t > *latest)
                *latest = t;
            (*arrived)++;
        }
        if (*arrived < c->gsize)
            return 0;
        /* The last member is here: the collective runs for all. Members
         * other than r are parked at this action; move them past it. */
        double us =
            cost_collective_us(sim->p, kind, cost_link_of_group(sim->dpn, c->group, c->gsize),
                               (double)c->elems * eb, c->gsize);
        double done = *latest + us;
        for (int i = 0; i < c->gsize; ++i) {
            int m = c->group[i];
            Rank *mk = &sim->ranks[m];
            mk->clock = mk->engine = done;
            mk->in_collective = 0;
            account(sim, m, PRIME_BYTES_COLLECTIVE, us);
            long sent =
                (long)(sched_collective_bytes(a->op, c->elems, c->gsize, i) / sizeof(float)) * eb;
            add_bytes(sim, mk->phase, PRIME_BYTES_COLLECTIVE, sent);
            if (m != r)
                mk->pc++;
        }
        *arrived = 0;
        break;
    }
    default:
        ICE("cost: unknown action %d", a->op);
    }
    rk->pc++;
    return 1;
}

/* Advances rank r as far as it can. A phase ends with an implicit wait
 * for whatever is still posted (prime_sched_run does the same). Returns
 * 1 if it moved. */
static int advance(Sim *sim, int r) {
    Rank *rk = &sim->ranks[r];
    const PtrVec *phases = &sim->s->phases;
    int moved = 0;
    while (rk->phase < phases->count) {
        const PhaseSched *ph = phases->items[rk->phase];
        if (rk->pc < ph->nactions[r]) {
            if (!step_action(sim, r))
                return moved;
            moved = 1;
            continue;
        }
        if (!wait_all(sim, r))
            return moved;
        sim->end[rk->phase][r] = rk->clock;
        rk->phase++;
        rk->pc = 0;
        rk->step = -1;
        moved = 1;
    }
    return moved;
}

static double **rank_table(Arena *arena, int nphases, int ndev) {
    double **t = ARENA_ARRAY(arena, double *, nphases);
    for (int p = 0; p < nphases; ++p)
        t[p] = ARENA_ARRAY(arena, double, ndev);
    return t;
}

static double max_over(const double *v, int n) {
    double m = 0;
    for (int i = 0; i < n; ++i)
        if (v[i] > m)
            m = v[i];
    return m;
}

static const char *phase_label(const Schedule *s, const PhaseSched *ph, Arena *arena) {
    if (ph->inst < 0)
        return phase_name(ph->kind);
    const char *inst = s->model->instances[ph->inst].name;
    if (ph->kind == PHASE_FWD && ph->phase->recompute) /* `recompute`: it writes NAME_rc */
        return arena_printf(arena, "recomputed forward of %s -> %s", inst,
                            s->tensors[ph->out.tensor].name);
    if (ph->kind == PHASE_FWD)
        return arena_printf(arena, "%s of %s", phase_name(ph->kind), inst);
    return arena_printf(arena, "%s of %s -> %s", phase_name(ph->kind), inst,
                        s->tensors[ph->out.tensor].name);
}

static int phase_steps(const PhaseSched *ph, int r) {
    int n = 0;
    for (int i = 0; i < ph->nactions[r]; ++i)
        if (ph->actions[r][i].op == PRIME_ACT_STEP && ph->actions[r][i].arg + 1 > n)
            n = ph->actions[r][i].arg + 1;
    return n;
}

/* Each phase's FLOPs: its kernel's per KERNEL action it runs; in a fused
 * group's rewritten first phase, the j-th KERNEL action of a rank is
 * member j's, counted in member j's phase. */
static void count_flops(const Schedule *s, const CostProgram *prog, CostReport *out) {
    for (int q = 0; q < s->phases.count; ++q) {
        const PhaseSched *ph = s->phases.items[q];
        const FuseGroup *g =
            prog->kernel_once[q] ? &prog->fusion->groups[prog->fusion->group_of[q]] : NULL;
        for (int r = 0; r < s->model->mesh.ndev; ++r) {
            int j = 0;
            for (int i = 0; i < ph->nactions[r]; ++i) {
                if (ph->actions[r][i].op != PRIME_ACT_KERNEL)
                    continue;
                int m = g && j < g->nmembers ? g->phase[j] : q;
                out->phases[m].flops += prog->own_flops[m];
                j++;
            }
        }
    }
}

void cost_schedule(const Schedule *s, const Profile *p, const CostOptions *opt, Arena *arena,
                   CostReport *out) {
    CostOptions def;
    if (!opt) {
        cost_options_default(&def);
        opt = &def;
    }
    memset(out, 0, sizeof *out);
    const int ndev = s->model->mesh.ndev;
    const int np = s->phases.count;
    out->schedule = s;
    snprintf(out->profile, sizeof out->profile, "%s", p->name);
    out->options = *opt;
    out->ndev = ndev;
    out->devices_per_node = opt->devices_per_node > 0 ? opt->devices_per_node : p->devices_per_node;
    out->nphases = np;
    out->phases = ARENA_ARRAY(arena, PhaseCost, np);

    Sim sim;
    memset(&sim, 0, sizeof sim);
    sim.s = s;
    sim.p = p;
    sim.arena = arena;
    sim.eb = opt->elem_bytes > 0 ? opt->elem_bytes : 4;
    sim.dpn = out->devices_per_node;
    sim.ndev = ndev;
    sim.r = out;
    sim.ranks = ARENA_ARRAY(arena, Rank, ndev);
    sim.inbox = ARENA_ARRAY(arena, MsgQueue, ndev);
    cost_program(s, p, sim.eb, !opt->no_fuse, arena, &sim.prog);
    sim.coll_arrived = ARENA_ARRAY(arena, int *, np);
    sim.coll_clock = ARENA_ARRAY(arena, double *, np);
    sim.end = rank_table(arena, np, ndev);
    sim.compute = rank_table(arena, np, ndev);
    sim.shift = rank_table(arena, np, ndev);
    sim.coll = rank_table(arena, np, ndev);
    sim.redist = rank_table(arena, np, ndev);
    sim.step_start = ARENA_ARRAY(arena, double **, np);
    sim.step_compute = ARENA_ARRAY(arena, double **, np);
    sim.step_comm = ARENA_ARRAY(arena, double **, np);
    for (int q = 0; q < np; ++q) {
        const PhaseSched *ph = s->phases.items[q];
        PhaseCost *pc = &out->phases[q];
        pc->phase = ph;
        pc->name = phase_label(s, ph, arena);
        /* Every rank runs the phase's steps, or none (a pipeline stage's
         * phase on the devices of the other stages). */
        pc->nsteps = 0;
        for (int r = 0; r < ndev; ++r) {
            int n = phase_steps(ph, r);
            if (n && pc->nsteps && n != pc->nsteps)
                ICE("cost: ranks run %d and %d steps in phase %d", pc->nsteps, n, q);
            if (n)
                pc->nsteps = n;
        }
        pc->steps = ARENA_ARRAY(arena, StepCost, pc->nsteps);
        sim.step_start[q] = rank_table(arena, pc->nsteps, ndev);
        sim.step_compute[q] = rank_table(arena, pc->nsteps, ndev);
        sim.step_comm[q] = rank_table(arena, pc->nsteps, ndev);
        sim.coll_arrived[q] = ARENA_ARRAY(arena, int, ph->groups.count + 1);
        sim.coll_clock[q] = ARENA_ARRAY(arena, double, ph->groups.count + 1);
    }
    count_flops(s, &sim.prog, out);
    for (int r = 0; r < ndev; ++r)
        sim.ranks[r].step = -1;
    sim.record = opt->record_events;
    if (sim.record) {
        sim.last_event = ARENA_ARRAY(arena, int, (size_t)ndev *COST_EV_KIND_COUNT);
        for (int i = 0; i < ndev * COST_EV_KIND_COUNT; ++i)
            sim.last_event[i] = -1;
    }

    /* Sweep until every rank is done. An all-reduce completed by a later
     * rank moves the earlier ones on; the next sweep continues them. */
    for (;;) {
        int progress = 0, done = 0;
        for (int r = 0; r < ndev; ++r) {
            progress |= advance(&sim, r);
            done += sim.ranks[r].phase >= np;
        }
        if (done == ndev)
            break;
        if (!progress) {
            int r = 0;
            while (r < ndev && sim.ranks[r].phase >= np)
                r++;
            ICE("cost: the action lists of model '%s' deadlock (rank %d at action %d of phase %d)",
                s->model->name, r, sim.ranks[r].pc, sim.ranks[r].phase);
        }
    }

    /* Phase and step times: advances of the latest clock. */
    double before = 0;
    for (int q = 0; q < np; ++q) {
        PhaseCost *pc = &out->phases[q];
        double end = max_over(sim.end[q], ndev);
        pc->time_us = end - before;
        pc->compute_us = max_over(sim.compute[q], ndev);
        pc->shift_us = max_over(sim.shift[q], ndev);
        pc->collective_us = max_over(sim.coll[q], ndev);
        pc->redist_us = max_over(sim.redist[q], ndev);
        pc->exposed_us = pc->time_us - pc->compute_us;
        if (pc->exposed_us < 0)
            pc->exposed_us = 0;
        double at = before;
        for (int st = 0; st < pc->nsteps; ++st) {
            double s0 = max_over(sim.step_start[q][st], ndev);
            double s1 = st + 1 < pc->nsteps ? max_over(sim.step_start[q][st + 1], ndev) : end;
            if (st == 0)
                pc->prologue_us = s0 - at;
            pc->steps[st].time_us = s1 - s0;
            pc->steps[st].compute_us = max_over(sim.step_compute[q][st], ndev);
            pc->steps[st].comm_us = max_over(sim.step_comm[q][st], ndev);
        }
        if (pc->nsteps == 0)
            pc->prologue_us = pc->time_us;
        for (int r = 0; r < ndev && pc->phase->peak; ++r) {
            long peak = pc->phase->peak[r] / (long)sizeof(float) * sim.eb;
            if (peak > pc->peak_bytes)
                pc->peak_bytes = peak;
        }
        out->flops += pc->flops;
        out->shift_bytes += pc->shift_bytes;
        out->redist_bytes += pc->redist_bytes;
        out->collective_bytes += pc->collective_bytes;
        before = end;
    }
    out->step_us = before;
    for (int r = 0; r < ndev; ++r) {
        if (sim.ranks[r].compute > out->compute_us)
            out->compute_us = sim.ranks[r].compute;
        if (sim.ranks[r].comm > out->comm_us)
            out->comm_us = sim.ranks[r].comm;
    }
    out->exposed_comm_us = out->step_us - out->compute_us;
    if (out->exposed_comm_us < 0)
        out->exposed_comm_us = 0;
    out->p2p_bytes = out->shift_bytes + out->redist_bytes;
    out->peak_bytes = ARENA_ARRAY(arena, long, ndev);
    for (int r = 0; r < ndev; ++r) {
        out->peak_bytes[r] = s->pred_peak ? s->pred_peak[r] / (long)sizeof(float) * sim.eb : 0;
        if (out->peak_bytes[r] > out->max_peak_bytes)
            out->max_peak_bytes = out->peak_bytes[r];
    }
    cost_training_memory(s, p, opt, arena, &out->memory);
}

/* ------------------------------------------------------------------ */
/* Training memory                                                     */

void cost_training_memory(const Schedule *s, const Profile *p, const CostOptions *opt, Arena *arena,
                          TrainingMemory *out) {
    const int ndev = s->model->mesh.ndev;
    const int eb = opt && opt->elem_bytes > 0 ? opt->elem_bytes : 4;
    memset(out, 0, sizeof *out);
    out->ndev = ndev;
    out->params = ARENA_ARRAY(arena, long, ndev);
    out->state_bytes = ARENA_ARRAY(arena, long, ndev);
    out->total_bytes = ARENA_ARRAY(arena, long, ndev);
    for (int i = 0; i < s->model->ntensors; ++i) {
        const ModelTensor *mt = &s->model->tensors[i];
        if (mt->role != TENSOR_WEIGHT)
            continue;
        long n = 1;
        for (int d = 0; d < mt->ndims; ++d)
            n *= mt->sizes[d];
        out->model_params += n;
    }
    /* A weight's home layout: the tiles the driver fills, where the
     * optimizer step runs. */
    for (int t = 0; t < s->ntensors; ++t) {
        const SchedTensor *ts = &s->tensors[t];
        const Layout *home = &s->home[t];
        if (!ts->is_weight || ts->is_grad || home->ndev != ndev)
            continue;
        for (int d = 0; d < ndev; ++d)
            out->params[d] += (long)home->count[d] * ts->tile_elems;
    }
    for (int d = 0; d < ndev; ++d) {
        out->state_bytes[d] = 16 * out->params[d];
        long peak = s->pred_peak ? s->pred_peak[d] / (long)sizeof(float) * eb : 0;
        out->total_bytes[d] = peak + COST_ADAM_STATE_BYTES * out->params[d];
        if (out->state_bytes[d] > out->max_state_bytes)
            out->max_state_bytes = out->state_bytes[d];
        if (out->total_bytes[d] > out->max_total_bytes)
            out->max_total_bytes = out->total_bytes[d];
    }
    out->capacity_bytes = p->mem_capacity_GB * 1e9;
    out->fits = (double)out->max_total_bytes <= out->capacity_bytes;
}

/* ------------------------------------------------------------------ */
/* Output                                                              */

static void print_bytes(FILE *out, double b) {
    if (b >= 1e9)
        fprintf(out, "%.2f GB", b / 1e9);
    else if (b >= 1e6)
        fprintf(out, "%.2f MB", b / 1e6);
    else if (b >= 1e3)
        fprintf(out, "%.2f kB", b / 1e3);
    else
        fprintf(out, "%.0f B", b);
}

void cost_print(const CostReport *r, FILE *out) {
    const Schedule *s = r->schedule;
    const Mesh *mesh = &s->model->mesh;
    fprintf(out, "cost of model %s on %d devices (mesh", s->model->name, r->ndev);
    for (int a = 0; a < mesh->naxes; ++a)
        fprintf(out, " %s:%ld", mesh->names[a], mesh->sizes[a]);
    fprintf(out, ") with profile %s (%d devices per node), %d-byte elements\n", r->profile,
            r->devices_per_node, r->options.elem_bytes);
    fprintf(out, "  %-32s %11s %11s %10s %10s %10s %11s  %s\n", "phase", "time_us", "compute_us",
            "shift_us", "coll_us", "redist_us", "exposed_us", "steps (time_us)");
    for (int q = 0; q < r->nphases; ++q) {
        const PhaseCost *pc = &r->phases[q];
        if (pc->phase->inst < 0 && pc->time_us == 0)
            continue;
        fprintf(out, "  %-32s %11.2f %11.2f %10.2f %10.2f %10.2f %11.2f ", pc->name, pc->time_us,
                pc->compute_us, pc->shift_us, pc->collective_us, pc->redist_us, pc->exposed_us);
        if (pc->prologue_us > 0)
            fprintf(out, " [in %.2f]", pc->prologue_us);
        for (int st = 0; st < pc->nsteps && st < 16; ++st)
            fprintf(out, " %.2f", pc->steps[st].time_us);
        if (pc->nsteps > 16)
            fprintf(out, " ... (%d steps)", pc->nsteps);
        fprintf(out, "\n");
    }
    double gflops = r->step_us > 0 ? r->flops / r->step_us / 1e3 : 0;
    fprintf(out,
            "  step time %.2f us: compute %.2f us, exposed communication %.2f us (%.0f%%); "
            "%.3g GFLOP, %.3g GFLOP/s\n",
            r->step_us, r->compute_us, r->exposed_comm_us,
            r->step_us > 0 ? 100 * r->exposed_comm_us / r->step_us : 0, r->flops / 1e9, gflops);
    fprintf(out,
            "  communication time %.2f us on the busiest device; bytes over all devices: "
            "shift %ld, redistribution %ld (p2p %ld), collective %ld\n",
            r->comm_us, r->shift_bytes, r->redist_bytes, r->p2p_bytes, r->collective_bytes);
    fprintf(out, "  peak memory per device:");
    for (int d = 0; d < r->ndev && d < 16; ++d)
        fprintf(out, " %ld", r->peak_bytes[d]);
    if (r->ndev > 16)
        fprintf(out, " ...");
    fprintf(out, " bytes (max ");
    print_bytes(out, (double)r->max_peak_bytes);
    fprintf(out, ")\n");
    const TrainingMemory *m = &r->memory;
    long maxp = 0;
    for (int d = 0; d < m->ndev; ++d)
        if (m->params[d] > maxp)
            maxp = m->params[d];
    fprintf(
        out,
        "  training state: %ld parameters in the model, at most %ld on one device; 16 B/param = ",
        m->model_params, maxp);
    print_bytes(out, (double)m->max_state_bytes);
    fprintf(out, "; with the schedule's peak: ");
    print_bytes(out, (double)m->max_total_bytes);
    fprintf(out, " of ");
    print_bytes(out, m->capacity_bytes);
    fprintf(out, " (%s)\n", m->fits ? "fits" : "does not fit");
}
