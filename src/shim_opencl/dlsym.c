/* dlsym.c: libtessera-opencl.so's exported dlsym: the loader's entries it
 * hooks go to the shim's own dlsym (real.c), every other name on to the
 * next dlsym, with the caller's return address kept (tenant/dlsym.h). A
 * file of its own, so that libtessera-preload.so, which carries both
 * shims, can give both one dlsym instead (src/shim_preload). */
#include "shim_opencl/shim.h"
#include "tenant/dlsym.h"

TSR_TENANT_DLSYM(tsr_ocl_dlsym_route, tsr_ocl_dlsym_hook)
