/*
 * sched_accumulate.c — accumulators of partial sums, coverage and the
 * all-reduces that complete them.
 *
 * An accumulator counts how often each reduction slice was added into
 * its output tile. At the end of a phase every output tile must have
 * received every slice equally often (else a double count or missed
 * voxels, reported at the DSI); the partial sums of a tile are split into
 * groups that each hold every slice once, and each group is all-reduced.
 */
#include "sched_internal.h"

long sched_red_id(const Builder *b, const AccState *as, int dev, long t) {
    long id = 0;
    for (int x = 0; x < as->nred_dims; ++x)
        id = id * b->st->nslices[as->red_dims[x]] + slice_fast(b, as->red_dims[x], dev, t);
    return id;
}

/* A fresh accumulator: one merged into another earlier in the run if
 * there is one (a phase whose accumulators travel makes one per device and
 * step), else new. red_step[r] is read only where red[r] is set. */
/* The spare accumulators whose reduction has nred slices (made empty on
 * first use): a run reuses those its reduction fits exactly. */
static PtrVec *acc_spare_of(Builder *b, long nred) {
    for (int i = 0; i < b->acc_spare.count; ++i) {
        AccSpare *sp = b->acc_spare.items[i];
        if (sp->nred == nred)
            return &sp->accs;
    }
    AccSpare *sp = ARENA_NEW(b->arena, AccSpare);
    sp->nred = nred;
    ptrvec_push(b->arena, &b->acc_spare, sp);
    return &sp->accs;
}

Acc *sched_acc_new(Builder *b, AccState *as, int dev, long tile, int slot) {
    Acc *a = NULL;
    if (as->pool.count > 0)
        a = as->pool.items[--as->pool.count];
    if (!a) {
        PtrVec *spare = acc_spare_of(b, as->nred);
        if (spare->count > 0)
            a = spare->items[--spare->count];
    }
    if (a) {
        for (long k = 0; k < a->nset; ++k)
            a->red[a->set[k]] = 0;
    } else {
        a = ARENA_NEW(b->arena, Acc);
        a->nred = as->nred;
        a->red = arena_alloc(b->arena, (size_t)as->nred);
        a->red_step = ARENA_ARRAY_UNINIT(b->arena, long, as->nred);
        a->set = ARENA_ARRAY_UNINIT(b->arena, long, as->nred);
    }
    a->nset = 0;
    a->dev = dev;
    a->tile = tile;
    a->slot = slot;
    a->first_dup = -1;
    a->dup_steps[0] = a->dup_steps[1] = 0;
    return a;
}

/* After a run: its accumulators (kept on devices or merged) are spare for
 * the next run; nothing refers to them any more. */
void sched_acc_release(Builder *b, AccState *as) {
    PtrVec *spare = acc_spare_of(b, as->nred);
    for (int d = 0; d < b->ndev; ++d)
        for (int i = 0; i < as->retired[d].count; ++i)
            ptrvec_push(b->arena, spare, as->retired[d].items[i]);
    for (int i = 0; i < as->pool.count; ++i)
        ptrvec_push(b->arena, spare, as->pool.items[i]);
    as->pool.count = 0;
}

void sched_acc_add(Acc *a, long r, long step) {
    if (a->red[r] && a->first_dup < 0) {
        a->first_dup = r;
        a->dup_steps[0] = a->red_step[r];
        a->dup_steps[1] = step;
    }
    if (!a->red[r]) {
        a->red_step[r] = step;
        a->set[a->nset++] = r;
    }
    if (a->red[r] < 255)
        a->red[r]++;
}

/* Merges what an arriving accumulator carried into the local partial.
 * The result is as if every slice were visited in order: counts add
 * (saturating), a slice's first step is into's where both hold it, and
 * the first double count is into's own, else the smallest slice both
 * hold, else from's. The work is proportional to the smaller of the two
 * (a partial started this step merges with a travelling accumulator in
 * one step): the larger one's arrays receive the smaller, and when that
 * is from's, into and from swap arrays (from is dead afterwards). */
