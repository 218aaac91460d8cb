/* attach.c: an OpenCL program meets its leases (tenant/tenant.h: which
 * leases, their regions and slots, the policy), and its devices and
 * contexts are matched to them.
 *
 * A device is charged to the lease whose region names its PCI bus id
 * (cl_khr_pci_bus_info, or NVIDIA's CL_DEVICE_PCI_*_NV attributes, which
 * its platform also answers), or, when the device or the region has none
 * (a CPU device, a declared device), whose OpenCL name pattern matches the
 * device's CL_DEVICE_NAME. A context is charged to the lease of its first
 * device that has one. A forked child attaches anew under its own pid on
 * its first hooked call; a process that exits gives its slots back. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim_opencl/shim.h"

#define TSR__NV_PCI_BUS 0x4008    /* CL_DEVICE_PCI_BUS_ID_NV */
#define TSR__NV_PCI_SLOT 0x4009   /* CL_DEVICE_PCI_SLOT_ID_NV: device << 3 | function */
#define TSR__NV_PCI_DOMAIN 0x400A /* CL_DEVICE_PCI_DOMAIN_ID_NV */
#define TSR__NV_VENDOR 0x10DEu
#define TSR__DEVICES_MAX 64
#define TSR__CONTEXTS_MAX 256

tsr_tenant_t tsr_ocl;

static tsr_tenant_once_t tsr__once = TSR_TENANT_ONCE_INIT;

/* What was learnt of devices and contexts, under one lock (a lookup is a
 * few compares; contexts and devices are few). */
static pthread_mutex_t tsr__cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  cl_device_id id;
  int lease;
} tsr__devices[TSR__DEVICES_MAX];
static size_t tsr__ndevices;
static struct {
  cl_context id;
  tsr_ocl_ctx_info_t info;
} tsr__contexts[TSR__CONTEXTS_MAX];
static size_t tsr__ncontexts;

static void tsr__detach_all(void) { tsr_tenant_detach(&tsr_ocl); }

static void tsr__child_after_fork(void) {
  tsr_tenant_forget(&tsr_ocl);
  tsr_ocl_objects_reset();
  pthread_mutex_init(&tsr__cache_lock, NULL);
  tsr__ndevices = tsr__ncontexts = 0;
  tsr_tenant_once_again(&tsr__once);
}

/* Start-up: the ICD loader, then the leases. */
static void tsr__start(void) {
  if (!tsr_ocl_real.clGetPlatformIDs && !tsr_ocl_real_load()) {
    const char *name = tsr_tenant_getenv("TESSERA_REAL_LIBOPENCL");
    tsr_tenant_warn_once(TSR_WARN_NO_ICD_LOADER, "cannot load the OpenCL ICD loader (%.200s); no OpenCL platform",
                         name && *name ? name : "libOpenCL.so.1");
  }
  tsr_tenant_attach(&tsr_ocl);
}

void tsr_ocl_ready(void) { tsr_tenant_once(&tsr__once, tsr__start, tsr__child_after_fork, tsr__detach_all); }

/* The device's PCI bus id as "dddd:bb:dd.f", or "" when it has none. */
static void tsr__device_pci(cl_device_id dev, char *out, size_t cap) {
  out[0] = '\0';
  cl_device_pci_bus_info_khr khr;
  memset(&khr, 0, sizeof(khr));
  if (tsr_ocl_real.clGetDeviceInfo(dev, CL_DEVICE_PCI_BUS_INFO_KHR, sizeof(khr), &khr, NULL) == CL_SUCCESS) {
    snprintf(out, cap, "%04x:%02x:%02x.%x", khr.pci_domain & 0xffff, khr.pci_bus & 0xff, khr.pci_device & 0x1f,
             khr.pci_function & 7);
    return;
  }
  cl_uint bus = 0, slot = 0, domain = 0;
  if (tsr_ocl_real.clGetDeviceInfo(dev, TSR__NV_PCI_BUS, sizeof(bus), &bus, NULL) != CL_SUCCESS ||
      tsr_ocl_real.clGetDeviceInfo(dev, TSR__NV_PCI_SLOT, sizeof(slot), &slot, NULL) != CL_SUCCESS)
    return;
  if (tsr_ocl_real.clGetDeviceInfo(dev, TSR__NV_PCI_DOMAIN, sizeof(domain), &domain, NULL) != CL_SUCCESS) domain = 0;
  snprintf(out, cap, "%04x:%02x:%02x.%x", domain & 0xffff, bus & 0xff, (slot >> 3) & 0x1f, slot & 7);
}

