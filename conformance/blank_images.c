/* distref conformance — blank images: the ReLU's derivative at exactly 0.
 *
 * Random data almost never puts a pre-activation exactly at 0, so a kernel
 * that treats a unit at 0 as active (TensorFlow's ReluGrad passes the
 * gradient only where features > 0) would pass every other case. Here a
 * third of the images are blank: with the biases initialized to zero,
 * every hidden unit of a blank image sits exactly at 0 in the first step,
 * and its gradient must not reach the hidden biases. The data set is a
 * small Fashion-MNIST-format pair of IDX files (uncompressed, which the
 * reader takes under the .gz names) written to a temporary
 * directory, trained as mlp_fashion_mnist (Adam, whose per-parameter
 * scaling turns any stray gradient into a full-size update).
 */
#include "conformance/conformance.h"
#include "distref/rng.h"

#include <stdlib.h>
#include <string.h>

#define SIDE 28

static void be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

/* One IDX pair: n images (every third one blank) and their labels. */
static bool write_pair(const char *dir, const char *prefix, uint32_t n, uint64_t seed)
{
    char path[1200];
    unsigned char head[16];
    FILE *f;
    bool ok;
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    if (!(f = fopen(path, "wb"))) return false;
    be32(head, 0x803); be32(head + 4, n); be32(head + 8, SIDE); be32(head + 12, SIDE);
    ok = fwrite(head, 1, 16, f) == 16;
    for (uint32_t i = 0; ok && i < n; i++) {
        unsigned char px[SIDE * SIDE];
        for (uint32_t q = 0; q < SIDE * SIDE; q++)
            px[q] = i % 3 == 1 ? 0 : (unsigned char)(dr_rng_uniform(seed, i, q) * 256.0f);
        ok = fwrite(px, 1, sizeof px, f) == sizeof px;
    }
    ok = fclose(f) == 0 && ok;
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    if (!ok || !(f = fopen(path, "wb"))) return false;
    be32(head, 0x801); be32(head + 4, n);
    ok = fwrite(head, 1, 8, f) == 8;
    for (uint32_t i = 0; ok && i < n; i++) {
        unsigned char label = (unsigned char)(dr_rng_uniform(seed, n + i, 0) * 10.0f) % 10;
        ok = fputc(label, f) != EOF;
    }
    return fclose(f) == 0 && ok;
}

int loss_curves_blank_images(results *r)
{
    static const struct { const char *name; int gpus; int replicas; } cs[] = {
        { "one_device", 0, 1 }, { "mirrored", 2, 2 }, { "mirrored", 3, 3 }, { "central_storage", 2, 2 },
    };
    char dir[] = "/tmp/distref_blank_XXXXXX", cmd[1200];
    dr_run_config c;
    outcome ref, got;
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    int fails = 0;
    if (!mkdtemp(dir)) return 1;
    if (!write_pair(dir, "train", 48, 21) || !write_pair(dir, "t10k", 12, 22)) {
        record(r, "loss_curves", NULL, 1, false, 0, "blank images: could not write the IDX files under %s", dir);
        fails = 1;
        goto out;
    }
    base_config(&c, 0, 16, DR_UNSET);
    strcpy(c.experiment, "mlp_fashion_mnist");
    snprintf(c.data_dir, sizeof c.data_dir, "%s", dir);
    c.epochs = 0; c.train_steps = 3;
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    for (size_t v = 0; v < nv; v++)
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
            bool pass;
            snprintf(c.variant, sizeof c.variant, "%s", ev[v]->name);
            strcpy(c.numerics, "exact");
            set_strategy(&c, cs[i].name, cs[i].gpus, NULL, 1);
            if (!supported(r, "loss_curves", &c, cs[i].replicas)) continue;
            run_case(&c, &got);
            pass = !ref.error[0] && outcome_same(&got, &ref);
            fails += !pass;
            record(r, "loss_curves", &c, cs[i].replicas, pass, got.seconds,
                   "blank images (hidden units exactly at 0), %s %s R=%d vs ref one_device%s%s", c.variant,
                   cs[i].name, cs[i].replicas, got.error[0] ? ": " : ref.error[0] ? ": ref: " : "",
                   got.error[0] ? got.error : ref.error);
            outcome_free(&got);
        }
    outcome_free(&ref);
out:
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
    return fails;
}
