/* distref — strategy.reduce over exact per-replica values.
 *
 * dr_strategy_reduce (strategy.h) takes per-replica floats, as
 * strategy.reduce does in TensorFlow. A custom training loop's per-replica
 * loss in distref is a dr_scaled (the exact value compute_average_loss and
 * scale_regularization_loss return); reducing those, rather than their
 * rounded floats, keeps the reduced loss and the summed gradients the same
 * bits for every replica count. This is that reduce:
 *
 *   TensorFlow                                      distref
 *   strategy.reduce(SUM,  per_replica_losses, None)  dr_strategy_reduce_scaled(s, DR_REDUCE_SUM,  v, &out, err)
 *   strategy.reduce(MEAN, per_replica_losses, None)  dr_strategy_reduce_scaled(s, DR_REDUCE_MEAN, v, &out, err)
 *
 * then dr_scaled_round(&out) rounds once. The examples (examples/) use it
 * for the loss and for each variable's gradient (the sum-over-all-replicas
 * that apply_gradients performs under a strategy).
 */
#ifndef DISTREF_STRATEGY_SCALED_H
#define DISTREF_STRATEGY_SCALED_H

#include "distref/error.h"
#include "distref/strategy.h"

/* v[0 .. s->num_replicas): one exact value per replica (axis=None). SUM adds
 * them exactly; MEAN also divides by the number of replicas. DR_EUSAGE,
 * naming the replica, when dr_scaled_add refuses a pair (unequal
 * denominators whose product passes 2^32, or one beyond 2^30), and for MEAN
 * when the sum's denominator times the replicas passes 2^30. Values from
 * compute_average_loss(global_batch_size=G) and scale_regularization_loss
 * share the denominators G and R and always reduce. */
int dr_strategy_reduce_scaled(const dr_strategy *s, dr_reduce_op op, const dr_scaled *v,
                              dr_scaled *out, dr_err *err);

#endif
