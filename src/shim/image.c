/* image.c: the static device memory a module image declares (image.h). */
#include "shim/image.h"

#include <string.h>

#define TSR__FATBIN_MAGIC 0xBA55ED50u
#define TSR__WRAPPER_MAGIC 0x466243B1u
#define TSR__FATBIN_COMPRESSED 0x2000u
#define TSR__PTX_MAX ((size_t)64 << 20) /* longer PTX text is not scanned */

static uint64_t tsr__add(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }
static uint64_t tsr__mul(uint64_t a, uint64_t b) { return a && b > UINT64_MAX / a ? UINT64_MAX : a * b; }

static uint16_t tsr__u16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t tsr__u32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t tsr__u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* A 64-bit little-endian ELF: the sizes of its .nv.global* sections. */
static uint64_t tsr__elf(const unsigned char *e, size_t len) {
  if (len < 64 || memcmp(e, "\x7f" "ELF", 4) != 0 || e[4] != 2 || e[5] != 1) return 0;
  uint64_t shoff = tsr__u64(e + 0x28);
  uint16_t shentsize = tsr__u16(e + 0x3a), shnum = tsr__u16(e + 0x3c), shstrndx = tsr__u16(e + 0x3e);
  if (shentsize < 64 || shstrndx >= shnum) return 0;
  uint64_t end = tsr__add(shoff, tsr__mul(shnum, shentsize));
  if (len != SIZE_MAX && end > len) return 0;
  const unsigned char *strtab_hdr = e + shoff + (uint64_t)shstrndx * shentsize;
  uint64_t stroff = tsr__u64(strtab_hdr + 24), strsize = tsr__u64(strtab_hdr + 32);
  if (len != SIZE_MAX && tsr__add(stroff, strsize) > len) return 0;
  uint64_t sum = 0;
  for (uint16_t i = 0; i < shnum; i++) {
    const unsigned char *sh = e + shoff + (uint64_t)i * shentsize;
    uint32_t name = tsr__u32(sh);
    if (name >= strsize || strsize - name < 11) continue;
    if (memcmp(e + stroff + name, ".nv.global", 10) != 0) continue;
    char next = (char)e[stroff + name + 10];
    if (next != '\0' && next != '.') continue;
    sum = tsr__add(sum, tsr__u64(sh + 32));
  }
  return sum;
}

/* Bytes per element of a PTX type (".b8", ".f32", ...), 0 if not one. */
static uint64_t tsr__ptx_type(const char *t, size_t n) {
  if (n < 3 || t[0] != '.' || !strchr("bsuf", t[1])) return 0;
  if (n == 3 && t[2] == '8') return 1;
  if (n == 4 && t[2] == '1' && t[3] == '6') return 2;
  if (n == 4 && t[2] == '3' && t[3] == '2') return 4;
  if (n == 4 && t[2] == '6' && t[3] == '4') return 8;
  return 0;
}

/* PTX text: the declarations at module scope of the .global state space
 * (".global .align 4 .b8 name[4096];"), not the .extern ones. */
static uint64_t tsr__ptx(const char *p, size_t len) {
  size_t n = len == SIZE_MAX ? strnlen(p, TSR__PTX_MAX) : (len < TSR__PTX_MAX ? len : TSR__PTX_MAX);
  uint64_t sum = 0;
  size_t i = 0;
  while (i < n) {
    size_t eol = i;
    while (eol < n && p[eol] != '\n' && p[eol] != ';') eol++;
    /* one declaration: tokens separated by blanks */
    bool global = false, ext = false;
    uint64_t elem = 0, count = 1;
    size_t j = i;
    while (j < eol) {
      while (j < eol && (p[j] == ' ' || p[j] == '\t' || p[j] == '\r')) j++;
      size_t k = j;
      while (k < eol && p[k] != ' ' && p[k] != '\t' && p[k] != '\r') k++;
      if (k == j) break;
      size_t tl = k - j;
      if (tl == 7 && memcmp(p + j, ".global", 7) == 0) global = true;
      else if (tl == 7 && memcmp(p + j, ".extern", 7) == 0) ext = true;
      else if (global && !elem) elem = tsr__ptx_type(p + j, tl);
      else if (global && elem) { /* the name, with its [N][M] dimensions */
        for (size_t b = j; b < k; b++) {
          if (p[b] == '=') break;
          if (p[b] != '[') continue;
          uint64_t dim = 0;
          for (b++; b < k && p[b] >= '0' && p[b] <= '9'; b++) dim = tsr__add(tsr__mul(dim, 10), (uint64_t)(p[b] - '0'));
          count = tsr__mul(count, dim ? dim : 1);
        }
        break;
      }
      j = k;
    }
    if (global && !ext && elem) sum = tsr__add(sum, tsr__mul(elem, count));
    i = eol + 1;
  }
  return sum;
}

static uint64_t tsr__fatbin(const unsigned char *f, size_t len, bool *unknown) {
  if (len != SIZE_MAX && len < 16) return 0;
  uint16_t header = tsr__u16(f + 6);
  uint64_t size = tsr__u64(f + 8);
  if (header < 16 || (len != SIZE_MAX && tsr__add(header, size) > len)) return 0;
  uint64_t best = 0, at = header, end = tsr__add(header, size);
  for (int entries = 0; entries < 4096 && at + 0x40 <= end; entries++) {
    const unsigned char *e = f + at;
    uint16_t kind = tsr__u16(e);
    uint32_t ehdr = tsr__u32(e + 4);
    uint64_t payload = tsr__u64(e + 8);
    uint64_t flags = tsr__u64(e + 0x28); /* 0x2000: compressed */
    if (ehdr < 0x40 || tsr__add(tsr__add(at, ehdr), payload) > end) break;
    uint64_t bytes = 0;
    if (flags & TSR__FATBIN_COMPRESSED) *unknown = true;
    else if (kind == 2) bytes = tsr__elf(e + ehdr, payload);
    else if (kind == 1) bytes = tsr__ptx((const char *)(e + ehdr), payload);
    if (bytes > best) best = bytes;
    at = tsr__add(tsr__add(at, ehdr), payload);
  }
  return best;
}

uint64_t tsr_shim_image_static_bytes(const void *image, size_t len, bool *out_unknown) {
  *out_unknown = false;
  if (!image || len < 4) return 0;
  const unsigned char *p = image;
  uint32_t magic = tsr__u32(p);
  if (magic == TSR__WRAPPER_MAGIC && (len == SIZE_MAX || len >= 16)) {
    const void *data;
    memcpy(&data, p + 8, sizeof(data));
    return data ? tsr_shim_image_static_bytes(data, SIZE_MAX, out_unknown) : 0;
  }
  if (magic == TSR__FATBIN_MAGIC) return tsr__fatbin(p, len, out_unknown);
  if (memcmp(p, "\x7f" "ELF", 4) == 0) return tsr__elf(p, len);
  return tsr__ptx((const char *)p, len);
}
