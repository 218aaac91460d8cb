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

/* arrays */
typedef struct CUarray_st *CUarray;
typedef struct CUmipmappedArray_st *CUmipmappedArray;
typedef struct {
  size_t Width, Height;
  int Format; /* CUarray_format */
  unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
typedef struct {
  size_t Width, Height, Depth;
  int Format;
  unsigned int NumChannels;
  unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

/* graphs: CUDA_MEM_ALLOC_NODE_PARAMS starts with CUmemPoolProps (88
 * bytes: allocType, handleTypes, location, ...); bytesize is at 104 */
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct {
  CUmemAllocationProp_prefix poolProps; /* the prefix of CUmemPoolProps */
  unsigned char rest_of_pool_props[88 - sizeof(CUmemAllocationProp_prefix)];
  const void *accessDescs;
  size_t accessDescCount;
  size_t bytesize;
  CUdeviceptr dptr;
} CUDA_MEM_ALLOC_NODE_PARAMS;
#define CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT 0
#define CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT 2
#define CU_GRAPH_NODE_TYPE_MEM_ALLOC 10
/* cuGraphInstantiateWithParams' parameters (CUDA 12 and 13) */
typedef struct {
  cuuint64_t flags;
  CUstream hUploadStream;
  CUgraphNode hErrNode_out;
  int result_out;
} CUDA_GRAPH_INSTANTIATE_PARAMS;
#define CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD 2

/* green contexts (CUDA 12.4) */
typedef struct CUgreenCtx_st *CUgreenCtx;
typedef struct CUdevResourceDesc_st *CUdevResourceDesc;

/* pools */
#define CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT 5
#define CU_MEMPOOL_ATTR_USED_MEM_CURRENT 7

/* streams, events, launches */
#define CU_STREAM_CAPTURE_STATUS_NONE 0
typedef struct CUevent_st *CUevent;
typedef struct CUfunc_st *CUfunction;
typedef struct CUkern_st *CUkernel;
typedef struct {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  void *attrs;
  unsigned int numAttrs;
} CUlaunchConfig;
typedef struct {
  CUfunction func;
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  void **kernelParams;
  void **extra;
  CUkernel kern; /* used when func is NULL */
  CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS_v2;
#define CU_GRAPH_NODE_TYPE_KERNEL 0
#define CU_GRAPH_NODE_TYPE_GRAPH 4

/* modules and libraries */
typedef struct CUmod_st *CUmodule;
typedef struct CUlib_st *CUlibrary;

/* contexts and their limits */
typedef int CUlimit;
#define CU_LIMIT_STACK_SIZE 0x00
#define CU_LIMIT_PRINTF_FIFO_SIZE 0x01
#define CU_LIMIT_MALLOC_HEAP_SIZE 0x02
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR 39
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_INVALID_HANDLE 400
#define CUDA_ERROR_ILLEGAL_STATE 401
#define CUDA_ERROR_NOT_READY 600
#define CUDA_ERROR_NOT_FOUND 500
#define CUDA_ERROR_NOT_SUPPORTED 801

_Static_assert(__builtin_offsetof(CUlaunchConfig, hStream) == 32 && sizeof(CUlaunchConfig) == 56,
               "CUlaunchConfig (cuda.h, CUDA 12 and 13)");
_Static_assert(__builtin_offsetof(CUDA_KERNEL_NODE_PARAMS_v2, kern) == 56 && sizeof(CUDA_KERNEL_NODE_PARAMS_v2) == 72,
               "CUDA_KERNEL_NODE_PARAMS_v2 (cuda.h, CUDA 12 and 13)");
_Static_assert(sizeof(CUmemAllocationProp_prefix) == 16, "CUmemAllocationProp starts with 16 bytes");
_Static_assert(__builtin_offsetof(CUDA_GRAPH_INSTANTIATE_PARAMS, hUploadStream) == 8 &&
                   sizeof(CUDA_GRAPH_INSTANTIATE_PARAMS) == 32,
               "CUDA_GRAPH_INSTANTIATE_PARAMS (cuda.h, CUDA 12 and 13)");
_Static_assert(__builtin_offsetof(CUDA_MEM_ALLOC_NODE_PARAMS, bytesize) == 104,
               "CUDA_MEM_ALLOC_NODE_PARAMS.bytesize is at 104 (cuda.h, CUDA 12 and 13)");

#endif
