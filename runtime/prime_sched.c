/*
 * prime_sched.c — the schedule executor (see prime_sched.h).
 *
 * It trusts the compiler for the schedule's consistency but checks
 * every slot access, so a corrupt table gives PRIME_ERR_ARG instead of a
 * crash. Each action it starts is named to the device (phase, step,
 * index, kind) for the message of a wait that times out.
 *
 * Timing (PrimeSchedStats, and the trace): a kernel is timed around its
 * call; a transfer spans from its posting to the return of the wait that
 * completes it (its span on the communication row), and only the time
 * blocked in that wait counts as communication; a collective is
 * communication from start to end. Each step's interval in the trace
 * carries its own split: time in kernels, exposed communication, and the
 * rest (the schedule's overhead).
 *
 * Every operation on a tile goes through the device's table
 * (prime_devops.h): host memory and the emitted C kernels by default,
 * GPU memory and streams with the CUDA runtime. With a table that runs
 * asynchronously, the host times above are those of the calls (kernel
 * launches, the waits' handshakes) and the table's `finish` gives the
 * kernels' device time for the phase.
 */
#include "prime_sched.h"

#include "prime_devops.h"
#include "prime_form.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PENDING 1024

/* A posted transfer and, for box transfers, its packed buffer. */
typedef struct Pending {
    PrimeReq req;
    float *temp; /* SEND_BOX/RECV_BOX: the packed buffer */
    size_t temp_n;
    float *unpack_to; /* RECV_BOX: the destination tile */
    const PrimeBox *box;
    uint64_t posted_ns; /* for the transfer's span in the trace */
    int op;
    int peer;
    int kind;
} Pending;

/* A send kept past its phase (KEEP), completed by WAIT_KEPT of its tag. */
struct PrimeKept {
    Pending pd;
    int tag;
};

/* Why a table's alloc returned NULL: out of memory, or a failed device
 * call that the table recorded. */
static PrimeStatus alloc_failure(const PrimeDev *dev) {
    return prime_dev_status(dev) == PRIME_ERR_DEVICE ? PRIME_ERR_DEVICE : PRIME_ERR_NOMEM;
}

static long box_elems(const PrimeBox *b) {
    long n = 1;
    for (int x = 0; x < b->ndims; ++x)
        n *= b->ext[x];
    return n;
}

PrimeStatus prime_store_init(PrimeStore *store, int ntensors, const size_t *tile_elems,
                             const int *max_slots) {
    memset(store, 0, sizeof *store);
    if (ntensors < 0)
        return PRIME_ERR_ARG;
    size_t n = ntensors ? (size_t)ntensors : 1;
    store->tile_elems = malloc(sizeof(size_t) * n);
    store->nslots = calloc(n, sizeof(int));
    store->slots = calloc(n, sizeof(float **));
    store->owed = calloc(n, sizeof(unsigned char *));
    if (!store->tile_elems || !store->nslots || !store->slots || !store->owed) {
        prime_store_release(NULL, store);
        return PRIME_ERR_NOMEM;
    }
    store->ntensors = ntensors;
    for (int t = 0; t < ntensors; ++t) {
        store->tile_elems[t] = tile_elems[t];
        if (max_slots[t] > 0) {
            store->slots[t] = calloc((size_t)max_slots[t], sizeof(float *));
            store->owed[t] = calloc((size_t)max_slots[t], 1);
            if (!store->slots[t] || !store->owed[t]) {
                prime_store_release(NULL, store);
                return PRIME_ERR_NOMEM;
            }
            store->nslots[t] = max_slots[t];
        }
    }
    return PRIME_OK;
}

void prime_store_release(PrimeDev *dev, PrimeStore *store) {
    const PrimeDevOps *ops = prime_dev_ops(dev);
    /* Sends still kept (a run that failed between KEEP and WAIT_KEPT). */
    for (int k = 0; k < store->nkept && dev; ++k) {
        (void)ops->wait(dev, &store->kept[k].pd.req);
        if (store->kept[k].pd.temp)
            ops->free(dev, store->kept[k].pd.temp, store->kept[k].pd.temp_n);
    }
    free(store->kept);
    for (int t = 0; t < store->ntensors; ++t) {
        for (int s = 0; s < store->nslots[t]; ++s) {
            if (store->slots[t][s])
                ops->free(dev, store->slots[t][s], store->tile_elems[t]);
        }
        free(store->slots[t]);
        if (store->owed)
            free(store->owed[t]);
    }
    free(store->tile_elems);
    free(store->nslots);
    free(store->slots);
    free(store->owed);
    memset(store, 0, sizeof *store);
}

