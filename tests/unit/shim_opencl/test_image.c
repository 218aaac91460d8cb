/* The bytes an image takes (shim_opencl/image.c), and the OpenCL name
 * patterns a lease answers to (tenant.c). */
#include <criterion/criterion.h>

#include "shim_opencl/image.h"
#include "tenant/tenant.h"

static cl_image_desc desc2d(size_t w, size_t h) {
  cl_image_desc d;
  memset(&d, 0, sizeof(d));
  d.image_type = CL_MEM_OBJECT_IMAGE2D, d.image_width = w, d.image_height = h;
  return d;
}

Test(opencl_image, formats_and_types) {
  cl_mem parent;
  cl_image_desc d = desc2d(100, 10);
  cl_image_format rgba8 = {CL_RGBA, CL_UNORM_INT8}, rf = {CL_R, CL_FLOAT}, rgh = {CL_RG, CL_HALF_FLOAT},
                  p565 = {CL_RGB, CL_UNORM_SHORT_565}, p1010 = {CL_RGB, CL_UNORM_INT_101010},
                  rgb16 = {CL_RGB, CL_UNSIGNED_INT16};
  cr_assert_eq(tsr_ocl_image_bytes(&rgba8, &d, &parent), 4000);
  cr_assert_null(parent);
  cr_assert_eq(tsr_ocl_image_bytes(&rf, &d, &parent), 4000);
  cr_assert_eq(tsr_ocl_image_bytes(&rgh, &d, &parent), 4000);
  cr_assert_eq(tsr_ocl_image_bytes(&p565, &d, &parent), 2000, "a packed type is the whole pixel");
  cr_assert_eq(tsr_ocl_image_bytes(&p1010, &d, &parent), 4000);
  cr_assert_eq(tsr_ocl_image_bytes(&rgb16, &d, &parent), 6000);
  d.image_type = CL_MEM_OBJECT_IMAGE3D, d.image_depth = 3;
  cr_assert_eq(tsr_ocl_image_bytes(&rf, &d, &parent), 12000);
  d.image_type = CL_MEM_OBJECT_IMAGE2D_ARRAY, d.image_array_size = 5;
  cr_assert_eq(tsr_ocl_image_bytes(&rf, &d, &parent), 20000);
  d.image_type = CL_MEM_OBJECT_IMAGE1D_ARRAY;
  cr_assert_eq(tsr_ocl_image_bytes(&rf, &d, &parent), 2000);
  d.image_type = CL_MEM_OBJECT_IMAGE1D;
  cr_assert_eq(tsr_ocl_image_bytes(&rf, &d, &parent), 400);
}

Test(opencl_image, over_a_buffer_takes_nothing_of_its_own) {
  cl_mem parent = NULL, buffer = (cl_mem)(uintptr_t)0x1000;
  cl_image_format f = {CL_RGBA, CL_FLOAT};
  cl_image_desc d = desc2d(64, 0);
  d.image_type = CL_MEM_OBJECT_IMAGE1D_BUFFER, d.mem_object = buffer;
  cr_assert_eq(tsr_ocl_image_bytes(&f, &d, &parent), 0);
  cr_assert_eq(parent, buffer);
  d = desc2d(64, 64);
  d.mem_object = buffer;
  cr_assert_eq(tsr_ocl_image_bytes(&f, &d, &parent), 0);
  cr_assert_eq(parent, buffer, "a 2D image over a buffer");
}

Test(opencl_image, what_cannot_be_told_is_zero) {
  cl_mem parent;
  cl_image_desc d = desc2d(64, 64);
  cl_image_format bad_order = {0x1234, CL_FLOAT}, bad_type = {CL_RGBA, 0x1234}, f = {CL_RGBA, CL_FLOAT};
  cr_assert_eq(tsr_ocl_image_bytes(&bad_order, &d, &parent), 0);
  cr_assert_eq(tsr_ocl_image_bytes(&bad_type, &d, &parent), 0);
  cr_assert_eq(tsr_ocl_image_bytes(NULL, &d, &parent), 0);
  cr_assert_eq(tsr_ocl_image_bytes(&f, NULL, &parent), 0);
  d.image_type = 0x9999;
  cr_assert_eq(tsr_ocl_image_bytes(&f, &d, &parent), 0);
  d = desc2d(SIZE_MAX, SIZE_MAX);
  cr_assert_eq(tsr_ocl_image_bytes(&f, &d, &parent), UINT64_MAX, "an overflow is the most, not a wrap");
}

Test(opencl_names, patterns) {
  cr_assert(tsr_tenant_opencl_name_matches("pthread-*", "pthread-skylake-avx512-AMD EPYC"));
  cr_assert(tsr_tenant_opencl_name_matches("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"));
  cr_assert(!tsr_tenant_opencl_name_matches("NVIDIA H100", "NVIDIA H100 80GB HBM3"), "a name is whole");
  cr_assert(!tsr_tenant_opencl_name_matches("cpu-*", "pthread-skylake"));
  cr_assert(!tsr_tenant_opencl_name_matches("", "anything"), "no pattern matches nothing");
  cr_assert(tsr_tenant_opencl_name_matches("*", "anything"), "a lone star is every name");
}
