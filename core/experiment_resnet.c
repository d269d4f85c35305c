/* distref core — the small ResNet of resnet_synthetic and
 * resnet_fashion_mnist (docs/MODELS.md), as a list of layers: a stem
 * Conv2D(w, 3) + BN + ReLU, then 3 stages of 2 basic blocks at widths w,
 * 2w, 4w (the second and third stages start with stride 2 and a projection
 * shortcut: Conv2D(1x1, stride 2) + BN on the block's input), each block
 * Conv2D(3x3) + BN + ReLU, Conv2D(3x3) + BN, Add(shortcut) + ReLU; then
 * GlobalAveragePooling2D and Dense(10). 38 layers. */
#include "distref/train.h"

static uint32_t push(dr_model_spec *m, dr_dense d)
{
    m->layer[m->nlayers] = d;
    return m->nlayers++;
}

static uint32_t conv(dr_model_spec *m, uint32_t f, uint32_t k, uint32_t s, uint32_t src)
{
    return push(m, (dr_dense){ .kind = DR_LAYER_CONV2D, .filters = f, .ksize = k, .stride = s, .same = true, .src = src });
}

static uint32_t bn(dr_model_spec *m, dr_activation act)
{
    return push(m, (dr_dense){ .kind = DR_LAYER_BATCH_NORM, .act = act });
}

/* One basic block on the output of layer `in`; returns its Add layer. */
static uint32_t block(dr_model_spec *m, uint32_t in, uint32_t f, uint32_t stride)
{
    uint32_t shortcut = in;
    if (stride != 1) {
        conv(m, f, 1, stride, in + 1);
        shortcut = bn(m, DR_ACT_LINEAR);
    }
    conv(m, f, 3, stride, in + 1);
    bn(m, DR_ACT_RELU);
    conv(m, f, 3, 1, 0);
    bn(m, DR_ACT_LINEAR);
    return push(m, (dr_dense){ .kind = DR_LAYER_ADD, .from = (int32_t)shortcut, .act = DR_ACT_RELU });
}

void dr_resnet_spec(dr_model_spec *m, uint32_t width)
{
    uint32_t last;
    *m = (dr_model_spec){ .loss = DR_LOSS_XENT_LOGITS, .in_h = 28, .in_w = 28, .in_c = 1 };
    conv(m, width, 3, 1, 0);
    last = bn(m, DR_ACT_RELU);
    for (uint32_t stage = 0; stage < 3; stage++)
        for (uint32_t b = 0; b < 2; b++)
            last = block(m, last, width << stage, stage > 0 && b == 0 ? 2 : 1);
    push(m, (dr_dense){ .kind = DR_LAYER_GLOBAL_AVG_POOL2D });
    push(m, (dr_dense){ .kind = DR_LAYER_DENSE, .out = 10 });
}
