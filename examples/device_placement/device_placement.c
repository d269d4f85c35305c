/* The seed's first program (shared/seeds/004, "Explicit Device Placement"):
 * two random tensors, one on the CPU and one on the GPU, a matmul pinned to
 * the GPU and a reduce_sum pinned to the CPU, with TensorFlow's placement
 * log switched on. Line for line:
 *
 *   cpu_device = '/CPU:0'; gpu_device = '/GPU:0'     dr_device_parse + dr_device_init
 *   with tf.device(cpu_device):
 *       cpu_tensor = tf.random.normal((100,100))     random_normal(&cpu, ...)
 *   with tf.device(gpu_device):
 *       gpu_tensor = tf.random.normal((100,100))     random_normal(&gpu, ...)
 *       result_gpu = tf.matmul(gpu_tensor, ...)      dr_gemm_f32 on the GPU's memory
 *   with tf.device(cpu_device):
 *       result_cpu = tf.reduce_sum(cpu_tensor)       dr_sum_f32 on the CPU's memory
 *
 * Each op prints the line tf.debugging.set_log_device_placement(True) prints
 * for an eager op in TensorFlow 2.21 ("Executing op <type> in device <name>").
 * The devices are distref's emulated ones: memory is host memory, but every
 * tensor is allocated on (and counted against) the device it names, and the
 * matmul and the sum are exact, rounded once, so the printed sum is the same
 * bits on any machine.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "distref/device.h"
#include "distref/elem.h"
#include "distref/exact.h"
#include "distref/rng.h"

enum { N = 100, SEED = 42, STREAM_CPU = 1, STREAM_GPU = 2 };

static void log_op(const char *type, const dr_device *d)
{
    printf("Executing op %s in device %s\n", type, d->name);
}

/* tf.random.normal on device d: n standard normal floats by Marsaglia's
 * polar method on counter-based uniforms (dr_logf and a correctly rounded
 * sqrt, so the values are the same bits everywhere). */
static float *random_normal(dr_device *d, size_t n, uint64_t stream)
{
    float *x;
    dr_err err;
    uint64_t k = 0;
    if (dr_device_alloc(d, n * sizeof *x, (void **)&x, &err) != DR_OK) {
        fprintf(stderr, "device_placement: %s\n", err.msg);
        exit(1);
    }
    for (size_t i = 0; i < n; i += 2) {
        float u, v, s;
        do {
            u = 2.0f * dr_rng_uniform(SEED, stream, k++) - 1.0f;
            v = 2.0f * dr_rng_uniform(SEED, stream, k++) - 1.0f;
            s = u * u + v * v;
        } while (s >= 1.0f || s == 0.0f);
        s = sqrtf(-2.0f * dr_logf(s) / s);
        x[i] = u * s;
        if (i + 1 < n) x[i + 1] = v * s;
    }
    log_op("RandomStandardNormal", d);
    return x;
}

int main(void)
{
    dr_device_spec cs, gs;
    dr_device cpu, gpu;
    dr_err err;
    float *cpu_tensor, *gpu_tensor, *result_gpu, result_cpu;

    if (dr_device_parse("/CPU:0", &cs, &err) != DR_OK || dr_device_parse("/GPU:0", &gs, &err) != DR_OK) {
        fprintf(stderr, "device_placement: %s\n", err.msg);
        return 1;
    }
    dr_device_init(&cpu, &cs, 0);
    dr_device_init(&gpu, &gs, 0);

    cpu_tensor = random_normal(&cpu, (size_t)N * N, STREAM_CPU);
    gpu_tensor = random_normal(&gpu, (size_t)N * N, STREAM_GPU);

    if (dr_device_alloc(&gpu, (size_t)N * N * sizeof *result_gpu, (void **)&result_gpu, &err) != DR_OK) {
        fprintf(stderr, "device_placement: %s\n", err.msg);
        return 1;
    }
    dr_gemm_f32(DR_NO_TRANS, DR_NO_TRANS, N, N, N, gpu_tensor, N, gpu_tensor, N, NULL, result_gpu, N);
    log_op("MatMul", &gpu);

    result_cpu = dr_sum_f32(cpu_tensor, (size_t)N * N);
    log_op("Sum", &cpu);

    printf("Result on GPU : (%d, %d)\n", N, N);
    printf("Result on CPU: tf.Tensor(%.9g, shape=(), dtype=float32)\n", (double)result_cpu);
    printf("memory: %s peak %llu bytes, %s peak %llu bytes\n", cpu.name, (unsigned long long)cpu.peak, gpu.name,
           (unsigned long long)gpu.peak);

    dr_device_free(&gpu, result_gpu, (size_t)N * N * sizeof *result_gpu);
    dr_device_free(&gpu, gpu_tensor, (size_t)N * N * sizeof *gpu_tensor);
    dr_device_free(&cpu, cpu_tensor, (size_t)N * N * sizeof *cpu_tensor);
    return 0;
}