void sched_acc_merge(Acc *into, Acc *from) {
    Acc *small = into->nset <= from->nset ? into : from;
    Acc *big = small == into ? from : into;
    long dup = -1, dup0 = 0, dup1 = 0;
    if (into->first_dup < 0) {
        for (long k = 0; k < small->nset; ++k) {
            long r = small->set[k];
            if (big->red[r] && (dup < 0 || r < dup))
                dup = r;
        }
        if (dup >= 0) {
            dup0 = from->red_step[dup];
            dup1 = into->red_step[dup];
        }
    }
    for (long k = 0; k < small->nset; ++k) {
        long r = small->set[k];
        if (!big->red[r]) {
            big->red_step[r] = small->red_step[r];
            big->set[big->nset++] = r;
        } else if (small == into) {
            big->red_step[r] = into->red_step[r];
        }
        unsigned v = (unsigned)big->red[r] + small->red[r];
        big->red[r] = (unsigned char)(v > 255 ? 255 : v);
    }
    if (into->first_dup < 0) {
        if (dup >= 0) {
            into->first_dup = dup;
            into->dup_steps[0] = dup0;
            into->dup_steps[1] = dup1;
        } else if (from->first_dup >= 0) {
            into->first_dup = from->first_dup;
            into->dup_steps[0] = from->dup_steps[0];
            into->dup_steps[1] = from->dup_steps[1];
        }
    }
    if (big == from) {
        unsigned char *red = into->red;
        long *red_step = into->red_step, *set = into->set, nset = into->nset;
        into->red = from->red;
        into->red_step = from->red_step;
        into->set = from->set;
        into->nset = from->nset;
        from->red = red;
        from->red_step = red_step;
        from->set = set;
        from->nset = nset;
    }
}

/* Can the accumulator of src travel to dst for the next step? Only if
 * src moves off the tile and dst's next contribution is a reduction
 * slice the accumulator lacks (else it would be counted twice: dst keeps
 * its own accumulator, a replica). */
int sched_acc_available(Builder *b, int tensor, int src, int dst, long tile, void *ctx) {
    (void)tensor;
    AccState *as = ctx;
    const Acc *a = as->active[src];
    if (!a || a->tile != tile || as->next_tile[src] == tile || as->claimed[src])
        return 0;
    return !a->red[sched_red_id(b, as, dst, op_step(b, b->ph, as->step + 1))];
}

int sched_retired_find(const AccState *as, int dev, long tile) {
    const TileIndex *ix = &as->retired_ix[dev];
    if (ix->cap && !ix->dup)
        return tile_index_find(ix, tile);
    for (int i = 0; i < as->retired[dev].count; ++i)
        if (((Acc *)as->retired[dev].items[i])->tile == tile)
            return i;
    return -1;
}

/* Keeps an accumulator on its device (indexed by tile once the device
 * keeps many). */
void sched_retired_push(Builder *b, AccState *as, int dev, Acc *a) {
    PtrVec *v = &as->retired[dev];
    TileIndex *ix = &as->retired_ix[dev];
    ptrvec_push(b->scratch, v, a);
    if (ix->cap) {
        tile_index_insert(b->scratch, ix, a->tile, v->count - 1);
    } else if (v->count >= TILE_INDEX_MIN) {
        for (int i = 0; i < v->count; ++i)
            tile_index_insert(b->scratch, ix, ((Acc *)v->items[i])->tile, i);
    }
}

/* Takes the kept accumulator at `index` off its device's list (the last
 * one takes its place). */
Acc *sched_retired_take(AccState *as, int dev, int index) {
    PtrVec *v = &as->retired[dev];
    TileIndex *ix = &as->retired_ix[dev];
    Acc *a = v->items[index];
    if (ix->cap) {
        tile_index_erase(ix, a->tile);
        if (index != v->count - 1)
            tile_index_move(ix, ((Acc *)v->items[v->count - 1])->tile, index);
    }
    v->items[index] = v->items[--v->count];
    return a;
}

static const char *red_name(Builder *b, const AccState *as, long r) {
    char buf[256];
    size_t n = 0;
    buf[0] = 0;
    long rest = r;
    long vals[IR_MAX_DIMS];
    for (int x = as->nred_dims - 1; x >= 0; --x) {
        vals[x] = rest % b->st->nslices[as->red_dims[x]];
        rest /= b->st->nslices[as->red_dims[x]];
    }
    for (int x = 0; x < as->nred_dims && n < sizeof buf - 40; ++x)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s=%ld", x ? ", " : "",
                              b->inst->op->dims[as->red_dims[x]], vals[x]);
    return arena_strdup(b->arena, buf);
}

/* The DSI of a reduction dimension, or failing that the partition, for
 * pointing at in diagnostics. */
static Span red_span(const Builder *b, const AccState *as) {
    const Partition *p = b->inst->partition;
    for (int x = 0; x < as->nred_dims; ++x)
        if (p->dsi[as->red_dims[x]])
            return p->dsi[as->red_dims[x]]->span;
    return p->decl->name.span;
}

