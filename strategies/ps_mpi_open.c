/* distref engine — parameter_server over MPI ranks: whether a run can be
 * built, and building one rank of it (chief, worker or ps task), the
 * variant's other entry points (summary, variables, close). The protocol:
 * strategies/ps_mpi.c and ps_mpi_roles.c.
 */
#include "strategies/ps_mpi_internal.h"
#include "distref/cluster.h"
#include "distref/mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "strategies/seams.h"

int engine_ps_supports(const dr_run_plan *plan, dr_err *err)
{
    const dr_run_config *cfg = plan->cfg;
    dr_backend_query q;
    if (!plan->exact)
        return dr_fail(err, DR_EUNSUPPORTED, "--variant=mpi: parameter_server runs in exact numerics only "
                       "(the reference's bits); drop --numerics=fast");
    if ((cfg->fail_worker[0] || cfg->fail_ps[0]) && strcmp(cfg->schedule, "seeded") != 0)
        return dr_fail(err, DR_EUSAGE, "--%s with --schedule=%s: an injected failure is a step of the reference's "
                       "seeded plan (--schedule=seeded); a free run's failures are ranks that really die",
                       cfg->fail_worker[0] ? "fail_worker" : "fail_ps", cfg->schedule);
    if (plan->spec.num_gpus)
        return dr_fail(err, DR_EUNSUPPORTED, "--variant=mpi: parameter_server workers are CPUs (--num_gpus=0)");
    if (cfg->input_partition_dims[0] || cfg->tpu_platform[0] || cfg->layer_devices[0])
        return dr_fail(err, DR_EUSAGE, "--%s: not with --distribution_strategy=parameter_server",
                       cfg->input_partition_dims[0] ? "input_partition_dims"
                       : cfg->tpu_platform[0] ? "tpu_platform" : "layer_devices");
    memset(&q, 0, sizeof q);
    q.strategy = DR_STRATEGY_ONE_DEVICE;   /* each worker computes as one replica */
    q.numerics = DR_NUMERICS_EXACT;
    q.num_replicas = 1;
    q.tiles = 1;
    return dr_backend_openmp()->supports(&q, err);
}

/* W and P from TF_CONFIG (checked against the world by the CLI), the
 * world's size checked again here, this rank's role. */
static int world(dr_session *s, dr_err *err)
{
    engine_ps *ps = s->ps;
    dr_cluster cl;
    uint32_t size;
    int rc;
    if ((rc = dr_cluster_parse(s->cfg->tf_config, &cl, err))) return rc;
    ps->W = cl.job[DR_TASK_WORKER].n;
    ps->P = cl.job[DR_TASK_PS].n;
    dr_cluster_free(&cl);
    dr_mpi_world(&ps->rank, &size);
    if (ps->W < 1 || ps->P < 1 || ps->W > DR_PS_MAX_WORKERS)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: parameter_server needs 1..%d workers and at least one ps task "
                       "(it has %u workers, %u ps)", DR_PS_MAX_WORKERS, ps->W, ps->P);
    if (size != 1 + ps->W + ps->P)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: chief + %u workers + %u ps = %u tasks but mpirun started %u "
                       "ranks (this is MPI rank %u)", ps->W, ps->P, 1 + ps->W + ps->P, size, ps->rank);
    ps->role = ps->rank == 0 ? PSM_CHIEF : ps->rank <= ps->W ? PSM_WORKER : PSM_PS;
    ps->index = ps->role == PSM_CHIEF ? 0 : ps->role == PSM_WORKER ? ps->rank - 1 : ps->rank - 1 - ps->W;
    return DR_OK;
}