static float **slot_ref(PrimeStore *store, int tensor, int slot) {
    if (tensor < 0 || tensor >= store->ntensors || slot < 0 || slot >= store->nslots[tensor])
        return NULL;
    return &store->slots[tensor][slot];
}

/* What slot s of tensor t owes (0: nothing), or NULL out of range. */
static unsigned char *owed_ref(PrimeStore *store, int t, int s) {
    if (!store->owed || t < 0 || t >= store->ntensors || s < 0 || s >= store->nslots[t] ||
        !store->owed[t])
        return NULL;
    return &store->owed[t][s];
}

/* Gives the tile in slot s of tensor t the identity it is owed, before a
 * use that reads it. */
static PrimeStatus settle(PrimeDev *dev, PrimeStore *store, int t, int s, PrimeSchedStats *acc) {
    unsigned char *owed = owed_ref(store, t, s);
    if (!owed || !*owed || !store->slots[t][s])
        return PRIME_OK;
    PrimeStatus st =
        prime_dev_ops(dev)->fill(dev, store->slots[t][s], store->tile_elems[t], *owed - 1);
    *owed = 0;
    if (acc)
        acc->tiles_filled++;
    return st;
}

/* The first writer of slot s of tensor t writes every element: whatever
 * it owed is skipped. */
static void overwritten(PrimeStore *store, int t, int s, PrimeSchedStats *acc) {
    unsigned char *owed = owed_ref(store, t, s);
    if (owed && *owed) {
        *owed = 0;
        acc->tiles_unfilled++;
    }
}

float *prime_store_tile(PrimeDev *dev, PrimeStore *store, int t, int s) {
    if (!owed_ref(store, t, s))
        return NULL;
    if (settle(dev, store, t, s, NULL) != PRIME_OK)
        return NULL;
    return store->slots[t][s];
}

void prime_store_written(PrimeStore *store, int t, int s) {
    unsigned char *owed = owed_ref(store, t, s);
    if (owed)
        *owed = 0;
}

/* A new tile for an ALLOC action: filled at once, or owing its identity
 * where the table allocates lazily. */
static float *alloc_slot(PrimeDev *dev, PrimeStore *store, const PrimeAction *a, size_t elems,
                         PrimeSchedStats *acc) {
    const PrimeDevOps *ops = prime_dev_ops(dev);
    int filled = 1;
    float *p = ops->alloc_lazy && ops->fill ? ops->alloc_lazy(dev, elems, a->kind, &filled)
                                            : ops->alloc(dev, elems, a->kind);
    if (!p)
        return NULL;
    *owed_ref(store, a->tensor, a->slot) = filled ? 0 : (unsigned char)(1 + a->kind);
    acc->tiles_filled += filled;
    return p;
}

/* The packed buffer of a box transfer, written whole by the packing or
 * the receive: never filled where the table allows. */
static float *alloc_box_buffer(PrimeDev *dev, size_t n, PrimeSchedStats *acc) {
    const PrimeDevOps *ops = prime_dev_ops(dev);
    int filled = 1;
    float *p = ops->alloc_lazy && ops->fill ? ops->alloc_lazy(dev, n, PRIME_COMBINE_SUM, &filled)
                                            : ops->alloc(dev, n, PRIME_COMBINE_SUM);
    if (p)
        *(filled ? &acc->tiles_filled : &acc->tiles_unfilled) += 1;
    return p;
}

/* Whether box b covers the whole destination tile. */
static int box_covers_dst(const PrimeBox *b) {
    for (int x = 0; x < b->ndims; ++x)
        if (b->dst_off[x] != 0 || b->ext[x] != b->dst_tile[x])
            return 0;
    return 1;
}

/* Runs a KERNEL action's kernel on its tiles: the overwriting form where
 * the output tile owes its fill (and is none of the inputs), else the
 * accumulating one on a filled tile. */
