/* gpu_tenant.c: a CUDA process that never loads the shim, for backstop.sh.
 *
 *   tsr_gpu_tenant MIB [--ignore-term] [--exit] [--region DIR LEASE]
 *
 * Uses the driver it is linked with (the driver double: tests/fakes/cuda):
 * makes the primary context current and allocates MIB MiB with cuMemAlloc,
 * prints "ready <pid>" and then waits to be signalled. With --region it
 * first claims a slot in lease LEASE's region under DIR (as the shim would,
 * charging nothing), so that only the slot ties it to the lease; with
 * --ignore-term it ignores SIGTERM; with --exit it exits (normally, giving
 * its memory back) once ready. A step that fails prints
 * "failed STEP RC" and exits with 3. */
#include <cuda.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "region/region.h"

static int fail(const char *step, int rc) {
  printf("failed %s %d\n", step, rc);
  fflush(stdout);
  return 3;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: tsr_gpu_tenant MIB [--ignore-term] [--exit] [--region DIR LEASE]\n");
    return 2;
  }
  size_t mib = strtoull(argv[1], NULL, 10);
  int exit_when_ready = 0;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--ignore-term") == 0) {
      signal(SIGTERM, SIG_IGN);
    } else if (strcmp(argv[i], "--exit") == 0) {
      exit_when_ready = 1;
    } else if (strcmp(argv[i], "--region") == 0 && i + 2 < argc) {
      uint64_t lease = strtoull(argv[i + 2], NULL, 10);
      char name[64], path[4200];
      tsr_region_file_name(lease, name, sizeof name);
      snprintf(path, sizeof path, "%s/%s", argv[i + 1], name);
      tsr_region_t *r = NULL;
      tsr_status_t st = tsr_region_open(AT_FDCWD, path, lease, &r);
      if (st) return fail("region", (int)tsr_status_code(st));
      tsr_region_proc_t self;
      tsr_region_proc_self(&self);
      uint32_t slot;
      st = tsr_region_attach(r, &self, &slot);
      if (st) return fail("attach", (int)tsr_status_code(st));
      i += 2; /* the mapping and the slot stay for the process's life */
    } else {
      fprintf(stderr, "tsr_gpu_tenant: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  CUresult rc;
  CUcontext c;
  CUdeviceptr p;
  if ((rc = cuInit(0)) != CUDA_SUCCESS) return fail("init", rc);
  if ((rc = cuDevicePrimaryCtxRetain(&c, 0)) != CUDA_SUCCESS) return fail("retain", rc);
  if ((rc = cuCtxSetCurrent(c)) != CUDA_SUCCESS) return fail("current", rc);
  if (mib > 0 && (rc = cuMemAlloc(&p, mib << 20)) != CUDA_SUCCESS) return fail("alloc", rc);
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  if (exit_when_ready) return 0;
  for (;;) pause();
}