/* A --schedule=free checkpoint: the order up to it is its recording,
 * model_dir/ps_schedule.jsonl, rewritten with every checkpoint; the chief
 * re-walks it (strategies/ps_mpi.c, rewalk) and the recording goes on. It
 * must hold at least the checkpoint's updates (one behind it, or a seeded
 * run's recording, is refused; the events past the checkpoint's last
 * landing, a later checkpoint's that a kill kept from committing, are
 * dropped and redone); that it fits this run's
 * TF_CONFIG, --staleness and --checkpoint_every is checked event by event
 * as it is re-walked. */
static int resume_recording(dr_session *s, const char *ckpt, dr_err *err)
{
    engine_ps *ps = s->ps;
    char path[1100];
    uint64_t lands = 0;
    int rc;
    snprintf(path, sizeof path, "%s/ps_schedule.jsonl", s->cfg->model_dir);
    if (access(path, F_OK) != 0)
        return dr_fail(err, DR_EFORMAT, "--schedule=free: checkpoint %s has no %s beside it (the order up to it): it "
                       "was not written by a --schedule=free run; resume it with --schedule=seeded, or use another "
                       "--model_dir", ckpt, path);
    if (ps->role != PSM_CHIEF) return DR_OK;   /* only the chief re-walks the order */
    if ((rc = dr_ps_schedule_load_as(path, NULL, &ps->replay, &ps->nreplay, err))) return rc;
    /* written before ckpt.bin's rename (core: dr_run_log_commit), so a kill between the two leaves it
     * ahead of the checkpoint: the order up to the checkpoint's last landing is kept, the rest redone */
    for (size_t i = 0; i < ps->nreplay && lands < ps->ck.step; i++)
        if ((lands += ps->replay[i].kind == DR_PS_LAND) == ps->ck.step) ps->nreplay = i + 1;
    if (lands != ps->ck.step)
        return dr_fail(err, DR_EFORMAT, "%s records %llu updates but checkpoint %s is at step %llu: they were not "
                       "written together (an older distref renamed ckpt.bin first); use another --model_dir",
                       path, (unsigned long long)lands, ckpt, (unsigned long long)ps->ck.step);
    return DR_OK;
}

/* A checkpoint in model_dir: every rank reads it (model_dir is on a shared
 * file system), the chief for its counters and data position, the ps tasks
 * for their shards, and checks it as the reference does (ref/ps.c): the
 * run's settings, and the plan's (ps_schedule.json) unless one worker. */
static int resume_load(dr_session *s, const char *path, dr_err *err)
{
    engine_ps *ps = s->ps;
    const dr_run_plan *plan = s->plan;
    dr_checkpoint now;
    bool found = false, absent = false;
    int rc;
    bool free_run = strcmp(s->cfg->schedule, "free") == 0;
    if ((rc = dr_checkpoint_load(s->cfg->model_dir, &ps->ck, &found, err)) || !found) return rc;
    memset(&now, 0, sizeof now);
    dr_plan_checkpoint_settings(plan, &now);
    rc = dr_checkpoint_check(&ps->ck, s->cfg->model_dir, plan->exp.name, plan->P, plan->nslots,
                             (int)plan->exp.optimizer.kind, s->cfg->seed, plan->G, s->data->n, err);
    if (!rc) rc = dr_checkpoint_check_settings(&ps->ck, s->cfg->model_dir, &now, err);
    if (!rc && free_run) rc = resume_recording(s, path, err);
    else if (!rc) rc = dr_ps_settings_check(s->cfg, ps->W, ps->P, ps->ck.step, &absent, err);
    if (!rc && !free_run && absent && ps->W != 1)
        rc = dr_fail(err, DR_EFORMAT, "checkpoint %s has no ps_schedule.json beside it: it was not written by a "
                     "parameter_server run (or by a --schedule=free one), and one with %u workers resumes only "
                     "those; use another --model_dir", path, ps->W);
    if (!rc && ps->ck.step > psm_total_steps(s))
        rc = dr_fail(err, DR_EFORMAT, "checkpoint %s: step %llu is past this run's %llu steps; use another "
                     "--model_dir or more steps", path, (unsigned long long)ps->ck.step,
                     (unsigned long long)psm_total_steps(s));
    if (!rc) ps->resume_step = ps->saved = ps->ck.step;
    ps->have_ckpt = rc == DR_OK;
    return rc;
}