static PrimeStatus run_kernel(PrimeDev *dev, const PrimePhase *src, const PrimeRankPhase *phase,
                              PrimeStore *store, const PrimeAction *a, float *out,
                              PrimeSchedStats *acc) {
    const PrimeDevOps *ops = prime_dev_ops(dev);
    const float *in[PRIME_MAX_KERNEL_INPUTS] = {0};
    if (a->nin > PRIME_MAX_KERNEL_INPUTS)
        return PRIME_ERR_ARG;
    int aliased = 0;
    for (int k = 0; k < a->nin; ++k) {
        float **r = slot_ref(store, a->in_tensor[k], a->in_slot[k]);
        if (!r || !*r)
            return PRIME_ERR_ARG;
        PrimeStatus st = settle(dev, store, a->in_tensor[k], a->in_slot[k], acc);
        if (st != PRIME_OK)
            return st;
        in[k] = *r;
        aliased |= *r == out;
    }
    const unsigned char *owed = owed_ref(store, a->tensor, a->slot);
    int set = owed && *owed && !aliased && ops->kernel_set && src->kernel_overwrites;
    if (set) {
        overwritten(store, a->tensor, a->slot, acc);
    } else {
        PrimeStatus st = settle(dev, store, a->tensor, a->slot, acc);
        if (st != PRIME_OK)
            return st;
    }
    static const long no_offsets[8] = {0};
    const long *off = phase->offsets ? phase->offsets[a->arg] : no_offsets;
    prime_trace_begin(dev, phase->name);
    uint64_t t0 = prime_clock_ns();
    PrimeStatus st = (set ? ops->kernel_set : ops->kernel)(dev, src, out, in, off);
    acc->kernel_ns += prime_clock_ns() - t0;
    acc->kernels++;
    prime_trace_end(dev);
    return st;
}

/* Runs the n consecutive KERNEL actions at acts as the phase's fused
 * kernel (PrimeFusedFn): every output tile is written whole first (so an
 * input that is an earlier member's output owes nothing), except one a
 * member accumulates into (settled), then the inputs are settled. */
static PrimeStatus run_fused(PrimeDev *dev, const PrimePhase *src, const PrimeRankPhase *phase,
                             PrimeStore *store, const PrimeAction *acts, int n,
                             PrimeSchedStats *acc) {
    const PrimeDevOps *ops = prime_dev_ops(dev);
    float *out[PRIME_MAX_FUSED] = {0};
    const float *ins[PRIME_MAX_FUSED][PRIME_MAX_KERNEL_INPUTS] = {{0}};
    const float *const *in[PRIME_MAX_FUSED] = {0};
    if (n > PRIME_MAX_FUSED || !ops->kernel_fused)
        return PRIME_ERR_ARG;
    for (int j = 0; j < n; ++j) {
        const PrimeAction *a = &acts[j];
        if (a->nin > PRIME_MAX_KERNEL_INPUTS)
            return PRIME_ERR_ARG;
        in[j] = ins[j];
        if (a->kind & 1)
            continue;
        float **r = slot_ref(store, a->tensor, a->slot);
        if (!r || !*r)
            return PRIME_ERR_ARG;
        if (a->kind & PRIME_FUSED_ACCUM) {
            PrimeStatus st = settle(dev, store, a->tensor, a->slot, acc);
            if (st != PRIME_OK)
                return st;
        } else {
            overwritten(store, a->tensor, a->slot, acc);
        }
        out[j] = *r;
    }
    for (int j = 0; j < n; ++j) {
        const PrimeAction *a = &acts[j];
        for (int k = 0; k < a->nin; ++k) {
            if ((a->kind >> (1 + k)) & 1)
                continue;
            float **r = slot_ref(store, a->in_tensor[k], a->in_slot[k]);
            if (!r || !*r)
                return PRIME_ERR_ARG;
            PrimeStatus st = settle(dev, store, a->in_tensor[k], a->in_slot[k], acc);
            if (st != PRIME_OK)
                return st;
            ins[j][k] = *r;
        }
    }
    static const long no_offsets[8] = {0};
    const long *off = phase->offsets ? phase->offsets[acts[0].arg] : no_offsets;
    prime_trace_begin(dev, phase->name);
    uint64_t t0 = prime_clock_ns();
    PrimeStatus st = ops->kernel_fused(dev, src, out, in, off);
    acc->kernel_ns += prime_clock_ns() - t0;
    acc->kernels++; /* one call, whose FLOPs are the members' (PrimePhase.kernel_flops) */
    prime_trace_end(dev);
    return st;
}

