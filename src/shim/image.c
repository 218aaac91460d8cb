/* image.c: the static device memory a module image declares (image.h).
 *
 * Its parts: a cubin (tsr__elf), PTX text (tsr__ptx), and a fatbin's
 * entries (tsr__fatbin): of those, only the ones the driver would load on
 * the device's architecture are read, and a compressed one is unpacked
 * (unpack.h) into a buffer of the size it declares first. */
#include "shim/image.h"

#include <stdlib.h>
#include <string.h>

#include "shim/unpack.h"

#define TSR__FATBIN_MAGIC 0xBA55ED50u
#define TSR__WRAPPER_MAGIC 0x466243B1u
#define TSR__PTX_MAX ((size_t)64 << 20)       /* longer PTX text is not scanned */
#define TSR__UNPACKED_MAX ((uint64_t)1 << 30) /* a larger unpacked entry is not unpacked */

/* A fatbin entry's header, as nvcc 13.0 writes it (found by comparing the
 * fatbins it makes of one source with and without compression):
 *   0x00 u16 kind (1 PTX, 2 ELF)    0x04 u32 header size (0x40 or more)
 *   0x08 u64 payload size (padded)  0x10 u32 packed size (0: not packed)
 *   0x1c u32 architecture (90: sm_90 for an ELF, compute_90 for PTX)
 *   0x28 u64 flags                  0x38 u64 unpacked size (0: not packed) */
#define TSR__ENTRY_PACKED 0x10
#define TSR__ENTRY_ARCH 0x1c
#define TSR__ENTRY_FLAGS 0x28
#define TSR__ENTRY_UNPACKED 0x38
#define TSR__FLAG_LZ4 0x2000u  /* one LZ4 block (--compress-mode=speed) */
#define TSR__FLAG_ZSTD 0x8000u /* zstd frames (default, size, balance) */

static uint64_t tsr__add(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }
static uint64_t tsr__mul(uint64_t a, uint64_t b) { return a && b > UINT64_MAX / a ? UINT64_MAX : a * b; }

