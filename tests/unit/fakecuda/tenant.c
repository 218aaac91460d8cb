/* fakecuda_tenant MIB: a process that uses the fake driver for
 * unit.fakecuda_state. It initializes, makes the primary context current,
 * allocates MIB MiB with cuMemAlloc, prints "ready" and waits until its
 * standard input is closed; then it exits normally (giving its memory
 * back). If a step fails it prints "failed STEP RC" and exits with 3. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int fail(const char *step, CUresult rc) {
  printf("failed %s %d\n", step, (int)rc);
  fflush(stdout);
  return 3;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fakecuda_tenant MIB\n");
    return 2;
  }
  size_t mib = strtoull(argv[1], NULL, 10);
  CUresult rc;
  CUcontext c;
  CUdeviceptr p;
  if ((rc = cuInit(0)) != CUDA_SUCCESS) return fail("init", rc);
  if ((rc = cuDevicePrimaryCtxRetain(&c, 0)) != CUDA_SUCCESS) return fail("retain", rc);
  if ((rc = cuCtxSetCurrent(c)) != CUDA_SUCCESS) return fail("current", rc);
  if (mib > 0 && (rc = cuMemAlloc(&p, mib << 20)) != CUDA_SUCCESS) return fail("alloc", rc);
  printf("ready\n");
  fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
  return 0;
}
