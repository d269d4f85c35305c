/* distref fuzzing — an earlier run's metrics.jsonl (core/run_log.c).
 *
 * Feeds: the input as <scratch>/metrics.jsonl, which dr_run_log_open loads
 * the way a resumed run does; then dr_run_log_trim cuts it back as the
 * harness does after a resume (to the last step, to a middle step taken
 * from the input's first byte, to 0) and dr_run_log_step appends a line
 * after what is left (so the append grows a buffer that came from the file),
 * with a segment marker when the kept lines' last segment is another one;
 * the segments (dr_run_log_segments, dr_run_log_last_segment) are read
 * from the file's markers first.
 * Checks: no crash, UB or leak; any error return is fine. After each trim
 * the kept text must be a prefix of the file ending at a newline (or
 * empty), and NUL-terminated at its length.
 */
#include "distref/run_log.h"
#include "fuzz/fuzz_common.h"

static void check_prefix(const dr_run_log *l, const uint8_t *data, size_t size)
{
    if (l->len > size || (l->len > 0 && (memcmp(l->metrics, data, l->len) != 0 ||
                                         l->metrics[l->len - 1] != '\n')))
        __builtin_trap();
    if (l->metrics != NULL && l->metrics[l->len] != '\0')
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static dr_run_config cfg;           /* 7 KB: off the stack */
    const char *dir = fz_dir("metrics");
    dr_run_log log;
    dr_err err = { 0, "" };
    if (dir == NULL || fz_write(dir, "metrics.jsonl", data, size) != 0)
        return 0;
    dr_run_config_defaults(&cfg);
    snprintf(cfg.model_dir, sizeof cfg.model_dir, "%s", dir);
    if (dr_run_log_open(&log, &cfg, &err) != DR_OK)
        return 0;
    dr_run_log_trim(&log, UINT64_MAX);
    check_prefix(&log, data, size);
    {   /* the segments the file's markers describe (summary.json's list, a resume's check) */
        char last[sizeof log.segment];
        json_object *segs = dr_run_log_segments(&log);
        if (dr_run_log_last_segment(&log, last, sizeof last) && strlen(last) >= sizeof last) __builtin_trap();
        if (!json_object_is_type(segs, json_type_array)) __builtin_trap();
        json_object_put(segs);
        dr_run_log_set_segment(&log, "{\"strategy\":\"mirrored\",\"variant\":\"ref\",\"workers\":1,"
                                     "\"replicas_in_sync\":2,\"numerics\":\"exact\"}");
    }
    dr_run_log_trim(&log, size > 0 ? data[0] % 8 : 1);
    check_prefix(&log, data, size);

    static const uint32_t ids[5] = { 4, 0, 3, 1, 2 };
    dr_step_report rep;
    memset(&rep, 0, sizeof rep);
    rep.loss = size > 1 ? (float)data[1] / 7.0f : 0.5f;
    rep.count = 5;
    rep.num_replicas = 2;
    rep.ids = ids;
    rep.off[0] = 0;
    rep.off[1] = 3;
    rep.off[2] = 5;
    (void)dr_run_log_step(&log, 9, 0, &rep, &err);
    dr_run_log_trim(&log, 0);
    check_prefix(&log, data, size);
    dr_run_log_free(&log);
    return 0;
}
