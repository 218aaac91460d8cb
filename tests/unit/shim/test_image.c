/* The static device memory a module image declares (shim/image.c), read
 * from real images nvcc 13.0 made (images/README.md) and from damaged and
 * hand-made ones. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/image.h"

#define BIG ((uint64_t)64 << 20)
#define INIT ((uint64_t)4096)
#define TABLE (((uint64_t)3 << 30) + 32768 * 4) /* table.cu */

/* A fatbin's first entry, and the fields of its header (image.c) */
#define ENTRY 16
#define PACKED 0x10
#define FLAGS 0x28
#define UNPACKED 0x38
#define LZ4 0x2000u
#define ZSTD 0x8000u

static unsigned char *slurp(const char *name, size_t *out_len) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", TSR_IMAGES_DIR, name);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "%s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = calloc(1, (size_t)n + 1);
  cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *out_len = (size_t)n;
  return buf;
}

Test(image, a_cubin_declares_its_global_sections) {
  size_t n;
  unsigned char *img = slurp("big_sm90.cubin", &n);
  bool unknown = true;
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, 0, NULL, &unknown), BIG + INIT);
  cr_assert(!unknown);
  cr_assert_eq(tsr_shim_image_static_bytes(img, SIZE_MAX, 0, NULL, &unknown), BIG + INIT, "bounded by its own headers");
  free(img);
}

Test(image, a_fatbin_and_the_runtime_wrapper) {
  size_t n;
  unsigned char *img = slurp("big_sm90.fatbin", &n);
  bool unknown = true;
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, 0, NULL, &unknown), BIG + INIT);
  cr_assert(!unknown);
  struct {
    uint32_t magic, version;
    const void *data, *unused;
  } wrapper = {0x466243B1u, 1, img, NULL};
  cr_assert_eq(tsr_shim_image_static_bytes(&wrapper, SIZE_MAX, 0, NULL, &unknown), BIG + INIT);
  struct {
    uint32_t magic, version;
    const void *data, *unused;
  } outer = {0x466243B1u, 1, &wrapper, NULL}, loop = {0x466243B1u, 1, &loop, NULL};
  cr_assert_eq(tsr_shim_image_static_bytes(&outer, SIZE_MAX, 0, NULL, &unknown), 0,
               "one level of wrapper, as the runtime makes");
  cr_assert_eq(tsr_shim_image_static_bytes(&loop, SIZE_MAX, 0, NULL, &unknown), 0,
               "a wrapper that points at itself ends");
  /* a plain entry marked compressed (no sizes for it): unknown, and its
   * zstd-compressed PTX entry (nvcc's default) still counts */
  uint64_t flags;
  memcpy(&flags, img + ENTRY + FLAGS, 8);
  flags |= LZ4;
  memcpy(img + ENTRY + FLAGS, &flags, 8);
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, 0, NULL, &unknown), BIG + INIT);
  cr_assert(unknown);
  free(img);
}

Test(image, ptx_text) {
  size_t n;
  unsigned char *img = slurp("big.ptx", &n);
  bool unknown = true;
  cr_assert_eq(tsr_shim_image_static_bytes(img, SIZE_MAX, 0, NULL, &unknown), BIG + INIT);
  free(img);
  const char *ptx =
      ".version 8.0\n.target sm_90\n.address_size 64\n"
      ".visible .global .align 8 .f64 grid[16][1024];\n"
      ".global .u32 counter;\n"
      ".extern .global .align 1 .b8 elsewhere[1048576];\n"
      ".visible .entry k() { ld.global.u32 %r1, [counter]; ret; }\n";
  cr_assert_eq(tsr_shim_image_static_bytes(ptx, SIZE_MAX, 0, NULL, &unknown), 8 * 16 * 1024 + 4);
}

