/* distref reference — --log_device_placement for the models beyond Dense:
 * the ops of one replica's forward, loss and backward, in TensorFlow's
 * format (ref/placement_log.c has the format, the Dense models and the
 * update).
 *
 * Names and types are what TensorFlow 2.21 / Keras 3.15 print for the same
 * Keras functional model (measured on logical CPU devices with
 * scripts/tf_placement_conv.py; docs/MODELS.md, "--log_device_placement"):
 * the layers are named per class in order (conv2d, conv2d_1, ...,
 * batch_normalization, re_lu for the ReLU Keras applies after a
 * BatchNormalization or an Add, add, max_pooling2d,
 * global_average_pooling2d, flatten, dropout, dense) under "functional/",
 * as the variables are; TensorFlow's trace adds a uniquifying "_1" to each
 * scope (functional_1/conv2d_1/...), which distref leaves out, as it does
 * for the Dense models' "sequential/". Only the ops that compute are
 * listed, one line where TensorFlow's gradient of a layer is a chain of
 * elementwise ops (BatchNormalization's: its two sums and a Mul). A
 * synchronized BatchNormalization's all-reduce is one line per replica and
 * direction: TensorFlow's trace has three CollectiveReduceV2 per replica
 * in the forward (count, sum, sum of squares) and none under the layer's
 * name in the backward; distref reduces the forward's two sums in one
 * exact all-reduce and the backward's two (of dy and dy * xhat) in
 * another, and prints what it runs.
 */
#include "ref/trainer.h"

#include <stdio.h>

typedef struct names {
    char     layer[DR_MAX_LAYERS][40];   /* the Keras layer's name */
    char     relu[DR_MAX_LAYERS][24];    /* its separate ReLU's (BatchNormalization, Add), or "" */
} names;

static const char *class_name(dr_layer_kind k)
{
    switch (k) {
    case DR_LAYER_CONV2D:            return "conv2d";
    case DR_LAYER_MAX_POOL2D:        return "max_pooling2d";
    case DR_LAYER_GLOBAL_AVG_POOL2D: return "global_average_pooling2d";
    case DR_LAYER_FLATTEN:           return "flatten";
    case DR_LAYER_BATCH_NORM:        return "batch_normalization";
    case DR_LAYER_DROPOUT:           return "dropout";
    case DR_LAYER_ADD:               return "add";
    case DR_LAYER_DENSE:             break;
    }
    return "dense";
}

/* Keras's per-class counter: the first of a class is "name", then "name_1". */
static void name_layers(const dr_model_spec *m, names *n)
{
    uint32_t count[DR_LAYER_ADD + 1] = { 0 }, relus = 0;
    for (uint32_t l = 0; l < m->nlayers; l++) {
        const dr_layer *d = &m->layer[l];
        uint32_t c = count[d->kind]++;
        if (c) snprintf(n->layer[l], sizeof n->layer[l], "%s_%u", class_name(d->kind), c);
        else snprintf(n->layer[l], sizeof n->layer[l], "%s", class_name(d->kind));
        n->relu[l][0] = 0;
        if ((d->kind == DR_LAYER_BATCH_NORM || d->kind == DR_LAYER_ADD) && d->act == DR_ACT_RELU) {
            if (relus) snprintf(n->relu[l], sizeof n->relu[l], "re_lu_%u", relus);
            else snprintf(n->relu[l], sizeof n->relu[l], "re_lu");
            relus++;
        }
    }
}

static void op(const trainer *t, const char *prefix, const char *grad, const char *layer, const char *name,
               const char *type, const dr_device *dev)
{
    fprintf(t->cfg->placement_log, "step %llu: %s%sfunctional/%s/%s: (%s): %s\n", (unsigned long long)t->step,
            prefix, grad, layer, name, type, dev->name);
}

/* The device layer l of replica r computes on: its --layer_devices entry,
 * else the replica's. */
static const dr_device *device_of(const trainer *t, uint32_t r, uint32_t l)
{
    return t->placed ? &t->strat.device[t->layer_dev[l]] : t->rep[r].dev;
}

