/* distref conformance — suites 4 and 5: reductions and checkpoints. */
#include "conformance/conformance.h"
#include "distref/comm.h"
#include "distref/engine.h"
#include "distref/rng.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* ---- 4. reductions ------------------------------------------------------- */

/* R random accumulator arrays (sums and products across the exponent range). */
static dr_acc **random_shares(uint32_t R, size_t n, uint64_t seed)
{
    dr_acc **a = calloc(R, sizeof *a);
    for (uint32_t r = 0; a && r < R; r++) {
        a[r] = calloc(n, sizeof **a);
        for (size_t i = 0; a[r] && i < n; i++) {
            float x = (dr_rng_uniform(seed, r, 3 * i) - 0.5f) * (float)(1u << (i % 20));
            float y = dr_rng_uniform(seed, r, 3 * i + 1) * 1e-3f;
            dr_acc_add(&a[r][i], x);
            dr_acc_add_prod(&a[r][i], x, y);
        }
    }
    return a;
}

static void free_shares(dr_acc **a, uint32_t R)
{
    for (uint32_t r = 0; a && r < R; r++) free(a[r]);
    free(a);
}

/* Every replica must end with the serial total, whatever the algorithm,
 * packing and thread count. */
static int allreduce_matrix(results *r)
{
    static const uint32_t reps[] = { 2, 3, 5, 8 };
    static const char *const algs[] = { "nccl", "hierarchical_copy", NULL };
    const size_t n = 1003, tensors[2] = { 1000, 3 };
    int fails = 0;
    for (size_t i = 0; i < sizeof reps / sizeof reps[0]; i++) {
        uint32_t R = reps[i], bad = 0, cases = 0;
        dr_acc **src = random_shares(R, n, 11 + R), *total = calloc(n, sizeof *total);
        for (uint32_t q = 0; q < R; q++) for (size_t k = 0; k < n; k++) dr_acc_merge(&total[k], &src[q][k]);
        for (size_t a = 0; a < 3; a++) {
            for (int packs = 0; packs <= 3; packs += 3) {
                for (int threads = 1; threads <= 4; threads *= 2) {
                    dr_strategy s;
                    dr_strategy_spec spec;
                    dr_err err;
                    dr_acc **work = random_shares(R, n, 11 + R);
                    dr_get_distribution_strategy("mirrored", (int)R, algs[a], packs, NULL, &spec, &err);
                    if (!algs[a]) spec.cross_device_op = DR_XDEV_REDUCTION_TO_ONE_DEVICE;
                    dr_comm_config cc;
                    dr_comm *ep[1];
                    uint32_t neps = 0;
                    dr_strategy_create(&spec, NULL, &s, &err);
                    omp_set_num_threads(threads);
                    memset(&cc, 0, sizeof cc);
                    cc.num_ranks = 1;
                    cc.local_replicas = R;
                    cc.alg = a == 0 ? DR_COMM_RING : a == 1 ? DR_COMM_HIERARCHICAL : DR_COMM_ONE_DEVICE;
                    cc.num_packs = spec.num_packs;
                    cc.tensor_len = tensors;
                    cc.ntensors = 2;
                    cc.strategy = &s;
                    if (dr_comm_threads()->open(&cc, ep, &neps, &err) == DR_OK) {
                        dr_comm_threads()->all_reduce(ep[0], DR_FORM_ACC, (void *const *)work, n, &err);
                        dr_comm_threads()->close(ep, neps);
                    } else bad++;
                    for (uint32_t q = 0; q < R; q++)
                        for (size_t k = 0; k < n; k++) bad += !dr_acc_equal(&work[q][k], &total[k]);
                    cases++;
                    free_shares(work, R);
                }
            }
        }
        omp_set_num_threads(omp_get_num_procs());
        fails += bad != 0;
        record(r, "reductions", NULL, (int)R, bad == 0, 0, "threads comm all-reduce R=%u: %u algorithm/packing/thread "
               "combinations vs serial merge (%u accumulators differ)", R, cases, bad);
        free(total);
        free_shares(src, R);
    }
    return fails;
}

/* The gradient reduction inside one training step, for every R and
 * algorithm: the updated weights must be one_device's. */
