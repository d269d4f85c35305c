/* distref reference — parameter_server (being built). */
#include "ref/strategy_kinds.h"
#include "ref/trainer.h"

int dr_strategy_create_ps(const dr_strategy_spec *spec, const dr_strategy_options *opt,
                          dr_strategy *s, dr_err *err)
{
    (void)spec; (void)opt; (void)s;
    return dr_fail(err, DR_EUNSUPPORTED, "--distribution_strategy=parameter_server: not built yet");
}

int dr_ps_run_train(const dr_run_config *cfg, dr_run_result *res, dr_err *err)
{
    (void)cfg; (void)res;
    return dr_fail(err, DR_EUNSUPPORTED, "--distribution_strategy=parameter_server: not built yet");
}
