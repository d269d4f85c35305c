/* distref core — accumulators on the wire (see distref/wire.h). */
#include "distref/wire.h"

#include <stdlib.h>
#include <string.h>

int dr_wire_init(dr_wire *w, size_t n, dr_err *err)
{
    w->cap = n;
    w->out = malloc(n * DR_ACC_BYTES + 1);
    w->in = malloc(n * DR_ACC_BYTES + 1);
    if (w->out && w->in) return DR_OK;
    dr_wire_free(w);
    return dr_fail(err, DR_ENOMEM, "no memory to stage %zu accumulators", n);
}

void dr_wire_free(dr_wire *w)
{
    free(w->out);
    free(w->in);
    memset(w, 0, sizeof *w);
}

int dr_wire_send(dr_wire *w, dr_device *a, const dr_acc *src, dr_device *b, dr_acc *dst,
                 size_t n, bool overwrite, dr_err *err)
{
    if (n > w->cap)
        return dr_fail(err, DR_EFAULT, "wire: %zu accumulators for a buffer of %zu", n, w->cap);
    for (size_t i = 0; i < n; i++) dr_acc_serialize(&src[i], w->out + i * DR_ACC_BYTES);
    dr_device_copy(b, w->in, a, w->out, n * DR_ACC_BYTES);
    for (size_t i = 0; i < n; i++) {
        dr_acc v;
        if (!dr_acc_deserialize(&v, w->in + i * DR_ACC_BYTES))
            return dr_fail(err, DR_EFAULT, "corrupt accumulator arrived at %s", b->name);
        if (overwrite) dst[i] = v;
        else dr_acc_merge(&dst[i], &v);
    }
    return DR_OK;
}
