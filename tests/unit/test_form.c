/*
 * test_form.c — the rank-parametric program form (form.h) against the
 * per-rank schedule.
 *
 * For every matmul partition of the stdlib on 1-D meshes of 1 to 16
 * devices and square meshes of 2x2 and 4x4, and for every model of the
 * examples (which use the stdlib's transformer partitions), the test
 * expands each phase's form on every rank with the runtime's expansion
 * (prime_rank_phase) and checks that it gives exactly the schedule's
 * actions (peers, slots, tags, kernel tile origins, collective groups);
 * that layouts in form give every rank its own tiles and slots; and that
 * the regular partitions need no per-rank table at all.
 */
#define _POSIX_C_SOURCE 200809L
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "form.h"
#include "form_fold.h"
#include "pipeline.h"

static char tmpdir[64];

static int group_setup(void **state) {
    (void)state;
    strcpy(tmpdir, "/tmp/primec-test-form-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/model.prime", tmpdir);
    unlink(path);
    return rmdir(tmpdir);
}

static Compilation current;
static int active;

static int teardown(void **state) {
    (void)state;
    if (active)
        compilation_free(&current);
    active = 0;
    return 0;
}

/* Compiles `path` through "schedule"; returns the number of schedules. */
static int compile(const char *path) {
    compilation_init(&current, path, NULL);
    active = 1;
    current.sink.out = getenv("FORM_TEST_DIAG") ? stderr : NULL;
    assert_true(pipeline_run(&current, "schedule"));
    return current.schedules.count;
}

static int is_post_op(int op) {
    return op == PRIME_ACT_ALLOC || op == PRIME_ACT_SEND || op == PRIME_ACT_RECV ||
           op == PRIME_ACT_SEND_BOX || op == PRIME_ACT_RECV_BOX || op == PRIME_ACT_COPY_BOX;
}

/* canon holds, per rank, the same actions as ph, with only runs of posts
 * permuted, every allocation before the posts that use its slot, and
 * messages to one peer in their order. */
static void check_reordering(const PhaseSched *ph, const PhaseSched *canon, int ndev) {
    for (int r = 0; r < ndev; ++r) {
        int n = ph->nactions[r];
        for (int i = 0; i < n;) {
            int j = i;
            while (j < n && is_post_op(ph->actions[r][j].op))
                ++j;
            if (j == i) {
                assert_memory_equal(&canon->actions[r][i], &ph->actions[r][i], sizeof(PrimeAction));
                ++i;
                continue;
            }
            for (int k = i; k < j; ++k) {
                const PrimeAction *a = &canon->actions[r][k];
                int found = 0;
                for (int q = i; q < j && !found; ++q)
                    found = memcmp(a, &ph->actions[r][q], sizeof *a) == 0;
                assert_true(found);
                if (a->op != PRIME_ACT_ALLOC)
                    continue;
                for (int q = i; q < k; ++q) /* nothing uses the slot before it exists */
                    assert_false(canon->actions[r][q].tensor == a->tensor &&
                                 canon->actions[r][q].slot == a->slot);
            }
            for (int k = i; k < j; ++k)
                for (int q = k + 1; q < j; ++q) {
                    const PrimeAction *x = &canon->actions[r][k], *y = &canon->actions[r][q];
                    if (x->op != y->op || x->peer != y->peer || x->tag != y->tag ||
                        x->op == PRIME_ACT_ALLOC || x->op == PRIME_ACT_COPY_BOX)
                        continue;
                    /* Same peer and tag: the original order is kept. */
                    int px = -1, py = -1;
                    for (int z = i; z < j; ++z) {
                        if (px < 0 && memcmp(x, &ph->actions[r][z], sizeof *x) == 0)
                            px = z;
                        if (py < 0 && memcmp(y, &ph->actions[r][z], sizeof *y) == 0 && z != px)
                            py = z;
                    }
                    assert_true(px >= 0 && py >= 0 && px < py);
                }
            i = j;
        }
    }
}

/* The expansion of every phase in form equals the schedule on every
 * rank; returns the number of phases left as per-rank tables. */
