/*
 * prime_sched.c — the schedule executor (see prime_sched.h).
 *
 * It trusts the compiler for the schedule's consistency but checks
 * every slot access, so a corrupt table gives PRIME_ERR_ARG instead of a
 * crash.
 */
#include "prime_sched.h"

#include <stdlib.h>

#define MAX_PENDING 256

const char *prime_action_name(int op)
{
    static const char *const names[] = {
#define PRIME_X(op, name) name,
        PRIME_ACTION_LIST(PRIME_X)
#undef PRIME_X
    };
    if (op < 0 || op >= PRIME_ACT_COUNT)
        return "?";
    return names[op];
}

PrimeStatus prime_store_init(PrimeStore *store, int ntensors, const size_t *tile_elems,
                             const int *max_slots)
{
    if (ntensors < 0 || ntensors > PRIME_MAX_TENSORS)
        return PRIME_ERR_ARG;
    store->ntensors = ntensors;
    for (int t = 0; t < PRIME_MAX_TENSORS; ++t) {
        store->tile_elems[t] = t < ntensors ? tile_elems[t] : 0;
        store->nslots[t] = t < ntensors ? max_slots[t] : 0;
        store->slots[t] = NULL;
        if (t < ntensors && max_slots[t] > 0) {
            store->slots[t] = calloc((size_t)max_slots[t], sizeof(float *));
            if (!store->slots[t]) {
                for (int u = 0; u < t; ++u)
                    free(store->slots[u]);
                return PRIME_ERR_NOMEM;
            }
        }
    }
    return PRIME_OK;
}

void prime_store_release(PrimeDev *dev, PrimeStore *store)
{
    for (int t = 0; t < store->ntensors; ++t) {
        for (int s = 0; s < store->nslots[t]; ++s) {
            if (store->slots[t][s])
                prime_free(dev, store->slots[t][s], store->tile_elems[t]);
        }
        free(store->slots[t]);
        store->slots[t] = NULL;
        store->nslots[t] = 0;
    }
}

static float **slot_ref(PrimeStore *store, int tensor, int slot)
{
    if (tensor < 0 || tensor >= store->ntensors || slot < 0 || slot >= store->nslots[tensor])
        return NULL;
    return &store->slots[tensor][slot];
}

PrimeStatus prime_sched_run(PrimeDev *dev, const PrimePhase *phase, PrimeStore *store)
{
    const int rank = prime_dev_rank(dev);
    const PrimeAction *acts = phase->actions[rank];
    const int n = phase->nactions[rank];
    PrimeReq pending[MAX_PENDING];
    int npending = 0;
    int in_step = 0;
    PrimeStatus st = PRIME_OK;

    for (int i = 0; i < n && st == PRIME_OK; ++i) {
        const PrimeAction *a = &acts[i];
        float **ref = NULL;
        if (a->op != PRIME_ACT_WAIT && a->op != PRIME_ACT_STEP) {
            ref = slot_ref(store, a->tensor, a->slot);
            if (!ref) {
                st = PRIME_ERR_ARG;
                break;
            }
        }
        size_t elems = a->op == PRIME_ACT_WAIT || a->op == PRIME_ACT_STEP
                           ? 0
                           : store->tile_elems[a->tensor];
        switch (a->op) {
        case PRIME_ACT_ALLOC:
            if (*ref) {
                st = PRIME_ERR_ARG;
                break;
            }
            *ref = prime_alloc(dev, elems);
            if (!*ref)
                st = PRIME_ERR_NOMEM;
            break;
        case PRIME_ACT_FREE:
            if (!*ref) {
                st = PRIME_ERR_ARG;
                break;
            }
            prime_free(dev, *ref, elems);
            *ref = NULL;
            break;
        case PRIME_ACT_SEND:
        case PRIME_ACT_RECV:
            if (!*ref || npending == MAX_PENDING) {
                st = PRIME_ERR_ARG;
                break;
            }
            if (a->op == PRIME_ACT_SEND)
                st = prime_isend(dev, a->peer, a->tag, *ref, elems, (PrimeByteKind)a->kind,
                                 &pending[npending]);
            else
                st = prime_irecv(dev, a->peer, a->tag, *ref, elems, &pending[npending]);
            if (st == PRIME_OK)
                ++npending;
            break;
        case PRIME_ACT_WAIT:
            for (int r = 0; r < npending; ++r) {
                PrimeStatus w = prime_wait(dev, &pending[r]);
                if (st == PRIME_OK)
                    st = w;
            }
            npending = 0;
            break;
        case PRIME_ACT_KERNEL: {
            const float *in[PRIME_MAX_KERNEL_INPUTS] = {0};
            if (!*ref || a->nin > PRIME_MAX_KERNEL_INPUTS) {
                st = PRIME_ERR_ARG;
                break;
            }
            for (int k = 0; k < a->nin; ++k) {
                float **r = slot_ref(store, a->in_tensor[k], a->in_slot[k]);
                if (!r || !*r) {
                    st = PRIME_ERR_ARG;
                    break;
                }
                in[k] = *r;
            }
            if (st != PRIME_OK)
                break;
            prime_trace_begin(dev, phase->name);
            phase->kernels[a->arg](*ref, in);
            prime_trace_end(dev);
            break;
        }
        case PRIME_ACT_ADD: {
            float **r = slot_ref(store, a->in_tensor[0], a->in_slot[0]);
            if (!*ref || !r || !*r) {
                st = PRIME_ERR_ARG;
                break;
            }
            prime_add(*ref, *r, elems);
            break;
        }
        case PRIME_ACT_ALLREDUCE: {
            const PrimeGroup *g = &phase->groups[a->arg];
            if (!*ref) {
                st = PRIME_ERR_ARG;
                break;
            }
            prime_trace_begin(dev, "allreduce");
            st = prime_allreduce_sum(dev, g->ranks, g->size, *ref, elems, a->tag);
            prime_trace_end(dev);
            break;
        }
        case PRIME_ACT_STEP:
            if (in_step)
                prime_trace_end(dev);
            prime_trace_begin(dev, "step");
            in_step = 1;
            break;
        default:
            st = PRIME_ERR_ARG;
            break;
        }
    }
    for (int r = 0; r < npending; ++r)
        (void)prime_wait(dev, &pending[r]);
    if (in_step)
        prime_trace_end(dev);
    return st;
}