/* A 64-bit little-endian ELF: the sizes of its .nv.global* sections. */
static uint64_t tsr__elf(const unsigned char *e, size_t len) {
  if (len < 64 ||
      memcmp(e,
             "\x7f"
             "ELF",
             4) != 0 ||
      e[4] != 2 || e[5] != 1)
    return 0;
  uint64_t shoff = tsr_le64(e + 0x28);
  uint16_t shentsize = tsr_le16(e + 0x3a), shnum = tsr_le16(e + 0x3c), shstrndx = tsr_le16(e + 0x3e);
  if (shentsize < 64 || shstrndx >= shnum) return 0;
  uint64_t end = tsr__add(shoff, tsr__mul(shnum, shentsize));
  if (len != SIZE_MAX && end > len) return 0;
  const unsigned char *strtab_hdr = e + shoff + (uint64_t)shstrndx * shentsize;
  uint64_t stroff = tsr_le64(strtab_hdr + 24), strsize = tsr_le64(strtab_hdr + 32);
  if (len != SIZE_MAX && tsr__add(stroff, strsize) > len) return 0;
  uint64_t sum = 0;
  for (uint16_t i = 0; i < shnum; i++) {
    const unsigned char *sh = e + shoff + (uint64_t)i * shentsize;
    uint32_t name = tsr_le32(sh);
    if (name >= strsize || strsize - name < 11) continue;
    if (memcmp(e + stroff + name, ".nv.global", 10) != 0) continue;
    char next = (char)e[stroff + name + 10];
    if (next != '\0' && next != '.') continue;
    sum = tsr__add(sum, tsr_le64(sh + 32));
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
      if (tl == 7 && memcmp(p + j, ".global", 7) == 0)
        global = true;
      else if (tl == 7 && memcmp(p + j, ".extern", 7) == 0)
        ext = true;
      else if (global && !elem)
        elem = tsr__ptx_type(p + j, tl);
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

/* ---- fatbins ------------------------------------------------------------ */

/* One entry of a fatbin, as its header describes it. */
typedef struct {
  const unsigned char *e; /* the entry's header */
  uint16_t kind;          /* 1 PTX, 2 ELF */
  uint32_t ehdr, arch;
  uint64_t payload, how; /* how: its compression flags, 0 if none */
} tsr__entry_t;

/* A compressed entry (kind 1 or 2): unpacked into a buffer of the size it
 * declares, then read as a plain one; false (and *unknown) if it cannot
 * be. */
static bool tsr__packed(const tsr__entry_t *x, uint64_t *budget, uint64_t *out_bytes, bool *unknown) {
  uint64_t packed = tsr_le32(x->e + TSR__ENTRY_PACKED), size = tsr_le64(x->e + TSR__ENTRY_UNPACKED);
  *out_bytes = 0;
  if (x->how == (TSR__FLAG_LZ4 | TSR__FLAG_ZSTD) || packed > x->payload || size == 0 || size > TSR__UNPACKED_MAX) {
    *unknown = true;
    return false;
  }
  if (budget && size > *budget) return false; /* past the budget: not read, and not unknown (image.h) */
  if (budget) *budget -= size;
  unsigned char *buf = malloc((size_t)size);
  size_t got = 0;
  const unsigned char *in = x->e + x->ehdr;
  bool ok = buf && (x->how == TSR__FLAG_LZ4 ? tsr_unpack_lz4_block(in, (size_t)packed, buf, (size_t)size, &got)
                                            : tsr_unpack_zstd(in, (size_t)packed, buf, (size_t)size, &got));
  ok = ok && got == size;
  if (!ok)
    *unknown = true;
  else if (x->kind == 2)
    *out_bytes = tsr__elf(buf, (size_t)size);
  else
    *out_bytes = tsr__ptx((const char *)buf, (size_t)size);
  free(buf);
  return ok;
}

/* A fatbin's entries, walked in order: tsr__entries_begin, then
 * tsr__entry_next until it returns false (at the end, at the 4096th entry,
 * or where the fatbin's own sizes stop holding). Only code entries (PTX,
 * ELF) are given. */
typedef struct {
  const unsigned char *f;
  uint64_t at, end;
  unsigned seen;
} tsr__walk_t;

static bool tsr__entries_begin(tsr__walk_t *w, const unsigned char *f, size_t len) {
  if (len != SIZE_MAX && len < 16) return false;
  uint16_t header = tsr_le16(f + 6);
  uint64_t size = tsr_le64(f + 8);
  if (header < 16 || (len != SIZE_MAX && tsr__add(header, size) > len)) return false;
  *w = (tsr__walk_t){f, header, tsr__add(header, size), 0};
  return true;
}

static bool tsr__entry_next(tsr__walk_t *w, tsr__entry_t *x) {
  while (w->seen < 4096 && w->at + 0x40 <= w->end) {
    const unsigned char *e = w->f + w->at;
    *x = (tsr__entry_t){e,
                        tsr_le16(e),
                        tsr_le32(e + 4),
                        tsr_le32(e + TSR__ENTRY_ARCH),
                        tsr_le64(e + 8),
                        tsr_le64(e + TSR__ENTRY_FLAGS) & (TSR__FLAG_LZ4 | TSR__FLAG_ZSTD)};
    if (x->ehdr < 0x40 || tsr__add(tsr__add(w->at, x->ehdr), x->payload) > w->end) return false;
    w->at = tsr__add(tsr__add(w->at, x->ehdr), x->payload);
    w->seen++;
    if (x->kind == 1 || x->kind == 2) return true; /* else nothing the driver loads as code */
  }
  return false;
}

/* One entry's static bytes; false (and *unknown) if it could not be read. */
static bool tsr__entry_bytes(const tsr__entry_t *x, uint64_t *budget, uint64_t *bytes, bool *unknown) {
  *bytes = 0;
  if (x->how) return tsr__packed(x, budget, bytes, unknown);
  *bytes = x->kind == 2 ? tsr__elf(x->e + x->ehdr, x->payload) : tsr__ptx((const char *)(x->e + x->ehdr), x->payload);
  return true;
}

/* The entry the driver loads on architecture `arch` (a cubin of the same
 * major version and no newer, the newest such; else the newest PTX no
 * newer than the device, which it compiles): of the entries of that kind
 * and architecture, the largest counts, and only they are read (unpacking
 * every architecture's entries would cost a PyTorch process seconds at
 * start-up). Where no entry fits, nothing counts: the driver has nothing
 * to run here (cuBLASLt registers 1,185 such fatbins on an H100, kernels
 * for other GPUs, 371 MiB of them compressed). Where arch is 0, every
 * entry is a candidate: the largest counts, and compressed PTX (nvcc
 * compresses PTX by default) is unpacked only where no ELF entry could be
 * read, as an ELF entry is what the driver loads, and unpacking and
 * scanning PTX costs far more than reading an ELF. The architecture is the
 * one the fatbin's entry header names: a tenant that labels its code
 * falsely can pass statics by (the backstop sees them). */
static uint64_t tsr__fatbin(const unsigned char *f, size_t len, unsigned arch, uint64_t *budget, bool *unknown) {
  tsr__walk_t w;
  tsr__entry_t x;
  uint32_t elf_arch = 0, ptx_arch = 0;
  if (!tsr__entries_begin(&w, f, len)) return 0;
  while (arch && tsr__entry_next(&w, &x)) {
    if (x.arch > arch) continue;
    if (x.kind == 2 && x.arch / 10 == arch / 10 && x.arch > elf_arch) elf_arch = x.arch;
    if (x.kind == 1 && x.arch > ptx_arch) ptx_arch = x.arch;
  }
  uint16_t kind = elf_arch ? 2 : ptx_arch ? 1 : 0;
  uint32_t want = elf_arch ? elf_arch : ptx_arch;
  if (arch && !kind) return 0; /* nothing the driver can run here: it loads nothing of it */
  uint64_t best = 0, bytes;
  bool elf = false;
  for (int pass = 0; pass < 2 && !elf; pass++) { /* pass 1: compressed PTX, where no kind was chosen */
    tsr__entries_begin(&w, f, len);
    while (tsr__entry_next(&w, &x)) {
      if (kind ? pass == 1 || x.kind != kind || x.arch != want : (pass == 1) != (x.kind == 1 && x.how != 0)) continue;
      if (tsr__entry_bytes(&x, budget, &bytes, unknown)) elf |= !kind && x.kind == 2;
      if (bytes > best) best = bytes;
    }
  }
  return best;
}

/* An image that is not a wrapper. */
static uint64_t tsr__image(const unsigned char *p, size_t len, unsigned arch, uint64_t *budget, bool *unknown) {
  if (len < 4) return 0;
  if (tsr_le32(p) == TSR__FATBIN_MAGIC) return tsr__fatbin(p, len, arch, budget, unknown);
  if (memcmp(p,
             "\x7f"
             "ELF",
             4) == 0)
    return tsr__elf(p, len);
  return tsr__ptx((const char *)p, len);
}

uint64_t tsr_shim_image_static_bytes(const void *image, size_t len, unsigned arch, uint64_t *unpack_budget,
                                     bool *out_unknown) {
  *out_unknown = false;
  if (!image || len < 4) return 0;
  const unsigned char *p = image;
  if (tsr_le32(p) == TSR__WRAPPER_MAGIC) { /* the runtime's: a pointer to the fatbin, one level */
    if (len != SIZE_MAX && len < 16) return 0;
    const void *data;
    memcpy(&data, p + 8, sizeof(data));
    return data ? tsr__image(data, SIZE_MAX, arch, unpack_budget, out_unknown) : 0;
  }
  return tsr__image(p, len, arch, unpack_budget, out_unknown);
}