static int check_schedule(const Schedule *s) {
    ScheduleForm *sf = form_build(current.arena, s);
    int ndev = s->model->mesh.ndev;
    for (int k = 0; k < s->phases.count; ++k) {
        const PhaseSched *ph = s->phases.items[k];
        const PhaseForm *pf = &sf->phases[k];
        if (pf->fallback)
            continue;
        /* A reordered form follows the canonical order of posts; check
         * that it is a reordering of each rank's runs of posts only. */
        if (pf->reordered) {
            check_reordering(ph, pf->sched, ndev);
            ph = pf->sched;
        } else {
            assert_ptr_equal(pf->sched, ph);
        }
        /* The program's form: tensors in its numbering, in which loops
         * over a layer's copies step. */
        PrimePhaseForm numbered = form_numbered(current.arena, sf, &pf->form);
        PrimePhase phase;
        memset(&phase, 0, sizeof phase);
        phase.form = &numbered;
        phase.offsets = pf->uses_offsets ? (const long(*)[8])ph->offsets : NULL;
        for (int r = 0; r < ndev; ++r) {
            PrimeRankPhase v;
            assert_int_equal(prime_rank_phase(&phase, r, &v), PRIME_OK);
            assert_int_equal(v.nactions, ph->nactions[r]);
            for (int i = 0; i < v.nactions; ++i) {
                const PrimeAction *want = &ph->actions[r][i], *got = &v.actions[i];
                assert_int_equal(got->op, want->op);
                int named = prime_action_has_tensor(want->op);
                assert_int_equal(got->tensor,
                                 named ? sf->tensor_number[want->tensor] : want->tensor);
                assert_int_equal(got->slot, want->slot);
                assert_int_equal(got->peer, want->peer);
                assert_int_equal(got->kind, want->kind);
                assert_int_equal(got->nin, want->nin);
                for (int x = 0; x < want->nin; ++x) {
                    assert_int_equal(got->in_tensor[x], sf->tensor_number[want->in_tensor[x]]);
                    assert_int_equal(got->in_slot[x], want->in_slot[x]);
                }
                if (want->op == PRIME_ACT_KERNEL && ph->offsets) {
                    assert_memory_equal(v.offsets[got->arg], ph->offsets[want->arg],
                                        sizeof(long[8]));
                } else if (want->op == PRIME_ACT_ALLREDUCE ||
                           want->op == PRIME_ACT_REDUCE_SCATTER ||
                           want->op == PRIME_ACT_ALLGATHER) {
                    const Collective *c = ph->groups.items[want->arg];
                    assert_int_equal(v.groups[got->arg].size, c->gsize);
                    assert_memory_equal(v.groups[got->arg].ranks, c->group,
                                        sizeof(int) * (size_t)c->gsize);
                } else {
                    assert_int_equal(got->arg, want->arg);
                    assert_int_equal(got->tag, want->tag);
                }
            }
            prime_rank_phase_release(&v);
        }
    }
    for (int t = 0; t < s->ntensors; ++t) {
        const PrimeLayoutForm *forms[2] = {sf->home[t], sf->final[t]};
        const Layout *lays[2] = {&s->home[t], &s->final[t]};
        for (int w = 0; w < 2; ++w) {
            if (!forms[w])
                continue;
            for (int r = 0; r < ndev; ++r) {
                int n = prime_layout_form_count(forms[w], &sf->mesh, r);
                assert_int_equal(n, lays[w]->count[r]);
                for (int i = 0; i < n; ++i) {
                    long tile;
                    int slot, found = 0;
                    prime_layout_form_tile(forms[w], &sf->mesh, r, i, &tile, &slot);
                    for (int j = 0; j < lays[w]->count[r]; ++j)
                        found |= lays[w]->tiles[r][j] == tile && lays[w]->slots[r][j] == slot;
                    assert_true(found);
                }
            }
        }
    }
    return sf->nfallback + sf->nlayout_fallback;
}

static void check_matmul(const char *partition, const char *mesh) {
    char path[128], src[512];
    snprintf(path, sizeof path, "%s/model.prime", tmpdir);
    snprintf(src, sizeof src,
             "model mm {\n    param m = 96, k = 48, n = 144;\n    mesh(%s);\n"
             "    input x[m, k];\n    weight w[k, n];\n    y = matmul(x, w) use %s;\n}\n",
             mesh, partition);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(src, f) >= 0);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(compile(path), 1);
    /* Every stdlib matmul partition is regular: no per-rank table. */
    assert_int_equal(check_schedule(current.schedules.items[0]), 0);
    compilation_free(&current);
    active = 0;
}