/* The name of a transfer's span: "send shift to 3", "recv from 2". */
static void span_name(const Pending *pd, char *buf, size_t cap) {
    if (pd->op == PRIME_ACT_SEND || pd->op == PRIME_ACT_SEND_BOX)
        snprintf(buf, cap, "send %s to %d", prime_byte_kind_name((PrimeByteKind)pd->kind),
                 pd->peer);
    else
        snprintf(buf, cap, "recv from %d", pd->peer);
}

/* Waits for a pending transfer, counts the time blocked, and records its
 * span. */
static PrimeStatus wait_pending(PrimeDev *dev, Pending *pd, PrimeSchedStats *acc) {
    uint64_t t0 = prime_clock_ns();
    PrimeStatus w = prime_dev_ops(dev)->wait(dev, &pd->req);
    uint64_t t1 = prime_clock_ns();
    acc->comm_ns += t1 - t0;
    char name[64];
    span_name(pd, name, sizeof name);
    prime_trace_span(dev, name, PRIME_TRACE_COMM, pd->posted_ns, t1);
    return w;
}

/* Runs one collective action, timed and traced as communication. */
static PrimeStatus run_collective(PrimeDev *dev, const PrimeRankPhase *phase, const PrimeAction *a,
                                  float *buf, size_t elems, PrimeSchedStats *acc) {
    const PrimeGroup *g = &phase->groups[a->arg];
    uint64_t t0 = prime_clock_ns();
    int which = a->op == PRIME_ACT_ALLGATHER   ? PRIME_COLL_ALLGATHER
                : a->op == PRIME_ACT_ALLREDUCE ? PRIME_COLL_ALLREDUCE
                                               : PRIME_COLL_REDUCE_SCATTER;
    PrimeStatus st =
        prime_dev_ops(dev)->collective(dev, which, a->kind, g->ranks, g->size, buf, elems, a->tag);
    uint64_t t1 = prime_clock_ns();
    acc->comm_ns += t1 - t0;
    acc->collectives++;
    prime_trace_span(dev, prime_action_name(a->op), PRIME_TRACE_COMM, t0, t1);
    return st;
}

/* Posts a SEND or RECV of the whole tile p into pd. A send reads the
 * tile; a receive writes all of it. */
static PrimeStatus post_transfer(PrimeDev *dev, PrimeStore *store, const PrimeAction *a, float *p,
                                 size_t elems, Pending *pd, PrimeSchedStats *acc) {
    const PrimeDevOps *ops = prime_dev_ops(dev);
    PrimeStatus st = PRIME_OK;
    if (a->op == PRIME_ACT_SEND)
        st = settle(dev, store, a->tensor, a->slot, acc);
    else
        overwritten(store, a->tensor, a->slot, acc);
    if (st != PRIME_OK)
        return st;
    memset(pd, 0, sizeof *pd);
    pd->posted_ns = prime_clock_ns();
    pd->op = a->op;
    pd->peer = a->peer;
    pd->kind = a->kind;
    if (a->op == PRIME_ACT_SEND)
        st = ops->isend(dev, a->peer, a->tag, p, elems, (PrimeByteKind)a->kind, &pd->req);
    else
        st = ops->irecv(dev, a->peer, a->tag, p, elems, &pd->req);
    if (st == PRIME_OK)
        ++*(a->op == PRIME_ACT_SEND ? &acc->sends : &acc->recvs);
    return st;
}

/* Posts a SEND_BOX (box b of tile p packed into a buffer, sent) or a
 * RECV_BOX (received into a buffer, unpacked into p at the wait) into
 * pd. Packing reads the tile, unpacking writes a box of it. */
