/*
 * sched_sends.c — a pipeline stage's boundary sends, posted where the
 * value is made.
 *
 * The simulation emits every move at the phase boundary that needs it:
 * the activation a stage hands to the next (or the gradient it hands
 * back) is sent at the receiving phase's place in the sender's action
 * list, although the sender's devices sit that phase out (sched_idle).
 * In 1F1B's steady state that makes two stages wait for each other: the
 * next stage's forward of micro-batch m + 1 and this stage's backward of
 * m are both ready, and each is at the other's place in the other's list.
 *
 * This pass, run once the action lists are complete, moves such sends:
 * for every phase and every device of another stage that sends in it,
 * the sends go to the end of the device's list in the phase that last
 * wrote their tiles (the phase that made the value), followed by KEEP,
 * and their place in the receiving phase becomes a WAIT_KEPT of the same
 * tag. So the send leaves as soon as the value exists; the receive, the
 * completion of the send and the free of its tile stay where they were,
 * so every device waits at the same points as before (no new
 * dependency, so no new deadlock under rendezvous transports), no tile
 * lives longer, and a source tile is not written between its send and
 * the send's completion (the phase that last wrote it is the one that
 * sends it). Box sends keep their packed buffers until WAIT_KEPT, which
 * the prediction counts (sched_predict.c).
 *
 * The cost model, the predicted counters and the program read the same
 * action lists, so all three follow.
 */
#include "sched_internal.h"

#include "partition.h"

static int is_send(int op) {
    return op == PRIME_ACT_SEND || op == PRIME_ACT_SEND_BOX;
}

/* Whether device d's list in phase ph only sends, waits and frees (the
 * boundary of a phase whose instance runs on another stage), with at
 * least one send. */
static int only_boundary_sends(const PhaseSched *ph, int d) {
    int sends = 0;
    for (int i = 0; i < ph->nactions[d]; ++i) {
        int op = ph->actions[d][i].op;
        if (!is_send(op) && op != PRIME_ACT_WAIT && op != PRIME_ACT_FREE)
            return 0;
        sends += is_send(op);
    }
    return sends > 0;
}

/* Whether action a writes (or allocates, or frees) slot `slot` of tensor
 * t: every action on a tile but a send, which reads it. */
static int writes_tile(const PrimeAction *a, int t, int slot) {
    return prime_action_has_tensor(a->op) && !is_send(a->op) && a->tensor == t && a->slot == slot;
}

/* The latest phase before p in which device d writes the tile of every
 * send of d's list in phase p; -1 when one of them was last written by
 * a phase without an instance (init, dy-in: the driver fills those tiles
 * after the phase) or never. */
static int producing_phase(const Schedule *s, int p, int d) {
    const PhaseSched *ph = s->phases.items[p];
    int latest = -1;
    for (int i = 0; i < ph->nactions[d]; ++i) {
        const PrimeAction *a = &ph->actions[d][i];
        if (!is_send(a->op))
            continue;
        int found = -1;
        for (int q = p - 1; q >= 0 && found < 0; --q) {
            const PhaseSched *qh = s->phases.items[q];
            for (int j = qh->nactions[d] - 1; j >= 0 && found < 0; --j)
                if (writes_tile(&qh->actions[d][j], a->tensor, a->slot))
                    found = q;
        }
        if (found < 0 || ((const PhaseSched *)s->phases.items[found])->inst < 0)
            return -1;
        if (found > latest)
            latest = found;
    }
    return latest;
}

/* Room for n more actions on device d's list in phase ph. */
static void reserve(Arena *arena, PhaseSched *ph, int d, int n) {
    if (ph->nactions[d] + n <= ph->action_cap[d])
        return;
    int cap = ph->nactions[d] + n + 8;
    PrimeAction *a = ARENA_ARRAY_UNINIT(arena, PrimeAction, cap);
    if (ph->nactions[d])
        memcpy(a, ph->actions[d], sizeof(PrimeAction) * (size_t)ph->nactions[d]);
    ph->actions[d] = a;
    ph->action_cap[d] = cap;
}

/* Moves device d's sends of phase p to the end of its list in phase q,
 * kept under the first send's tag, and puts a WAIT_KEPT of that tag
 * where the first send was. */
static void move_sends(Arena *arena, Schedule *s, int p, int q, int d) {
    PhaseSched *ph = s->phases.items[p], *qh = s->phases.items[q];
    int nsends = 0, tag = -1;
    for (int i = 0; i < ph->nactions[d]; ++i)
        if (is_send(ph->actions[d][i].op))
            nsends++;
    reserve(arena, qh, d, nsends + 1);
    int n = 0;
    for (int i = 0; i < ph->nactions[d]; ++i) {
        PrimeAction a = ph->actions[d][i];
        if (!is_send(a.op)) {
            ph->actions[d][n++] = a;
            continue;
        }
        if (a.op == PRIME_ACT_SEND_BOX) /* its box, among the boxes of its new phase */
            a.arg = sched_phase_box(arena, qh, &ph->boxes[a.arg]);
        qh->actions[d][qh->nactions[d]++] = a;
        if (tag < 0) {
            tag = a.tag;
            PrimeAction w = {0};
            w.op = PRIME_ACT_WAIT_KEPT;
            w.tag = tag;
            ph->actions[d][n++] = w;
        }
    }
    ph->nactions[d] = n;
    PrimeAction k = {0};
    k.op = PRIME_ACT_KEEP;
    k.tag = tag;
    qh->actions[d][qh->nactions[d]++] = k;
}

void sched_post_sends_early(Schedule *s, Arena *arena) {
    const Model *m = s->model;
    if (m->nstages < 2)
        return;
    int ndev = m->mesh.ndev;
    long *coords = ARENA_ARRAY(arena, long, (long)ndev * m->mesh.naxes + 1);
    for (int d = 0; d < ndev; ++d)
        mesh_coords(&m->mesh, d, coords + (long)d * m->mesh.naxes);
    for (int p = 1; p < s->phases.count; ++p) {
        const PhaseSched *ph = s->phases.items[p];
        if (ph->inst < 0)
            continue;
        const Instance *inst = &m->instances[ph->inst];
        for (int d = 0; d < ndev; ++d) {
            if (instance_on_device(m, inst, coords + (long)d * m->mesh.naxes) ||
                !only_boundary_sends(ph, d))
                continue;
            int q = producing_phase(s, p, d);
            if (q >= 0)
                move_sends(arena, s, p, q, d);
        }
    }
}
