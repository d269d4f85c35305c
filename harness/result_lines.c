/* distref harness — the result lines of train, evaluate and predict
 * (harness.h): each says only what its command computed. */
#include "distref/harness.h"

#include <string.h>

static unsigned bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* "loss=L (0xBITS) accuracy=A " (accuracy only for a classifier). */
static void loss_and_accuracy(FILE *out, const dr_run_result *r, bool accuracy)
{
    fprintf(out, "loss=%.9g (0x%08x) ", (double)r->loss, bits_of(r->loss));
    if (accuracy) fprintf(out, "accuracy=%.4f ", (double)r->accuracy);
}

void dr_report_train(FILE *out, const char *what, const dr_run_result *r, const char *model_dir, bool accuracy)
{
    if (r->already_complete) {
        fprintf(out, "%s: already complete at step %llu in %s; nothing run (its result: %s/summary.json)\n", what,
                (unsigned long long)r->steps, model_dir, model_dir);
        return;
    }
    if (r->resumed_step) {
        fprintf(out, "%s: resumed at step %llu from %s/ckpt.bin", what, (unsigned long long)r->resumed_step,
                model_dir);
        if (r->previous[0]) fprintf(out, "; steps up to %llu ran under %s (summary.json lists the segments)",
                                    (unsigned long long)r->resumed_step, r->previous);
        fputc('\n', out);
    }
    fprintf(out, "%s: steps=%llu examples=%llu ", what, (unsigned long long)r->steps,
            (unsigned long long)r->examples);
    loss_and_accuracy(out, r, accuracy);
    fprintf(out, "weights_sha256=%s (%.2f s; %s", r->weights_sha256, r->seconds, r->topology);
    if (r->emulated_seconds > 0) fprintf(out, "; emulated TPU time %.6g s", r->emulated_seconds);
    fprintf(out, ")\n");
}

void dr_report_evaluate(FILE *out, const char *what, const dr_run_result *r, bool accuracy)
{
    fprintf(out, "%s: checkpoint step=%llu examples=%llu ", what, (unsigned long long)r->steps,
            (unsigned long long)r->examples);
    loss_and_accuracy(out, r, accuracy);
    fprintf(out, "weights_sha256=%s (%.2f s)\n", r->weights_sha256, r->seconds);
}

void dr_report_predict(FILE *out, const dr_run_result *r, const char *model_dir)
{
    fprintf(out, "predict: checkpoint step=%llu examples=%llu predictions=%s/predictions.jsonl weights_sha256=%s\n",
            (unsigned long long)r->steps, (unsigned long long)r->examples, model_dir, r->weights_sha256);
}