static void forward(const trainer *t, const char *pre, const names *n, uint32_t l, const dr_device *dev)
{
    const dr_layer *d = &t->exp.model.layer[l];
    const char *ln = n->layer[l];
    bool sync = !t->plan->bn_replica, many = t->strat.num_replicas > 1;
    switch (d->kind) {
    case DR_LAYER_CONV2D:
    case DR_LAYER_DENSE:
        op(t, pre, "", ln, d->kind == DR_LAYER_CONV2D ? "convolution" : "MatMul",
           d->kind == DR_LAYER_CONV2D ? "Conv2D" : "MatMul", dev);
        op(t, pre, "", ln, "BiasAdd", "BiasAdd", dev);
        if (d->act == DR_ACT_RELU) op(t, pre, "", ln, "Relu", "Relu", dev);
        if (d->act == DR_ACT_SOFTMAX) op(t, pre, "", ln, "Softmax", "Softmax", dev);
        return;
    case DR_LAYER_BATCH_NORM:
        if (sync) {   /* Keras: the sums of x and x^2, all-reduced */
            op(t, pre, "", ln, "Sum", "Sum", dev);
            op(t, pre, "", ln, "Sum_1", "Sum", dev);
            if (many) op(t, pre, "", ln, "CollectiveReduceV2", "CollectiveReduceV2", dev);
        } else {      /* tf.nn.moments over the replica's batch */
            op(t, pre, "", ln, "moments/mean", "Mean", dev);
            op(t, pre, "", ln, "moments/variance", "Mean", dev);
        }
        op(t, pre, "", ln, "AssignVariableOp", "AssignVariableOp", dev);     /* the moving mean */
        op(t, pre, "", ln, "AssignVariableOp_1", "AssignVariableOp", dev);   /* the moving variance */
        op(t, pre, "", ln, "batchnorm/Rsqrt", "Rsqrt", dev);
        op(t, pre, "", ln, "batchnorm/add_1", "AddV2", dev);
        break;
    case DR_LAYER_ADD:
        op(t, pre, "", ln, "Add", "AddV2", dev);
        break;
    case DR_LAYER_MAX_POOL2D:
        op(t, pre, "", ln, "MaxPool2d", "MaxPool", dev);
        return;
    case DR_LAYER_GLOBAL_AVG_POOL2D:
        op(t, pre, "", ln, "Mean", "Mean", dev);
        return;
    case DR_LAYER_FLATTEN:
        op(t, pre, "", ln, "Reshape", "Reshape", dev);
        return;
    case DR_LAYER_DROPOUT:   /* Keras skips a Dropout of rate 0 (--dropout=off) */
        if (d->rate > 0.0f) op(t, pre, "", ln, "stateless_dropout/SelectV2", "SelectV2", dev);
        return;
    }
    if (n->relu[l][0]) op(t, pre, "", n->relu[l], "Relu", "Relu", dev);
}

static void backward(const trainer *t, const char *pre, const names *n, uint32_t l, const dr_device *dev)
{
    static const char *g = "gradient_tape/";
    const dr_layer *d = &t->exp.model.layer[l];
    const char *ln = n->layer[l];
    bool sync = !t->plan->bn_replica, many = t->strat.num_replicas > 1;
    bool below = l > 0 || d->src > 0;   /* a layer whose input is not the model's: its input's gradient */
    if (n->relu[l][0]) op(t, pre, g, n->relu[l], "ReluGrad", "ReluGrad", dev);
    switch (d->kind) {
    case DR_LAYER_CONV2D:
    case DR_LAYER_DENSE:
        if (d->act == DR_ACT_RELU) op(t, pre, g, ln, "ReluGrad", "ReluGrad", dev);
        op(t, pre, g, ln, "BiasAdd/BiasAddGrad", "BiasAddGrad", dev);
        if (d->kind == DR_LAYER_CONV2D) {
            if (below) op(t, pre, g, ln, "convolution/Conv2DBackpropInput", "Conv2DBackpropInput", dev);
            op(t, pre, g, ln, "convolution/Conv2DBackpropFilter", "Conv2DBackpropFilter", dev);
        } else {
            if (below) op(t, pre, g, ln, "MatMul/MatMul", "MatMul", dev);
            op(t, pre, g, ln, "MatMul/MatMul_1", "MatMul", dev);
        }
        return;
    case DR_LAYER_BATCH_NORM:   /* the sums of dy and dy * xhat (also beta's and gamma's gradients) */
        op(t, pre, g, ln, "batchnorm/add_1/Sum", "Sum", dev);
        op(t, pre, g, ln, "batchnorm/mul_1/Sum", "Sum", dev);
        if (sync && many) op(t, pre, g, ln, "CollectiveReduceV2", "CollectiveReduceV2", dev);
        op(t, pre, g, ln, "batchnorm/mul_1/Mul", "Mul", dev);
        return;
    case DR_LAYER_MAX_POOL2D:
        op(t, pre, g, ln, "MaxPool2d/MaxPoolGrad", "MaxPoolGrad", dev);
        return;
    case DR_LAYER_GLOBAL_AVG_POOL2D:
        op(t, pre, g, ln, "truediv", "RealDiv", dev);
        return;
    case DR_LAYER_FLATTEN:
        op(t, pre, g, ln, "Reshape", "Reshape", dev);
        return;
    case DR_LAYER_DROPOUT:
        if (d->rate > 0.0f) op(t, pre, g, ln, "stateless_dropout/SelectV2", "SelectV2", dev);
        return;
    case DR_LAYER_ADD:   /* the gradient passes to both inputs unchanged */
        return;
    }
}

void dr_trainer_log_graph_ops(const trainer *t, uint32_t r)
{
    const dr_model_spec *m = &t->exp.model;
    char prefix[32], name[64];
    names n;
    name_layers(m, &n);
    if (r == 0) prefix[0] = 0;
    else snprintf(prefix, sizeof prefix, "replica_%u/", r);
    for (uint32_t l = 0; l < m->nlayers; l++) forward(t, prefix, &n, l, device_of(t, r, l));
    dr_trainer_log_loss(t, prefix, device_of(t, r, m->nlayers - 1));
    for (uint32_t l = 0; m->l2 != 0.0f && l < m->nlayers; l++)
        if (dr_model_kernel_size(m, l)) {
            snprintf(name, sizeof name, "%s/Regularizer/Square",
                     m->layer[l].kind == DR_LAYER_BATCH_NORM ? "gamma" : "kernel");
            op(t, prefix, "", n.layer[l], name, "Square", device_of(t, r, l));
        }
    for (uint32_t l = m->nlayers; l-- > 0;) backward(t, prefix, &n, l, device_of(t, r, l));
}
