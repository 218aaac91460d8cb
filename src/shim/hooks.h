/* shim/hooks.h: every CUDA driver entry the shim defines (its hooks),
 * declared once: for real.c, whose table pairs each name with its hook,
 * and for the files that define them (memory.c, pools.c, arrays.c,
 * graphs.c, context.c, launch.c, legacy.c, green.c, procaddr.c), so that
 * the compiler checks each definition against this declaration. Types from
 * shim/cuda_abi.h. */
#ifndef TESSERA_SHIM_HOOKS_H
#define TESSERA_SHIM_HOOKS_H

#include <stddef.h>

#include "shim/cuda_abi.h"

CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned int);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *, size_t, CUstream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
CUresult cuMemCreate(CUmemGenericAllocationHandle *, size_t, const void *, unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuDeviceTotalMem_v2(size_t *, CUdevice);
CUresult cuMemPoolCreate(CUmemoryPool *, const void *);
CUresult cuMemPoolDestroy(CUmemoryPool);
CUresult cuMemPoolTrimTo(CUmemoryPool, size_t);
CUresult cuArrayCreate_v2(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
CUresult cuArray3DCreate_v2(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
CUresult cuMipmappedArrayCreate(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned int);
CUresult cuArrayDestroy(CUarray);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray);
CUresult cuGraphAddMemAllocNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUDA_MEM_ALLOC_NODE_PARAMS *);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *, CUgraph, unsigned long long);
CUresult cuGraphInstantiateWithParams(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *);
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *);
CUresult cuGraphInstantiate_v2(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
CUresult cuGraphInstantiate(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
CUresult cuGraphExecDestroy(CUgraphExec);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuGraphLaunch_ptsz(CUgraphExec, CUstream);
CUresult cuGraphUpload(CUgraphExec, CUstream);
CUresult cuGraphUpload_ptsz(CUgraphExec, CUstream);
CUresult cuDeviceGraphMemTrim(CUdevice);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxCreate_v3(CUcontext *, void *, int, unsigned int, CUdevice);
CUresult cuCtxCreate_v4(CUcontext *, void *, unsigned int, CUdevice);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuDevicePrimaryCtxReset_v2(CUdevice);
CUresult cuCtxSetLimit(CUlimit, size_t);
CUresult cuModuleLoad(CUmodule *, const char *);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleLoadDataEx(CUmodule *, const void *, unsigned int, void *, void **);
CUresult cuModuleLoadFatBinary(CUmodule *, const void *);
CUresult cuModuleUnload(CUmodule);
CUresult cuLibraryLoadData(CUlibrary *, const void *, void *, void **, unsigned int, void *, void **, unsigned int);
CUresult cuLibraryLoadFromFile(CUlibrary *, const char *, void *, void **, unsigned int, void *, void **, unsigned int);
CUresult cuLibraryUnload(CUlibrary);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                        void **, void **);
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void **, void **);
CUresult cuLaunchKernelEx(const CUlaunchConfig *, CUfunction, void **, void **);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *, CUfunction, void **, void **);
CUresult cuLaunchCooperativeKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   CUstream, void **);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, CUstream, void **);
CUresult cuStreamBeginCapture(CUstream);
CUresult cuStreamBeginCapture_ptsz(CUstream);
CUresult cuStreamBeginCapture_v2(CUstream, int);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream, int);
CUresult cuStreamBeginCaptureToGraph(CUstream, CUgraph, const CUgraphNode *, const void *, size_t, int);
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream, CUgraph, const CUgraphNode *, const void *, size_t, int);
CUresult cuStreamEndCapture(CUstream, CUgraph *);
CUresult cuStreamEndCapture_ptsz(CUstream, CUgraph *);
CUresult cuGraphExecUpdate_v2(CUgraphExec, CUgraph, void *);
CUresult cuGraphExecUpdate(CUgraphExec, CUgraph, CUgraphNode *, int *);
CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2 *);
CUresult cuGetProcAddress(const char *, void **, int, cuuint64_t);
CUresult cuGetProcAddress_v2(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
CUresult cuMemAlloc(unsigned int *, unsigned int);
CUresult cuMemAllocPitch(unsigned int *, unsigned int *, unsigned int, unsigned int, unsigned int);
CUresult cuMemFree(unsigned int);
CUresult cuMemGetInfo(unsigned int *, unsigned int *);
CUresult cuDeviceTotalMem(unsigned int *, CUdevice);
CUresult cuCtxCreate(CUcontext *, unsigned int, CUdevice);
CUresult cuArrayCreate(CUarray *, const void *);
CUresult cuArray3DCreate(CUarray *, const void *);
CUresult cuCtxDestroy(CUcontext);
CUresult cuDevicePrimaryCtxRelease(CUdevice);
CUresult cuDevicePrimaryCtxReset(CUdevice);
CUresult cuGreenCtxCreate(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned int);

#endif