Test(image, damaged_images_count_nothing_and_read_nothing_past_their_end) {
  size_t n;
  unsigned char *img = slurp("big_sm90.cubin", &n);
  bool unknown;
  /* section headers said to lie past the end of the buffer */
  cr_assert_eq(tsr_shim_image_static_bytes(img, 100, 0, NULL, &unknown), 0);
  uint64_t far = UINT64_MAX - 8;
  memcpy(img + 0x28, &far, 8);
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, 0, NULL, &unknown), 0);
  free(img);
  img = slurp("big_sm90.fatbin", &n);
  cr_assert_eq(tsr_shim_image_static_bytes(img, 40, 0, NULL, &unknown), 0, "a fatbin longer than its buffer");
  uint64_t huge = UINT64_MAX;
  memcpy(img + 16 + 8, &huge, 8); /* an entry's payload size */
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, 0, NULL, &unknown), 0);
  free(img);
  cr_assert_eq(tsr_shim_image_static_bytes(NULL, 0, 0, NULL, &unknown), 0);
  cr_assert_eq(tsr_shim_image_static_bytes("abc", 3, 0, NULL, &unknown), 0);
  const char absurd[] = ".global .b8 x[99999999999999999999999999];";
  cr_assert_eq(tsr_shim_image_static_bytes(absurd, SIZE_MAX, 0, NULL, &unknown), UINT64_MAX, "saturates");
}

/* ---- compressed fatbins ------------------------------------------------- */

static uint64_t entry_u64(const unsigned char *img, size_t at) {
  uint64_t v;
  memcpy(&v, img + at, 8);
  return v;
}

static void entry_set(unsigned char *img, size_t at, uint64_t v, size_t width) {
  memcpy(img + at, &v, width); /* little-endian, as the image */
}

/* An exact copy on the heap: a read one byte past it is caught by ASan. */
static unsigned char *copy_of(const unsigned char *img, size_t n) {
  unsigned char *c = malloc(n);
  cr_assert_not_null(c);
  memcpy(c, img, n);
  return c;
}

static void expect(const char *name, uint64_t want, uint64_t how) {
  size_t n;
  unsigned char *img = slurp(name, &n);
  cr_assert_eq(entry_u64(img, ENTRY + FLAGS) & (LZ4 | ZSTD), how, "%s: compressed as its README says", name);
  bool unknown = true;
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, 0, NULL, &unknown), want, "%s", name);
  cr_assert(!unknown, "%s", name);
  cr_assert_eq(tsr_shim_image_static_bytes(img, SIZE_MAX, 0, NULL, &unknown), want, "%s: bounded by its own headers",
               name);
  cr_assert(!unknown);
  struct {
    uint32_t magic, version;
    const void *data, *unused;
  } wrapper = {0x466243B1u, 1, img, NULL};
  cr_assert_eq(tsr_shim_image_static_bytes(&wrapper, SIZE_MAX, 0, NULL, &unknown), want, "%s: through the wrapper",
               name);
  free(img);
}

Test(image, a_compressed_fatbin_counts_what_the_uncompressed_one_does) {
  size_t n;
  unsigned char *img = slurp("big_sm90.fatbin", &n);
  bool unknown;
  uint64_t plain = tsr_shim_image_static_bytes(img, n, 0, NULL, &unknown);
  free(img);
  cr_assert_eq(plain, BIG + INIT);
  expect("big_sm90_zstd.fatbin", plain, ZSTD); /* nvcc's default mode */
  expect("big_sm90_size.fatbin", plain, ZSTD);
  expect("big_sm90_lz4.fatbin", plain, LZ4);     /* --compress-mode=speed */
  expect("table_sm90_zstd.fatbin", TABLE, ZSTD); /* several zstd blocks, Huffman-coded */
  expect("table_sm90_lz4.fatbin", TABLE, LZ4);
}

/* arch_zstd.fatbin (images/README.md): sm_80, sm_90 and sm_100 cubins and
 * compute_100 PTX, all zstd-compressed, whose statics tell them apart. */
#define MIB ((uint64_t)1 << 20)

