/* pci.c: a device's kind and PCI bus id as text. */
#include <stdio.h>
#include <string.h>

#include "device/device.h"

const char *tsr_device_kind_name(tsr_device_kind_t kind) { return kind == TSR_DEVICE_KIND_OPENCL ? "opencl" : "cuda"; }

/* Reads up to `max` hex digits (at least one) into *v; advances *p. */
static bool tsr__hex(const char **p, size_t max, unsigned long *v) {
  size_t n = 0;
  *v = 0;
  for (; n < max; n++) {
    char c = (*p)[n];
    unsigned d;
    if (c >= '0' && c <= '9')
      d = (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      d = (unsigned)(c - 'A' + 10);
    else
      break;
    *v = *v * 16 + d;
  }
  *p += n;
  return n > 0;
}

bool tsr_device_pci_normalize(const char *text, char *out) {
  if (!text) return false;
  /* [domain:]bus:device.function; the domain is optional (lspci's short form)
   */
  unsigned long a = 0, b = 0, c = 0, f = 0, domain = 0, bus, dev;
  const char *p = text;
  if (!tsr__hex(&p, 8, &a) || *p++ != ':' || !tsr__hex(&p, 2, &b)) return false;
  if (*p == ':') {
    p++;
    if (!tsr__hex(&p, 2, &c)) return false;
    domain = a, bus = b, dev = c;
  } else {
    if (p - text > 5) return false; /* "bb:dd" has a bus of two digits at most */
    bus = a, dev = b;
  }
  if (*p++ != '.' || !tsr__hex(&p, 1, &f) || *p != '\0') return false;
  if (domain > 0xffff || bus > 0xff || dev > 0x1f || f > 7) return false;
  snprintf(out, TSR_DEVICE_PCI_MAX, "%04lx:%02lx:%02lx.%lx", domain, bus, dev, f);
  return true;
}
