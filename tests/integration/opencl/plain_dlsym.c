/* plain_dlsym.c: a program without OpenCL that looks up libc's names with
 * dlsym, as many do. Under libtessera-opencl.so (node-wide, every process
 * loads it) the shim must not load the ICD loader into it: prints whether
 * libOpenCL ended up mapped. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  void *a = dlsym(RTLD_DEFAULT, "close"), *b = dlsym(RTLD_DEFAULT, "clock_gettime");
  FILE *f = fopen("/proc/self/maps", "r");
  char line[1024];
  int mapped = 0;
  while (f && fgets(line, sizeof(line), f))
    if (strstr(line, "libOpenCL")) mapped = 1;
  if (f) fclose(f);
  printf("found=%d libOpenCL=%d\n", a && b, mapped);
  return 0;
}
