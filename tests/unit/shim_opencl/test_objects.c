/* The table of charged OpenCL objects (shim_opencl/objects.c): reference
 * counts as OpenCL keeps them, parents kept alive by their children, a
 * failed release, and growth. The credits it gives are recorded here. */
#include <criterion/criterion.h>

#include "shim_opencl/shim.h"

static uint64_t credited[4];

void tsr_ocl_credit(int charged, uint64_t bytes) {
  if (charged >= 0 && charged < 4) credited[charged] += bytes;
}

static void *key(uintptr_t k) { return (void *)(k << 4); }

/* drop + settle as a release that the implementation carried out */
static void release(tsr_ocl_kind_t kind, void *k) {
  tsr_ocl_drop_t d;
  cr_assert(tsr_ocl_objects_drop(kind, k, &d), "%p is not known", k);
  tsr_ocl_objects_settle(kind, k, &d, true);
}

static void fresh(void) {
  tsr_ocl_objects_reset();
  memset(credited, 0, sizeof(credited));
}

Test(opencl_objects, credited_at_the_last_release) {
  fresh();
  cr_assert(tsr_ocl_objects_add(TSR_OCL_MEM, key(1), 4096, 0, NULL));
  tsr_ocl_objects_retain(TSR_OCL_MEM, key(1));
  tsr_ocl_objects_retain(TSR_OCL_MEM, key(1));
  release(TSR_OCL_MEM, key(1));
  release(TSR_OCL_MEM, key(1));
  cr_assert_eq(credited[0], 0);
  release(TSR_OCL_MEM, key(1));
  cr_assert_eq(credited[0], 4096);
  tsr_ocl_drop_t d;
  cr_assert(!tsr_ocl_objects_drop(TSR_OCL_MEM, key(1), &d), "a fourth release finds nothing to credit");
}

Test(opencl_objects, kinds_do_not_meet) {
  fresh();
  cr_assert(tsr_ocl_objects_add(TSR_OCL_SVM, key(7), 100, 1, NULL));
  tsr_ocl_drop_t d;
  cr_assert(!tsr_ocl_objects_drop(TSR_OCL_MEM, key(7), &d));
  release(TSR_OCL_SVM, key(7));
  cr_assert_eq(credited[1], 100);
}

Test(opencl_objects, a_child_keeps_its_parent) {
  fresh();
  cr_assert(tsr_ocl_objects_add(TSR_OCL_MEM, key(1), 1000, 2, NULL));
  cr_assert(tsr_ocl_objects_add(TSR_OCL_MEM, key(2), 0, -1, key(1))); /* a sub-buffer */
  cr_assert(tsr_ocl_objects_add(TSR_OCL_MEM, key(3), 0, -1, key(2))); /* an image over it */
  release(TSR_OCL_MEM, key(1));
  release(TSR_OCL_MEM, key(2));
  cr_assert_eq(credited[2], 0, "the image still holds the sub-buffer, which holds the buffer");
  release(TSR_OCL_MEM, key(3));
  cr_assert_eq(credited[2], 1000, "the last of the chain frees the buffer");
}

Test(opencl_objects, a_child_of_nothing_charged_is_not_kept) {
  fresh();
  cr_assert(tsr_ocl_objects_add(TSR_OCL_MEM, key(5), 0, -1, key(4)));
  tsr_ocl_drop_t d;
  cr_assert(!tsr_ocl_objects_drop(TSR_OCL_MEM, key(5), &d));
}

Test(opencl_objects, a_failed_release_changes_nothing) {
  fresh();
  cr_assert(tsr_ocl_objects_add(TSR_OCL_MEM, key(1), 64, 0, NULL));
  tsr_ocl_drop_t d;
  cr_assert(tsr_ocl_objects_drop(TSR_OCL_MEM, key(1), &d));
  cr_assert(d.last);
  tsr_ocl_objects_settle(TSR_OCL_MEM, key(1), &d, false);
  cr_assert_eq(credited[0], 0);
  release(TSR_OCL_MEM, key(1));
  cr_assert_eq(credited[0], 64, "the object was kept, and its release credits it");
  tsr_ocl_objects_add(TSR_OCL_MEM, key(1), 64, 0, NULL);
  tsr_ocl_objects_retain(TSR_OCL_MEM, key(1));
  cr_assert(tsr_ocl_objects_drop(TSR_OCL_MEM, key(1), &d));
  cr_assert(!d.last);
  tsr_ocl_objects_settle(TSR_OCL_MEM, key(1), &d, false); /* the reference is back: two again */
  release(TSR_OCL_MEM, key(1));
  cr_assert_eq(credited[0], 64);
  release(TSR_OCL_MEM, key(1));
  cr_assert_eq(credited[0], 128);
}

Test(opencl_objects, grows_past_its_first_size_and_keeps_everything) {
  fresh();
  enum { N = 20000 };
  for (uintptr_t i = 1; i <= N; i++) cr_assert(tsr_ocl_objects_add(TSR_OCL_MEM, key(i), i, 3, NULL));
  for (uintptr_t i = 1; i <= N; i += 2) release(TSR_OCL_MEM, key(i));
  for (uintptr_t i = N + 1; i <= 2 * N; i++) cr_assert(tsr_ocl_objects_add(TSR_OCL_MEM, key(i), i, 3, NULL));
  for (uintptr_t i = 2; i <= N; i += 2) release(TSR_OCL_MEM, key(i));
  for (uintptr_t i = N + 1; i <= 2 * N; i++) release(TSR_OCL_MEM, key(i));
  uint64_t want = 0;
  for (uint64_t i = 1; i <= 2 * N; i++) want += i;
  cr_assert_eq(credited[3], want);
}
