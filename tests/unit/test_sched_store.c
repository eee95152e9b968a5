/*
 * test_sched_store.c — the schedule's indexed stores and kept
 * accumulators (sched_machine.c, sched_accumulate.c) against a reference.
 *
 * A store indexes its tiles once it holds TILE_INDEX_MIN of them, and the
 * machine counts, per tile, the devices holding it; a device's kept
 * (retired) accumulators are indexed the same way. Lookups must return
 * exactly what a scan of the list returns (the first position holding the
 * tile, -1 for none), duplicates included, through adds, swap-removals,
 * clears and a save and restore of the machine; the holder counts must
 * equal a recount of every store. Random operations, checked after each.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"

#define NDEV 3
#define NTILES 97

static int scan(const Store *st, long tile) {
    for (int i = 0; i < st->count; ++i)
        if (st->items[i].tile == tile)
            return i;
    return -1;
}

/* Every lookup and every holder count of the machine's one tensor. */
static void check_machine(Builder *b) {
    int count[NTILES] = {0};
    for (int d = 0; d < NDEV; ++d) {
        const Store *st = store_of(b, 0, d);
        for (long t = -1; t <= NTILES; ++t)
            assert_int_equal(sched_store_find(st, t), scan(st, t));
        for (int i = 0; i < st->count; ++i)
            count[st->items[i].tile]++;
    }
    for (long t = 0; t < NTILES; ++t)
        assert_int_equal(sched_store_held_anywhere(store_of(b, 0, 0), t), count[t] > 0);
}

static void machine_setup(Builder *b, Schedule *s, SchedTensor *tensor, Arena *arena) {
    memset(b, 0, sizeof *b);
    memset(s, 0, sizeof *s);
    memset(tensor, 0, sizeof *tensor);
    tensor->ntiles = NTILES;
    s->tensors = tensor;
    s->ntensors = 1;
    b->arena = arena;
    b->scratch = arena;
    b->s = s;
    b->ndev = NDEV;
    b->tensor_cap = 1;
    sched_machine_room(b, &b->m);
    sched_machine_init(b);
}

static void test_store_matches_scan(void **state) {
    (void)state;
    Arena *arena = arena_create();
    Builder b;
    Schedule s;
    SchedTensor tensor;
    machine_setup(&b, &s, &tensor, arena);
    srand(7);
    MachineSave saved;
    int tensors[1] = {0}, have_save = 0;
    for (int op = 0; op < 20000; ++op) {
        int d = rand() % NDEV;
        Store *st = store_of(&b, 0, d);
        int what = rand() % 100;
        if (what < 55) {
            long tile = rand() % NTILES;
            /* Mostly tiles the device lacks; now and then a second copy. */
            if (scan(st, tile) < 0 || rand() % 50 == 0)
                sched_store_add(&b, st, tile, op % MAX_SLOTS);
        } else if (what < 95) {
            if (st->count)
                sched_store_remove(st, rand() % st->count);
        } else if (what < 97) {
            sched_store_clear(st);
        } else if (what < 99) {
            sched_machine_save(&b, &saved, tensors, 1);
            have_save = 1;
        } else if (have_save) {
            sched_machine_restore(&b, &saved);
            for (int e = 0; e < NDEV; ++e) {
                const Store *x = &saved.stores[0][e], *y = store_of(&b, 0, e);
                assert_int_equal(x->count, y->count);
                assert_memory_equal(x->items, y->items, sizeof(Held) * (size_t)x->count);
            }
        }
        check_machine(&b);
    }
    arena_destroy(arena);
}

static int retired_scan(const PtrVec *retired, long tile) {
    for (int i = 0; i < retired->count; ++i)
        if (((Acc *)retired->items[i])->tile == tile)
            return i;
    return -1;
}

static void test_retired_matches_scan(void **state) {
    (void)state;
    Arena *arena = arena_create();
    Builder b;
    memset(&b, 0, sizeof b);
    b.arena = arena;
    b.scratch = arena;
    b.ndev = 1;
    srand(11);
    /* Rounds of a fresh device; every fourth keeps a tile twice. */
    for (int round = 0; round < 40; ++round) {
        AccState as;
        memset(&as, 0, sizeof as);
        PtrVec retired = {0};
        TileIndex ix = {0};
        as.retired = &retired;
        as.retired_ix = &ix;
        for (int op = 0; op < 600; ++op) {
            if (rand() % 100 < 60) {
                long tile = rand() % 200;
                if (retired_scan(&retired, tile) >= 0 && (round % 4 != 3 || rand() % 20))
                    continue;
                Acc *a = ARENA_NEW(arena, Acc);
                a->tile = tile;
                sched_retired_push(&b, &as, 0, a);
            } else if (retired.count) {
                int k = rand() % retired.count;
                Acc *want = retired.items[k], *last = retired.items[retired.count - 1];
                assert_ptr_equal(sched_retired_take(&as, 0, k), want);
                if (k < retired.count)
                    assert_ptr_equal(retired.items[k], last);
            }
            for (long t = -1; t <= 200; ++t)
                assert_int_equal(sched_retired_find(&as, 0, t), retired_scan(&retired, t));
        }
    }
    arena_destroy(arena);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_matches_scan),
        cmocka_unit_test(test_retired_matches_scan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