static PrimeStatus post_box(PrimeDev *dev, PrimeStore *store, const PrimeAction *a,
                            const PrimeBox *b, float *p, Pending *pd, PrimeSchedStats *acc) {
    const PrimeDevOps *ops = prime_dev_ops(dev);
    static const long zero[8] = {0};
    PrimeStatus st = PRIME_OK;
    if (a->op == PRIME_ACT_RECV_BOX && box_covers_dst(b))
        overwritten(store, a->tensor, a->slot, acc);
    else
        st = settle(dev, store, a->tensor, a->slot, acc);
    if (st != PRIME_OK)
        return st;
    memset(pd, 0, sizeof *pd);
    pd->temp_n = (size_t)box_elems(b);
    pd->temp = alloc_box_buffer(dev, pd->temp_n, acc);
    if (!pd->temp)
        return alloc_failure(dev);
    pd->box = b;
    pd->posted_ns = prime_clock_ns();
    pd->op = a->op;
    pd->peer = a->peer;
    pd->kind = a->kind;
    if (a->op == PRIME_ACT_SEND_BOX) {
        st = ops->copy_box(dev, b->ndims, b->ext, p, b->src_tile, b->src_off, pd->temp, b->ext,
                           zero);
        if (st == PRIME_OK)
            st = ops->isend(dev, a->peer, a->tag, pd->temp, pd->temp_n, (PrimeByteKind)a->kind,
                            &pd->req);
    } else {
        pd->unpack_to = p;
        st = ops->irecv(dev, a->peer, a->tag, pd->temp, pd->temp_n, &pd->req);
    }
    if (st == PRIME_OK)
        ++*(a->op == PRIME_ACT_SEND_BOX ? &acc->sends : &acc->recvs);
    else
        ops->free(dev, pd->temp, pd->temp_n);
    return st;
}

/* Completes every pending transfer (unpacking received boxes, freeing
 * the packed buffers); the first failure. */
static PrimeStatus wait_all(PrimeDev *dev, Pending *pending, int npending, PrimeSchedStats *acc) {
    const PrimeDevOps *ops = prime_dev_ops(dev);
    static const long zero[8] = {0};
    PrimeStatus st = PRIME_OK;
    for (int r = 0; r < npending; ++r) {
        Pending *pd = &pending[r];
        PrimeStatus w = wait_pending(dev, pd, acc);
        if (st == PRIME_OK)
            st = w;
        if (pd->unpack_to && w == PRIME_OK)
            w = ops->copy_box(dev, pd->box->ndims, pd->box->ext, pd->temp, pd->box->ext, zero,
                              pd->unpack_to, pd->box->dst_tile, pd->box->dst_off);
        if (st == PRIME_OK)
            st = w;
        if (pd->temp)
            ops->free(dev, pd->temp, pd->temp_n);
    }
    return st;
}

/* KEEP: the sends pending since the last wait go to the store, under
 * tag, instead of completing at this phase's wait or end. A receive
 * cannot be kept (its tile is read after the wait). */
static PrimeStatus keep_sends(PrimeStore *store, Pending *pending, int *npending, int tag) {
    for (int r = 0; r < *npending; ++r)
        if (pending[r].op != PRIME_ACT_SEND && pending[r].op != PRIME_ACT_SEND_BOX)
            return PRIME_ERR_ARG;
    if (store->nkept + *npending > store->kept_cap) {
        int cap = store->kept_cap ? store->kept_cap : 8;
        while (cap < store->nkept + *npending)
            cap *= 2;
        struct PrimeKept *k = realloc(store->kept, sizeof *k * (size_t)cap);
        if (!k)
            return PRIME_ERR_NOMEM;
        store->kept = k;
        store->kept_cap = cap;
    }
    for (int r = 0; r < *npending; ++r) {
        store->kept[store->nkept].pd = pending[r];
        store->kept[store->nkept++].tag = tag;
    }
    *npending = 0;
    return PRIME_OK;
}

/* WAIT_KEPT: completes the sends kept under tag, in the order they were
 * posted; the first failure. */
static PrimeStatus wait_kept(PrimeDev *dev, PrimeStore *store, int tag, PrimeSchedStats *acc) {
    const PrimeDevOps *ops = prime_dev_ops(dev);
    PrimeStatus st = PRIME_OK;
    int n = 0;
    for (int k = 0; k < store->nkept; ++k) {
        struct PrimeKept *kp = &store->kept[k];
        if (kp->tag != tag) {
            store->kept[n++] = *kp;
            continue;
        }
        PrimeStatus w = wait_pending(dev, &kp->pd, acc);
        if (st == PRIME_OK)
            st = w;
        if (kp->pd.temp)
            ops->free(dev, kp->pd.temp, kp->pd.temp_n);
    }
    store->nkept = n;
    return st;
}

