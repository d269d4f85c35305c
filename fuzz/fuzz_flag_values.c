/* distref fuzzing — the parsers of single flag values (core/ and ref/).
 *
 * Feeds: input = selector byte | parameter byte | value text (NUL-terminated
 * copy). The selector picks the parser, the parameter byte varies its other
 * arguments:
 *   0 --distribution_strategy   dr_get_distribution_strategy (core/factory.c)
 *   1 --all_reduce_alg          the same, for mirrored / multi_worker_mirrored
 *   2 --tpu                     the factory, dr_tpu_topology_resolve and
 *                               dr_tpu_initialize_system (core/tpu_system.c)
 *   3 --tpu_platform            dr_tpu_topology_resolve
 *   4 --input_partition_dims    dr_tpu_partition_shape, dr_tpu_tile_pixels
 *   5 a device string           dr_device_parse, dr_device_spec_name (core/device.c)
 *   6 --ps_partitioner          dr_partitioner_parse, dr_ps_place_variables
 *                               (core/ps_partition.c) on the 784-128-10 model
 *   7 --fail_worker/--fail_ps   dr_ps_parse_failure (core/ps_partition.c)
 *   8 --auto_shard_policy       dr_shard_policy_parse, _resolve (core/multiworker.c)
 * Checks: no crash, UB or leak; any error return is fine. Where a parser
 * succeeds, that its result is usable: tile pixels are a permutation of the
 * 784 pixels, ps shards cover every variable exactly, names fit.
 * Built with -DDR_LAYER_REF: it includes ref's distref/ps.h.
 */
#include "distref/device.h"
#include "distref/factory.h"
#include "distref/multiworker.h"
#include "distref/plan.h"
#include "distref/ps.h"
#include "distref/tpu.h"
#include "distref/train.h"
#include "fuzz/fuzz_common.h"

static const char *const k_platforms[] = { "", "v2", "v3", "v4" };
static const char *const k_tpus[] = { "", "local", "v3-8", "v2-32" };

static void partition(const char *s)
{
    static const int image[2] = { DR_IMAGE_SIDE, DR_IMAGE_SIDE };
    int part[2], cs[DR_TPU_RANK], prod = 0;
    dr_err err = { 0, "" };
    if (dr_tpu_partition_shape(s, image, part, cs, &prod, &err) != DR_OK)
        return;
    if (part[0] < 1 || part[1] < 1 || part[0] * part[1] != prod)
        __builtin_trap();
    uint32_t pix[DR_IMAGE_SIDE * DR_IMAGE_SIDE];
    uint8_t seen[DR_IMAGE_SIDE * DR_IMAGE_SIDE] = { 0 };
    dr_tpu_tile_pixels(part, pix);
    for (uint32_t i = 0; i < DR_IMAGE_SIDE * DR_IMAGE_SIDE; i++) {
        if (pix[i] >= DR_IMAGE_SIDE * DR_IMAGE_SIDE || seen[pix[i]])
            __builtin_trap();
        seen[pix[i]] = 1;
    }
}

static void partitioner(const char *s, uint8_t param)
{
    dr_partitioner p;
    dr_experiment exp;
    dr_ps_variable vars[DR_PS_MAX_VARIABLES];
    dr_ps_layout layout;
    dr_err err = { 0, "" };
    if (dr_partitioner_parse(s, &p, &err) != DR_OK ||
        dr_experiment_lookup(param & 1 ? "linear_ones" : "mlp_synthetic", &exp, &err) != DR_OK)
        return;
    uint32_t nvars = dr_ps_model_variables(&exp.model, vars);
    if (dr_ps_place_variables(vars, nvars, &p, 1u + param % 5u, &layout, &err) != DR_OK)
        return;
    size_t covered = 0;
    for (uint32_t i = 0; i < layout.num_shards; i++) {
        const dr_ps_shard *sh = &layout.shard[i];
        if (sh->variable >= nvars || sh->ps_task >= 1u + param % 5u || sh->offset != covered)
            __builtin_trap();
        covered += sh->length;
    }
    if (covered != dr_model_num_params(&exp.model))
        __builtin_trap();
    dr_ps_layout_free(&layout);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t sel = data[0], param = data[1];
    char *s = fz_cstr(data + 2, size - 2);
    if (s == NULL)
        return 0;
    dr_err err = { 0, "" };
    dr_strategy_spec spec;
    dr_tpu_topology topo;
    switch (sel % 9) {
    case 0:
        (void)dr_get_distribution_strategy(s, (int)(int8_t)param, param & 0x80 ? "nccl" : NULL,
                                           param % 3, NULL, &spec, &err);
        break;
    case 1:
        (void)dr_get_distribution_strategy(param & 1 ? "mirrored" : "multi_worker_mirrored",
                                           (param >> 1) % 5, s, (int)(int8_t)param >> 2, NULL,
                                           &spec, &err);
        break;
    case 2: {
        dr_tpu_system sys;
        memset(&sys, 0, sizeof sys);
        (void)dr_get_distribution_strategy("tpu", 0, NULL, 1, s, &spec, &err);
        (void)dr_tpu_topology_resolve(s, k_platforms[param % 4], (double)(param >> 2) / 8.0, &topo, &err);
        (void)dr_tpu_initialize_system(&sys, s, k_platforms[(param >> 4) % 4], 1.0, &err);
        break;
    }
    case 3:
        (void)dr_tpu_topology_resolve(k_tpus[param % 4], s, 1.0, &topo, &err);
        break;
    case 4:
        partition(s);
        break;
    case 5: {
        dr_device_spec d;
        char name[96];
        if (dr_device_parse(s, &d, &err) == DR_OK) {
            dr_device_spec_name(&d, name, sizeof name);
            if (strlen(name) >= sizeof name)
                __builtin_trap();
        }
        break;
    }
    case 6:
        partitioner(s, param);
        break;
    case 7: {
        uint32_t index;
        uint64_t step;
        if (dr_ps_parse_failure(param & 1 ? "fail_ps" : "fail_worker", s, param >> 1, &index, &step,
                                &err) == DR_OK && s[0] != '\0' && (index >= (uint32_t)(param >> 1) || step == 0))
            __builtin_trap();
        break;
    }
    case 8: {
        dr_shard_policy p;
        if (dr_shard_policy_parse(s, &p, &err) == DR_OK)
            (void)dr_shard_policy_resolve(p, param & 1, (param >> 1) % 5, &p, &err);
        break;
    }
    }
    free(s);
    return 0;
}