Test(image, only_the_entry_the_driver_loads_on_the_device_counts) {
  size_t n;
  unsigned char *img = slurp("arch_zstd.fatbin", &n);
  struct {
    unsigned arch;
    uint64_t want;
    const char *why;
  } cases[] = {
      {80, 1 * MIB, "its own cubin"},
      {86, 1 * MIB, "sm_80 code runs on 8.6: the newest cubin of its major version"},
      {89, 1 * MIB, "and on 8.9"},
      {90, 2 * MIB, "an H100"},
      {100, 3 * MIB, "its own cubin"},
      {103, 3 * MIB, "sm_100 code on 10.3"},
      {120, 3 * MIB, "no cubin of major 12: the driver compiles the compute_100 PTX"},
      {75, 0, "nothing fits: the driver runs none of it on a 7.5 device"},
      {0, 3 * MIB, "the architecture not known: likewise"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    bool unknown = true;
    cr_assert_eq(tsr_shim_image_static_bytes(img, n, cases[i].arch, NULL, &unknown), cases[i].want, "arch %u: %s",
                 cases[i].arch, cases[i].why);
    cr_assert_not(unknown, "arch %u", cases[i].arch);
  }
  free(img);
}

Test(image, other_architectures_entries_are_not_unpacked) {
  size_t n;
  unsigned char *img = slurp("arch_zstd.fatbin", &n);
  /* the sm_80 entry (the first) now declares a byte more than it unpacks to */
  entry_set(img, ENTRY + UNPACKED, entry_u64(img, ENTRY + UNPACKED) + 1, 8);
  bool unknown = true;
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, 90, NULL, &unknown), 2 * MIB);
  cr_assert_not(unknown, "the sm_80 entry was unpacked for an sm_90 device");
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, 100, NULL, &unknown), 3 * MIB);
  cr_assert_not(unknown);
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, 86, NULL, &unknown), 0,
               "the entry the driver loads could not be read");
  cr_assert(unknown);
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, 0, NULL, &unknown), 3 * MIB, "every entry read: the largest counts");
  cr_assert(unknown, "and the damaged one is said");
  free(img);
}

/* the header of a fatbin's k-th entry */
static size_t nth_entry(const unsigned char *img, int k) {
  size_t at = ENTRY;
  for (int i = 0; i < k; i++) {
    uint32_t ehdr;
    memcpy(&ehdr, img + at + 4, 4);
    at += ehdr + entry_u64(img, at + 8);
  }
  return at;
}

Test(image, unpacking_stops_at_the_budget) {
  size_t n;
  unsigned char *img = slurp("arch_zstd.fatbin", &n);
  uint64_t sm90 = entry_u64(img, nth_entry(img, 1) + UNPACKED), sm80 = entry_u64(img, nth_entry(img, 0) + UNPACKED);
  cr_assert(sm90 > 0 && sm80 > 0);
  bool unknown = true;
  uint64_t budget = sm90;
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, 90, &budget, &unknown), 2 * MIB);
  cr_assert_not(unknown);
  cr_assert_eq(budget, 0, "what was unpacked is taken off: %llu left", (unsigned long long)budget);
  budget = sm90 - 1;
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, 90, &budget, &unknown), 0, "one byte short: not unpacked");
  cr_assert_not(unknown, "a budget spent is not a damaged image");
  cr_assert_eq(budget, sm90 - 1, "nothing taken off");
  budget = sm80 + sm90; /* every ELF entry read in order: sm_80, sm_90, then no room for sm_100 */
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, 0, &budget, &unknown), 2 * MIB);
  cr_assert_not(unknown);
  cr_assert_eq(budget, 0);
  free(img);
}

