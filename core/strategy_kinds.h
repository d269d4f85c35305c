/* distref core — constructors of the strategies that live in their own files
 * (private to core/: core/strategy.c's dr_strategy_create dispatches to
 * them). */
#ifndef DISTREF_CORE_STRATEGY_KINDS_H
#define DISTREF_CORE_STRATEGY_KINDS_H

#include "distref/strategy.h"

/* tpu: replicas on the cores of an initialized emulated TPU system
 * (core/strategy_tpu.c). */
int dr_strategy_create_tpu(const dr_strategy_spec *spec, const dr_strategy_options *opt,
                           dr_strategy *s, dr_err *err);

/* parameter_server: a coordinator, workers and ps tasks (core/strategy_ps.c;
 * the reference runs them in ref/ps*.c). */
int dr_strategy_create_ps(const dr_strategy_spec *spec, const dr_strategy_options *opt,
                          dr_strategy *s, dr_err *err);

#endif