static void test_line_partitions(void **state) {
    (void)state;
    static const char *const parts[] = {"replicate", "data", "column", "row", "ring"};
    static const char *const meshes[] = {"d: 1", "d: 2", "d: 4", "d: 8", "d: 16"};
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; ++p)
        for (size_t m = 0; m < sizeof meshes / sizeof meshes[0]; ++m)
            check_matmul(parts[p], meshes[m]);
}

static void test_square_partitions(void **state) {
    (void)state;
    static const char *const parts[] = {"square", "square_skew"};
    static const char *const meshes[] = {"i: 2, j: 2", "i: 4, j: 4"};
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; ++p)
        for (size_t m = 0; m < sizeof meshes / sizeof meshes[0]; ++m)
            check_matmul(parts[p], meshes[m]);
}

/* Every model of an example: forms equal the schedule; the number of
 * phases left as tables is what explain reports (and, for the listed
 * examples, none: a run with pipeline stages splits its first phase and
 * its boundary phases by stages, docs/program-form.md, "Pipeline
 * stages"). */
static void check_example(const char *file, int regular) {
    char path[512];
    snprintf(path, sizeof path, "%s/examples/%s", PRIMEC_SOURCE_DIR, file);
    int n = compile(path);
    assert_true(n > 0);
    for (int i = 0; i < n; ++i) {
        const Schedule *s = current.schedules.items[i];
        int tables = check_schedule(s);
        if (regular && tables) {
            fprintf(stderr, "%s: %d phases or layouts as per-rank tables\n", s->model->name,
                    tables);
            fail();
        }
    }
    compilation_free(&current);
    active = 0;
}

static void test_examples(void **state) {
    (void)state;
    static const char *const files[] = {
        "matmul_column.prime", "matmul_data.prime",   "matmul_replicate.prime", "matmul_ring.prime",
        "matmul_row.prime",    "matmul_square.prime", "opt_layer.prime",        "opt_mlp.prime",
        "llama2_layer.prime",  "bloom_layer.prime",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; ++i)
        check_example(files[i], 1);
}

/* What a staged run's program holds at a number of layers. */
typedef struct Staged {
    int tables;      /* phases and layouts left as per-rank tables */
    int split;       /* phases split by slices (PrimePhaseForm.next) */
    size_t bytes;    /* of emitted C (unformatted) */
    int phases;      /* phase descriptors emitted */
    int rank_lists;  /* per-rank action lists emitted */
    int descriptors; /* tensor descriptors emitted */
} Staged;

static int count_of(const char *text, const char *what) {
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
        ++n;
    return n;
}

/* Compiles a run of opt_layer (or of `file`, NULL: the example) with
 * stages or micro-batches through "emit": every phase's form is checked
 * against the schedule on every rank (check_schedule), the tables left
 * are counted, and so is what the program text holds. */
static Staged staged_in(const char *file, const char *model, long layers) {
    char path[512];
    if (file)
        snprintf(path, sizeof path, "%s", file);
    else
        snprintf(path, sizeof path, "%s/examples/opt_layer.prime", PRIMEC_SOURCE_DIR);
    ParamOverride po = {"layers", 6, layers};
    compilation_init(&current, path, NULL);
    active = 1;
    current.model_name = model;
    current.nparams = 1;
    current.params = &po;
    current.sink.out = getenv("FORM_TEST_DIAG") ? stderr : NULL;
    assert_true(pipeline_run(&current, "emit"));
    assert_int_equal(current.schedules.count, 1);
    assert_int_equal(current.emitted.count, 1);
    const Schedule *s = current.schedules.items[0];
    int stages = s->model->nstages > 1;
    assert_true(stages || s->model->nmicro > 1);
    Staged out;
    memset(&out, 0, sizeof out);
    out.tables = check_schedule(s);
    int sliced = 0;
    ScheduleForm *sf = form_build(current.arena, s);
    for (int k = 0; k < s->phases.count; ++k) {
        sliced += !sf->phases[k].fallback && sf->phases[k].form.sliced;
        out.split += !sf->phases[k].fallback && sf->phases[k].next != NULL;
    }
    /* Most phases of a staged run run on one stage. */
    assert_true(!stages || sliced > s->phases.count / 2);
    const char *text = current.emitted.items[0];
    out.bytes = strlen(text);
    out.phases = count_of(text, "static const PrimePhase phase");
    out.rank_lists = count_of(text, "static const PrimeAction phase");
    const char *desc = strstr(text, "static const PrimeTensorDesc tensors[]");
    assert_non_null(desc);
    const char *desc_end = strstr(desc, "};");
    assert_non_null(desc_end);
    for (const char *p = strstr(desc, "{\""); p && p < desc_end; p = strstr(p + 1, "{\""))
        out.descriptors++;
    compilation_free(&current);
    active = 0;
    return out;
}

