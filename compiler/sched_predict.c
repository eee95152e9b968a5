/*
 * sched_predict.c — predicted bytes and peak memory per rank, from
 * interpreting the action lists the emitted program runs (so they are
 * exact for it).
 */
#include "sched_internal.h"

uint64_t sched_collective_bytes(int op, long elems, int gsize, int pos) {
    size_t n = (size_t)elems;
    return op == PRIME_ACT_ALLGATHER        ? prime_allgather_bytes(n, gsize, pos)
           : op == PRIME_ACT_REDUCE_SCATTER ? prime_reduce_scatter_bytes(n, gsize, pos)
                                            : prime_allreduce_bytes(n, gsize, pos);
}

const char *sched_collective_kind(const Collective *c) {
    return c->allgather ? "all-gather" : c->reduce_scatter ? "reduce-scatter" : "all-reduce";
}

void sched_predict(Schedule *s, Arena *arena) {
    int ndev = s->model->mesh.ndev;
    for (int k = 0; k < PRIME_BYTES_KIND_COUNT; ++k)
        s->pred_bytes[k] = ARENA_ARRAY(arena, long, ndev);
    s->pred_peak = ARENA_ARRAY(arena, long, ndev);
    for (int p = 0; p < s->phases.count; ++p) {
        PhaseSched *ph = s->phases.items[p];
        ph->peak = ARENA_ARRAY(arena, long, ndev);
    }
    /* Tile bytes per tensor in one table: the loop below reads one per
     * action, and the tensors' records are far apart. */
    long *tile_bytes_of = ARENA_ARRAY_UNINIT(arena, long, s->ntensors + 1);
    for (int t = 0; t < s->ntensors; ++t)
        tile_bytes_of[t] = s->tensors[t].tile_elems * (long)sizeof(float);
    /* Packed buffers of box sends kept past their phase (KEEP), per tag:
     * freed at the WAIT_KEPT of the tag, as the runtime frees them. */
    PtrVec kept = {0};
    for (int d = 0; d < ndev; ++d) {
        long cur = 0, peak = 0;
        kept.count = 0;
        for (int p = 0; p < s->phases.count; ++p) {
            PhaseSched *ph = s->phases.items[p];
            long phase_peak = cur, temps = 0;
            for (int i = 0; i < ph->nactions[d]; ++i) {
                const PrimeAction *a = &ph->actions[d][i];
                long tile_bytes = prime_action_has_tensor(a->op) ? tile_bytes_of[a->tensor] : 0;
                switch (a->op) {
                case PRIME_ACT_ALLOC:
                    cur += tile_bytes;
                    break;
                case PRIME_ACT_FREE:
                    cur -= tile_bytes;
                    break;
                case PRIME_ACT_SEND:
                    s->pred_bytes[a->kind][d] += tile_bytes;
                    break;
                case PRIME_ACT_SEND_BOX:
                case PRIME_ACT_RECV_BOX: {
                    const PrimeBox *box = &ph->boxes[a->arg];
                    long n = 1;
                    for (int x = 0; x < box->ndims; ++x)
                        n *= box->ext[x];
                    cur += n * (long)sizeof(float);
                    temps += n * (long)sizeof(float);
                    if (a->op == PRIME_ACT_SEND_BOX)
                        s->pred_bytes[a->kind][d] += n * (long)sizeof(float);
                    break;
                }
                case PRIME_ACT_WAIT:
                    cur -= temps;
                    temps = 0;
                    break;
                case PRIME_ACT_KEEP: {
                    long *k = ARENA_ARRAY(arena, long, 2);
                    k[0] = a->tag;
                    k[1] = temps;
                    ptrvec_push(arena, &kept, k);
                    temps = 0;
                    break;
                }
                case PRIME_ACT_WAIT_KEPT:
                    for (int j = 0; j < kept.count; ++j) {
                        long *k = kept.items[j];
                        if (k[0] == a->tag)
                            cur -= k[1], k[1] = 0;
                    }
                    break;
                case PRIME_ACT_ALLREDUCE:
                case PRIME_ACT_REDUCE_SCATTER:
                case PRIME_ACT_ALLGATHER: {
                    const Collective *c = ph->groups.items[a->arg];
                    int pos = 0;
                    while (c->group[pos] != d)
                        pos++;
                    s->pred_bytes[PRIME_BYTES_COLLECTIVE][d] +=
                        (long)sched_collective_bytes(a->op, c->elems, c->gsize, pos);
                    /* The all-gather receives into the tile itself. */
                    long scratch =
                        a->op == PRIME_ACT_ALLGATHER
                            ? 0
                            : (long)prime_collective_scratch((size_t)c->elems, c->gsize) *
                                  (long)sizeof(float);
                    if (cur + scratch > phase_peak)
                        phase_peak = cur + scratch;
                    break;
                }
                default:
                    break;
                }
                if (cur > phase_peak)
                    phase_peak = cur;
            }
            ph->peak[d] = phase_peak;
            if (phase_peak > peak)
                peak = phase_peak;
        }
        s->pred_peak[d] = peak;
    }
}