/* --fail_worker / --fail_ps against this run's workers, ps tasks and steps,
 * as the reference checks them (core: dr_ps_parse_failures). */
static int failures(dr_session *s, dr_err *err)
{
    engine_ps *ps = s->ps;
    return dr_ps_parse_failures(s->cfg->fail_worker, s->cfg->fail_ps, ps->W, ps->P, psm_total_steps(s),
                                &ps->fail_worker, &ps->fail_worker_step, &ps->fail_ps, &ps->fail_ps_step, err);
}

/* The rank's backend (the CPU one: supports_on below), one replica. */
static int open_backend(dr_session *s, const dr_run_plan *plan, dr_err *err)
{
    dr_backend_params p = engine_backend_params(plan, s->num, 1);
    dr_optimizer o = *p.optimizer;
    /* a worker clips its whole gradient before it travels (compute()); a ps
     * task sees only its shards, so its apply must not clip them again */
    if (s->ps->role == PSM_PS && DR_SEAM_PS_CLIPS_ON_WORKER) memset(&o.clip, 0, sizeof o.clip);
    p.optimizer = &o;
    return s->bo->open(&p, &s->be, err);
}

static int layout(dr_session *s, dr_err *err)
{
    engine_ps *ps = s->ps;
    dr_ps_variable vars[DR_PS_MAX_VARIABLES];
    uint32_t nvars = dr_ps_model_variables(&s->plan->exp.model, vars);
    dr_partitioner part;
    int rc = dr_partitioner_parse(s->cfg->ps_partitioner, &part, err);
    if (rc == DR_OK) rc = dr_ps_place_variables(vars, nvars, &part, ps->P, &ps->layout, err);
    if (rc) return rc;
    for (uint32_t i = 0; i < ps->layout.num_shards; i++)
        if (ps->role == PSM_PS && ps->layout.shard[i].ps_task == ps->index) ps->mine += ps->layout.shard[i].length;
    return DR_OK;
}

static int buffers(dr_session *s, dr_err *err)
{
    engine_ps *ps = s->ps;
    size_t P = s->plan->P;
    ps->msg_bytes = sizeof(psm_result) + (size_t)s->plan->G * sizeof(uint32_t) + P * sizeof(float);
    if (!(ps->send = malloc(P * sizeof(float) + 1))) return dr_fail(err, DR_ENOMEM, "no memory for messages");
    for (uint32_t w = 0; w < ps->W; w++) {
        ps->req[w] = MPI_REQUEST_NULL;
        if ((ps->role == PSM_CHIEF || (ps->role == PSM_WORKER && w == 0)) && !(ps->res[w] = malloc(ps->msg_bytes)))
            return dr_fail(err, DR_ENOMEM, "no memory for the workers' results");
    }
    if (ps->role == PSM_WORKER &&
        (!(ps->vars = malloc(P * sizeof(float) + 1)) || !(ps->vreq = calloc(ps->P, sizeof *ps->vreq))))
        return dr_fail(err, DR_ENOMEM, "no memory for the variables");
    if (ps->role == PSM_CHIEF) {
        ps->final_params = calloc(P + 1, sizeof(float));
        ps->final_slots = calloc(P * (size_t)s->plan->nslots + 1, sizeof(float));
        if (!ps->final_params || !ps->final_slots) return dr_fail(err, DR_ENOMEM, "no memory for the variables");
        dr_model_init(&s->plan->exp.model, s->cfg->seed, ps->final_params);
        if (ps->resume_step) {   /* what a finished run, run again, reports */
            memcpy(ps->final_params, ps->ck.params, P * sizeof(float));
            memcpy(ps->final_slots, ps->ck.slots, P * (size_t)s->plan->nslots * sizeof(float));
        }
        if (strcmp(s->cfg->schedule, "free") == 0 && !(ps->record = malloc(ps->record_cap = 65536)))
            return dr_fail(err, DR_ENOMEM, "no memory for the recorded schedule");
    }
    return psm_roles_open(s, err);
}