/* Runs `phase`, the view of `src` on the device's rank. */
static PrimeStatus run_view(PrimeDev *dev, const PrimePhase *src, const PrimeRankPhase *phase,
                            PrimeStore *store, PrimeSchedStats *acc) {
    const PrimeAction *acts = phase->actions;
    const int n = phase->nactions;
    const PrimeDevOps *ops = prime_dev_ops(dev);
    Pending pending[MAX_PENDING];
    int npending = 0;
    int in_step = 0, step = -1;
    uint64_t step_kernel = 0, step_comm = 0; /* acc's times when the step began */
    PrimeStatus st = PRIME_OK;

    for (int i = 0; i < n && st == PRIME_OK; ++i) {
        const PrimeAction *a = &acts[i];
        float **ref = NULL;
        /* Named in the message of a wait that times out. */
        if (a->op == PRIME_ACT_STEP)
            step = a->arg;
        prime_dev_set_context(dev, phase->name, step, i, prime_action_name(a->op));
        if (npending == MAX_PENDING &&
            (a->op == PRIME_ACT_SEND || a->op == PRIME_ACT_RECV || a->op == PRIME_ACT_SEND_BOX ||
             a->op == PRIME_ACT_RECV_BOX)) {
            st = PRIME_ERR_ARG;
            break;
        }
        if (prime_action_has_tensor(a->op)) {
            ref = slot_ref(store, a->tensor, a->slot);
            if (!ref) {
                st = PRIME_ERR_ARG;
                break;
            }
        }
        size_t elems = prime_action_has_tensor(a->op) ? store->tile_elems[a->tensor] : 0;
        switch (a->op) {
        case PRIME_ACT_ALLOC:
            if (*ref) {
                st = PRIME_ERR_ARG;
                break;
            }
            *ref = alloc_slot(dev, store, a, elems, acc);
            if (!*ref)
                st = alloc_failure(dev);
            break;
        case PRIME_ACT_FREE:
            if (!*ref) {
                st = PRIME_ERR_ARG;
                break;
            }
            ops->free(dev, *ref, elems);
            *ref = NULL;
            prime_store_written(store, a->tensor, a->slot);
            break;
        case PRIME_ACT_SEND:
        case PRIME_ACT_RECV:
            if (!*ref) {
                st = PRIME_ERR_ARG;
                break;
            }
            st = post_transfer(dev, store, a, *ref, elems, &pending[npending], acc);
            npending += st == PRIME_OK;
            break;
        case PRIME_ACT_SEND_BOX:
        case PRIME_ACT_RECV_BOX: {
            const PrimeBox *b = phase->boxes ? &phase->boxes[a->arg] : NULL;
            if (!*ref || !b) {
                st = PRIME_ERR_ARG;
                break;
            }
            st = post_box(dev, store, a, b, *ref, &pending[npending], acc);
            npending += st == PRIME_OK;
            break;
        }
        case PRIME_ACT_COPY_BOX: {
            const PrimeBox *b = phase->boxes ? &phase->boxes[a->arg] : NULL;
            float **src = slot_ref(store, a->in_tensor[0], a->in_slot[0]);
            if (!*ref || !b || !src || !*src) {
                st = PRIME_ERR_ARG;
                break;
            }
            st = settle(dev, store, a->in_tensor[0], a->in_slot[0], acc);
            if (st == PRIME_OK && box_covers_dst(b))
                overwritten(store, a->tensor, a->slot, acc);
            else if (st == PRIME_OK)
                st = settle(dev, store, a->tensor, a->slot, acc);
            if (st != PRIME_OK)
                break;
            st = ops->copy_box(dev, b->ndims, b->ext, *src, b->src_tile, b->src_off, *ref,
                               b->dst_tile, b->dst_off);
            break;
        }
        case PRIME_ACT_WAIT:
            st = wait_all(dev, pending, npending, acc);
            npending = 0;
            break;
        case PRIME_ACT_KEEP:
            st = keep_sends(store, pending, &npending, a->tag);
            break;
        case PRIME_ACT_WAIT_KEPT:
            st = wait_kept(dev, store, a->tag, acc);
            break;
        case PRIME_ACT_KERNEL:
            if (src->fused) {
                int nk = 1;
                while (i + nk < n && acts[i + nk].op == PRIME_ACT_KERNEL)
                    nk++;
                st = run_fused(dev, src, phase, store, a, nk, acc);
                i += nk - 1;
                break;
            }
            if (!*ref) {
                st = PRIME_ERR_ARG;
                break;
            }
            st = run_kernel(dev, src, phase, store, a, *ref, acc);
            break;
        case PRIME_ACT_ADD: {
            float **r = slot_ref(store, a->in_tensor[0], a->in_slot[0]);
            if (!*ref || !r || !*r) {
                st = PRIME_ERR_ARG;
                break;
            }
            st = settle(dev, store, a->in_tensor[0], a->in_slot[0], acc);
            if (st == PRIME_OK)
                st = settle(dev, store, a->tensor, a->slot, acc);
            if (st == PRIME_OK)
                st = ops->combine(dev, *ref, *r, elems, a->kind);
            break;
        }
        case PRIME_ACT_ALLREDUCE:
        case PRIME_ACT_REDUCE_SCATTER:
        case PRIME_ACT_ALLGATHER:
            if (!*ref || !phase->groups) {
                st = PRIME_ERR_ARG;
                break;
            }
            st = settle(dev, store, a->tensor, a->slot, acc);
            if (st == PRIME_OK)
                st = run_collective(dev, phase, a, *ref, elems, acc);
            break;
        case PRIME_ACT_STEP:
            if (in_step)
                prime_trace_end_split(dev, acc->kernel_ns - step_kernel, acc->comm_ns - step_comm);
            prime_trace_begin(dev, "step");
            step_kernel = acc->kernel_ns;
            step_comm = acc->comm_ns;
            in_step = 1;
            acc->steps++;
            break;
        default:
            st = PRIME_ERR_ARG;
            break;
        }
    }
    for (int r = 0; r < npending; ++r) {
        (void)ops->wait(dev, &pending[r].req);
        if (pending[r].temp)
            ops->free(dev, pending[r].temp, pending[r].temp_n);
    }
    if (in_step)
        prime_trace_end_split(dev, acc->kernel_ns - step_kernel, acc->comm_ns - step_comm);
    return st;
}

