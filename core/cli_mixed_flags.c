/* distref core — bin/distref's mixed-precision flags: --dtype_policy (and
 * Model Garden's --dtype), --loss_scale, --mixed_reduction (distref/loss_scale.h,
 * docs/TRAINING_FEATURES.md "Mixed precision"). */
#include "distref/cli_flags.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool seen(const dr_flag *f, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(f[i].name, name) == 0) return f[i].seen;
    return false;
}

static int policy(const dr_cli_flags *c, const dr_flag *f, int n, dr_dtype *out, dr_err *err)
{
    static const struct { const char *policy, *dtype; dr_dtype t; } k[] = {
        { "float32", "fp32", DR_DTYPE_F32 }, { "mixed_float16", "fp16", DR_DTYPE_F16 },
        { "mixed_bfloat16", "bf16", DR_DTYPE_BF16 },
    };
    int ip = -1, id = -1;
    for (int i = 0; i < 3; i++) {
        if (strcmp(c->dtype_policy, k[i].policy) == 0) ip = i;
        if (strcmp(c->dtype, k[i].dtype) == 0) id = i;
    }
    if (ip < 0)
        return dr_fail(err, DR_EUSAGE, "--dtype_policy=%s: expected float32, mixed_float16 or mixed_bfloat16",
                       c->dtype_policy);
    if (seen(f, n, "dtype")) {
        if (id < 0) return dr_fail(err, DR_EUSAGE, "--dtype=%s: expected fp32, fp16 or bf16", c->dtype);
        if (seen(f, n, "dtype_policy") && id != ip)
            return dr_fail(err, DR_EUSAGE, "--dtype=%s and --dtype_policy=%s disagree; give one of them",
                           c->dtype, c->dtype_policy);
        ip = id;
    }
    *out = k[ip].t;
    return DR_OK;
}

static int loss_scale(const dr_cli_flags *c, const dr_flag *f, int n, dr_mixed_config *m, dr_err *err)
{
    char *end = NULL;
    double v;
    m->loss_scale = m->compute == DR_DTYPE_F16 ? DR_LOSS_SCALE_DYNAMIC : DR_LOSS_SCALE_NONE;
    if (!seen(f, n, "loss_scale")) return DR_OK;
    if (m->compute == DR_DTYPE_F32)
        return dr_fail(err, DR_EUSAGE, "--loss_scale applies to a mixed policy (--dtype_policy=mixed_float16 or "
                       "mixed_bfloat16); the policy is float32");
    if (strcmp(c->loss_scale, "dynamic") == 0) { m->loss_scale = DR_LOSS_SCALE_DYNAMIC; return DR_OK; }
    {   /* dynamic:X, Keras's initial_scale */
        bool dyn = strncmp(c->loss_scale, "dynamic:", 8) == 0;
        const char *num = c->loss_scale + (dyn ? 8 : 0);
        errno = 0;
        v = strtod(num, &end);
        if (end == num || *end || errno || !(v > 0) || !isfinite((float)v) || !((float)v > 0))
            return dr_fail(err, DR_EUSAGE, "--loss_scale=%s: expected dynamic, dynamic:<initial scale> or a finite "
                           "float > 0", c->loss_scale);
        m->loss_scale = dyn ? DR_LOSS_SCALE_DYNAMIC : DR_LOSS_SCALE_FIXED;
    }
    m->fixed_scale = (float)v;
    return DR_OK;
}

int dr_cli_flags_mixed(const dr_cli_flags *c, const dr_flag *f, int n, dr_run_config *cfg, dr_err *err)
{
    dr_mixed_config *m = &cfg->mixed;
    int rc;
    memset(m, 0, sizeof *m);
    if ((rc = policy(c, f, n, &m->compute, err)) || (rc = loss_scale(c, f, n, m, err))) return rc;
    if (strcmp(c->mixed_reduction, "exact") != 0 && strcmp(c->mixed_reduction, "tensorflow") != 0)
        return dr_fail(err, DR_EUSAGE, "--mixed_reduction=%s: expected exact or tensorflow", c->mixed_reduction);
    if (seen(f, n, "mixed_reduction") && m->compute == DR_DTYPE_F32)
        return dr_fail(err, DR_EUSAGE, "--mixed_reduction applies to a mixed policy (--dtype_policy=mixed_float16 "
                       "or mixed_bfloat16); the policy is float32");
    m->tf_reduction = strcmp(c->mixed_reduction, "tensorflow") == 0;
    if (seen(f, n, "dynamic_growth_steps")) {
        if (m->loss_scale != DR_LOSS_SCALE_DYNAMIC)
            return dr_fail(err, DR_EUSAGE, "--dynamic_growth_steps applies to a dynamic loss scale "
                           "(--loss_scale=dynamic or dynamic:X; mixed_float16's default); this run's is %s",
                           m->loss_scale == DR_LOSS_SCALE_FIXED ? "fixed" : "none");
        m->growth_steps = (uint32_t)c->dynamic_growth_steps;
    }
    return DR_OK;
}