static void phase_error_note(Builder *b) {
    diag_note(b->sink, b->inst->use_span, "partition '%s' applied to '%s' here",
              b->inst->partition->name, b->inst->name);
}

/* Emits an all-reduce in phase ph: every member, in group order. */
void sched_emit_collective(Builder *b, PhaseSched *ph, Collective *col) {
    int tag = b->next_tag++;
    if (!b->dry) {
        ptrvec_push(b->arena, &ph->collectives, col);
        ptrvec_push(b->arena, &ph->groups, col);
    }
    int gindex = ph->groups.count - 1;
    col->phase = ph;
    col->action = ARENA_ARRAY(b->dry ? b->scratch : b->arena, int, col->gsize);
    for (int p = 0; p < col->gsize; ++p) {
        col->action[p] = ph->nactions[col->group[p]];
        PrimeAction *a = sched_act(b, col->group[p], PRIME_ACT_ALLREDUCE);
        a->tensor = col->tensor;
        a->slot = col->slots[p];
        a->tag = tag;
        a->arg = gindex;
        a->kind = b->s->tensors[col->tensor].combine;
    }
    if (!b->dry && b->reduced) {
        if (b->reduced_phase[col->tensor] != b->phase_index) {
            b->reduced[col->tensor].count = 0;
            b->reduced_phase[col->tensor] = b->phase_index;
        }
        ptrvec_push(b->arena, &b->reduced[col->tensor], col);
    }
}

/* All-reduces each group of a tile's partial sums (group_of[i]: the group
 * of accumulator i, c groups) over the devices that hold them, or defers
 * it to after the gradient's last contribution. */
static void all_reduce_groups(Builder *b, PhaseSched *ph, long tile, const PtrVec *accs,
                              const int *group_of, long c, unsigned joined) {
    const SchedTensor *out = &b->s->tensors[ph->out.tensor];
    int nacc = accs->count;
    for (long g = 0; g < c; ++g) {
        int members[4096];
        int slots[4096];
        int gs = 0;
        for (int i = 0; i < nacc && gs < 4096; ++i) {
            if (group_of[i] == g) {
                const Acc *a = accs->items[i];
                members[gs] = a->dev;
                slots[gs] = a->slot;
                gs++;
            }
        }
        /* joined: one replica's group of a group over the replicas of
         * these replica axes (sched_orbit.c), an all-reduce even of one
         * member here. */
        int whole = gs;
        for (int k = 0; joined && k < b->orbit->n; ++k)
            if (joined & (1u << k))
                whole *= b->orbit->sizes[k];
        if (whole < 2)
            continue;
        /* Ring order = rank order, so every member derives the same ring. */
        for (int x = 1; x < gs; ++x)
            for (int y = x; y > 0 && members[y - 1] > members[y]; --y) {
                int tm = members[y], ts = slots[y];
                members[y] = members[y - 1];
                slots[y] = slots[y - 1];
                members[y - 1] = tm;
                slots[y - 1] = ts;
            }
        /* A trial run's collectives are dropped with it. */
        Arena *ca = b->dry ? b->scratch : b->arena;
        Collective *col = ARENA_NEW(ca, Collective);
        col->tensor = ph->out.tensor;
        col->tile = tile;
        col->gsize = gs;
        col->group = ARENA_ARRAY(ca, int, gs);
        col->slots = ARENA_ARRAY(ca, int, gs);
        memcpy(col->group, members, sizeof(int) * (size_t)gs);
        memcpy(col->slots, slots, sizeof(int) * (size_t)gs);
        col->elems = out->tile_elems;
        col->orbit_gsize = joined ? whole : 0;
        col->orbit_join = (int)joined;
        for (int p = 0; p < whole; ++p)
            col->bytes += (long)prime_allreduce_bytes((size_t)col->elems, whole, p);
        if (b->defer) {
            if (!b->dry)
                ptrvec_push(b->arena, &b->deferred, col);
        } else {
            sched_emit_collective(b, ph, col);
        }
    }
}