Test(image, a_compressed_ptx_entry_is_read_too) {
  const char *names[] = {"big_sm90_zstd.fatbin", "big_sm90_lz4.fatbin"};
  for (size_t i = 0; i < 2; i++) {
    size_t n;
    unsigned char *img = slurp(names[i], &n);
    entry_set(img, ENTRY, 0x40, 2); /* the ELF entry becomes a kind nothing reads: the PTX one counts */
    bool unknown = true;
    cr_assert_eq(tsr_shim_image_static_bytes(img, n, 0, NULL, &unknown), BIG + INIT, "%s", names[i]);
    cr_assert(!unknown);
    free(img);
  }
  /* with an ELF entry read, compressed PTX is not unpacked: its damage goes unseen */
  size_t n;
  unsigned char *img = slurp("big_sm90.fatbin", &n);
  size_t ptx = ENTRY + 0x40 + (size_t)entry_u64(img, ENTRY + 8);
  cr_assert_eq(entry_u64(img, ptx) & 0xFFFF, 1, "the PTX entry");
  cr_assert_eq(entry_u64(img, ptx + FLAGS) & ZSTD, ZSTD);
  img[ptx + (entry_u64(img, ptx + 4) & 0xFFFFFFFFu)] ^= 1; /* past its header: the zstd magic */
  bool unknown = true;
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, 0, NULL, &unknown), BIG + INIT);
  cr_assert(!unknown);
  entry_set(img, ENTRY, 0x40, 2); /* no ELF entry: the PTX one is unpacked, and fails */
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, 0, NULL, &unknown), 0);
  cr_assert(unknown);
  free(img);
}

/* table_sm90_*.fatbin hold one entry, so a damaged one counts 0. */
static void expect_unknown(const unsigned char *img, size_t n, const char *what) {
  unsigned char *c = copy_of(img, n);
  bool unknown = false;
  cr_assert_eq(tsr_shim_image_static_bytes(c, n, 0, NULL, &unknown), 0, "%s", what);
  cr_assert(unknown, "%s", what);
  free(c);
}

Test(image, a_compressed_entry_whose_sizes_do_not_hold_is_unknown) {
  const char *names[] = {"table_sm90_zstd.fatbin", "table_sm90_lz4.fatbin"};
  for (size_t i = 0; i < 2; i++) {
    size_t n;
    unsigned char *img = slurp(names[i], &n);
    uint64_t packed = entry_u64(img, ENTRY + PACKED) & 0xFFFFFFFFu, unpacked = entry_u64(img, ENTRY + UNPACKED),
             flags = entry_u64(img, ENTRY + FLAGS);
    entry_set(img, ENTRY + UNPACKED, unpacked + 1, 8);
    expect_unknown(img, n, "unpacks to less than it declares");
    entry_set(img, ENTRY + UNPACKED, unpacked - 1, 8);
    expect_unknown(img, n, "unpacks to more than it declares");
    entry_set(img, ENTRY + UNPACKED, 0, 8);
    expect_unknown(img, n, "declares nothing");
    entry_set(img, ENTRY + UNPACKED, (uint64_t)2 << 30, 8);
    expect_unknown(img, n, "declares 2 GiB: not unpacked");
    entry_set(img, ENTRY + UNPACKED, UINT64_MAX, 8);
    expect_unknown(img, n, "declares 16 EiB");
    entry_set(img, ENTRY + UNPACKED, unpacked, 8);
    entry_set(img, ENTRY + PACKED, entry_u64(img, ENTRY + 8) + 1, 4);
    expect_unknown(img, n, "packed past its payload");
    entry_set(img, ENTRY + PACKED, packed, 4);
    entry_set(img, ENTRY + FLAGS, flags | LZ4 | ZSTD, 8);
    expect_unknown(img, n, "both compressions");
    entry_set(img, ENTRY + FLAGS, flags, 8);
    /* every truncation: the data ends early, so it never unpacks to its size */
    for (uint64_t cut = 0; cut < packed; cut += cut < 64 || packed - cut < 64 ? 1 : 509) {
      entry_set(img, ENTRY + PACKED, cut, 4);
      expect_unknown(img, n, "truncated");
    }
    entry_set(img, ENTRY + PACKED, packed, 4);
    bool unknown = true;
    cr_assert_eq(tsr_shim_image_static_bytes(img, n, 0, NULL, &unknown), TABLE, "%s: put back", names[i]);
    cr_assert(!unknown);
    free(img);
  }
  size_t n;
  unsigned char *img = slurp("table_sm90_zstd.fatbin", &n);
  img[ENTRY + 0x40] ^= 1; /* the zstd magic */
  expect_unknown(img, n, "not a zstd frame");
  free(img);
}

