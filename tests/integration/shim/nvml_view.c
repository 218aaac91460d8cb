/* nvml_view: what NVML's memory queries say about device 0, asked the two
 * ways programs reach NVML: by linked symbol (the preloaded shim's
 * definitions come first) and by dlopen + dlsym (the shim's dlsym hands out
 * its hooks). Prints "linked total=T free=F used=U", the same for "v2"
 * (with reserved) and for "dlsym". Built against the fake NVML. */
#include <dlfcn.h>
#include <stdio.h>

typedef struct nvml_dev *nvml_dev_t;
typedef struct {
  unsigned long long total, free, used;
} mem_t;
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} mem2_t;
int nvmlInit_v2(void);
int nvmlDeviceGetHandleByIndex_v2(unsigned int, nvml_dev_t *);
int nvmlDeviceGetMemoryInfo(nvml_dev_t, mem_t *);
int nvmlDeviceGetMemoryInfo_v2(nvml_dev_t, mem2_t *);

int main(int argc, char **argv) {
  nvml_dev_t d;
  if (argc != 2 || nvmlInit_v2() != 0 || nvmlDeviceGetHandleByIndex_v2(0, &d) != 0) return 2;
  mem_t m;
  mem2_t m2 = {.version = 2u << 24 | (unsigned)sizeof(mem2_t)};
  if (nvmlDeviceGetMemoryInfo(d, &m) != 0 || nvmlDeviceGetMemoryInfo_v2(d, &m2) != 0) return 3;
  printf("linked total=%llu free=%llu used=%llu\n", m.total, m.free, m.used);
  printf("v2 total=%llu free=%llu used=%llu reserved=%llu\n", m2.total, m2.free, m2.used, m2.reserved);
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  int (*get)(nvml_dev_t, mem_t *) = h ? (int (*)(nvml_dev_t, mem_t *))dlsym(h, "nvmlDeviceGetMemoryInfo") : NULL;
  if (!get || get(d, &m) != 0) return 4;
  printf("dlsym total=%llu free=%llu used=%llu\n", m.total, m.free, m.used);
  return 0;
}
