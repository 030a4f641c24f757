/* A C program that adds two vectors with the Tile kernel of examples/vadd.tile, without
 * Python: the kernel is exported by `tilec --emit c ../vadd.tile -o vadd.c` (vadd.c holds the
 * cubins and the launcher, vadd.h declares them; docs/cli.md, "C export"), and this program
 * calls it through the CUDA driver API. Build and run with `make run` (Makefile). */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "vadd.h"

#define CHECK(call)                                                                    \
    do {                                                                               \
        CUresult check_err = (call);                                                   \
        if (check_err != CUDA_SUCCESS) {                                               \
            const char *check_name = NULL;                                             \
            cuGetErrorName(check_err, &check_name);                                    \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,       \
                    check_name ? check_name : "unknown error");                        \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

int main(void)
{
    enum { N = 1000003 };             /* not a multiple of the kernel's tile: a ragged end */
    const int64_t shape[1] = {N}, strides[1] = {1};
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *c = malloc(N * sizeof *c);
    CUdevice device;
    CUcontext context;
    CUdeviceptr da, db, dc;
    unsigned int blocks = (N + 1023) / 1024;    /* the kernel's const TILE = 1024 */
    long i, wrong = 0;

    if (!a || !b || !c)
        return 1;
    for (i = 0; i < N; ++i) {
        a[i] = (float)i * 0.5f;
        b[i] = 1.0f / (float)(i + 1);
    }
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&device, 0));
    CHECK(cuDevicePrimaryCtxRetain(&context, device));
    CHECK(cuCtxSetCurrent(context));
    CHECK(vadd_load());

    CHECK(cuMemAlloc(&da, N * sizeof *a));
    CHECK(cuMemAlloc(&db, N * sizeof *b));
    CHECK(cuMemAlloc(&dc, N * sizeof *c));
    CHECK(cuMemcpyHtoD(da, a, N * sizeof *a));
    CHECK(cuMemcpyHtoD(db, b, N * sizeof *b));
    CHECK(vadd_launch_vadd(NULL, blocks, 1, 1, da, shape, strides, db, shape, strides,
                           dc, shape, strides));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoH(c, dc, N * sizeof *c));

    for (i = 0; i < N; ++i)
        if (c[i] != a[i] + b[i])           /* one f32 add: exactly what the host computes */
            ++wrong;
    printf("vadd: %ld of %d elements wrong\n", wrong, N);

    CHECK(cuMemFree(da));
    CHECK(cuMemFree(db));
    CHECK(cuMemFree(dc));
    CHECK(vadd_unload());
    CHECK(cuDevicePrimaryCtxRelease(device));
    free(a);
    free(b);
    free(c);
    return wrong != 0;
}