/* Checks coverage of the output and all-reduces partial sums. */
void sched_finish_accumulators(Builder *b, PhaseSched *ph, AccState *as) {
    const SchedTensor *out = &b->s->tensors[ph->out.tensor];
    PtrVec *by_tile = ARENA_ARRAY(b->scratch, PtrVec, out->ntiles);
    for (int d = 0; d < b->ndev; ++d) {
        for (int i = 0; i < as->retired[d].count; ++i) {
            Acc *a = as->retired[d].items[i];
            if (a->first_dup >= 0 && !b->failed) {
                if (!b->dry) {
                    diag_error(b->sink, red_span(b, as),
                               "%s phase double counts: reduction slice (%s) is added twice into "
                               "tile %s of '%s' on device %d (steps %ld and %ld)",
                               phase_name(ph->kind), red_name(b, as, a->first_dup),
                               sched_tile_name(b->arena, b->s, ph->out.tensor, a->tile), out->name,
                               d, a->dup_steps[0], a->dup_steps[1]);
                    phase_error_note(b);
                }
                b->failed = 1;
            }
            ptrvec_push(b->scratch, &by_tile[a->tile], a);
        }
    }
    if (b->failed)
        return;
    /* One replica's simulation (sched_orbit.c): the partial sums of a tile
     * unsplit over a replica axis whose reduction is split over it are
     * summed over that axis's replicas. */
    unsigned joined = 0;
    if (b->orbit)
        for (int x = 0; x < as->nred_dims; ++x) {
            int k = b->orbit->dim_split[(long)ph->inst * IR_MAX_DIMS + as->red_dims[x]];
            if (k && !(b->orbit->tensor_split[out->model_tensor] & (1u << (k - 1))))
                joined |= 1u << (k - 1);
        }
    long replication = 0;
    long *counts = ARENA_ARRAY(b->scratch, long, as->nred);
    for (long tile = 0; tile < out->ntiles; ++tile) {
        PtrVec *accs = &by_tile[tile];
        if (accs->count == 0) {
            if (!b->dry) {
                diag_error(b->sink, b->inst->partition->decl->name.span,
                           "%s phase misses tile %s of '%s': no device computes it",
                           phase_name(ph->kind),
                           sched_tile_name(b->arena, b->s, ph->out.tensor, tile), out->name);
                phase_error_note(b);
            }
            b->failed = 1;
            return;
        }
        /* An accumulator's slices with a count are its set (Acc.set):
         * the sums and the grouping below read those alone. */
        memset(counts, 0, sizeof(long) * (size_t)as->nred);
        for (int i = 0; i < accs->count; ++i) {
            const Acc *a = accs->items[i];
            for (long k = 0; k < a->nset; ++k)
                counts[a->set[k]] += a->red[a->set[k]];
        }
        long c = counts[0];
        for (long r = 0; r < as->nred; ++r) {
            if (counts[r] == 0 || counts[r] != c) {
                long missing = r;
                if (counts[r] != 0)
                    for (long q = 0; q < as->nred; ++q)
                        if (counts[q] < c)
                            missing = q;
                if (!b->dry) {
                    diag_error(b->sink, red_span(b, as),
                               "%s phase misses voxels: tile %s of '%s' never receives reduction "
                               "slice (%s)%s",
                               phase_name(ph->kind),
                               sched_tile_name(b->arena, b->s, ph->out.tensor, tile), out->name,
                               red_name(b, as, missing),
                               counts[r] != 0 ? " as often as the others" : "");
                    phase_error_note(b);
                }
                b->failed = 1;
                return;
            }
        }
        if (c > replication)
            replication = c;
        /* Group partial sums: each group receives every slice once. */
        int nacc = accs->count;
        int *group_of = ARENA_ARRAY(b->scratch, int, nacc);
        unsigned char **gred = ARENA_ARRAY(b->scratch, unsigned char *, c);
        for (long g = 0; g < c; ++g)
            gred[g] = arena_alloc(b->scratch, (size_t)as->nred);
        for (int i = 0; i < nacc; ++i) {
            const Acc *a = accs->items[i];
            group_of[i] = -1;
            for (long g = 0; g < c && group_of[i] < 0; ++g) {
                int clash = 0;
                for (long k = 0; k < a->nset && !clash; ++k)
                    clash = gred[g][a->set[k]] != 0;
                if (!clash) {
                    group_of[i] = (int)g;
                    for (long k = 0; k < a->nset; ++k)
                        gred[g][a->set[k]] =
                            (unsigned char)(gred[g][a->set[k]] | a->red[a->set[k]]);
                }
            }
            if (group_of[i] < 0) {
                if (!b->dry) {
                    diag_error(b->sink, red_span(b, as),
                               "%s phase double counts: the partial sums of tile %s of '%s' cannot "
                               "be split into complete sums",
                               phase_name(ph->kind),
                               sched_tile_name(b->arena, b->s, ph->out.tensor, tile), out->name);
                    phase_error_note(b);
                }
                b->failed = 1;
                return;
            }
        }
        all_reduce_groups(b, ph, tile, accs, group_of, c, joined);
    }
    ph->replication = replication;
}
