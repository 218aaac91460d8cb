/* preload.c: libtessera-preload.so, both shims in one object, for the
 * node-wide mode (/etc/ld.so.preload).
 *
 * In the node-wide mode every process on the node loads what
 * /etc/ld.so.preload lists: every shell, every `ls`, every cron job, almost
 * none of which ever touches a GPU. What each preloaded object costs such a
 * process is mostly the loading itself (opening, mapping, relocating a
 * shared object): measured on the H100 machine, an empty library costs
 * /bin/true about as much as this one does, and the two shims apart cost
 * half as much again (bench/startup, bench/results/startup-2026-11-27.md).
 * So the node-wide mode loads one object, this one: libtessera-cuda.so's and
 * libtessera-opencl.so's objects linked together (each unchanged: they
 * share no name but dlsym), and one dlsym that sends each shim's hooked
 * names to that shim and every other name on to libc's dlsym untouched
 * (tenant/dlsym.h). Each shim still attaches on its own API's first call,
 * each with its own slot in a lease's region, as when the two are preloaded
 * apart. */
#include "shim/shim.h"
#include "shim_opencl/shim.h"
#include "tenant/dlsym.h"

/* Each shim's names to that shim. */
static tsr_tenant_dlsym_fn tsr__hook_of(const char *symbol) {
  tsr_tenant_dlsym_fn hook = tsr_shim_dlsym_hook(symbol);
  return hook ? hook : tsr_ocl_dlsym_hook(symbol);
}

TSR_TENANT_DLSYM(tsr_preload_dlsym_route, tsr__hook_of)
