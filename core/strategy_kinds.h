/* distref core — constructors of the strategies that live in their own files
 * (internal to core/ and ref/: core/strategy.c's dr_strategy_create
 * dispatches to them). */
#ifndef DISTREF_REF_STRATEGY_KINDS_H
#define DISTREF_REF_STRATEGY_KINDS_H

#include "distref/strategy.h"

/* tpu: replicas on the cores of an initialized emulated TPU system
 * (core/strategy_tpu.c). */
int dr_strategy_create_tpu(const dr_strategy_spec *spec, const dr_strategy_options *opt,
                           dr_strategy *s, dr_err *err);

/* DR_ESTATE once the TPU system under a tpu strategy was initialized again
 * (its HBM wiped); DR_OK for any other strategy. */
int dr_strategy_check_tpu_live(const dr_strategy *s, dr_err *err);

/* parameter_server: a coordinator, workers and ps tasks (core/strategy_ps.c;
 * the reference runs them in ref/ps*.c). */
int dr_strategy_create_ps(const dr_strategy_spec *spec, const dr_strategy_options *opt,
                          dr_strategy *s, dr_err *err);

#endif