/* A zstd frame by hand, of what nvcc does not write: a skippable frame,
 * then the cubin in two frames of raw blocks (no sizes, a checksum). */
Test(image, zstd_frames_nvcc_does_not_write) {
  size_t cn;
  unsigned char *cubin = slurp("big_sm90.cubin", &cn);
  size_t cap = cn + 64, at = 0;
  unsigned char *img = calloc(1, ENTRY + 0x40 + cap + 8);
  unsigned char *z = img + ENTRY + 0x40;
  const unsigned char skip[] = {0x5A, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 'a', 'b', 'c'};
  memcpy(z, skip, sizeof(skip));
  at += sizeof(skip);
  size_t half = cn / 2;
  for (int f = 0; f < 2; f++) {
    size_t len = f ? cn - half : half;
    const unsigned char head[] = {0x28, 0xB5, 0x2F, 0xFD, 0x04 /* checksum */, 0x58 /* window */};
    memcpy(z + at, head, sizeof(head));
    at += sizeof(head);
    uint32_t block = (uint32_t)(len << 3) | 1u; /* raw, last */
    memcpy(z + at, &block, 3);
    at += 3;
    memcpy(z + at, cubin + (f ? half : 0), len);
    at += len + 4;
  }
  entry_set(img, 0, 0xBA55ED50u | (uint64_t)1 << 32 | (uint64_t)16 << 48, 8); /* magic, version, header */
  entry_set(img, 8, 0x40 + ((at + 7) & ~(size_t)7), 8);
  entry_set(img, ENTRY, 0x01010002, 4); /* kind 2, version 0x0101 */
  entry_set(img, ENTRY + 4, 0x40, 4);   /* header size */
  entry_set(img, ENTRY + 8, (at + 7) & ~(size_t)7, 8);
  entry_set(img, ENTRY + PACKED, at, 4);
  entry_set(img, ENTRY + FLAGS, 0x11 | ZSTD, 8);
  entry_set(img, ENTRY + UNPACKED, cn, 8);
  bool unknown = true;
  cr_assert_eq(tsr_shim_image_static_bytes(img, SIZE_MAX, 0, NULL, &unknown), BIG + INIT);
  cr_assert(!unknown);
  z[sizeof(skip) + 4] |= 0x08; /* a reserved bit */
  cr_assert_eq(tsr_shim_image_static_bytes(img, SIZE_MAX, 0, NULL, &unknown), 0);
  cr_assert(unknown);
  free(img);
  free(cubin);
}

/* Deterministic pseudo-random numbers (xorshift64). */
static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

Test(image, damaged_compressed_entries_never_crash, .timeout = 120) {
  const char *names[] = {"table_sm90_zstd.fatbin", "table_sm90_lz4.fatbin", "big_sm90_size.fatbin",
                         "big_sm90_lz4.fatbin"};
  uint64_t seed = 0x7e55e2a;
  for (size_t i = 0; i < 4; i++) {
    size_t n;
    unsigned char *img = slurp(names[i], &n);
    size_t body = ENTRY + 0x40, packed = (size_t)(entry_u64(img, ENTRY + PACKED) & 0xFFFFFFFFu);
    int unknowns = 0;
    for (int round = 0; round < 150; round++) {
      unsigned char *c = copy_of(img, n);
      int flips = 1 + (int)(next_random(&seed) % 4);
      for (int f = 0; f < flips; f++) {
        size_t at = round % 3 == 0 ? body + next_random(&seed) % 32 : body + next_random(&seed) % packed;
        c[at] ^= (unsigned char)(1u << (next_random(&seed) % 8));
      }
      bool unknown = false;
      (void)tsr_shim_image_static_bytes(c, n, 0, NULL, &unknown);
      unknowns += unknown;
      free(c);
    }
    cr_assert_gt(unknowns, 0, "%s: some damage is seen", names[i]);
    free(img);
  }
}