static int step_reduction(results *r)
{
    static const struct { int R; const char *alg; int packs; } cs[] = {
        { 2, "nccl", 1 }, { 3, "hierarchical_copy", 2 }, { 4, NULL, 1 }, { 8, "nccl", 0 },
    };
    dr_run_config c;
    outcome ref, got;
    int fails = 0;
    base_config(&c, 63, 20, 1e-3);
    c.epochs = 0; c.train_steps = 1;
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        bool pass;
        strcpy(c.variant, "openmp");
        set_strategy(&c, "mirrored", cs[i].R, cs[i].alg, cs[i].packs);
        run_case(&c, &got);
        pass = !got.error[0] && strcmp(got.sha, ref.sha) == 0 && got.loss_bits[0] == ref.loss_bits[0];
        fails += !pass;
        record(r, "reductions", &c, cs[i].R, pass, got.seconds, "one step's gradient all-reduce, openmp R=%d alg=%s packs=%d",
               cs[i].R, cs[i].alg ? cs[i].alg : "default", cs[i].packs);
        outcome_free(&got);
    }
    outcome_free(&ref);
    return fails;
}

/* The exact sum of 10^6 floats split over threads in any way. */
static int threaded_sum(results *r)
{
    const size_t n = 1000000;
    float *x = malloc(n * sizeof *x);
    uint32_t bad = 0;
    float want;
    if (!x) return 1;
    for (size_t i = 0; i < n; i++) x[i] = (dr_rng_uniform(5, 0, i) - 0.5f) * (float)(1u << (i % 24));
    want = dr_sum_f32(x, n);
    for (int threads = 1; threads <= 8; threads++) {
        dr_acc total;
        dr_acc_init(&total);
        #pragma omp parallel num_threads(threads)
        {
            dr_acc part;
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            size_t lo = n * (size_t)t / (size_t)nt, hi = n * (size_t)(t + 1) / (size_t)nt;
            dr_acc_init(&part);
            dr_acc_add_sum(&part, x + lo, hi - lo);
            #pragma omp critical
            dr_acc_merge(&total, &part);
        }
        bad += dr_acc_round(&total) != want;
    }
    free(x);
    record(r, "reductions", NULL, 1, bad == 0, 0, "exact sum of 10^6 floats over 1..8 threads, any merge order (%u differ)", bad);
    return bad != 0;
}

int suite_reductions(results *r)
{
    int fails = step_reduction(r);
    if (r->fault) return fails;     /* the kernels below do not depend on a training fault */
    return fails + allreduce_matrix(r) + threaded_sum(r);
}

/* ---- 5. checkpoints ------------------------------------------------------ */

int suite_checkpoints(results *r)
{
    static const struct { const char *v1, *s1; int g1; const char *v2, *s2; int g2; } pairs[] = {
        { "ref", "mirrored", 4, "openmp", "one_device", 0 },
        { "openmp", "central_storage", 2, "ref", "mirrored", 3 },
        { "openmp", "mirrored", 8, "openmp", "mirrored", 2 },
        { "ref", "one_device", 0, "openmp", "mirrored", 5 },
    };
    dr_run_config c;
    outcome ref, got;
    int fails = 0;
    base_config(&c, 50, 20, 1e-3);        /* 3 steps per epoch: resuming crosses an epoch */
    c.epochs = 0; c.train_steps = 7;
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        char dir[] = "/tmp/distref_ckpt_XXXXXX", cmd[1200];
        bool pass;
        if (!mkdtemp(dir)) return fails + 1;
        base_config(&c, 50, 20, 1e-3);
        c.epochs = 0; c.train_steps = 4;
        snprintf(c.model_dir, sizeof c.model_dir, "%s", dir);
        strcpy(c.variant, pairs[i].v1);
        set_strategy(&c, pairs[i].s1, pairs[i].g1, NULL, 1);
        run_case(&c, &got);
        outcome_free(&got);
        c.train_steps = 7;
        strcpy(c.variant, pairs[i].v2);
        set_strategy(&c, pairs[i].s2, pairs[i].g2, NULL, 1);
        run_case(&c, &got);
        pass = outcome_same(&got, &ref);
        fails += !pass;
        record(r, "checkpoints", &c, pairs[i].g2 ? pairs[i].g2 : 1, pass, got.seconds,
               "4 steps %s %s (%d GPUs), resumed to 7 under %s %s (%d GPUs)%s%s", pairs[i].v1, pairs[i].s1,
               pairs[i].g1, pairs[i].v2, pairs[i].s2, pairs[i].g2, got.error[0] ? ": " : "", got.error);
        outcome_free(&got);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
    }
    outcome_free(&ref);
    return fails;
}
