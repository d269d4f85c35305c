/* distref fuzzing — `--dropout_masks=FILE` (core/dropout_masks.c).
 *
 * Feeds: the input as a masks file, in memory to dr_dropout_masks_parse and
 * written to a scratch file to dr_dropout_masks_load (the flag's path: every
 * refusal DR_EUSAGE), then what parsed to dr_dropout_masks_check against
 * cnn_synthetic (one Dropout layer of 72 units) at the file's own rows and
 * steps, and one more step than it has.
 * Checks: no crash, UB or leak; parse and load agree; on success, what
 * dropout_masks.h promises: the file is exactly header + units + steps x
 * step_bytes long, every mask byte 0 or 1, and, once checked, every cell of
 * the first and last step readable through dr_dropout_masks_keep (ASan
 * checks the reads); a file with fewer steps than the run is refused.
 */
#include "distref/dropout_masks.h"
#include "distref/train.h"
#include "fuzz/fuzz_common.h"

static volatile uint32_t sink;     /* volatile: the reads below must happen */

static void checked(dr_dropout_masks *mk, const dr_model_spec *m)
{
    dr_err err = { 0, "" };
    if (dr_dropout_masks_check(mk, m, mk->rows, (uint64_t)mk->steps + 1, "in.masks", &err) == DR_OK)
        __builtin_trap();   /* more steps than the file has */
    if (dr_dropout_masks_check(mk, m, mk->rows, mk->steps, "in.masks", &err) != DR_OK)
        return;
    for (uint32_t l = 0; l < m->nlayers; l++) {
        if (m->layer[l].kind != DR_LAYER_DROPOUT)
            continue;
        for (uint64_t s = 1; s <= mk->steps; s += mk->steps > 1 ? mk->steps - 1 : 1)
            for (uint32_t r = 0; r < mk->rows; r++)
                for (uint32_t u = 0; u < m->layer[l].out; u++)
                    sink += dr_dropout_masks_keep(mk, s, l, r, u);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static dr_experiment exp;
    static int have_exp;
    const char *dir = fz_dir("dropout_masks");
    char path[512];
    dr_dropout_masks a, b;
    dr_err err = { 0, "" };
    int ra, rb;
    if (!have_exp) {
        if (dr_experiment_lookup("cnn_synthetic", &exp, &err) != DR_OK)
            __builtin_trap();
        have_exp = 1;
    }
    ra = dr_dropout_masks_parse(data, size, "in.masks", &a, &err);
    if (ra != DR_OK && a.keep != NULL)
        __builtin_trap();                       /* freed on error */
    if (ra == DR_OK) {
        uint64_t want = DR_DROPOUT_MASKS_HEADER + 4ull * a.layers + a.step_bytes * a.steps;
        if (want != size || a.layers < 1 || a.layers > DR_MAX_LAYERS || a.keep == NULL)
            __builtin_trap();
        for (uint64_t i = 0; i < a.step_bytes * a.steps; i++)
            if (a.keep[i] > 1)
                __builtin_trap();
        checked(&a, &exp.model);
    }
    if (dir != NULL && fz_write(dir, "in.masks", data, size) == 0) {
        snprintf(path, sizeof path, "%s/in.masks", dir);
        rb = dr_dropout_masks_load(path, &b, &err);
        if ((rb == DR_OK) != (ra == DR_OK) || (rb != DR_OK && rb != DR_EUSAGE && rb != DR_ENOMEM))
            __builtin_trap();                   /* the flag's loader: parse's verdict, as a usage error */
        if (rb == DR_OK && memcmp(a.keep, b.keep, (size_t)(a.step_bytes * a.steps)) != 0)
            __builtin_trap();
        dr_dropout_masks_free(&b);
    }
    if (ra == DR_OK)
        dr_dropout_masks_free(&a);
    return 0;
}