int engine_ps_open(const dr_run_plan *plan, const dr_dataset *data, dr_session **out, dr_err *err)
{
    dr_session *s = calloc(1, sizeof *s);
    dr_strategy_spec spec = plan->spec;
    dr_strategy_options sopt = plan->sopt;
    char path[1100];
    int rc;
    if (!s || !(s->ps = calloc(1, sizeof *s->ps))) { free(s); return dr_fail(err, DR_ENOMEM, "no memory for the run"); }
    s->plan = plan;
    s->cfg = plan->cfg;
    s->data = data;
    s->bo = dr_backend_openmp();
    s->num = DR_NUMERICS_EXACT;
    s->esz = dr_sum_bytes(s->num);
    s->ps->comm = MPI_COMM_NULL;
    snprintf(path, sizeof path, "%s/ckpt.bin", plan->cfg->model_dir);
    if ((rc = world(s, err)) || (rc = failures(s, err))) goto fail;
    if (access(path, F_OK) == 0 && (rc = resume_load(s, path, err))) goto fail;
    sopt.num_workers = s->ps->W;
    sopt.num_ps = s->ps->P;
    s->W = s->ps->W;
    s->R = 1;
    s->L = 1;
    s->wlo = s->ps->rank;   /* rank 0, the chief, writes model_dir (mpi_chief) */
    s->whi = s->wlo + 1;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &s->ps->comm) != MPI_SUCCESS ||
        MPI_Comm_set_errhandler(s->ps->comm, MPI_ERRORS_RETURN) != MPI_SUCCESS) {
        rc = dr_fail(err, DR_EIO, "parameter_server over MPI: MPI_Comm_dup failed");
        goto fail;
    }
    {   /* measured with Open MPI 4.1.4: `mpirun --enable-recovery` sets this in every rank (docs/MPI.md) */
        const char *rec = getenv("OMPI_MCA_orte_enable_recovery");
        s->ps->rerun = strcmp(plan->cfg->schedule, "free") == 0 && rec && strcmp(rec, "1") == 0;
        s->ps->timeout = plan->cfg->collective_timeout > 0 ? plan->cfg->collective_timeout : DR_COMM_TIMEOUT_DEFAULT;
    }
    if ((rc = dr_strategy_create(&spec, &sopt, &s->strat, err)) || (rc = layout(s, err)) ||
        (rc = open_backend(s, plan, err)) || (rc = buffers(s, err)))
        goto fail;
    *out = s;
    return DR_OK;
fail:
    engine_ps_close(s);
    return rc;
}

void engine_ps_close(dr_session *s)
{
    engine_ps *ps = s->ps;
    psm_roles_close(s);
    for (uint32_t i = 0; i < ps->nabandoned; i++) {   /* sends to a dead worker: they never complete */
        if (ps->abandoned[i] != MPI_REQUEST_NULL) MPI_Request_free(&ps->abandoned[i]);
        free(ps->abandoned_buf[i]);
    }
    if (s->be) s->bo->close(s->be);
    for (uint32_t w = 0; w < DR_PS_MAX_WORKERS; w++) free(ps->res[w]);
    free(ps->send); free(ps->vars); free(ps->vreq); free(ps->final_params); free(ps->final_slots); free(ps->record);
    free(ps->replay);
    dr_ps_layout_free(&ps->layout);
    if (ps->resume_step) dr_checkpoint_free(&ps->ck);
    if (ps->comm != MPI_COMM_NULL) MPI_Comm_free(&ps->comm);
    free(s->host_x); free(s->host_labels); free(s->host_targets);
    free(ps);
    free(s);
}

