/* distref core — strategy.reduce over exact per-replica values
 * (distref/strategy_scaled.h). */
#include "distref/strategy_scaled.h"

int dr_strategy_reduce_scaled(const dr_strategy *s, dr_reduce_op op, const dr_scaled *v,
                              dr_scaled *out, dr_err *err)
{
    if (s->num_replicas == 0)
        return dr_fail(err, DR_EUSAGE, "reduce: the strategy has no replicas");
    dr_scaled sum = v[0];
    for (uint32_t r = 1; r < s->num_replicas; r++) {
        if (!dr_scaled_add(&sum, &v[r]))
            return dr_fail(err, DR_EUSAGE, "reduce: replica %u's denominator %u and the sum's %u "
                           "have no common denominator below 2^32", r, v[r].den, sum.den);
    }
    if (op == DR_REDUCE_MEAN) {
        dr_scaled inv;               /* sum / R = sum * (1/R): multiply the denominator */
        if ((uint64_t)sum.den * s->num_replicas > (1u << 30))
            return dr_fail(err, DR_EUSAGE, "reduce MEAN: denominator %u x %u replicas passes 2^30",
                           sum.den, s->num_replicas);
        inv = sum;
        inv.den = sum.den * s->num_replicas;
        sum = inv;
    }
    *out = sum;
    return DR_OK;
}
