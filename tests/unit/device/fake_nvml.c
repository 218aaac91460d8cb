/* A stand-in for libnvidia-ml.so.1 with the entry points tessera uses, so the
 * dlopen path is tested on machines without a GPU. FAKE_NVML_MODE picks the
 * behaviour: "two" (default: an H100 with MIG off and an A100 with MIG on),
 * "init_fail", "none" (no GPU), "no_attr" (attributes unsupported: the SM
 * count comes from cores and compute capability), "memory_fail". */
#include <stdlib.h>
#include <string.h>

typedef struct dev { int i; } *dev_t_;
static struct dev devs[2] = {{0}, {1}};
static const char *mode(void) {
  const char *m = getenv("FAKE_NVML_MODE");
  return m ? m : "two";
}
int nvmlInit_v2(void) { return strcmp(mode(), "init_fail") == 0 ? 9 /* DRIVER_NOT_LOADED */ : 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int r) { return r == 9 ? "Driver Not Loaded" : "Unknown Error"; }
int nvmlDeviceGetCount_v2(unsigned int *n) {
  *n = strcmp(mode(), "none") == 0 ? 0 : 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, dev_t_ *h) {
  if (i > 1) return 2;
  *h = &devs[i];
  return 0;
}
int nvmlDeviceGetName(dev_t_ h, char *buf, unsigned int len) {
  strncpy(buf, h->i == 0 ? "NVIDIA H100 80GB HBM3" : "NVIDIA A100-SXM4-40GB", len);
  return 0;
}
int nvmlDeviceGetUUID(dev_t_ h, char *buf, unsigned int len) {
  strncpy(buf, h->i == 0 ? "GPU-00000000-1111-2222-3333-444444444444" : "GPU-aaaa", len);
  return 0;
}
typedef struct { unsigned long long total, free, used; } mem_t;
int nvmlDeviceGetMemoryInfo(dev_t_ h, mem_t *m) {
  if (strcmp(mode(), "memory_fail") == 0) return 999;
  m->total = h->i == 0 ? 85520809984ULL : 42949672960ULL;
  m->free = m->total;
  m->used = 0;
  return 0;
}
int nvmlDeviceGetMigMode(dev_t_ h, unsigned int *cur, unsigned int *pend) {
  *cur = *pend = h->i == 1;
  return 0;
}
typedef struct {
  unsigned int sm, a, b, c, d, e, f, g;
  unsigned long long mb;
} attr_t;
int nvmlDeviceGetAttributes_v2(dev_t_ h, attr_t *a) {
  if (strcmp(mode(), "no_attr") == 0) return 3; /* NOT_SUPPORTED */
  memset(a, 0, sizeof(*a));
  a->sm = h->i == 0 ? 132 : 108;
  return 0;
}
int nvmlDeviceGetNumGpuCores(dev_t_ h, unsigned int *n) {
  *n = h->i == 0 ? 16896 : 6912;
  return 0;
}
int nvmlDeviceGetCudaComputeCapability(dev_t_ h, int *major, int *minor) {
  *major = h->i == 0 ? 9 : 8;
  *minor = 0;
  return 0;
}