PrimeStatus prime_sched_run(PrimeDev *dev, const PrimePhase *phase, PrimeStore *store) {
    return prime_sched_run_shifted(dev, phase, store, 0, 0);
}

PrimeStatus prime_sched_run_shifted(PrimeDev *dev, const PrimePhase *phase, PrimeStore *store,
                                    int dtensor, int dtag) {
    return prime_sched_run_timed(dev, phase, store, dtensor, dtag, NULL);
}

PrimeStatus prime_sched_run_timed(PrimeDev *dev, const PrimePhase *phase, PrimeStore *store,
                                  int dtensor, int dtag, PrimeSchedStats *acc) {
    PrimeSchedStats local;
    memset(&local, 0, sizeof local);
    uint64_t t0 = prime_clock_ns();
    PrimeRankPhase view;
    PrimeStatus st = prime_rank_phase_shifted(phase, prime_dev_rank(dev), dtensor, dtag, &view);
    if (st != PRIME_OK)
        return st;
    st = run_view(dev, phase, &view, store, &local);
    prime_rank_phase_release(&view);
    const PrimeDevOps *ops = prime_dev_ops(dev);
    if (ops->finish) {
        uint64_t kernel_ns = 0;
        int measured = 0;
        PrimeStatus f = ops->finish(dev, &kernel_ns, &measured);
        if (st == PRIME_OK)
            st = f;
        if (measured)
            local.kernel_ns = kernel_ns;
    }
    local.wall_ns = prime_clock_ns() - t0;
    if (acc) {
        acc->wall_ns += local.wall_ns;
        acc->kernel_ns += local.kernel_ns;
        acc->comm_ns += local.comm_ns;
        acc->kernels += local.kernels;
        acc->sends += local.sends;
        acc->recvs += local.recvs;
        acc->collectives += local.collectives;
        acc->steps += local.steps;
        acc->tiles_filled += local.tiles_filled;
        acc->tiles_unfilled += local.tiles_unfilled;
    }
    return st;
}
