// A module whose statics the shim must read from a compressed fatbin
// (statics_zstd.fatbin, made by the command in paths.c): 1 GiB in the sm_90
// code and PTX, 256 MiB in the sm_80 code.
#if __CUDA_ARCH__ >= 900
#define BYTES (1u << 30)
#else
#define BYTES (1u << 28)
#endif
__device__ char big[BYTES];
extern "C" __global__ void touch(int i) { big[i] = 1; }
