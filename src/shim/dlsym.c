/* dlsym.c: libtessera-cuda.so's exported dlsym: the driver entries it hooks
 * go to the shim's own dlsym (real.c), every other name on to libc's, with
 * the caller's return address kept (tenant/dlsym.h). A file of its own, so
 * that libtessera-preload.so, which carries both shims, can give both one
 * dlsym instead (src/shim_preload). */
#include "shim/shim.h"
#include "tenant/dlsym.h"

TSR_TENANT_DLSYM(tsr_shim_dlsym_route, tsr_shim_dlsym_hook)
