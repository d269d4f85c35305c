/* distref reference — --log_device_placement: the device each op of a step
 * ran on, in TensorFlow's format.
 *
 * TensorFlow 2.21 (tf.debugging.set_log_device_placement(True), measured on
 * logical CPU devices; docs/SEMANTICS.md) prints the placer's decision for
 * every op of a traced function as
 *
 *     sequential/dense/MatMul: (MatMul): /job:localhost/replica:0/task:0/device:GPU:0
 *
 * once per trace, and "Executing op <type> in device <device>" per eager
 * op. distref prints the placer's line for every op the reference runs, at
 * the moment it runs, every step, prefixed with the step ("step 3: "),
 * because here placement can change what a step moves (layer placement,
 * central storage). Op names follow what Keras 3 under TensorFlow 2.21
 * names them: the replica prefix MirroredStrategy gives replicas after the
 * first ("replica_1/"), the Sequential model's layers "dense", "dense_1",
 * ..., their gradients under "gradient_tape/", the optimizer's updates one
 * per variable. Only the ops that compute are listed (not TensorFlow's
 * _Arg, ReadVariableOp or Const bookkeeping).
 *
 * The placement printed is the one the reference used: each layer's
 * device (--layer_devices) or the replica's, the variable device for
 * central_storage's update, every replica's device for a mirrored update.
 */
#include "ref/trainer.h"

#include <stdio.h>

static const char *layer_name(uint32_t l, char *buf, size_t n)
{
    if (l == 0) snprintf(buf, n, "dense");
    else snprintf(buf, n, "dense_%u", l);
    return buf;
}

static void op(const trainer *t, const char *prefix, const char *name, const char *type, const dr_device *dev)
{
    fprintf(t->cfg->placement_log, "step %llu: %s%s: (%s): %s\n", (unsigned long long)t->step, prefix, name, type,
            dev->name);
}

/* The device layer l of replica r computes on. */
static const dr_device *layer_device(const trainer *t, const replica *rp, uint32_t l)
{
    return t->placed ? &t->strat.device[t->layer_dev[l]] : rp->dev;
}

/* The loss op, on the device of the model's last layer. */
void dr_trainer_log_loss(const trainer *t, const char *prefix, const dr_device *dev)
{
    const dr_model_spec *m = &t->exp.model;
    if (m->loss == DR_LOSS_XENT_LOGITS)
        op(t, prefix, "compile_loss/sparse_categorical_crossentropy/SparseSoftmaxCrossEntropyWithLogits/"
                      "SparseSoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits", dev);
    else if (m->loss == DR_LOSS_XENT_PROBS)
        op(t, prefix, "compile_loss/sparse_categorical_crossentropy/Log", "Log", dev);
    else
        op(t, prefix, "compile_loss/mean_squared_error/SquaredDifference", "SquaredDifference", dev);
}

void dr_trainer_log_replica_ops(const trainer *t, uint32_t r)
{
    const dr_model_spec *m = &t->exp.model;
    const replica *rp = &t->rep[r];
    const dr_device *last = layer_device(t, rp, m->nlayers - 1);
    char prefix[32], lname[24], name[128];
    if (!dr_model_is_dense(m)) {
        dr_trainer_log_graph_ops(t, r);
        return;
    }
    if (r == 0) prefix[0] = 0;
    else snprintf(prefix, sizeof prefix, "replica_%u/", r);
    for (uint32_t l = 0; l < m->nlayers; l++) {
        const dr_device *d = layer_device(t, rp, l);
        layer_name(l, lname, sizeof lname);
        snprintf(name, sizeof name, "sequential/%s/MatMul", lname);
        op(t, prefix, name, "MatMul", d);
        snprintf(name, sizeof name, "sequential/%s/BiasAdd", lname);
        op(t, prefix, name, "BiasAdd", d);
        if (m->layer[l].act == DR_ACT_RELU) {
            snprintf(name, sizeof name, "sequential/%s/Relu", lname);
            op(t, prefix, name, "Relu", d);
        } else if (m->layer[l].act == DR_ACT_SOFTMAX) {
            snprintf(name, sizeof name, "sequential/%s/Softmax", lname);
            op(t, prefix, name, "Softmax", d);
        }
    }
    dr_trainer_log_loss(t, prefix, last);
    for (uint32_t l = 0; m->l2 != 0.0f && l < m->nlayers; l++) {
        layer_name(l, lname, sizeof lname);
        snprintf(name, sizeof name, "sequential/%s/kernel/Regularizer/Square", lname);
        op(t, prefix, name, "Square", layer_device(t, rp, l));
    }
    for (uint32_t l = m->nlayers; l-- > 0;) {
        const dr_device *d = layer_device(t, rp, l);
        layer_name(l, lname, sizeof lname);
        if (m->layer[l].act == DR_ACT_RELU) {
            snprintf(name, sizeof name, "gradient_tape/sequential/%s/ReluGrad", lname);
            op(t, prefix, name, "ReluGrad", d);
        }
        snprintf(name, sizeof name, "gradient_tape/sequential/%s/BiasAdd/BiasAddGrad", lname);
        op(t, prefix, name, "BiasAddGrad", d);
        if (l > 0) {   /* the delta of the layer below */
            snprintf(name, sizeof name, "gradient_tape/sequential/%s/MatMul/MatMul", lname);
            op(t, prefix, name, "MatMul", d);
        }
        snprintf(name, sizeof name, "gradient_tape/sequential/%s/MatMul/MatMul_1", lname);
        op(t, prefix, name, "MatMul", d);
    }
}

