/* bench_unpack.c: what reading a library's fatbins for their statics costs
 * a process under the shim (src/shim/image.c), beside the reference zstd
 * decoder (libzstd.so.1, dlopen'd) unpacking the same entries.
 *
 *   bench_unpack [LIBRARY] [ARCH]
 *
 * LIBRARY (default: CUDA 13's libcublasLt.so.13) is read whole; every
 * fatbin in its .nv_fatbin section is given to tsr_shim_image_static_bytes
 * as the runtime would register it, for architecture ARCH (default 90):
 * once without a budget (every entry of that architecture unpacked), once
 * with the shim's 16 MiB budget, once for every architecture (0). The
 * baseline unpacks the same zstd entries of ARCH with libzstd. Prints each
 * row's seconds and unpacked MiB/s (the median of 3 runs), and SKIP (exit
 * 0, so that `make bench` goes on) without the library or libzstd. */
#include <dlfcn.h>
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_record.h"
#include "shim/image.h"
#include "shim/unpack.h"

#define RUNS 3

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = n > 0 ? malloc((size_t)n) : NULL;
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  *len = (size_t)n;
  return b;
}

/* The .nv_fatbin section of a 64-bit ELF file image; NULL if none. */
static const unsigned char *fatbin_section(const unsigned char *e, size_t len, size_t *out_len) {
  if (len < sizeof(Elf64_Ehdr) || memcmp(e, ELFMAG, SELFMAG) != 0 || e[EI_CLASS] != ELFCLASS64) return NULL;
  const Elf64_Ehdr *h = (const void *)e;
  if (h->e_shoff == 0 || h->e_shoff + (uint64_t)h->e_shnum * sizeof(Elf64_Shdr) > len || h->e_shstrndx >= h->e_shnum)
    return NULL;
  const Elf64_Shdr *sh = (const void *)(e + h->e_shoff);
  const Elf64_Shdr *names = &sh[h->e_shstrndx];
  for (unsigned i = 0; i < h->e_shnum; i++) {
    if (sh[i].sh_name >= names->sh_size || sh[i].sh_offset + sh[i].sh_size > len) continue;
    if (strcmp((const char *)e + names->sh_offset + sh[i].sh_name, ".nv_fatbin") == 0) {
      *out_len = sh[i].sh_size;
      return e + sh[i].sh_offset;
    }
  }
  return NULL;
}

typedef size_t (*zstd_fn)(void *dst, size_t cap, const void *src, size_t len);
typedef unsigned (*zstd_err_fn)(size_t code);

typedef struct {
  double seconds;
  uint64_t unpacked, statics;
  size_t fatbins;
} row_t;

/* One pass over the section's fatbins: the image reader (budget: NULL or
 * a fresh 16 MiB), or, with z, libzstd on the zstd entries of `arch`. */
static row_t pass(const unsigned char *s, size_t n, unsigned arch, bool budgeted, zstd_fn z, zstd_err_fn zerr) {
  row_t r = {0};
  uint64_t budget = budgeted ? (uint64_t)16 << 20 : UINT64_MAX; /* UINT64_MAX: unbounded, but counted */
  static unsigned char *out;
  static size_t out_cap;
  double t0 = now_s();
  for (size_t at = 0; at + 16 <= n; at += 8) {
    if (tsr_le32(s + at) != 0xBA55ED50u) continue;
    uint64_t header = tsr_le16(s + at + 6), size = tsr_le64(s + at + 8);
    if (header < 16 || at + header + size > n) continue;
    r.fatbins++;
    if (!z) {
      bool unknown;
      uint64_t before = budget;
      r.statics += tsr_shim_image_static_bytes(s + at, header + size, arch, &budget, &unknown);
      r.unpacked += before - budget;
    } else {
      for (uint64_t e = at + header; e + 0x40 <= at + header + size;) {
        uint32_t ehdr = tsr_le32(s + e + 4), packed = tsr_le32(s + e + 0x10), earch = tsr_le32(s + e + 0x1c);
        uint64_t payload = tsr_le64(s + e + 8), unpacked = tsr_le64(s + e + 0x38);
        if ((tsr_le64(s + e + 0x28) & 0x8000u) && tsr_le16(s + e) == 2 && earch == arch && unpacked) {
          if (unpacked > out_cap) {
            free(out);
            out = malloc(unpacked);
            out_cap = out ? unpacked : 0;
          }
          size_t got = out ? z(out, unpacked, s + e + ehdr, packed) : 0;
          if (out && !zerr(got)) r.unpacked += got;
        }
        e += ehdr + payload;
      }
    }
    at += header + size - 8;
  }
  r.seconds = now_s() - t0;
  return r;
}

static int cmp(const void *a, const void *b) {
  double x = ((const row_t *)a)->seconds, y = ((const row_t *)b)->seconds;
  return (x > y) - (x < y);
}

static void row(const char *name, const unsigned char *s, size_t n, unsigned arch, bool budgeted, zstd_fn z,
                zstd_err_fn zerr) {
  row_t runs[RUNS];
  for (int i = 0; i < RUNS; i++) runs[i] = pass(s, n, arch, budgeted, z, zerr);
  qsort(runs, RUNS, sizeof(runs[0]), cmp);
  row_t m = runs[RUNS / 2];
  printf("%-34s %9.3f s  %8.1f MiB unpacked  %8.1f MiB/s  %zu fatbins", name, m.seconds, (double)m.unpacked / (1 << 20),
         m.seconds > 0 ? (double)m.unpacked / (1 << 20) / m.seconds : 0, m.fatbins);
  if (!z) printf("  statics %llu B", (unsigned long long)m.statics);
  printf("\n");
  tsr_bench_record_t *rec = tsr_bench_record_begin("unpack", "%s", name);
  tsr_bench_record_figure(rec, m.seconds, "time_s");
  tsr_bench_record_figure(rec, (double)m.unpacked / (1 << 20), "unpacked_mib");
  tsr_bench_record_figure(rec, m.seconds > 0 ? (double)m.unpacked / (1 << 20) / m.seconds : 0, "mib_per_s");
  tsr_bench_record_figure(rec, (double)m.fatbins, "fatbins");
  if (!z) tsr_bench_record_figure(rec, (double)m.statics, "statics_bytes");
  tsr_bench_record_end(rec, NULL, NULL);
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "/usr/local/cuda/lib64/libcublasLt.so.13";
  unsigned arch = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 90;
  size_t len = 0, n = 0;
  unsigned char *lib = slurp(path, &len);
  const unsigned char *s = lib ? fatbin_section(lib, len, &n) : NULL;
  void *zstd = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
  zstd_fn z = zstd ? (zstd_fn)dlsym(zstd, "ZSTD_decompress") : NULL;
  zstd_err_fn zerr = zstd ? (zstd_err_fn)dlsym(zstd, "ZSTD_isError") : NULL;
  if (!s || !z || !zerr) {
    printf("SKIP: bench_unpack: %s\n", !lib ? "no such library" : !s ? "no .nv_fatbin section" : "no libzstd.so.1");
    free(lib);
    return 0;
  }
  printf("bench_unpack: %s, .nv_fatbin %.1f MiB, sm_%u, median of %d\n", path, (double)n / (1 << 20), arch, RUNS);
  row("libzstd, the arch's zstd entries", s, n, arch, false, z, zerr);
  row("tessera, the arch, no budget", s, n, arch, false, NULL, NULL);
  row("tessera, the arch, 16 MiB budget", s, n, arch, true, NULL, NULL);
  row("tessera, every arch, no budget", s, n, 0, false, NULL, NULL);
  free(lib);
  return 0;
}
