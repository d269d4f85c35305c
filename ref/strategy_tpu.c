/* distref reference — the tpu strategy (being built). */
#include "ref/strategy_kinds.h"

int dr_strategy_create_tpu(const dr_strategy_spec *spec, const dr_strategy_options *opt,
                           dr_strategy *s, dr_err *err)
{
    (void)spec; (void)opt; (void)s;
    return dr_fail(err, DR_EUNSUPPORTED, "--distribution_strategy=tpu: not built yet");
}