/* The optimizer's update of each variable (kernel, bias per layer), on the
 * device that holds it: the variable device (central_storage, rp NULL), or
 * the replica's (its layer's, under layer placement). */
static void log_apply(const trainer *t, const char *prefix, const replica *rp)
{
    const dr_optimizer *o = &t->exp.optimizer;
    const char *opt = o->kind == DR_OPT_ADAM ? "adam" : "sgd";
    const char *type = o->kind == DR_OPT_SGD && o->momentum != 0.0f ? "AssignAddVariableOp" : "AssignSubVariableOp";
    char name[128];
    uint32_t v = 0;
    for (uint32_t l = 0; l < t->exp.model.nlayers; l++)
        for (uint32_t k = 0; dr_model_layer_params(&t->exp.model, l) && k < 2; k++, v++) {   /* kernel, bias */
            const dr_device *d = rp ? layer_device(t, rp, l) : &t->strat.device[t->strat.variable_device];
            if (v == 0) snprintf(name, sizeof name, "%s/%s", opt, type);
            else snprintf(name, sizeof name, "%s/%s_%u", opt, type, v);
            op(t, prefix, name, type, d);
        }
}

/* The gradients' reduction, named after the cross-device op that ran it
 * (ref/cross_device.c), and each holder's update. */
void dr_trainer_log_update_ops(const trainer *t)
{
    const dr_strategy_spec *sp = &t->strat.spec;
    uint32_t R = t->strat.num_replicas;
    bool ring = sp->cross_device_op == DR_XDEV_NCCL || sp->cross_device_op == DR_XDEV_RING ||
                sp->cross_device_op == DR_XDEV_AUTO || (sp->cross_device_op == DR_XDEV_DEFAULT && sp->num_gpus > 0);
    char prefix[32];
    if (t->var) {   /* central_storage: summed and applied on the variable device */
        if (R > 1) op(t, "", "AddN", "AddN", &t->strat.device[t->strat.variable_device]);
        log_apply(t, "", NULL);
        return;
    }
    if (R > 1 && !ring) {   /* reduced on one device (hierarchical: on each half's root), copied back */
        op(t, "", "AddN", "AddN", t->rep[0].dev);
        if (sp->cross_device_op == DR_XDEV_HIERARCHICAL_COPY && R / 2 > 0) {
            snprintf(prefix, sizeof prefix, "replica_%u/", R / 2);
            op(t, prefix, "AddN", "AddN", t->rep[R / 2].dev);
        }
    }
    for (uint32_t r = 0; r < R; r++) {
        if (r == 0) prefix[0] = 0;
        else snprintf(prefix, sizeof prefix, "replica_%u/", r);
        if (R > 1 && ring) {
            const char *type = sp->kind == DR_STRATEGY_MULTI_WORKER_MIRRORED ? "CollectiveReduceV2" : "NcclAllReduce";
            op(t, prefix, type, type, t->rep[r].dev);
        }
        log_apply(t, prefix, &t->rep[r]);
    }
}
