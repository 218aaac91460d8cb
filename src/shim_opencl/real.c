/* real.c: the real ICD loader.
 *
 * Opened with dlopen("libOpenCL.so.1") ($TESSERA_REAL_LIBOPENCL overrides
 * the name, for tests); dlsym on that handle finds the loader's own
 * definitions even though the shim, preloaded, defines the same names in
 * the global scope. A program that never loaded OpenCL gets it loaded here
 * on its first call, as linking it would have. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "shim_opencl/shim.h"

tsr_ocl_real_t tsr__ocl_real;

#define TSR__LOAD(name) \
  memcpy(&tsr__ocl_real.name, (void *[]){dlsym(lib, #name)}, sizeof(void *))

bool tsr_ocl_real_load(void) {
  const char *name = getenv("TESSERA_REAL_LIBOPENCL");
  void *lib = dlopen(name && *name ? name : "libOpenCL.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) return false;
  TSR__LOAD(clGetPlatformIDs);
  TSR__LOAD(clGetPlatformInfo);
  TSR__LOAD(clGetDeviceIDs);
  TSR__LOAD(clGetDeviceInfo);
  TSR__LOAD(clCreateContext);
  TSR__LOAD(clCreateContextFromType);
  TSR__LOAD(clRetainContext);
  TSR__LOAD(clReleaseContext);
  TSR__LOAD(clGetContextInfo);
  TSR__LOAD(clCreateBuffer);
  TSR__LOAD(clCreateBufferWithProperties);
  TSR__LOAD(clCreateSubBuffer);
  TSR__LOAD(clCreateImage);
  TSR__LOAD(clCreateImageWithProperties);
  TSR__LOAD(clCreateImage2D);
  TSR__LOAD(clCreateImage3D);
  TSR__LOAD(clCreatePipe);
  TSR__LOAD(clRetainMemObject);
  TSR__LOAD(clReleaseMemObject);
  TSR__LOAD(clSVMAlloc);
  TSR__LOAD(clSVMFree);
  TSR__LOAD(clEnqueueSVMFree);
  TSR__LOAD(clGetExtensionFunctionAddress);
  TSR__LOAD(clGetExtensionFunctionAddressForPlatform);
  return tsr__ocl_real.clGetPlatformIDs != NULL;
}
