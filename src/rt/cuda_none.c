/* cuda_none.c: the CUDA backend of a build without nvcc: refuses. */
#include "rt/internal.h"

TSR_MUST_USE static tsr_status_t tsr__none_start(tsr_rt_t *rt) {
  (void)rt;
  return tsr_status_make(TSR_UNIMPLEMENTED, "this libtessera-rt was built without nvcc: no CUDA backend");
}
const tsr__rt_backend_ops_t tsr_rt_cuda = {.name = "cuda (absent)", .start = tsr__none_start};