void engine_ps_summarize(dr_session *s, json_object *o)
{
    const engine_ps *ps = s->ps;
    json_object *a = json_object_new_array();
    json_object_object_add(o, "devices", dr_devices_json(&s->strat));
    json_object_object_add(o, "backend", json_object_new_string(s->bo->name));
    json_object_object_add(o, "mpi_ranks", json_object_new_int((int)(1 + ps->W + ps->P)));
    json_object_object_add(o, "num_ps", json_object_new_int((int)ps->P));
    json_object_object_add(o, "schedule", json_object_new_string(s->cfg->schedule));
    json_object_object_add(o, "staleness_bound", json_object_new_int64((int64_t)s->cfg->staleness));
    json_object_object_add(o, "schedule_seed", json_object_new_int64((int64_t)s->cfg->schedule_seed));
    json_object_object_add(o, "ps_partitioner", json_object_new_string(s->cfg->ps_partitioner));
    json_object_object_add(o, "updates_applied", json_object_new_int64((int64_t)ps->updates));
    json_object_object_add(o, "max_staleness", json_object_new_int64((int64_t)ps->max_staleness));
    json_object_object_add(o, "worker_failures", json_object_new_int64((int64_t)ps->worker_failures));
    json_object_object_add(o, "rerun_closures", json_object_new_int64((int64_t)ps->rerun_closures));
    json_object_object_add(o, "worker_recoveries", json_object_new_int64((int64_t)ps->recoveries));
    json_object_object_add(o, "resumed_from_step", json_object_new_int64((int64_t)ps->resume_step));
    {
        json_object *dead = json_object_new_array();
        for (uint32_t w = 0; w < ps->W; w++) {
            json_object *d;
            if (!ps->lost_at[w]) continue;
            d = json_object_new_object();
            json_object_object_add(d, "worker", json_object_new_int((int)w));
            json_object_object_add(d, "mpi_rank", json_object_new_int((int)(1 + w)));
            json_object_object_add(d, "step", json_object_new_int64((int64_t)ps->lost_at[w]));
            json_object_array_add(dead, d);
        }
        json_object_object_add(o, "dead_workers", dead);
    }
    json_object_object_add(o, "mean_staleness",
                           json_object_new_double(ps->updates ? (double)ps->staleness_sum / (double)ps->updates : 0.0));
    for (uint32_t i = 0; i < ps->layout.num_shards; i++) {
        json_object *sh = json_object_new_object();
        json_object_object_add(sh, "variable", json_object_new_int((int)ps->layout.shard[i].variable));
        json_object_object_add(sh, "part", json_object_new_int((int)ps->layout.shard[i].part));
        json_object_object_add(sh, "ps_task", json_object_new_int((int)ps->layout.shard[i].ps_task));
        json_object_object_add(sh, "mpi_rank", json_object_new_int((int)(1 + ps->W + ps->layout.shard[i].ps_task)));
        json_object_object_add(sh, "floats", json_object_new_int64((int64_t)ps->layout.shard[i].length));
        json_object_array_add(a, sh);
    }
    json_object_object_add(o, "variable_shards", a);
}

/* The chief's copy, read back from the ps tasks at the last checkpoint
 * (the end of training); other ranks hold no whole copy and write nothing. */
int engine_ps_get(dr_session *s, float *params, float *slots, dr_err *err)
{
    const engine_ps *ps = s->ps;
    size_t P = s->plan->P, S = P * (size_t)s->plan->nslots;
    (void)err;
    if (ps->final_params) memcpy(params, ps->final_params, P * sizeof(float));
    else memset(params, 0, P * sizeof(float));
    if (S && ps->final_slots) memcpy(slots, ps->final_slots, S * sizeof(float));
    else if (S) memset(slots, 0, S * sizeof(float));
    return DR_OK;
}
