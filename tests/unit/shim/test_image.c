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
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, &unknown), BIG + INIT);
  cr_assert(!unknown);
  cr_assert_eq(tsr_shim_image_static_bytes(img, SIZE_MAX, &unknown), BIG + INIT, "bounded by its own headers");
  free(img);
}

Test(image, a_fatbin_and_the_runtime_wrapper) {
  size_t n;
  unsigned char *img = slurp("big_sm90.fatbin", &n);
  bool unknown = true;
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, &unknown), BIG + INIT);
  cr_assert(!unknown);
  struct {
    uint32_t magic, version;
    const void *data, *unused;
  } wrapper = {0x466243B1u, 1, img, NULL};
  cr_assert_eq(tsr_shim_image_static_bytes(&wrapper, SIZE_MAX, &unknown), BIG + INIT);
  /* a compressed entry cannot be read: counted 0 and said */
  uint64_t flags;
  memcpy(&flags, img + 16 + 0x28, 8);
  flags |= 0x2000;
  memcpy(img + 16 + 0x28, &flags, 8);
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, &unknown), 0);
  cr_assert(unknown);
  free(img);
}

Test(image, ptx_text) {
  size_t n;
  unsigned char *img = slurp("big.ptx", &n);
  bool unknown = true;
  cr_assert_eq(tsr_shim_image_static_bytes(img, SIZE_MAX, &unknown), BIG + INIT);
  free(img);
  const char *ptx = ".version 8.0\n.target sm_90\n.address_size 64\n"
                    ".visible .global .align 8 .f64 grid[16][1024];\n"
                    ".global .u32 counter;\n"
                    ".extern .global .align 1 .b8 elsewhere[1048576];\n"
                    ".visible .entry k() { ld.global.u32 %r1, [counter]; ret; }\n";
  cr_assert_eq(tsr_shim_image_static_bytes(ptx, SIZE_MAX, &unknown), 8 * 16 * 1024 + 4);
}

Test(image, damaged_images_count_nothing_and_read_nothing_past_their_end) {
  size_t n;
  unsigned char *img = slurp("big_sm90.cubin", &n);
  bool unknown;
  /* section headers said to lie past the end of the buffer */
  cr_assert_eq(tsr_shim_image_static_bytes(img, 100, &unknown), 0);
  uint64_t far = UINT64_MAX - 8;
  memcpy(img + 0x28, &far, 8);
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, &unknown), 0);
  free(img);
  img = slurp("big_sm90.fatbin", &n);
  cr_assert_eq(tsr_shim_image_static_bytes(img, 40, &unknown), 0, "a fatbin longer than its buffer");
  uint64_t huge = UINT64_MAX;
  memcpy(img + 16 + 8, &huge, 8); /* an entry's payload size */
  cr_assert_eq(tsr_shim_image_static_bytes(img, n, &unknown), 0);
  free(img);
  cr_assert_eq(tsr_shim_image_static_bytes(NULL, 0, &unknown), 0);
  cr_assert_eq(tsr_shim_image_static_bytes("abc", 3, &unknown), 0);
  const char absurd[] = ".global .b8 x[99999999999999999999999999];";
  cr_assert_eq(tsr_shim_image_static_bytes(absurd, SIZE_MAX, &unknown), UINT64_MAX, "saturates");
}