static int tsr__match(cl_device_id dev) {
  char pci[32], name[256] = "";
  tsr__device_pci(dev, pci, sizeof(pci));
  if (tsr_ocl_real.clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof(name) - 1, name, NULL) != CL_SUCCESS) name[0] = '\0';
  name[sizeof(name) - 1] = '\0';
  for (size_t i = 0; i < tsr_ocl.nleases; i++) {
    const tsr_tenant_lease_t *l = &tsr_ocl.leases[i];
    bool match =
        l->pci[0] && pci[0] ? strcmp(l->pci, pci) == 0 : name[0] && tsr_tenant_opencl_name_matches(l->opencl, name);
    if (match) return (int)i;
  }
  return TSR_OCL_NO_LEASE;
}

int tsr_ocl_lease_of_device(cl_device_id dev) {
  if (!tsr_ocl.governed) return TSR_OCL_UNGOVERNED;
  pthread_mutex_lock(&tsr__cache_lock);
  for (size_t i = 0; i < tsr__ndevices; i++)
    if (tsr__devices[i].id == dev) {
      int lease = tsr__devices[i].lease;
      pthread_mutex_unlock(&tsr__cache_lock);
      return lease;
    }
  pthread_mutex_unlock(&tsr__cache_lock);
  int lease = tsr__match(dev); /* the implementation's queries, outside the lock */
  pthread_mutex_lock(&tsr__cache_lock);
  if (tsr__ndevices < TSR__DEVICES_MAX) tsr__devices[tsr__ndevices++] = (__typeof__(tsr__devices[0])){dev, lease};
  pthread_mutex_unlock(&tsr__cache_lock);
  return lease;
}

void tsr_ocl_devices_info(const cl_device_id *devs, size_t n, tsr_ocl_ctx_info_t *info) {
  info->lease = tsr_ocl.governed ? TSR_OCL_NO_LEASE : TSR_OCL_UNGOVERNED;
  info->max_alloc = UINT64_MAX;
  info->nvidia = false;
  info->platform = NULL;
  if (n && tsr_ocl_real.clGetDeviceInfo(devs[0], CL_DEVICE_PLATFORM, sizeof(info->platform), &info->platform, NULL) !=
               CL_SUCCESS)
    info->platform = NULL;
  for (size_t i = 0; i < n; i++) {
    int lease = tsr_ocl_lease_of_device(devs[i]);
    if (lease >= 0 && info->lease < 0) info->lease = lease;
    cl_ulong max = 0;
    if (tsr_ocl_real.clGetDeviceInfo(devs[i], CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(max), &max, NULL) == CL_SUCCESS &&
        max < info->max_alloc)
      info->max_alloc = max;
    cl_uint vendor = 0;
    if (tsr_ocl_real.clGetDeviceInfo(devs[i], CL_DEVICE_VENDOR_ID, sizeof(vendor), &vendor, NULL) == CL_SUCCESS &&
        vendor == TSR__NV_VENDOR)
      info->nvidia = true;
  }
}

static bool tsr__context_learn(cl_context ctx, tsr_ocl_ctx_info_t *info) {
  cl_device_id devs[TSR__DEVICES_MAX];
  size_t bytes = 0;
  if (tsr_ocl_real.clGetContextInfo(ctx, CL_CONTEXT_DEVICES, sizeof(devs), devs, &bytes) != CL_SUCCESS ||
      bytes < sizeof(cl_device_id))
    return false;
  size_t n = bytes / sizeof(cl_device_id);
  tsr_ocl_devices_info(devs, n > TSR__DEVICES_MAX ? TSR__DEVICES_MAX : n, info);
  return true;
}

bool tsr_ocl_context_info(cl_context ctx, tsr_ocl_ctx_info_t *info) {
  if (!ctx || !tsr_ocl_real.clGetContextInfo) return false;
  pthread_mutex_lock(&tsr__cache_lock);
  for (size_t i = 0; i < tsr__ncontexts; i++)
    if (tsr__contexts[i].id == ctx) {
      *info = tsr__contexts[i].info;
      pthread_mutex_unlock(&tsr__cache_lock);
      return true;
    }
  pthread_mutex_unlock(&tsr__cache_lock);
  if (!tsr__context_learn(ctx, info)) return false;
  pthread_mutex_lock(&tsr__cache_lock);
  if (tsr__ncontexts < TSR__CONTEXTS_MAX) {
    tsr__contexts[tsr__ncontexts].id = ctx;
    tsr__contexts[tsr__ncontexts++].info = *info;
  }
  pthread_mutex_unlock(&tsr__cache_lock);
  return true;
}

void tsr_ocl_context_forget(cl_context ctx) {
  pthread_mutex_lock(&tsr__cache_lock);
  for (size_t i = 0; i < tsr__ncontexts; i++)
    if (tsr__contexts[i].id == ctx) {
      tsr__contexts[i] = tsr__contexts[--tsr__ncontexts];
      break;
    }
  pthread_mutex_unlock(&tsr__cache_lock);
}