static Staged staged(const char *model, long layers) {
    return staged_in(NULL, model, layers);
}

/* A staged run's program does not grow with its layers: at 8 and 32
 * layers (4 and 16 a stage) it emits as many phases, action lists and
 * tensor descriptors, and as much C but for the digits of larger
 * numbers; no phase or layout is left as per-rank tables (the first
 * phase and the stage boundaries are split by stages); and at 2 layers
 * (one a stage, nothing to fold) the tables are as few. With
 * micro-batches, each micro-batch's copies fold too. */
static void test_staged(void **state) {
    (void)state;
    static const char *const models[] = {"opt_small_megatron_pp", "opt_small_megatron_pp_mb"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; ++i) {
        Staged two = staged(models[i], 2), eight = staged(models[i], 8),
               many = staged(models[i], 32);
        fprintf(stderr,
                "%s: C %zu / %zu / %zu bytes at 2 / 8 / 32 layers; phases %d / %d, action "
                "lists %d / %d, tensor descriptors %d / %d at 8 / 32; split phases %d\n",
                models[i], two.bytes, eight.bytes, many.bytes, eight.phases, many.phases,
                eight.rank_lists, many.rank_lists, eight.descriptors, many.descriptors,
                eight.split);
        assert_int_equal(two.tables, 0);
        assert_int_equal(eight.tables, 0);
        assert_int_equal(many.tables, 0);
        assert_true(eight.split > 0);
        assert_int_equal(eight.phases, many.phases);
        assert_int_equal(eight.rank_lists, many.rank_lists);
        assert_int_equal(eight.descriptors, many.descriptors);
        assert_true(many.bytes < eight.bytes + eight.bytes / 50);
    }
}

/* Micro-batches without stages: each micro-batch's copies of the layer
 * fold as well (Model.micro_layer_copies), so the program does not grow
 * with the layers either. */
static void test_microbatched(void **state) {
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/micro.prime", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "import \"%s/examples/opt_layer.prime\";\n"
            "plan megatron_mb extends megatron_dp {\n    microbatches b: 2;\n}\n"
            "run opt_small_megatron_mb = megatron_mb(R = 2, P = 2);\n",
            PRIMEC_SOURCE_DIR);
    assert_int_equal(fclose(f), 0);
    Staged eight = staged_in(path, "opt_small_megatron_mb", 8),
           many = staged_in(path, "opt_small_megatron_mb", 32);
    unlink(path);
    fprintf(stderr,
            "opt_small_megatron_mb: C %zu / %zu bytes at 8 / 32 layers; phases %d / %d, "
            "tensor descriptors %d / %d\n",
            eight.bytes, many.bytes, eight.phases, many.phases, eight.descriptors,
            many.descriptors);
    assert_int_equal(eight.tables, 0);
    assert_int_equal(many.tables, 0);
    assert_int_equal(eight.phases, many.phases);
    assert_int_equal(eight.rank_lists, many.rank_lists);
    assert_int_equal(eight.descriptors, many.descriptors);
    assert_true(many.bytes < eight.bytes + eight.bytes / 50);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_line_partitions, teardown),
        cmocka_unit_test_teardown(test_square_partitions, teardown),
        cmocka_unit_test_teardown(test_examples, teardown),
        cmocka_unit_test_teardown(test_staged, teardown),
        cmocka_unit_test_teardown(test_microbatched, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
