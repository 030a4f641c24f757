/* A test double of the CUDA driver library for the C export's tests (tests/aot/): the calls an
 * exported launcher makes, compiled against the real cuda.h (so their signatures are checked),
 * each appending one line to the file named by TILE_FAKE_CUDA_LOG. Nothing runs: a launch
 * records its kernel, grid, block, shared memory, stream, cluster and parameter buffer; a
 * tensor-map encode records its arguments and fills the map with a marker the test replaces
 * with the emulator's encoding of the same arguments.
 *
 * TILE_FAKE_CUDA_NO_CONTEXT=1 makes cuCtxGetDevice fail as without a current context;
 * TILE_FAKE_CUDA_FAIL=NAME makes that call return CUDA_ERROR_INVALID_VALUE. */

#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fake_library { int id; };
struct fake_kernel { int library; char name[256]; };
static int fake_libraries;
static unsigned long long fake_maps;

static FILE *fake_log(void)
{
    const char *path = getenv("TILE_FAKE_CUDA_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f == NULL) {
        fprintf(stderr, "fake_cuda: TILE_FAKE_CUDA_LOG is not a writable file\n");
        exit(3);
    }
    return f;
}

static int fake_fails(const char *name)
{
    const char *which = getenv("TILE_FAKE_CUDA_FAIL");
    return which != NULL && strcmp(which, name) == 0;
}

/* An ELF image's size from its header: the end of the section or program header table,
 * whichever comes last (the linker puts them after the sections). */
static size_t fake_elf_size(const unsigned char *p)
{
    uint64_t phoff, shoff, ph, sh;
    uint16_t phentsize, phnum, shentsize, shnum;
    memcpy(&phoff, p + 0x20, 8);
    memcpy(&shoff, p + 0x28, 8);
    memcpy(&phentsize, p + 0x36, 2);
    memcpy(&phnum, p + 0x38, 2);
    memcpy(&shentsize, p + 0x3a, 2);
    memcpy(&shnum, p + 0x3c, 2);
    ph = phoff + (uint64_t)phentsize * phnum;
    sh = shoff + (uint64_t)shentsize * shnum;
    return (size_t)(ph > sh ? ph : sh);
}

CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                           void **jitOptionsValues, unsigned int numJitOptions,
                           CUlibraryOption *libraryOptions, void **libraryOptionValues,
                           unsigned int numLibraryOptions)
{
    const unsigned char *p = (const unsigned char *)code;
    size_t n, i;
    uint64_t h = 1469598103934665603ULL;
    FILE *f;
    struct fake_library *lib;
    (void)jitOptions; (void)jitOptionsValues; (void)libraryOptions; (void)libraryOptionValues;
    if (fake_fails("cuLibraryLoadData"))
        return CUDA_ERROR_INVALID_VALUE;
    if (memcmp(p, "\177ELF", 4) != 0 || ((uintptr_t)code % 8) != 0)
        return CUDA_ERROR_INVALID_IMAGE;
    n = fake_elf_size(p);
    for (i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    lib = (struct fake_library *)malloc(sizeof *lib);
    lib->id = fake_libraries++;
    *library = (CUlibrary)lib;
    f = fake_log();
    fprintf(f, "load library=%d size=%zu fnv=%016llx jit=%u lib=%u\n", lib->id, n,
            (unsigned long long)h, numJitOptions, numLibraryOptions);
    fclose(f);
    return CUDA_SUCCESS;
}

CUresult cuLibraryGetKernel(CUkernel *kernel, CUlibrary library, const char *name)
{
    struct fake_kernel *k;
    FILE *f;
    if (fake_fails("cuLibraryGetKernel"))
        return CUDA_ERROR_NOT_FOUND;
    k = (struct fake_kernel *)calloc(1, sizeof *k);
    k->library = ((struct fake_library *)library)->id;
    strncpy(k->name, name, sizeof k->name - 1);
    *kernel = (CUkernel)k;
    f = fake_log();
    fprintf(f, "kernel library=%d name=%s\n", k->library, name);
    fclose(f);
    return CUDA_SUCCESS;
}

CUresult cuLibraryUnload(CUlibrary library)
{
    FILE *f = fake_log();
    fprintf(f, "unload library=%d\n", ((struct fake_library *)library)->id);
    fclose(f);
    free(library);
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    if (getenv("TILE_FAKE_CUDA_NO_CONTEXT") != NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = 0;
    return CUDA_SUCCESS;
}

CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
                              CUdevice dev)
{
    struct fake_kernel *k = (struct fake_kernel *)kernel;
    FILE *f = fake_log();
    fprintf(f, "attribute library=%d name=%s attr=%d value=%d device=%d\n", k->library,
            k->name, (int)attrib, val, (int)dev);
    fclose(f);
    return fake_fails("cuKernelSetAttribute") ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult fake_launch(CUfunction fn, const unsigned int grid[3],
                            const unsigned int block[3], unsigned int smem, CUstream stream,
                            const unsigned int cluster[3], void **kernelParams, void **extra)
{
    struct fake_kernel *k = (struct fake_kernel *)fn;
    const unsigned char *buf = NULL;
    size_t size = 0, i;
    FILE *f;
    if (kernelParams != NULL)
        return CUDA_ERROR_INVALID_VALUE;        /* the launcher passes a packed buffer */
    for (i = 0; extra != NULL && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            buf = (const unsigned char *)extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            size = *(size_t *)extra[i + 1];
        else
            return CUDA_ERROR_INVALID_VALUE;
    }
    f = fake_log();
    fprintf(f, "launch library=%d name=%s grid=%u,%u,%u block=%u,%u,%u smem=%u stream=%llx "
            "cluster=%u,%u,%u params=", k->library, k->name, grid[0], grid[1], grid[2],
            block[0], block[1], block[2], smem, (unsigned long long)(uintptr_t)stream,
            cluster[0], cluster[1], cluster[2]);
    for (i = 0; i < size; ++i)
        fprintf(f, "%02x", buf[i]);
    fprintf(f, " align=%u\n", (unsigned)((uintptr_t)buf % 64));
    fclose(f);
    return fake_fails("launch") ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra)
{
    unsigned int grid[3], block[3], cluster[3] = {0, 0, 0};
    grid[0] = gridDimX; grid[1] = gridDimY; grid[2] = gridDimZ;
    block[0] = blockDimX; block[1] = blockDimY; block[2] = blockDimZ;
    return fake_launch(f, grid, block, sharedMemBytes, hStream, cluster, kernelParams, extra);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                          void **extra)
{
    unsigned int grid[3], block[3], cluster[3] = {0, 0, 0}, i;
    grid[0] = config->gridDimX; grid[1] = config->gridDimY; grid[2] = config->gridDimZ;
    block[0] = config->blockDimX; block[1] = config->blockDimY; block[2] = config->blockDimZ;
    for (i = 0; i < config->numAttrs; ++i) {
        if (config->attrs[i].id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            return CUDA_ERROR_INVALID_VALUE;
        cluster[0] = config->attrs[i].value.clusterDim.x;
        cluster[1] = config->attrs[i].value.clusterDim.y;
        cluster[2] = config->attrs[i].value.clusterDim.z;
    }
    return fake_launch(f, grid, block, config->sharedMemBytes, config->hStream, cluster,
                       kernelParams, extra);
}

CUresult cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                cuuint32_t tensorRank, void *globalAddress,
                                const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                                const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
                                CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                CUtensorMapL2promotion l2Promotion,
                                CUtensorMapFloatOOBfill oobFill)
{
    cuuint32_t i;
    unsigned long long index = fake_maps++;
    FILE *f = fake_log();
    fprintf(f, "tensormap index=%llu dtype=%d rank=%u address=%llu dims=", index,
            (int)tensorDataType, tensorRank, (unsigned long long)(uintptr_t)globalAddress);
    for (i = 0; i < tensorRank; ++i)
        fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)globalDim[i]);
    fprintf(f, " strides=");
    for (i = 0; i + 1 < tensorRank; ++i)
        fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)globalStrides[i]);
    fprintf(f, " box=");
    for (i = 0; i < tensorRank; ++i)
        fprintf(f, "%s%u", i ? "," : "", boxDim[i]);
    fprintf(f, " estrides=");
    for (i = 0; i < tensorRank; ++i)
        fprintf(f, "%s%u", i ? "," : "", elementStrides[i]);
    fprintf(f, " interleave=%d swizzle=%d l2=%d oob=%d\n", (int)interleave, (int)swizzle,
            (int)l2Promotion, (int)oobFill);
    fclose(f);
    memset(tensorMap, 0, sizeof *tensorMap);
    memcpy(tensorMap, "TILEMAP", 8);
    memcpy((unsigned char *)tensorMap + 8, &index, 8);
    return fake_fails("cuTensorMapEncodeTiled") ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* Enough of the rest of the driver, in host memory, for examples/c/main.c to link and run:
 * memory calls copy bytes; nothing executes a kernel. */
CUresult cuInit(unsigned int flags) { (void)flags; return CUDA_SUCCESS; }

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    static int fake_context;
    (void)dev;
    *pctx = (CUcontext)&fake_context;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { (void)dev; return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext ctx) { (void)ctx; return CUDA_SUCCESS; }
CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
    void *p = malloc(bytesize ? bytesize : 1);
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemFree(CUdeviceptr dptr)
{
    free((void *)(uintptr_t)dptr);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n)
{
    memcpy((void *)(uintptr_t)dst, src, n);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n)
{
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    (void)error;
    *pStr = "CUDA_ERROR (fake_cuda)";
    return CUDA_SUCCESS;
}
