/* distref tests — a parameter_server plan in one call (shared by
 * test_ps_plan.c and test_ps.c; include after cmocka.h and distref/ps.h). */
#ifndef DISTREF_TESTS_PS_PLAN_H
#define DISTREF_TESTS_PS_PLAN_H

/* The whole event list of W workers, staleness bound S, schedule seed,
 * worker fw failing at closure fk (0: none), n closures, a join every
 * `every` (0: none). */
static inline size_t plan(uint32_t W, uint32_t S, uint64_t seed, uint32_t fw, uint64_t fk, uint64_t n, uint64_t every,
                   dr_ps_event **ev)
{
    dr_ps_schedule_options o = { W, S, seed, fw, fk, NULL, 0 };
    size_t count;
    dr_err err;
    assert_int_equal(dr_ps_plan(&o, n, every, ev, &count, &err), DR_OK);
    return count;
}

#endif
