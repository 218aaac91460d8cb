/* shim/cuda_abi.h: the few types and codes of the CUDA driver API that the
 * shim uses, written from the driver's documented ABI (cuda.h of CUDA 12
 * and 13), so that libtessera-cuda.so builds on machines without the CUDA
 * toolkit, as src/device/nvml_abi.h does for NVML. Values checked against
 * /usr/local/cuda/include/cuda.h (CUDA 13.0) on 2026-11-23. */
#ifndef TESSERA_SHIM_CUDA_ABI_H
#define TESSERA_SHIM_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUctx_st *CUcontext;
typedef uint64_t cuuint64_t;
typedef struct {
  char bytes[16];
} CUuuid;
typedef int CUdriverProcAddressQueryResult;
typedef unsigned long long CUmemGenericAllocationHandle;
/* The start of CUmemAllocationProp (cuda.h): type, requested handle types,
 * then the location; the shim reads only these. */
typedef struct {
  int type;
  int requestedHandleTypes;
  struct {
    int type; /* CU_MEM_LOCATION_TYPE_DEVICE: id is a device ordinal */
    int id;
  } location;
} CUmemAllocationProp_prefix;
#define CU_MEM_LOCATION_TYPE_DEVICE 1

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_NOT_FOUND 500

#endif
