/* distref fuzzing — Slurm's compressed host lists and tasks per node
 * (core/slurm.c).
 *
 * Feeds: the input up to its first newline as SLURM_STEP_NODELIST, the rest
 * as SLURM_STEP_TASKS_PER_NODE, to dr_slurm_nodelist (into a small table:
 * the host cap is hit often) and dr_slurm_tasks_per_node, then the whole
 * derivation (dr_slurm_tf_config) with 3 tasks.
 * Checks: no crash, UB or leak; every host of an accepted list is a
 * non-empty NUL-terminated name of host characters; a rejected list leaves
 * the count untouched and names the variable.
 */
#include "distref/slurm.h"
#include "fuzz/fuzz_common.h"

static char g_hosts[16][DR_SLURM_HOST_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fz_cstr(data, size), *tpn;
    uint32_t n = 12345, counts[16], id, nt, g;
    dr_err err = { 0, "" };
    char *tf = NULL;
    if (text == NULL) return 0;
    tpn = strchr(text, '\n');
    if (tpn) *tpn++ = '\0';
    if (dr_slurm_nodelist("SLURM_STEP_NODELIST", text, g_hosts, 16, &n, &err) == DR_OK) {
        if (n == 0 || n > 16) __builtin_trap();
        for (uint32_t i = 0; i < n; i++) {
            size_t len = strnlen(g_hosts[i], DR_SLURM_HOST_MAX);
            if (len == 0 || len >= DR_SLURM_HOST_MAX || strspn(g_hosts[i], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") != len)
                __builtin_trap();
        }
        if (tpn) (void)dr_slurm_tasks_per_node("SLURM_STEP_TASKS_PER_NODE", tpn, counts, n, &err);
    } else if (n != 12345 || !strstr(err.msg, "SLURM_STEP_NODELIST")) {
        __builtin_trap();
    }
    dr_slurm_env e = { "1", "3", text, tpn, NULL, "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE" };
    if (dr_slurm_tf_config(&e, &tf, &id, &nt, &g, &err) == DR_OK) free(tf);
    free(text);
    return 0;
}
