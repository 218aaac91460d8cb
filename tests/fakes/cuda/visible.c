/* visible.c: CUDA_VISIBLE_DEVICES, read at cuInit into the table of CUDA
 * ordinal -> physical device.
 *
 * The rules are the CUDA Programming Guide's ("CUDA Environment Variables")
 * and, where it says nothing, what the H100 (driver 580.159.04, one GPU,
 * 2026-11-23) answered to probe_visible.c (real_h100_visible.txt, checked
 * by unit.fakecuda_visible_conformance):
 *   - unset: every device, in physical order; set but empty (or blank): none;
 *   - a comma-separated list, of ordinals ("2,1": device 2 is CUDA device
 *     0) or of GPU UUIDs as nvidia-smi prints them and prefixes of one; its
 *     first entry says which: after "GPU-..." an ordinal ends the list, and
 *     after ordinals a UUID does ("0,GPU-<its UUID>" shows one device);
 *   - the list stops at its first invalid entry ("0,2,-1,1" shows 0 and 2);
 *   - an ordinal is read as strtoul reads it: blanks before it, a sign, any
 *     text after it ("+0", "-0", " 0 ", "0gpu" are all 0; "-1" is invalid);
 *   - a UUID entry is "GPU-" (that case only) then hex digits in either
 *     case, dashes anywhere skipped ("GPU-13dc0-" is a prefix of
 *     "GPU-13dc09a4-..."); at least one digit, and it must match one device
 *     only (a prefix of two: unconfirmed, the probe had one GPU); past the
 *     32nd digit the rest is ignored, before it any other character (a
 *     blank too) makes the entry invalid;
 *   - a "MIG-..." list names MIG instances, which the fake has none of: no
 *     device (the H100 with MIG off took "MIG-<its UUID's digits>/0/0" as
 *     the GPU itself; the fake does not);
 *   - a device named twice before the list stops makes cuInit answer
 *     CUDA_ERROR_INVALID_DEVICE ("0,0", "0,+0", a UUID and its prefix);
 *     after the stop it does not matter ("0,-1,0" is device 0). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define FC_UUID_DIGITS 32

/* The physical device ordinal entry [s, s + n) names, or -1. */
static int fc_visible_ordinal(const char *s, size_t n, int nphys) {
  size_t i = 0;
  while (i < n && isspace((unsigned char)s[i])) i++;
  bool minus = false;
  if (i < n && (s[i] == '+' || s[i] == '-')) minus = s[i++] == '-';
  if (i == n || !isdigit((unsigned char)s[i])) return -1;
  long v = 0;
  for (; i < n && isdigit((unsigned char)s[i]); i++) {
    v = v * 10 + (s[i] - '0');
    if (v >= nphys) return -1; /* also keeps v from overflowing */
  }
  return minus && v != 0 ? -1 : (int)v; /* strtoul makes -N huge */
}

/* The physical device UUID entry [s, s + n) names, or -1. */
static int fc_visible_uuid(const char *s, size_t n, int nphys) {
  if (n < 4 || memcmp(s, "GPU-", 4) != 0) return -1;
  char digits[FC_UUID_DIGITS];
  size_t nd = 0;
  for (size_t i = 4; i < n && nd < FC_UUID_DIGITS; i++) {
    if (s[i] == '-') continue;
    if (!isxdigit((unsigned char)s[i])) return -1;
    digits[nd++] = (char)tolower((unsigned char)s[i]);
  }
  if (nd == 0) return -1;
  int found = -1;
  for (int d = 0; d < nphys; d++) {
    unsigned char u[16];
    char hex[FC_UUID_DIGITS + 1];
    fake_cuda_uuid(d, u);
    for (int b = 0; b < 16; b++) {
      static const char xd[] = "0123456789abcdef";
      hex[2 * b] = xd[u[b] >> 4];
      hex[2 * b + 1] = xd[u[b] & 15];
    }
    if (memcmp(hex, digits, nd) != 0) continue;
    if (found >= 0) return -1; /* a prefix of two devices names neither */
    found = d;
  }
  return found;
}

int fc_visible_read(int nphys, int out_phys[FAKE_CUDA_MAX_DEVICES]) {
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  if (!v) {
    for (int d = 0; d < nphys; d++) out_phys[d] = d;
    return nphys;
  }
  bool uuids = strncmp(v, "GPU-", 4) == 0, mig = strncmp(v, "MIG-", 4) == 0;
  bool seen[FAKE_CUDA_MAX_DEVICES] = {false};
  int n = 0;
  for (const char *s = v; !mig;) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    int d = uuids ? fc_visible_uuid(s, len, nphys) : fc_visible_ordinal(s, len, nphys);
    if (d < 0) break;
    if (seen[d]) return -1;
    seen[d] = true;
    out_phys[n++] = d;
    if (!end) break;
    s = end + 1;
  }
  return n;
}

int fc_dev_phys(CUdevice ordinal) { return ordinal >= 0 && ordinal < g_fc.nvisible ? g_fc.phys[ordinal] : -1; }

CUdevice fc_dev_ordinal(int phys) {
  for (int i = 0; i < g_fc.nvisible; i++)
    if (g_fc.phys[i] == phys) return i;
  return -1;
}
