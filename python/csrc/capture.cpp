/* libtessera-torch: the native engine of the PyTorch front (tessera.torch,
 * docs/runtime.md "The PyTorch front"). No Python runs per operation.
 *
 * While a scheduler is active on a thread, the dispatch key
 * TESTING_ONLY_GenericMode is in that thread's included set, so every aten
 * call of the thread comes here first (the key sits above autograd and
 * above Python's dispatch modes). PyTorch reserves that key for a mode
 * defined outside its tree and uses it nowhere itself; no dedicated key
 * can be made from outside PyTorch.
 *
 * - The seed's elementwise operators and sum/mean over dims (functional,
 *   out= and in-place forms) are taken when what would run below this key
 *   is the plain autograd-then-backend path, nothing needs a gradient, and
 *   every operand is a strided tensor of the runtime's device of one dtype
 *   (f32, f16, bf16) with at most `threshold` elements: each becomes one
 *   libtessera-rt task, submitted at once (tsr_rt_submit_deferred: posted
 *   to the device eight at a time or before anything waits; the runtime
 *   orders tasks among themselves). A functional result is allocated by PyTorch's allocator
 *   and returned at once; its contents are pending.
 * - Views and metadata operations fall through (no data is read).
 * - Every other operation runs eagerly, after the runtime has finished
 *   everything if the operation touches a storage that submitted tasks
 *   touch and that are not known to be done.
 * - The runtime reads tensors that eager CUDA work may still be writing:
 *   after eager work ran on the device, the next task first synchronizes
 *   the current stream.
 * - Storages a task uses are held until the task is done, so PyTorch's
 *   allocator cannot hand their memory to anyone while the runtime uses it.
 * - An operation the runtime refuses (partly overlapping operands) runs
 *   eagerly; a runtime that failed raises.
 *
 * Control is a small C API (tessera.torch calls it through ctypes). One
 * scheduler at a time: libtessera-rt is owned by one thread. */
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>
#include <ATen/EmptyTensor.h>
#if defined(TSR_TORCH_CUDA)
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <ATen/ExpandUtils.h>
#include <ATen/native/TypeProperties.h>
#include <c10/util/SmallVector.h>

#include "tessera/rt.h"

namespace {

constexpr c10::DispatchKey kKey = c10::DispatchKey::TESTING_ONLY_GenericMode;

enum class Kind { fn, out, inplace };
enum class Form {
  binary,     /* (self, other[, alpha]): other a tensor or a number */
  rsub,       /* (self, other[, alpha]): other - alpha * self */
  pow_self,   /* (Scalar self, Tensor exponent) */
  compare,    /* (self, other): a bool result */
  unary,      /* (self) */
  gelu,       /* (self, approximate) */
  leaky_relu, /* (self, negative_slope) */
  hardtanh,   /* (self, min_val, max_val) */
  elu,        /* (self, alpha, scale, input_scale) */
  softplus,   /* (self, beta, threshold) */
  clamp,      /* (self, min?, max?): numbers or tensors */
  scalar1,    /* (self, bound): clamp_min, clamp_max, a number or a tensor */
  lerp,       /* (self, end, weight): a number or a tensor */
  addc,       /* (self, tensor1, tensor2, value) */
  where,      /* (condition, self, other): tensors or numbers */
  fill,       /* (self[, value]): fill_, zero_ */
  copy,       /* (self, src[, non_blocking]): copy_ */
  clone,      /* (self, memory_format?): a copy in a new tensor like self */
  reduce,     /* (self, dim?, keepdim, dtype?) */
  reduce_all, /* (self, dtype?) */
};

struct OpInfo {
  tsr_rt_op_t op;
  Kind kind;
  Form form;
};

/* aten overload -> what it is. An overload a PyTorch version lacks is
 * registered all the same and never called. */
struct Entry {
  const char *name;
  OpInfo info;
};

#define TSR_E(n, OP, K, F) {n, {OP, Kind::K, Form::F}}
/* a binary operator's tensor and number forms, functional, out= and in place */
#define TSR_BIN(n, OP)                                                                                         \
  TSR_E(n ".Tensor", OP, fn, binary), TSR_E(n ".out", OP, out, binary), TSR_E(n "_.Tensor", OP, inplace, binary), \
      TSR_E(n ".Scalar", OP, fn, binary), TSR_E(n ".Scalar_out", OP, out, binary),                             \
      TSR_E(n "_.Scalar", OP, inplace, binary)
#define TSR_CMP(n, OP)                                                                                           \
  TSR_E(n ".Tensor", OP, fn, compare), TSR_E(n ".Tensor_out", OP, out, compare),                                 \
      TSR_E(n "_.Tensor", OP, inplace, compare), TSR_E(n ".Scalar", OP, fn, compare),                            \
      TSR_E(n ".Scalar_out", OP, out, compare), TSR_E(n "_.Scalar", OP, inplace, compare)
#define TSR_UN(n, OP, F) TSR_E(n, OP, fn, F), TSR_E(n ".out", OP, out, F), TSR_E(n "_", OP, inplace, F)

const Entry kTable[] = {
    TSR_BIN("aten::add", TSR_RT_OP_ADD),
    TSR_BIN("aten::sub", TSR_RT_OP_SUB),
    TSR_BIN("aten::mul", TSR_RT_OP_MUL),
    TSR_BIN("aten::div", TSR_RT_OP_DIV),
    TSR_E("aten::rsub.Tensor", TSR_RT_OP_SUB, fn, rsub),
    TSR_E("aten::rsub.Scalar", TSR_RT_OP_SUB, fn, rsub),
    TSR_E("aten::maximum", TSR_RT_OP_MAXIMUM, fn, binary),
    TSR_E("aten::maximum.out", TSR_RT_OP_MAXIMUM, out, binary),
    TSR_E("aten::minimum", TSR_RT_OP_MINIMUM, fn, binary),
    TSR_E("aten::minimum.out", TSR_RT_OP_MINIMUM, out, binary),
    TSR_E("aten::pow.Tensor_Tensor", TSR_RT_OP_POW, fn, binary),
    TSR_E("aten::pow.Tensor_Tensor_out", TSR_RT_OP_POW, out, binary),
    TSR_E("aten::pow_.Tensor", TSR_RT_OP_POW, inplace, binary),
    TSR_E("aten::pow.Tensor_Scalar", TSR_RT_OP_POW, fn, binary),
    TSR_E("aten::pow.Tensor_Scalar_out", TSR_RT_OP_POW, out, binary),
    TSR_E("aten::pow_.Scalar", TSR_RT_OP_POW, inplace, binary),
    TSR_E("aten::pow.Scalar", TSR_RT_OP_POW, fn, pow_self),
    TSR_E("aten::pow.Scalar_out", TSR_RT_OP_POW, out, pow_self),
    TSR_CMP("aten::eq", TSR_RT_OP_EQ),
    TSR_CMP("aten::ne", TSR_RT_OP_NE),
    TSR_CMP("aten::lt", TSR_RT_OP_LT),
    TSR_CMP("aten::le", TSR_RT_OP_LE),
    TSR_CMP("aten::gt", TSR_RT_OP_GT),
    TSR_CMP("aten::ge", TSR_RT_OP_GE),
    TSR_E("aten::relu", TSR_RT_OP_RELU, fn, unary),
    TSR_E("aten::relu_", TSR_RT_OP_RELU, inplace, unary),
    TSR_UN("aten::sigmoid", TSR_RT_OP_SIGMOID, unary),
    TSR_UN("aten::tanh", TSR_RT_OP_TANH, unary),
    TSR_UN("aten::exp", TSR_RT_OP_EXP, unary),
    TSR_UN("aten::log", TSR_RT_OP_LOG, unary),
    TSR_UN("aten::sqrt", TSR_RT_OP_SQRT, unary),
    TSR_UN("aten::abs", TSR_RT_OP_ABS, unary),
    TSR_UN("aten::sin", TSR_RT_OP_SIN, unary),
    TSR_UN("aten::cos", TSR_RT_OP_COS, unary),
    TSR_UN("aten::neg", TSR_RT_OP_NEG, unary),
    TSR_UN("aten::reciprocal", TSR_RT_OP_RECIPROCAL, unary),
    TSR_UN("aten::rsqrt", TSR_RT_OP_RSQRT, unary),
    TSR_UN("aten::square", TSR_RT_OP_SQUARE, unary),
    TSR_UN("aten::exp2", TSR_RT_OP_EXP2, unary),
    TSR_UN("aten::log1p", TSR_RT_OP_LOG1P, unary),
    TSR_UN("aten::expm1", TSR_RT_OP_EXPM1, unary),
    TSR_UN("aten::silu", TSR_RT_OP_SILU, unary),
    TSR_UN("aten::mish", TSR_RT_OP_MISH, unary),
    TSR_UN("aten::hardsigmoid", TSR_RT_OP_HARDSIGMOID, unary),
    TSR_UN("aten::hardswish", TSR_RT_OP_HARDSWISH, unary),
    TSR_UN("aten::gelu", TSR_RT_OP_GELU, gelu),
    TSR_UN("aten::leaky_relu", TSR_RT_OP_LEAKY_RELU, leaky_relu),
    TSR_UN("aten::hardtanh", TSR_RT_OP_HARDTANH, hardtanh),
    TSR_UN("aten::elu", TSR_RT_OP_ELU, elu),
    TSR_E("aten::softplus", TSR_RT_OP_SOFTPLUS, fn, softplus),
    TSR_E("aten::softplus.out", TSR_RT_OP_SOFTPLUS, out, softplus),
    TSR_UN("aten::clamp", TSR_RT_OP_CLAMP, clamp),
    TSR_E("aten::clamp.Tensor", TSR_RT_OP_CLAMP, fn, clamp),
    TSR_E("aten::clamp.Tensor_out", TSR_RT_OP_CLAMP, out, clamp),
    TSR_E("aten::clamp_.Tensor", TSR_RT_OP_CLAMP, inplace, clamp),
    TSR_UN("aten::clamp_min", TSR_RT_OP_CLAMP_MIN, scalar1),
    TSR_E("aten::clamp_min.Tensor", TSR_RT_OP_CLAMP_MIN, fn, scalar1),
    TSR_E("aten::clamp_min.Tensor_out", TSR_RT_OP_CLAMP_MIN, out, scalar1),
    TSR_E("aten::clamp_min_.Tensor", TSR_RT_OP_CLAMP_MIN, inplace, scalar1),
    TSR_UN("aten::clamp_max", TSR_RT_OP_CLAMP_MAX, scalar1),
    TSR_E("aten::clamp_max.Tensor", TSR_RT_OP_CLAMP_MAX, fn, scalar1),
    TSR_E("aten::clamp_max.Tensor_out", TSR_RT_OP_CLAMP_MAX, out, scalar1),
    TSR_E("aten::clamp_max_.Tensor", TSR_RT_OP_CLAMP_MAX, inplace, scalar1),
    TSR_E("aten::lerp.Scalar", TSR_RT_OP_LERP, fn, lerp),
    TSR_E("aten::lerp.Scalar_out", TSR_RT_OP_LERP, out, lerp),
    TSR_E("aten::lerp_.Scalar", TSR_RT_OP_LERP, inplace, lerp),
    TSR_E("aten::lerp.Tensor", TSR_RT_OP_LERP, fn, lerp),
    TSR_E("aten::lerp.Tensor_out", TSR_RT_OP_LERP, out, lerp),
    TSR_E("aten::lerp_.Tensor", TSR_RT_OP_LERP, inplace, lerp),
    TSR_UN("aten::addcmul", TSR_RT_OP_ADDCMUL, addc),
    TSR_UN("aten::addcdiv", TSR_RT_OP_ADDCDIV, addc),
    TSR_E("aten::where.self", TSR_RT_OP_WHERE, fn, where),
    TSR_E("aten::where.self_out", TSR_RT_OP_WHERE, out, where),
    TSR_E("aten::where.ScalarSelf", TSR_RT_OP_WHERE, fn, where),
    TSR_E("aten::where.ScalarOther", TSR_RT_OP_WHERE, fn, where),
    TSR_E("aten::where.Scalar", TSR_RT_OP_WHERE, fn, where),
    TSR_E("aten::fill_.Scalar", TSR_RT_OP_COPY, inplace, fill),
    TSR_E("aten::fill_.Tensor", TSR_RT_OP_COPY, inplace, fill),
    TSR_E("aten::zero_", TSR_RT_OP_COPY, inplace, fill),
    TSR_E("aten::copy_", TSR_RT_OP_COPY, inplace, copy),
    TSR_E("aten::clone", TSR_RT_OP_COPY, fn, clone),
    TSR_E("aten::sum.dim_IntList", TSR_RT_OP_SUM, fn, reduce),
    TSR_E("aten::sum.IntList_out", TSR_RT_OP_SUM, out, reduce),
    TSR_E("aten::sum", TSR_RT_OP_SUM, fn, reduce_all),
    TSR_E("aten::mean.dim", TSR_RT_OP_MEAN, fn, reduce),
    TSR_E("aten::mean.out", TSR_RT_OP_MEAN, out, reduce),
    TSR_E("aten::mean", TSR_RT_OP_MEAN, fn, reduce_all),
};
#undef TSR_BIN
#undef TSR_CMP
#undef TSR_UN
#undef TSR_E

/* torch._foreach_* (what torch.optim calls by default): one
 * tsr_rt_submit_group per call and kind of item. */
enum class FForm {
  unary,            /* (self) */
  scalar,           /* (self, Scalar) */
  list,             /* (self, other[], alpha?) */
  scalar_list,      /* (self, Scalar[]) */
  tensor,           /* (self, Tensor other (a number), alpha?) */
  addc_scalar,      /* (self, tensor1[], tensor2[], Scalar value) */
  addc_scalar_list, /* (self, tensor1[], tensor2[], Scalar[] values) */
  addc_tensor,      /* (self, tensor1[], tensor2[], Tensor values (1-D, on the host)) */
  lerp_list,        /* (self, end[], weight[]) */
  lerp_scalar,      /* (self, end[], Scalar weight) */
  lerp_scalar_list, /* (self, end[], Scalar[] weights) */
};
struct FInfo {
  tsr_rt_op_t op;
  bool inplace;
  FForm form;
};
struct FEntry {
  const char *name;
  FInfo info;
};
#define TSR_F(n, OP, F) {n, {OP, false, FForm::F}}, {n "_" , {OP, true, FForm::F}}
#define TSR_FO(n, o, OP, F) {n "." o, {OP, false, FForm::F}}, {n "_." o, {OP, true, FForm::F}}
#define TSR_FBIN(n, OP)                                                                                        \
  TSR_FO(n, "Scalar", OP, scalar), TSR_FO(n, "List", OP, list), TSR_FO(n, "ScalarList", OP, scalar_list),       \
      TSR_FO(n, "Tensor", OP, tensor)
#define TSR_FADDC(n, OP)                                                                                    \
  TSR_FO(n, "Scalar", OP, addc_scalar), TSR_FO(n, "ScalarList", OP, addc_scalar_list), \
      TSR_FO(n, "Tensor", OP, addc_tensor)
const FEntry kForeach[] = {
    TSR_FBIN("aten::_foreach_add", TSR_RT_OP_ADD),
    TSR_FBIN("aten::_foreach_sub", TSR_RT_OP_SUB),
    TSR_FBIN("aten::_foreach_mul", TSR_RT_OP_MUL),
    TSR_FBIN("aten::_foreach_div", TSR_RT_OP_DIV),
    TSR_FBIN("aten::_foreach_maximum", TSR_RT_OP_MAXIMUM),
    TSR_FBIN("aten::_foreach_minimum", TSR_RT_OP_MINIMUM),
    TSR_FBIN("aten::_foreach_clamp_min", TSR_RT_OP_MAXIMUM),
    TSR_FBIN("aten::_foreach_clamp_max", TSR_RT_OP_MINIMUM),
    TSR_FADDC("aten::_foreach_addcmul", TSR_RT_OP_ADDCMUL),
    TSR_FADDC("aten::_foreach_addcdiv", TSR_RT_OP_ADDCDIV),
    TSR_FO("aten::_foreach_lerp", "List", TSR_RT_OP_LERP_T, lerp_list),
    TSR_FO("aten::_foreach_lerp", "Scalar", TSR_RT_OP_LERP, lerp_scalar),
    TSR_FO("aten::_foreach_lerp", "ScalarList", TSR_RT_OP_LERP, lerp_scalar_list),
    TSR_F("aten::_foreach_sqrt", TSR_RT_OP_SQRT, unary),
    TSR_F("aten::_foreach_neg", TSR_RT_OP_NEG, unary),
    TSR_F("aten::_foreach_abs", TSR_RT_OP_ABS, unary),
    TSR_F("aten::_foreach_exp", TSR_RT_OP_EXP, unary),
    TSR_F("aten::_foreach_log", TSR_RT_OP_LOG, unary),
    TSR_F("aten::_foreach_sigmoid", TSR_RT_OP_SIGMOID, unary),
    TSR_F("aten::_foreach_tanh", TSR_RT_OP_TANH, unary),
    TSR_F("aten::_foreach_reciprocal", TSR_RT_OP_RECIPROCAL, unary),
    TSR_F("aten::_foreach_rsqrt", TSR_RT_OP_RSQRT, unary),
    TSR_F("aten::_foreach_log1p", TSR_RT_OP_LOG1P, unary),
    TSR_F("aten::_foreach_expm1", TSR_RT_OP_EXPM1, unary),
    TSR_F("aten::_foreach_zero", TSR_RT_OP_COPY, unary),
};
#undef TSR_F
#undef TSR_FO
#undef TSR_FBIN
#undef TSR_FADDC

/* Views and metadata: they read no data, so they pass below this key at no
 * cost (a composite one's inner calls still come here). */
const char *const kFallthrough[] = {
    "aten::select.int", "aten::slice.Tensor", "aten::as_strided", "aten::view", "aten::alias",
    "aten::expand", "aten::unsqueeze", "aten::squeeze", "aten::squeeze.dim", "aten::squeeze.dims",
    "aten::t", "aten::transpose.int", "aten::permute", "aten::detach", "aten::_reshape_alias",
    "aten::reshape", "aten::unbind.int", "aten::split.Tensor", "aten::chunk", "aten::narrow",
    "aten::expand_as", "aten::view_as", "aten::reshape_as", "aten::flatten.using_ints", "aten::unflatten.int",
    "aten::movedim.int", "aten::movedim.intlist", "aten::swapaxes", "aten::swapdims", "aten::diagonal",
    "aten::empty.memory_format", "aten::empty_strided", "aten::empty_like", "aten::is_same_size",
    "aten::size.int", "aten::stride.int", "aten::sym_size.int", "aten::sym_stride.int", "aten::numel",
    "aten::sym_numel", "aten::dim", "aten::is_nonzero", "aten::_has_compatible_shallow_copy_type",
};

enum Stat { kScheduled, kEager, kFallbacks, kTasks, kWaits, kSyncs, kPassed, kStats };

/* The storages a task uses, held until it is done (out and up to three
 * inputs); a foreach call's many tasks are one entry (tickets first ..
 * last, its storages in `more`). */
struct Held {
  uint64_t first, last;
  bool released = false; /* waited for out of order: its storages already let go */
  uint8_t n = 0;
  c10::Storage storages[4];
  std::vector<c10::Storage> more;
};

/* The storages held tasks use, each with how many held tasks use it: open
 * addressing, linear probing, deletion by backward shift (no tombstones). */
class LiveSet {
 public:
  bool empty() const { return used_ == 0; }
  bool has(const c10::StorageImpl *k) const {
    if (!used_) return false;
    for (size_t i = home(k);; i = (i + 1) & mask_) {
      if (t_[i].key == k) return true;
      if (!t_[i].key) return false;
    }
  }
  void add(const c10::StorageImpl *k) {
    if ((used_ + 1) * 2 > t_.size()) grow();
    size_t i = home(k);
    while (t_[i].key && t_[i].key != k) i = (i + 1) & mask_;
    if (!t_[i].key) {
      t_[i].key = k;
      used_++;
    }
    t_[i].count++;
  }
  void remove(const c10::StorageImpl *k) {
    if (!used_) return;
    size_t i = home(k);
    while (t_[i].key != k) {
      if (!t_[i].key) return;
      i = (i + 1) & mask_;
    }
    if (--t_[i].count) return;
    used_--;
    for (size_t j = (i + 1) & mask_; t_[j].key; j = (j + 1) & mask_) {
      size_t h = home(t_[j].key);
      /* t_[j] may move to the hole at i unless its home lies in (i, j] */
      bool stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
      if (!stays) {
        t_[i] = t_[j];
        i = j;
      }
    }
    t_[i] = Slot{};
  }
  void clear() {
    std::fill(t_.begin(), t_.end(), Slot{});
    used_ = 0;
  }

 private:
  struct Slot {
    const c10::StorageImpl *key = nullptr;
    uint32_t count = 0;
  };
  size_t home(const c10::StorageImpl *k) const {
    return (size_t)(((uintptr_t)k * UINT64_C(0x9e3779b97f4a7c15)) >> 24) & mask_;
  }
  void grow() {
    std::vector<Slot> old = std::move(t_);
    t_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    mask_ = t_.size() - 1;
    used_ = 0;
    for (const Slot &sl : old) {
      if (!sl.key) continue;
      size_t i = home(sl.key);
      while (t_[i].key) i = (i + 1) & mask_;
      t_[i] = sl;
      used_++;
    }
  }
  std::vector<Slot> t_;
  size_t mask_ = 0, used_ = 0;
};

inline uint64_t now_ns() {
  return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

#if defined(TSR_TORCH_SECTIONS)
/* where a taken operation's time goes (a profiling build: -DTSR_TORCH_SECTIONS) */
enum Section { kSecBuild, kSecAlloc, kSecSubmit, kSecTrack, kSecGroup, kSecs };
const char *const kSecNames[kSecs] = {"checks and task", "allocation", "tsr_rt_submit", "holding",
                                      "foreach: items into groups"};
uint64_t sec_ns[kSecs];
#define TSR_SEC_START uint64_t tsr_t0 = now_ns(), tsr_t1
#define TSR_SEC(s) (tsr_t1 = now_ns(), sec_ns[s] += tsr_t1 - tsr_t0, tsr_t0 = tsr_t1)
#else
#define TSR_SEC_START
#define TSR_SEC(s) ((void)0)
#endif

struct Engine {
  tsr_rt_t *rt = nullptr;
  bool active = false;
  bool cuda = false;
  int device_index = -1;
  int64_t threshold = 0;
  std::thread::id owner;
  bool dirty = true; /* eager work may be queued on the device */
  LiveSet live;          /* the storages of held tasks */
  std::deque<Held> held; /* in ticket order */
  uint32_t since_prune = 0;
  int64_t stats[kStats] = {};
  /* passing (start_pass): operations the engine would take run eagerly
   * while eager device work keeps forcing waits after short runs of tasks */
  uint64_t run_tasks = 0;         /* tasks taken since the last forced wait */
  uint64_t run_sync_ns = 0;       /* what synchronizing with eager work cost those tasks (sync_if_dirty) */
  int short_runs = 0;             /* forced waits in a row that cost more than their tasks saved */
  int passing = 1;                /* tsr_torch_set_passing: 0 off, 1 by cost, 2 on every short run */
  int64_t pass_left = 0;          /* operations still to pass */
  int64_t pass_len = 0;           /* the next pass's length (doubles while probes find short runs) */
  bool pass_on = false;           /* a pass: the key is out of the thread's set, count_passed counts */
  at::CallbackHandle pass_cb = 0; /* count_passed's registration (removed by settle_pass) */
  std::unordered_map<const c10::FunctionSchema *, const OpInfo *> ops; /* a cache of kTable */
  std::unordered_map<const c10::FunctionSchema *, const FInfo *> fops; /* ... of kForeach */
};

Engine E;

/* ---- passing operations while waits cost more than tasks save -------------- *
 * A task saves the host an eager launch (about kTaskSavesNs: PyTorch's
 * dispatch and launch against the engine's submit); a forced wait (eager
 * device work that reads or writes what pending tasks touch) costs what it
 * waited. When such waits keep coming after only a few tasks (fewer than
 * kShortRun) and cost more than those tasks saved (a GEMM, or an operation
 * the front does not take, between every few elementwise ones), taking
 * operations costs more than eager: the engine then passes the next
 * operations to eager PyTorch, and takes them again afterwards to see
 * whether the pattern went on (the probe), passing twice as long each time
 * it did. During a pass the engine's key is out of the thread's dispatch
 * set, so a passed operation goes to PyTorch's kernels directly (no boxed
 * look at it, which cost about 3.5 us an operation on the H200); a
 * thread-local RecordFunction callback counts the operations (every aten
 * call, nested ones too; sampled, one in kPassSample, so that an operation
 * it does not see costs PyTorch's countdown and no RecordFunction) and puts
 * the key back after the pass. Before a
 * pass the engine waits for every pending task (it does not see what the
 * passed operations touch) and parks the runtime's kernel. Longer runs,
 * whose waits are shared by more tasks, are always taken.
 * tsr_torch_set_passing(0) turns it off. */
constexpr uint64_t kTaskSavesNs = 4000; /* what a task saves against eager (H200: 3-4 us against 7-8) */
constexpr uint64_t kPassCostNs = 4000;  /* what passing an operation cost over eager through the key (H200: about
                                         * 3.5 us); not measured again since a pass goes around the key */
constexpr uint64_t kShortRun = 8;       /* a run of fewer tasks than this before a forced wait is short */
constexpr int kCostlyWaits = 4;         /* costly forced waits after short runs, in a row, before passing (after a
                                         * pass, one: the probe found the pattern again) */
constexpr int64_t kPassFirst = 256;     /* operations passed the first time */
constexpr int64_t kPassMax = 16384;     /* at most, however long the pattern lasts */
constexpr int64_t kPassSample = 8;      /* the pass's counter sees one operation in this many, at random */

void start_pass(int64_t n);

void forced_wait(uint64_t waited_ns) {
  if (!E.passing) return;
  /* the run's cost: its forced wait, and its wait for eager work before its first task */
  waited_ns += E.run_sync_ns;
  E.run_sync_ns = 0;
  /* costly: the wait cost more than its run's tasks saved, and than passing them would have cost */
  if (E.run_tasks >= kShortRun || (E.passing == 1 && waited_ns <= E.run_tasks * (kTaskSavesNs + kPassCostNs))) {
    E.short_runs = 0;
    E.pass_len = kPassFirst;
  } else if (++E.short_runs >= (E.pass_len > kPassFirst ? 1 : kCostlyWaits)) {
    int64_t n = E.pass_len ? E.pass_len : kPassFirst;
    E.pass_len = std::min<int64_t>(n * 2, kPassMax);
    E.short_runs = 0;
    start_pass(n);
  }
  E.run_tasks = 0;
}

/* An operation taken as `tasks` tasks: the counters, and the run passing
 * measures its next forced wait against. */
void took(uint64_t tasks) {
  E.stats[kScheduled]++;
  E.stats[kTasks] += (int64_t)tasks;
  E.run_tasks += tasks;
}

/* A passed operation (RecordFunction's start, on every thread that shares
 * this one's thread-local state: autograd's workers too, which it
 * ignores). The last one of the pass puts the key back: the next operation
 * comes to the engine again. */
std::unique_ptr<at::ObserverContext> count_passed(const at::RecordFunction &) {
  if (!E.pass_on || std::this_thread::get_id() != E.owner) return nullptr;
  E.stats[kPassed] += kPassSample;
  E.pass_left -= kPassSample;
  if (E.pass_left <= 0) {
    E.pass_on = false;
    c10::impl::tls_set_dispatch_key_included(kKey, true);
  }
  return nullptr;
}

/* A pass's end, at the engine's next operation: the counter goes (not from
 * inside the callback, while RecordFunction runs its callbacks). */
inline void settle_pass() {
  if (E.pass_cb && !E.pass_on) {
    at::removeCallback(E.pass_cb);
    E.pass_cb = 0;
  }
}

void end_pass() {
  if (E.pass_on && std::this_thread::get_id() == E.owner) c10::impl::tls_set_dispatch_key_included(kKey, true);
  E.pass_on = false;
  E.pass_left = 0;
  settle_pass();
}

[[noreturn]] void fail(tsr_status_t st, const char *what) {
  std::string msg = std::string("tessera: ") + what + ": " + tsr_status_message(st);
  tsr_status_free(st);
  TORCH_CHECK(false, msg);
}

bool held_done(const Held &h) {
  for (uint64_t t = h.first; t <= h.last; t++)
    if (!tsr_rt_done(E.rt, t)) return false;
  return true;
}

/* Lets go of an entry's storages (its tasks are done). */
void release(Held &h) {
  if (h.released) return;
  for (int i = 0; i < h.n; i++) E.live.remove(h.storages[i].unsafeGetStorageImpl());
  for (const c10::Storage &st : h.more) E.live.remove(st.unsafeGetStorageImpl());
  h.released = true;
  h.n = 0;
  h.more.clear();
}

/* Drops what finished from the front of `held` (lanes finish out of
 * order: it stops at the first task not done). */
void prune() {
  while (!E.held.empty() && (E.held.front().released || held_done(E.held.front()))) {
    release(E.held.front());
    E.held.pop_front();
  }
  E.since_prune = 0;
}

/* Waits for everything submitted and lets go of what it held. */
void flush_all() {
  if (!E.rt) return;
  tsr_status_t st = tsr_rt_flush(E.rt);
  E.stats[kWaits]++;
  E.live.clear();
  E.held.clear();
  if (st) fail(st, "the runtime failed");
}

/* Passes the next n operations (see "passing" above). */
void start_pass(int64_t n) {
  flush_all(); /* the passed operations may touch anything pending */
  if (E.cuda) tsr_rt_park(E.rt);
  E.dirty = true;
  E.pass_left = n;
  E.pass_on = true;
  if (!E.pass_cb)
    E.pass_cb =
        at::addThreadLocalCallback(at::RecordFunctionCallback(&count_passed)
                                       .scopes({at::RecordScope::FUNCTION})
                                       .samplingProb(1.0 / (double)kPassSample));
  c10::impl::tls_set_dispatch_key_included(kKey, false);
}

void storages_of(const c10::IValue &v, LiveSet *set) {
  if (v.isTensor()) {
    const at::Tensor &t = v.toTensor();
    if (t.defined() && t.has_storage()) set->add(t.storage().unsafeGetStorageImpl());
  } else if (v.isList()) {
    for (const c10::IValue &e : v.toListRef()) storages_of(e, set);
  }
}

/* Waits only for the held tasks that use a storage of `args` (an eager
 * operation reads or writes those; the rest run on), and lets go of them. */
void wait_for(c10::ArrayRef<c10::IValue> args) {
  const uint64_t t0 = now_ns();
  static LiveSet mine;
  mine.clear();
  for (const c10::IValue &v : args) storages_of(v, &mine);
  bool waited = false;
  for (Held &h : E.held) {
    if (h.released) continue;
    bool uses = false;
    for (int i = 0; !uses && i < h.n; i++) uses = mine.has(h.storages[i].unsafeGetStorageImpl());
    for (size_t i = 0; !uses && i < h.more.size(); i++) uses = mine.has(h.more[i].unsafeGetStorageImpl());
    if (!uses) continue;
    for (uint64_t t = h.first; t <= h.last; t++) {
      tsr_status_t st = tsr_rt_wait(E.rt, t);
      if (st) fail(st, "the runtime failed");
    }
    waited = true;
    release(h);
  }
  if (waited) {
    E.stats[kWaits]++;
    forced_wait(now_ns() - t0);
  }
  prune();
}

bool touches_live(const c10::IValue &v) {
  if (v.isTensor()) {
    const at::Tensor &t = v.toTensor();
    if (!t.defined() || !t.has_storage()) return false;
    return E.live.has(t.storage().unsafeGetStorageImpl());
  }
  if (v.isList()) { /* tensor lists too, without a copy */
    for (const c10::IValue &e : v.toListRef())
      if (touches_live(e)) return true;
  }
  return false;
}

bool on_device(const c10::IValue &v) {
  if (v.isTensor()) return v.toTensor().defined() && v.toTensor().is_cuda();
  if (v.isList()) {
    for (const c10::IValue &e : v.toListRef())
      if (on_device(e)) return true;
  }
  return false;
}

/* Whether an operation's arguments include a tensor of the runtime's kind
 * (a CUDA tensor, or any tensor on the CPU backend): a fallback then moves
 * work off the runtime; a host-only operation (a step counter) is not one. */
bool device_work(c10::ArrayRef<c10::IValue> args) {
  if (!E.cuda) return true;
  for (const c10::IValue &v : args)
    if (on_device(v)) return true;
  return false;
}

/* Runs an operation eagerly, below this key: first the runtime finishes
 * whatever the operation's tensors are waiting for. */
void eager(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  settle_pass();
  size_t nargs = op.schema().arguments().size();
  if (E.active && !E.live.empty()) {
    bool touch = false;
    for (const c10::IValue &v : torch::jit::last(*stack, nargs)) touch = touch || touches_live(v);
    if (touch) {
      prune();
      touch = false;
      for (const c10::IValue &v : torch::jit::last(*stack, nargs)) touch = touch || touches_live(v);
      if (touch) wait_for(torch::jit::last(*stack, nargs));
    }
  }
  if (E.active) {
    E.stats[kEager]++;
    tsr_rt_post(E.rt); /* the device runs what is deferred while this runs */
  }
  /* eager device work after tasks: the runtime's kernel makes room for it
   * at once (tsr_rt_park) rather than holding the SMs for its idle time;
   * while dirty, no task has run since the last park */
  bool dev = false;
  if (E.active && E.cuda && !E.dirty) {
    for (const c10::IValue &v : torch::jit::last(*stack, nargs)) dev = dev || on_device(v);
    if (dev) tsr_rt_park(E.rt);
  }
  {
    c10::impl::ExcludeDispatchKeyGuard guard(kKey);
    op.callBoxed(stack);
  }
  if (E.active && E.cuda && !E.dirty) {
    size_t nret = op.schema().returns().size();
    bool made = false; /* a factory's result (torch.zeros(device=...)): no operand said so */
    for (const c10::IValue &v : torch::jit::last(*stack, nret)) made = made || on_device(v);
    if (made && !dev) tsr_rt_park(E.rt);
    if (dev || made) E.dirty = true;
  }
}

/* ---- taking an operation --------------------------------------------------- */

/* Whether what runs below this key for these tensors is the plain
 * autograd, ADInplaceOrView, backend path (no other mode, subclass,
 * autocast, functionalization, conjugate or negative view, tracer). */
bool plain_path(c10::DispatchKeySet ks) {
  /* the answer for the last key set seen (a loop over its keys each call
   * otherwise; a program's operations mostly see one or two sets) */
  static thread_local uint64_t last_raw = 0;
  static thread_local bool last_ok = false;
  if (ks.raw_repr() == last_raw && last_raw) return last_ok;
  last_raw = ks.raw_repr();
  last_ok = false;
  for (c10::DispatchKey k : ks.remove(kKey)) {
    switch (k) {
    case c10::DispatchKey::CPU:
    case c10::DispatchKey::CUDA:
    case c10::DispatchKey::AutogradCPU:
    case c10::DispatchKey::AutogradCUDA:
    case c10::DispatchKey::ADInplaceOrView:
    case c10::DispatchKey::BackendSelect:
      break;
    default:
      return false;
    }
  }
  last_ok = true;
  return true;
}

/* A tensor the runtime can use as an operand: strided, on its device, of
 * a float dtype (or bool where `bools`), not empty, within the
 * threshold, not needing a gradient. A 0-dim one broadcasts. */
bool good_operand(const at::Tensor &t, bool bools) {
  if (!t.defined() || t.layout() != c10::kStrided || !t.has_storage()) return false;
  if (E.cuda ? !(t.is_cuda() && t.get_device() == E.device_index) : !t.device().is_cpu()) return false;
  c10::ScalarType s = t.scalar_type();
  if (s != at::kFloat && s != at::kHalf && s != at::kBFloat16 && !(bools && s == at::kBool)) return false;
  if (t.dim() > TSR_RT_MAX_DIMS || t.numel() == 0 || t.numel() > E.threshold) return false;
  if (at::GradMode::is_enabled() && t.requires_grad()) return false;
  return t.data_ptr() != nullptr;
}

bool good_tensor(const at::Tensor &t) { return good_operand(t, false); }

tsr_rt_dtype_t dtype_of(c10::ScalarType s) {
  switch (s) {
  case at::kHalf:
    return TSR_RT_F16;
  case at::kBFloat16:
    return TSR_RT_BF16;
  case at::kBool:
    return TSR_RT_BOOL;
  default:
    return TSR_RT_F32;
  }
}

bool runtime_dtype(c10::ScalarType s) {
  return s == at::kFloat || s == at::kHalf || s == at::kBFloat16 || s == at::kBool;
}

/* t as a task operand of `ndim` dims (leading dims of size 1 added). */
void operand(tsr_rt_tensor_t *o, const at::Tensor &t, int64_t ndim) {
  o->data = t.data_ptr();
  o->dtype = dtype_of(t.scalar_type());
  o->ndim = (uint32_t)ndim;
  int64_t lead = ndim - t.dim();
  for (int64_t d = 0; d < ndim; d++) {
    o->sizes[d] = d < lead ? 1 : t.size(d - lead);
    o->strides[d] = d < lead ? 0 : t.stride(d - lead);
  }
}

bool scalar_arg(const c10::IValue &v, float *out) {
  if (v.isScalar()) {
    c10::Scalar s = v.toScalar();
    if (s.isComplex() || s.isBoolean()) return false;
    *out = (float)s.toDouble();
    return true;
  }
  return false;
}

bool scalar_is(const c10::IValue &v, double want) {
  float f;
  return scalar_arg(v, &f) && (double)f == want;
}

/* The value of a 0-dim tensor in host memory, read there: a number PyTorch
 * passes as a tensor (a Python number wrapped, a step count, a bias
 * correction). With the CUDA backend, whose tasks never write host
 * memory; on the CPU backend only what no task can have written. */
bool host_number(const at::Tensor &t, double *out) {
  if (!t.defined() || t.dim() != 0 || !t.device().is_cpu() || !t.has_storage()) return false;
  if (t.layout() != c10::kStrided) return false;
  /* on the CPU backend, a host tensor of a runtime dtype may be a pending
   * result: an operand then, unless PyTorch made it from a number */
  if (!E.cuda && !t.unsafeGetTensorImpl()->is_wrapped_number() &&
      (t.scalar_type() == at::kFloat || t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16))
    return false;
  const void *p = t.data_ptr();
  if (!p) return false;
  switch (t.scalar_type()) {
  case at::kFloat: *out = *static_cast<const float *>(p); return true;
  case at::kDouble: *out = *static_cast<const double *>(p); return true;
  case at::kHalf: *out = (float)*static_cast<const c10::Half *>(p); return true;
  case at::kBFloat16: *out = (float)*static_cast<const c10::BFloat16 *>(p); return true;
  case at::kLong: *out = (double)*static_cast<const int64_t *>(p); return true;
  case at::kInt: *out = (double)*static_cast<const int32_t *>(p); return true;
  default: return false;
  }
}

typedef c10::SmallVector<int64_t, TSR_RT_MAX_DIMS> Shape;

/* What a taken operation reads, in the runtime operator's order: tensors
 * (pointers into the call's stack) and numbers. */
struct Inputs {
  const at::Tensor *t[3];
  float num[3];
  int n = 0;
  void push_back(const at::Tensor &x) {
    t[n] = &x;
    num[n++] = 0.f;
  }
  void push_number(float v) {
    t[n] = nullptr;
    num[n++] = v;
  }
};

/* One operand: a tensor the runtime can read, or a number (a Python
 * number, or a 0-dim tensor in host memory). Also folds it into the
 * operation's result type. */
bool take(const c10::IValue &v, Inputs *ins, at::native::ResultTypeState *rs, bool bools = false) {
  if (v.isTensor()) {
    const at::Tensor &x = v.toTensor();
    double d;
    if (host_number(x, &d)) {
      ins->push_number((float)d);
    } else {
      if (!good_operand(x, bools)) return false;
      ins->push_back(x);
    }
    if (rs) *rs = at::native::update_result_type_state(x, *rs);
    return true;
  }
  if (v.isScalar()) {
    c10::Scalar s = v.toScalar();
    if (s.isComplex() || s.isBoolean()) return false;
    ins->push_number((float)s.toDouble());
    if (rs) *rs = at::native::update_result_type_state(s, *rs);
    return true;
  }
  return false;
}

/* The broadcast shape of the tensor inputs (false: they do not broadcast,
 * PyTorch's error follows). */
bool broadcast(const Inputs &ins, Shape *shape) {
  shape->clear();
  bool any = false;
  for (int i = 0; i < ins.n; i++) {
    if (!ins.t[i]) continue;
    if (!any) {
      shape->assign(ins.t[i]->sizes().begin(), ins.t[i]->sizes().end());
      any = true;
      continue;
    }
    try {
      auto s = at::infer_size_dimvector(c10::IntArrayRef(shape->data(), shape->size()), ins.t[i]->sizes());
      shape->assign(s.begin(), s.end());
    } catch (const c10::Error &) {
      return false;
    }
  }
  return any;
}

/* pow with a number exponent as PyTorch's kernel special-cases it */
void pow_number(tsr_rt_task_t *k, Inputs *ins, float e) {
  if (e == 2.f || e == 0.5f || e == -1.f || e == -0.5f) {
    k->op = e == 2.f ? TSR_RT_OP_SQUARE : e == 0.5f ? TSR_RT_OP_SQRT : e == -1.f ? TSR_RT_OP_RECIPROCAL : TSR_RT_OP_RSQRT;
    ins->n = 1;
  }
}

/* Reads an operation's arguments into a task; false: not one the runtime
 * takes (it runs eagerly). `res` gets the tensor the operation returns
 * (out, self, or undefined for a new one of out_shape and *out_dtype). */
bool build(const OpInfo &info, c10::ArrayRef<c10::IValue> a, tsr_rt_task_t *k, at::Tensor *res, Shape *out_shape,
           c10::ScalarType *out_dtype, Inputs *ins) {
  *k = tsr_rt_task_t{};
  k->op = info.op;
  size_t n = a.size();
  if (n == 0) return false;
  size_t last = n; /* one past the last argument before out */
  if (info.kind == Kind::out) {
    if (!a[n - 1].isTensor()) return false;
    *res = a[n - 1].toTensor();
    last = n - 1;
  } else if (info.kind == Kind::inplace) {
    if (!a[0].isTensor()) return false;
    *res = a[0].toTensor();
  }
  at::native::ResultTypeState rs{};
  bool reduce = info.form == Form::reduce || info.form == Form::reduce_all;
  bool compare = info.form == Form::compare;
  /* self first: a tensor for every form but pow(number, tensor) and where */
  if (info.form != Form::pow_self && info.form != Form::where && info.form != Form::rsub) {
    if (!a[0].isTensor() || !good_tensor(a[0].toTensor())) return false;
  }
  switch (info.form) {
  case Form::binary:
  case Form::compare: {
    if (last < 2) return false;
    take(a[0], ins, &rs);
    if (!take(a[1], ins, &rs)) return false;
    float alpha = 1.f;
    if (last >= 3 && !a[2].isNone() && !scalar_arg(a[2], &alpha)) return false;
    if (!ins->t[1]) {
      /* a number: what PyTorch's kernel computes with a host scalar */
      float b = ins->num[1];
      switch (info.op) {
      case TSR_RT_OP_ADD: ins->num[1] = alpha * b; break;
      case TSR_RT_OP_SUB: ins->num[1] = alpha * b; break;
      case TSR_RT_OP_DIV:
        if (E.cuda) { /* x / s is x * (1 / s) on the GPU */
          k->op = TSR_RT_OP_MUL;
          ins->num[1] = 1.f / b;
        }
        break;
      case TSR_RT_OP_POW: pow_number(k, ins, b); break;
      default: break;
      }
    } else if (alpha != 1.f) {
      if (info.op != TSR_RT_OP_ADD && info.op != TSR_RT_OP_SUB) return false;
      /* self + alpha * other (sub: PyTorch's add with -alpha) */
      k->op = TSR_RT_OP_ADDCMUL;
      k->scalar[0] = info.op == TSR_RT_OP_SUB ? -alpha : alpha;
      ins->push_number(1.f);
    }
    break;
  }
  case Form::rsub: {
    /* other - alpha * self */
    if (last < 2 || !a[0].isTensor() || !good_tensor(a[0].toTensor())) return false;
    float alpha = 1.f;
    if (last >= 3 && !a[2].isNone() && !scalar_arg(a[2], &alpha)) return false;
    if (!take(a[1], ins, &rs)) return false;
    take(a[0], ins, &rs);
    if (alpha != 1.f) {
      k->op = TSR_RT_OP_ADDCMUL;
      k->scalar[0] = -alpha;
      ins->push_number(1.f);
    }
    break;
  }
  case Form::pow_self: {
    if (last < 2 || !a[1].isTensor() || !good_tensor(a[1].toTensor())) return false;
    if (!take(a[0], ins, &rs) || ins->t[0]) return false;
    take(a[1], ins, &rs);
    if (ins->num[0] == 2.f) { /* PyTorch's pow(2, x) is exp2 */
      k->op = TSR_RT_OP_EXP2;
      ins->t[0] = ins->t[1];
      ins->n = 1;
    }
    break;
  }
  case Form::clone:
    /* preserve_format (or none given): a tensor like self, as empty_like makes it */
    if (last >= 2 && !a[1].isNone() &&
        !(a[1].isInt() && a[1].toInt() == (int64_t)c10::MemoryFormat::Preserve))
      return false;
    take(a[0], ins, &rs);
    break;
  case Form::unary:
  case Form::gelu:
  case Form::leaky_relu:
  case Form::hardtanh:
  case Form::elu:
  case Form::softplus:
  case Form::reduce:
  case Form::reduce_all:
    take(a[0], ins, &rs);
    break;
  case Form::clamp: {
    if (last < 3) return false;
    take(a[0], ins, &rs);
    bool lo = !a[1].isNone(), hi = !a[2].isNone();
    if (!lo && !hi) return false;
    Inputs b;
    if ((lo && !take(a[1], &b, &rs)) || (hi && !take(a[2], &b, &rs))) return false;
    bool tensors = (b.n > 0 && b.t[0]) || (b.n > 1 && b.t[1]);
    if (!tensors) {
      /* numbers: the scalar forms */
      k->scalar[0] = b.num[0];
      k->scalar[1] = b.n > 1 ? b.num[1] : 0.f;
      k->op = lo && hi ? TSR_RT_OP_CLAMP : lo ? TSR_RT_OP_CLAMP_MIN : TSR_RT_OP_CLAMP_MAX;
    } else if (lo && hi) {
      k->op = TSR_RT_OP_CLAMP_T;
      for (int i = 0; i < 2; i++) {
        if (b.t[i]) ins->push_back(*b.t[i]);
        else ins->push_number(b.num[i]);
      }
    } else {
      k->op = lo ? TSR_RT_OP_MAXIMUM : TSR_RT_OP_MINIMUM;
      ins->push_back(*b.t[0]);
    }
    break;
  }
  case Form::scalar1: {
    if (last < 2) return false;
    take(a[0], ins, &rs);
    Inputs b;
    if (!take(a[1], &b, &rs)) return false;
    if (b.t[0]) {
      k->op = info.op == TSR_RT_OP_CLAMP_MIN ? TSR_RT_OP_MAXIMUM : TSR_RT_OP_MINIMUM;
      ins->push_back(*b.t[0]);
    } else {
      k->scalar[0] = b.num[0];
    }
    break;
  }
  case Form::lerp: {
    if (last < 3) return false;
    take(a[0], ins, &rs);
    if (!take(a[1], ins, &rs)) return false;
    Inputs w;
    if (!take(a[2], &w, nullptr)) return false;
    if (w.t[0]) {
      k->op = TSR_RT_OP_LERP_T;
      ins->push_back(*w.t[0]);
    } else {
      k->scalar[0] = w.num[0];
    }
    break;
  }
  case Form::addc: {
    if (last < 4 || !scalar_arg(a[3], &k->scalar[0])) return false;
    take(a[0], ins, &rs);
    if (!take(a[1], ins, &rs) || !take(a[2], ins, &rs)) return false;
    break;
  }
  case Form::where: {
    if (last < 3 || !a[0].isTensor() || a[0].toTensor().scalar_type() != at::kBool) return false;
    if (!take(a[0], ins, nullptr, true) || !ins->t[0]) return false;
    if (!take(a[1], ins, &rs) || !take(a[2], ins, &rs)) return false;
    break;
  }
  case Form::fill: {
    /* fill_(self, value), zero_(self): a copy of a number */
    Inputs v;
    if (last >= 2) {
      if (!take(a[1], &v, nullptr)) return false;
      if (v.t[0]) ins->push_back(*v.t[0]);
      else ins->push_number(v.num[0]);
    } else {
      ins->push_number(0.f);
    }
    rs = at::native::update_result_type_state(a[0].toTensor(), rs);
    break;
  }
  case Form::copy: {
    if (last < 2 || !a[1].isTensor()) return false;
    const at::Tensor &src = a[1].toTensor();
    if (!good_operand(src, true) || src.dim() > a[0].toTensor().dim()) return false;
    ins->push_back(src);
    rs = at::native::update_result_type_state(a[0].toTensor(), rs);
    break;
  }
  }
  /* what PyTorch would compute in and return */
  c10::ScalarType rt = at::native::result_type(rs);
  if (rt != at::kFloat && rt != at::kHalf && rt != at::kBFloat16) return false;
  for (int i = 0; i < ins->n; i++)
    if (ins->t[i] && !runtime_dtype(ins->t[i]->scalar_type())) return false;
  *out_dtype = compare ? at::kBool : rt;
  if (reduce) {
    const at::Tensor &self = a[0].toTensor();
    int64_t nd = self.dim();
    if (nd == 0) return false;
    uint32_t mask = 0;
    bool keepdim = false;
    size_t dtype_at = info.form == Form::reduce ? 3 : 1;
    if (last > dtype_at && !a[dtype_at].isNone()) return false; /* dtype= */
    if (info.form == Form::reduce_all) {
      mask = (uint32_t)((1u << nd) - 1);
    } else {
      if (last < 3 || !a[2].isBool()) return false;
      keepdim = a[2].toBool();
      if (a[1].isNone()) {
        mask = (uint32_t)((1u << nd) - 1);
      } else {
        if (!a[1].isIntList()) return false;
        c10::List<int64_t> dims = a[1].toIntList();
        if (dims.empty()) return false; /* PyTorch's meaning of [] has changed between versions */
        for (int64_t d : dims) {
          if (d < -nd || d >= nd) return false;
          uint32_t bit = 1u << (d < 0 ? d + nd : d);
          if (mask & bit) return false; /* a dim twice: PyTorch's error */
          mask |= bit;
        }
      }
    }
    k->reduce_mask = mask;
    k->keepdim = keepdim;
    out_shape->clear();
    for (int64_t d = 0; d < nd; d++) {
      if (mask & (1u << d)) {
        if (keepdim) out_shape->push_back(1);
      } else {
        out_shape->push_back(self.size(d));
      }
    }
  } else {
    switch (info.form) {
    case Form::gelu:
      if (last >= 2 && !(a[1].isString() && a[1].toStringRef() == "none")) return false;
      break;
    case Form::leaky_relu:
      if (last < 2 || !scalar_arg(a[1], &k->scalar[0])) return false;
      break;
    case Form::hardtanh:
      if (last < 3 || !scalar_arg(a[1], &k->scalar[0]) || !scalar_arg(a[2], &k->scalar[1])) return false;
      break;
    case Form::elu:
      if (last < 4 || !scalar_arg(a[1], &k->scalar[0]) || !scalar_is(a[2], 1.0) || !scalar_is(a[3], 1.0))
        return false;
      break;
    case Form::softplus:
      if (last < 3 || !scalar_is(a[1], 1.0) || !scalar_is(a[2], 20.0)) return false;
      break;
    default:
      break;
    }
    if (info.form == Form::fill || info.form == Form::copy) {
      out_shape->assign(res->sizes().begin(), res->sizes().end());
      if (ins->t[0]) {
        /* the source broadcasts to self's shape */
        try {
          auto b = at::infer_size_dimvector(res->sizes(), ins->t[0]->sizes());
          if (c10::IntArrayRef(b.data(), b.size()) != res->sizes()) return false;
        } catch (const c10::Error &) {
          return false;
        }
      }
    } else if (!broadcast(*ins, out_shape)) {
      return false;
    }
  }
  int64_t numel = 1;
  for (int64_t d : *out_shape) numel *= d;
  if (numel == 0 || numel > E.threshold) return false;
  /* a 0-dim result in host memory is a number Python may read without
   * PyTorch's dispatch (a list of them as an operator's Scalar[]): the CPU
   * backend leaves those to eager */
  if (!E.cuda && out_shape->empty()) return false;
  if (res->defined()) {
    /* out= or in place: PyTorch resizes (or refuses) what does not match,
     * and refuses a result it cannot cast to */
    if (!good_operand(*res, true) || res->sizes() != c10::IntArrayRef(out_shape->data(), out_shape->size()))
      return false;
    if (!c10::canCast(*out_dtype, res->scalar_type())) return false;
    if (res->is_inference() && !c10::InferenceMode::is_enabled()) return false;
  }
  return true;
}

/* A contiguous result on like's device: the allocator directly (at::empty
 * through the dispatcher cost 2.1 us of a taken operation's 6 on the
 * H200, 2026-11-28: the largest part of the engine's own). */
at::Tensor new_result(c10::IntArrayRef sizes, const at::Tensor &like, c10::ScalarType dtype) {
#if defined(TSR_TORCH_CUDA)
  if (like.is_cuda()) return at::Tensor(at::detail::empty_cuda(sizes, dtype, like.device(), c10::nullopt));
#endif
  if (like.is_cpu()) return at::Tensor(at::detail::empty_cpu(sizes, dtype));
  c10::impl::ExcludeDispatchKeyGuard guard(kKey);
  return at::empty(sizes, like.options().dtype(dtype));
}

/* Before a task reads or writes what eager work may still be using on the
 * device: the current stream finishes. */
void sync_if_dirty() {
  if (!E.dirty) return;
#if defined(TSR_TORCH_CUDA)
  if (E.cuda) {
    const uint64_t t0 = now_ns();
    c10::cuda::getCurrentCUDAStream((c10::DeviceIndex)E.device_index).synchronize();
    E.stats[kSyncs]++;
    E.run_sync_ns += now_ns() - t0;
  }
#endif
  E.dirty = false;
}

/* What a table says of an operator (nullptr: not in it), by its schema:
 * looked up by name once, then kept. */
template <typename Info, typename Row, size_t N>
const Info *lookup(const c10::OperatorHandle &op, std::unordered_map<const c10::FunctionSchema *, const Info *> *cache,
                   const Row (&table)[N]) {
  auto it = cache->find(&op.schema());
  if (it != cache->end()) return it->second;
  const std::string name =
      op.schema().name() + (op.schema().overload_name().empty() ? "" : "." + op.schema().overload_name());
  const Info *info = nullptr;
  for (const Row &e : table)
    if (name == e.name) info = &e.info;
  (*cache)[&op.schema()] = info;
  return info;
}

void scheduled(const c10::OperatorHandle &op, c10::DispatchKeySet ks, torch::jit::Stack *stack) {
  settle_pass();
  if (!E.active || std::this_thread::get_id() != E.owner) return eager(op, stack);
  const OpInfo *info = lookup(op, &E.ops, kTable);
  size_t nargs = op.schema().arguments().size();
  TSR_SEC_START;
  tsr_rt_task_t k;
  at::Tensor res;
  Shape shape;
  Inputs ins;
  c10::ScalarType dtype = at::kFloat;
  if (!info || !plain_path(ks) || !build(*info, torch::jit::last(*stack, nargs), &k, &res, &shape, &dtype, &ins)) {
    if (device_work(torch::jit::last(*stack, nargs))) E.stats[kFallbacks]++;
    return eager(op, stack);
  }
  sync_if_dirty();
  bool reduce = info->form == Form::reduce || info->form == Form::reduce_all;
  TSR_SEC(kSecBuild);
  if (!res.defined() && info->form == Form::clone) {
    c10::impl::ExcludeDispatchKeyGuard guard(kKey);
    res = at::empty_like(*ins.t[0]);
    shape.assign(res.sizes().begin(), res.sizes().end());
  }
  if (!res.defined()) {
    const at::Tensor *like = nullptr;
    for (int i = 0; i < ins.n && !like; i++)
      if (ins.t[i] && (info->form != Form::where || i > 0)) like = ins.t[i];
    if (!like) like = ins.t[0];
    res = new_result(c10::IntArrayRef(shape.data(), shape.size()), *like, dtype);
  }
  TSR_SEC(kSecAlloc);
  int64_t nd = reduce ? res.dim() : (int64_t)shape.size();
  operand(&k.out, res, nd);
  for (int i = 0; i < ins.n; i++) {
    if (!ins.t[i]) {
      k.imm_mask |= 1u << i;
      k.imm[i] = ins.num[i];
      continue;
    }
    operand(&k.in[i], *ins.t[i], reduce ? ins.t[i]->dim() : nd);
  }
  tsr_rt_ticket_t ticket = 0;
  tsr_status_t st = tsr_rt_submit_deferred(E.rt, &k, 1, &ticket);
  if (st) {
    if (tsr_status_code(st) != TSR_INVALID_ARGUMENT) fail(st, "submit");
    tsr_status_free(st); /* e.g. operands that partly overlap: PyTorch's rules apply */
    E.stats[kFallbacks]++;
    return eager(op, stack);
  }
  TSR_SEC(kSecSubmit);
  took(1);
  E.held.emplace_back();
  Held &h = E.held.back();
  h.first = h.last = ticket;
  h.storages[h.n++] = res.storage();
  for (int i = 0; i < ins.n; i++)
    if (ins.t[i]) h.storages[h.n++] = ins.t[i]->storage();
  for (int i = 0; i < h.n; i++) E.live.add(h.storages[i].unsafeGetStorageImpl());
  if (info->kind != Kind::fn && !res.is_inference()) res.unsafeGetTensorImpl()->bump_version();
  torch::jit::drop(*stack, nargs);
  torch::jit::push(*stack, std::move(res));
  TSR_SEC(kSecTrack);
  if (++E.since_prune >= 64) prune();
}

/* ---- foreach ---------------------------------------------------------------- */

/* One item of a foreach call: its out, inputs, operator and parameter. */
struct FItem {
  at::Tensor out;
  const at::Tensor *self; /* the list's item: out in place, else out's model */
  Inputs ins;
  tsr_rt_op_t op;
  float s0;
};

/* Items that can share a group: one operator, parameter and numbers, and
 * operands of one size and dtype each. */
struct Bucket {
  tsr_rt_group_t g;
  std::vector<void *> ptr[1 + 3];
};

bool same_kind(const tsr_rt_task_t &a, const tsr_rt_task_t &b) {
  if (a.op != b.op || a.scalar[0] != b.scalar[0] || a.imm_mask != b.imm_mask) return false;
  if (a.out.sizes[0] != b.out.sizes[0] || a.out.dtype != b.out.dtype) return false;
  for (int i = 0; i < 3; i++) {
    if ((a.imm_mask >> i) & 1u) {
      if (a.imm[i] != b.imm[i]) return false;
    } else if (a.in[i].dtype != b.in[i].dtype) {
      return false;
    }
  }
  return true;
}

/* A list argument's tensors (no copy). */
bool tensor_list(const c10::IValue &v, c10::ArrayRef<c10::IValue> *out) {
  if (!v.isTensorList() && !v.isList()) return false;
  *out = v.toListRef();
  return true;
}

/* Whether a foreach item's operand may join a group: contiguous, of the
 * item's self's shape and dtype class. */
bool item_operand(const at::Tensor &t, const at::Tensor &self) {
  return good_tensor(t) && t.is_contiguous() && t.sizes() == self.sizes();
}

/* A torch._foreach_* call as groups of tasks; false: it runs eagerly
 * (nothing submitted). */
bool foreach_build(const FInfo &f, c10::ArrayRef<c10::IValue> a, std::vector<FItem> *items) {
  c10::ArrayRef<c10::IValue> self, l1, l2;
  if (a.empty() || !tensor_list(a[0], &self) || self.empty()) return false;
  size_t n = self.size();
  bool two = f.form == FForm::list || f.form == FForm::addc_scalar || f.form == FForm::addc_scalar_list ||
             f.form == FForm::addc_tensor || f.form == FForm::lerp_list || f.form == FForm::lerp_scalar ||
             f.form == FForm::lerp_scalar_list;
  bool three = f.form == FForm::addc_scalar || f.form == FForm::addc_scalar_list || f.form == FForm::addc_tensor ||
               f.form == FForm::lerp_list;
  if (two && (a.size() < 2 || !tensor_list(a[1], &l1) || l1.size() != n)) return false;
  if (three && (a.size() < 3 || !tensor_list(a[2], &l2) || l2.size() != n)) return false;
  /* the per-call or per-item number */
  float alpha = 1.f, one = 0.f;
  c10::ArrayRef<c10::IValue> nums;
  const float *host_vals = nullptr;
  switch (f.form) {
  case FForm::scalar:
    if (a.size() < 2 || !scalar_arg(a[1], &one)) return false;
    break;
  case FForm::list:
    if (a.size() >= 3 && !a[2].isNone() && !scalar_arg(a[2], &alpha)) return false;
    break;
  case FForm::tensor: {
    double d;
    if (a.size() < 2 || !a[1].isTensor() || !host_number(a[1].toTensor(), &d)) return false;
    one = (float)d;
    if (a.size() >= 3 && !a[2].isNone() && !scalar_arg(a[2], &alpha)) return false;
    break;
  }
  case FForm::scalar_list:
    if (a.size() < 2 || !a[1].isList()) return false;
    nums = a[1].toListRef();
    if (nums.size() != n) return false;
    break;
  case FForm::addc_scalar:
    if (a.size() < 4 || !scalar_arg(a[3], &one)) return false;
    break;
  case FForm::addc_scalar_list:
    if (a.size() < 4 || !a[3].isList()) return false;
    nums = a[3].toListRef();
    if (nums.size() != n) return false;
    break;
  case FForm::addc_tensor: {
    if (a.size() < 4 || !a[3].isTensor()) return false;
    const at::Tensor &v = a[3].toTensor();
    if (!E.cuda && v.has_storage() && E.live.has(v.storage().unsafeGetStorageImpl())) return false; /* pending */
    if (!v.device().is_cpu() || v.scalar_type() != at::kFloat || v.dim() != 1 || v.numel() != (int64_t)n ||
        !v.is_contiguous())
      return false;
    host_vals = static_cast<const float *>(v.data_ptr());
    break;
  }
  case FForm::lerp_scalar:
    if (a.size() < 3 || !scalar_arg(a[2], &one)) return false;
    break;
  case FForm::lerp_scalar_list:
    if (a.size() < 3 || !a[2].isList()) return false;
    nums = a[2].toListRef();
    if (nums.size() != n) return false;
    break;
  default:
    break;
  }
  items->resize(n);
  for (size_t i = 0; i < n; i++) {
    if (!self[i].isTensor()) return false;
    const at::Tensor &x = self[i].toTensor();
    if (!good_tensor(x) || !x.is_contiguous()) return false;
    FItem &it = (*items)[i];
    it.ins = Inputs{};
    it.self = &x;
    it.op = f.op;
    it.s0 = 0.f;
    it.ins.push_back(x);
    float num = one;
    if (!nums.empty() && !scalar_arg(nums[i], &num)) return false;
    if (host_vals) num = host_vals[i];
    if (two) {
      if (!l1[i].isTensor() || !item_operand(l1[i].toTensor(), x)) return false;
      if (l1[i].toTensor().scalar_type() != x.scalar_type()) return false;
      it.ins.push_back(l1[i].toTensor());
    }
    if (three) {
      if (!l2[i].isTensor() || !item_operand(l2[i].toTensor(), x)) return false;
      if (l2[i].toTensor().scalar_type() != x.scalar_type()) return false;
      it.ins.push_back(l2[i].toTensor());
    }
    switch (f.form) {
    case FForm::unary:
      if (f.op == TSR_RT_OP_COPY) { /* _foreach_zero_ */
        it.ins.n = 0;
        it.ins.push_number(0.f);
      }
      break;
    case FForm::scalar:
    case FForm::scalar_list:
    case FForm::tensor:
      /* self op number (foreach divides: no reciprocal, as PyTorch's foreach kernels) */
      it.ins.push_number(f.op == TSR_RT_OP_ADD || f.op == TSR_RT_OP_SUB ? alpha * num : num);
      break;
    case FForm::list:
      if (alpha != 1.f) {
        if (f.op != TSR_RT_OP_ADD && f.op != TSR_RT_OP_SUB) return false;
        it.op = TSR_RT_OP_ADDCMUL;
        it.s0 = f.op == TSR_RT_OP_SUB ? -alpha : alpha;
        it.ins.push_number(1.f);
      }
      break;
    case FForm::addc_scalar:
    case FForm::addc_scalar_list:
    case FForm::addc_tensor:
    case FForm::lerp_scalar:
    case FForm::lerp_scalar_list:
      it.s0 = num;
      break;
    case FForm::lerp_list:
      break;
    }
  }
  return true;
}

void foreach_op(const c10::OperatorHandle &op, c10::DispatchKeySet ks, torch::jit::Stack *stack) {
  settle_pass();
  if (!E.active || std::this_thread::get_id() != E.owner) return eager(op, stack);
  const FInfo *info = lookup(op, &E.fops, kForeach);
  size_t nargs = op.schema().arguments().size();
  static std::vector<FItem> items;
  items.clear();
  TSR_SEC_START;
  if (!info || !plain_path(ks) || !foreach_build(*info, torch::jit::last(*stack, nargs), &items)) {
    items.clear();
    if (device_work(torch::jit::last(*stack, nargs))) E.stats[kFallbacks]++;
    return eager(op, stack);
  }
  /* an item whose operands partly overlap its out: PyTorch's rules, eagerly */
  for (const FItem &x : items) {
    const at::Tensor &s0 = *x.self;
    const char *o = static_cast<const char *>(s0.data_ptr());
    size_t ob = (size_t)s0.numel() * s0.element_size();
    for (int i = 0; i < x.ins.n; i++) {
      if (!x.ins.t[i]) continue;
      const char *p = static_cast<const char *>(x.ins.t[i]->data_ptr());
      size_t pb = (size_t)x.ins.t[i]->numel() * x.ins.t[i]->element_size();
      if (p != o && p < o + ob && o < p + pb) {
        items.clear();
        E.stats[kFallbacks]++;
        return eager(op, stack);
      }
    }
  }
  sync_if_dirty();
  TSR_SEC(kSecBuild);
  /* outs: self in place, else new tensors like self */
  {
    c10::impl::ExcludeDispatchKeyGuard guard(kKey);
    for (FItem &x : items)
      x.out = info->inplace                 ? *x.self
              : x.self->is_contiguous() ? new_result(x.self->sizes(), *x.self, x.self->scalar_type())
                                        : at::empty_like(*x.self);
  }
  TSR_SEC(kSecAlloc);
  /* the items by kind, each kind one group */
  static std::vector<Bucket> buckets;
  size_t used = 0;
  for (FItem &x : items) {
    tsr_rt_task_t k{};
    k.op = x.op;
    k.scalar[0] = x.s0;
    int64_t numel = x.out.numel();
    tsr_rt_tensor_contiguous(&k.out, nullptr, dtype_of(x.out.scalar_type()), 1, &numel);
    for (int i = 0; i < x.ins.n; i++) {
      if (!x.ins.t[i]) {
        k.imm_mask |= 1u << i;
        k.imm[i] = x.ins.num[i];
      } else {
        tsr_rt_tensor_contiguous(&k.in[i], nullptr, dtype_of(x.ins.t[i]->scalar_type()), 1, &numel);
      }
    }
    size_t b = 0;
    while (b < used && !same_kind(buckets[b].g.task, k)) b++;
    if (b == used) {
      if (used == buckets.size()) buckets.emplace_back();
      Bucket &nb = buckets[used++];
      nb.g = tsr_rt_group_t{};
      nb.g.task = k;
      for (auto &v : nb.ptr) v.clear();
    }
    Bucket &bk = buckets[b];
    bk.ptr[0].push_back(x.out.data_ptr());
    for (int i = 0; i < x.ins.n; i++) bk.ptr[1 + i].push_back(x.ins.t[i] ? x.ins.t[i]->data_ptr() : nullptr);
  }
  TSR_SEC(kSecGroup);
  uint64_t first = 0, last = 0;
  for (size_t b = 0; b < used; b++) {
    Bucket &bk = buckets[b];
    bk.g.count = bk.ptr[0].size();
    bk.g.out = bk.ptr[0].data();
    for (int i = 0; i < 3; i++) bk.g.in[i] = bk.ptr[1 + i].empty() ? nullptr : bk.ptr[1 + i].data();
    tsr_rt_ticket_t f0 = 0, f1 = 0;
    tsr_status_t st = tsr_rt_submit_group(E.rt, &bk.g, &f0, &f1);
    if (st) fail(st, "submit of a foreach group"); /* checked above: nothing PyTorch would take is refused */
    if (!first) first = f0;
    last = f1;
  }
  TSR_SEC(kSecSubmit);
  took(items.size());
  if (first && last >= first) {
    E.held.emplace_back();
    Held &h = E.held.back();
    h.first = first;
    h.last = last;
    for (const FItem &x : items) {
      h.more.push_back(x.out.storage());
      for (int i = 0; i < x.ins.n; i++)
        if (x.ins.t[i] && !(info->inplace && x.ins.t[i] == x.self)) h.more.push_back(x.ins.t[i]->storage());
    }
    for (const c10::Storage &st : h.more) E.live.add(st.unsafeGetStorageImpl());
  }
  std::vector<at::Tensor> outs;
  if (info->inplace) {
    for (FItem &x : items)
      if (!x.out.is_inference()) x.out.unsafeGetTensorImpl()->bump_version();
  } else {
    outs.reserve(items.size());
    for (FItem &x : items) outs.push_back(std::move(x.out));
  }
  items.clear();
  torch::jit::drop(*stack, nargs);
  if (!info->inplace) torch::jit::push(*stack, c10::IValue(std::move(outs)));
  TSR_SEC(kSecTrack);
  if (++E.since_prune >= 64) prune();
}

/* ---- torch.optim: a whole step ---------------------------------------------- *
 * tessera.optim routes torch.optim's Adam, AdamW and SGD steps here while a
 * scheduler is active (their functional forms, foreach or not, with the
 * options these take; any other step runs as PyTorch wrote it). The step is
 * the foreach form's sequence of operations, each one group over every
 * parameter, with the step counters (host tensors) advanced here and no
 * Python between the operations. */

/* One operation over the items `idx` of a partition: every operand
 * contiguous, `numel` elements of dtype `dt`; ptrs[r][j] operand r of item j. */
struct StepGroups {
  uint64_t first = 0, last = 0;
  uint64_t tasks = 0; /* items submitted, over every operation */
  void op(tsr_rt_op_t op, float s0, float s1, int nin, uint32_t imm_mask, const float *imm, int64_t numel,
          tsr_rt_dtype_t dt, std::vector<void *> *const *ptrs) {
    tsr_rt_group_t g{};
    g.task.op = op;
    g.task.scalar[0] = s0;
    g.task.scalar[1] = s1;
    g.task.imm_mask = imm_mask;
    tsr_rt_tensor_contiguous(&g.task.out, nullptr, dt, 1, &numel);
    for (int k = 0; k < nin; k++) {
      if ((imm_mask >> k) & 1u) {
        g.task.imm[k] = imm[k];
        continue;
      }
      tsr_rt_tensor_contiguous(&g.task.in[k], nullptr, dt, 1, &numel);
      g.in[k] = ptrs[1 + k]->data();
    }
    g.count = ptrs[0]->size();
    g.out = ptrs[0]->data();
    tsr_rt_ticket_t f = 0, l = 0;
    tsr_status_t st = tsr_rt_submit_group(E.rt, &g, &f, &l);
    if (st) fail(st, "submit of an optimizer step");
    if (!first) first = f;
    last = l;
    tasks += g.count;
  }
};

/* A step counter: a 0-dim float tensor in host memory no task writes. */
bool step_counter(const c10::IValue &v) {
  if (!v.isTensor()) return false;
  const at::Tensor &t = v.toTensor();
  if (!t.defined() || t.dim() != 0 || !t.device().is_cpu() || t.layout() != c10::kStrided || !t.has_storage())
    return false;
  if (t.scalar_type() != at::kFloat && t.scalar_type() != at::kDouble) return false;
  if (!E.cuda && E.live.has(t.storage().unsafeGetStorageImpl())) return false;
  return t.data_ptr() != nullptr;
}

double step_add_one(const at::Tensor &t) {
  double v;
  if (t.scalar_type() == at::kFloat) {
    float *p = static_cast<float *>(t.data_ptr());
    *p += 1.f;
    v = *p;
  } else {
    double *p = static_cast<double *>(t.data_ptr());
    *p += 1.0;
    v = *p;
  }
  if (!t.is_inference()) t.unsafeGetTensorImpl()->bump_version();
  return v;
}

/* The parameters' lists, checked: each item a contiguous tensor the
 * runtime takes, of its parameter's shape and dtype. */
bool param_lists(c10::ArrayRef<c10::IValue> a, int nlists, c10::ArrayRef<c10::IValue> *l, size_t *n) {
  for (int k = 0; k < nlists; k++)
    if (!tensor_list(a[k], &l[k]) || (k && l[k].size() != l[0].size())) return false;
  *n = l[0].size();
  if (*n == 0) return false;
  for (size_t i = 0; i < *n; i++) {
    for (int k = 0; k < nlists; k++) {
      if (!l[k][i].isTensor()) return false;
      const at::Tensor &t = l[k][i].toTensor();
      if (!good_tensor(t) || !t.is_contiguous()) return false;
      if (k && (t.sizes() != l[0][i].toTensor().sizes() || t.scalar_type() != l[0][i].toTensor().scalar_type()))
        return false;
    }
  }
  return true;
}

/* Items that share numel, dtype and step: one partition, one group each operation. */
struct Part {
  int64_t numel;
  c10::ScalarType dtype;
  double step;
  std::vector<size_t> idx;
};

void partition(c10::ArrayRef<c10::IValue> p, const std::vector<double> &steps, std::vector<Part> *parts) {
  parts->clear();
  for (size_t i = 0; i < p.size(); i++) {
    const at::Tensor &t = p[i].toTensor();
    double st = steps.empty() ? 0 : steps[i];
    size_t k = 0;
    while (k < parts->size() && !((*parts)[k].numel == t.numel() && (*parts)[k].dtype == t.scalar_type() &&
                                   (*parts)[k].step == st))
      k++;
    if (k == parts->size()) parts->push_back(Part{t.numel(), t.scalar_type(), st, {}});
    (*parts)[k].idx.push_back(i);
  }
}

/* The data pointers of a partition's items in one of a step's lists. */
void gather(c10::ArrayRef<c10::IValue> list, const std::vector<size_t> &idx, std::vector<void *> *out) {
  out->clear();
  for (size_t j : idx) out->push_back(list[j].toTensor().data_ptr());
}

/* A flat scratch tensor of n items of numel each, and their pointers. */
at::Tensor scratch(const at::Tensor &like, size_t n, int64_t numel, std::vector<void *> *ptrs) {
  at::Tensor t;
  {
    c10::impl::ExcludeDispatchKeyGuard guard(kKey);
    t = at::empty({(int64_t)n * numel}, like.options());
  }
  ptrs->clear();
  char *b = static_cast<char *>(t.data_ptr());
  for (size_t j = 0; j < n; j++) ptrs->push_back(b + j * (size_t)numel * t.element_size());
  return t;
}

void hold_step(const StepGroups &sg, c10::ArrayRef<c10::IValue> *lists, int nlists, size_t n,
               const std::vector<at::Tensor> &temps) {
  if (!sg.first || sg.last < sg.first) return;
  E.held.emplace_back();
  Held &h = E.held.back();
  h.first = sg.first;
  h.last = sg.last;
  h.more.reserve(n * nlists + temps.size());
  for (int k = 0; k < nlists; k++)
    for (size_t i = 0; i < n; i++) h.more.push_back(lists[k][i].toTensor().storage());
  for (const at::Tensor &t : temps) h.more.push_back(t.storage());
  for (const c10::Storage &st : h.more) E.live.add(st.unsafeGetStorageImpl());
}

void bump(c10::ArrayRef<c10::IValue> l) {
  for (const c10::IValue &v : l) {
    const at::Tensor &t = v.toTensor();
    if (!t.is_inference()) t.unsafeGetTensorImpl()->bump_version();
  }
}

/* The gradient a step uses, into T: -grad when maximizing, plus wd * param
 * (L2 weight decay) when wd is not 0; one pass. */
void step_grad(StepGroups *sg, std::vector<void *> *T, std::vector<void *> *G, std::vector<void *> *P, bool maximize,
               double wd, int64_t numel, tsr_rt_dtype_t dt) {
  if (wd == 0) {
    std::vector<void *> *neg[2] = {T, G};
    sg->op(TSR_RT_OP_NEG, 0.f, 0.f, 1, 0, nullptr, numel, dt, neg);
    return;
  }
  std::vector<void *> *l2[3] = {T, G, P};
  sg->op(TSR_RT_OP_AXPBY, maximize ? -1.f : 1.f, (float)wd, 2, 0, nullptr, numel, dt, l2);
}

/* tessera::adam_step(params, grads, exp_avgs, exp_avg_sqs, steps, lr, beta1,
 * beta2, eps, weight_decay, decoupled, maximize) -> bool: false, having
 * changed nothing, when it does not take the step (PyTorch's code runs). */
bool adam_step(c10::ArrayRef<c10::IValue> a) {
  if (!E.active || std::this_thread::get_id() != E.owner || a.size() < 12) return false;
  c10::ArrayRef<c10::IValue> l[5];
  size_t n;
  if (!param_lists(a, 4, l, &n)) return false;
  if (!tensor_list(a[4], &l[4]) || l[4].size() != n) return false;
  for (size_t i = 0; i < n; i++)
    if (!step_counter(l[4][i])) return false;
  const double lr = a[5].toDouble(), beta1 = a[6].toDouble(), beta2 = a[7].toDouble(), eps = a[8].toDouble(),
               wd = a[9].toDouble();
  const bool decoupled = a[10].toBool(), maximize = a[11].toBool();
  sync_if_dirty();
  std::vector<double> steps(n);
  for (size_t i = 0; i < n; i++) steps[i] = step_add_one(l[4][i].toTensor());
  static std::vector<Part> parts;
  partition(l[0], steps, &parts);
  StepGroups sg;
  std::vector<at::Tensor> temps;
  std::vector<void *> P, G, M, V, T;
  for (const Part &pt : parts) {
    const size_t m = pt.idx.size();
    const tsr_rt_dtype_t dt = dtype_of(pt.dtype);
    gather(l[0], pt.idx, &P), gather(l[1], pt.idx, &G), gather(l[2], pt.idx, &M), gather(l[3], pt.idx, &V);
    const at::Tensor &like = l[0][pt.idx[0]].toTensor();
    std::vector<void *> *g = &G;
    if (maximize || (wd != 0 && !decoupled)) {
      /* the gradient used: -grad (maximize), plus weight_decay * param (Adam's L2) */
      temps.push_back(scratch(like, m, pt.numel, &T));
      g = &T;
      step_grad(&sg, &T, &G, &P, maximize, decoupled ? 0.0 : wd, pt.numel, dt);
    }
    if (wd != 0 && decoupled) { /* AdamW: param *= 1 - lr * weight_decay */
      std::vector<void *> *pp[2] = {&P, &P};
      const float imm[3] = {0.f, (float)(1.0 - lr * wd), 0.f};
      sg.op(TSR_RT_OP_MUL, 0.f, 0.f, 2, 2u, imm, pt.numel, dt, pp);
    }
    const double bc1 = 1.0 - std::pow(beta1, pt.step), bc2 = 1.0 - std::pow(beta2, pt.step);
    const double step_size = lr / bc1, bc2_sqrt = std::sqrt(bc2);
    /* m = lerp(m, g, 1 - beta1); v = beta2 * v + (1 - beta2) * g * g;
     * p -= step_size * m / (sqrt(v) / bc2_sqrt + eps), written
     * p += (-step_size * bc2_sqrt) * m / (sqrt(v) + eps * bc2_sqrt): three
     * passes, where the foreach form makes seven and a temporary */
    std::vector<void *> *lerp[3] = {&M, &M, g};
    sg.op(TSR_RT_OP_LERP, (float)(1.0 - beta1), 0.f, 2, 0, nullptr, pt.numel, dt, lerp);
    std::vector<void *> *vv[4] = {&V, &V, g, g};
    sg.op(TSR_RT_OP_AXPBYZ, (float)beta2, (float)(1.0 - beta2), 3, 0, nullptr, pt.numel, dt, vv);
    std::vector<void *> *up[4] = {&P, &P, &M, &V};
    sg.op(TSR_RT_OP_ADAM_UPDATE, (float)(-step_size * bc2_sqrt), (float)(eps * bc2_sqrt), 3, 0, nullptr, pt.numel,
          dt, up);
  }
  hold_step(sg, l, 4, n, temps);
  bump(l[0]), bump(l[2]), bump(l[3]);
  took(sg.tasks);
  if (++E.since_prune >= 64) prune();
  return true;
}

/* tessera::sgd_step(params, grads, momentum_buffers, lr, momentum, dampening,
 * weight_decay, nesterov, maximize) -> (taken, made): taken false, having
 * changed nothing, when it does not take the step (PyTorch's code runs);
 * made, the momentum buffers when this step made them (the first step,
 * every buffer None), else []. */
bool sgd_step(c10::ArrayRef<c10::IValue> a, std::vector<at::Tensor> *made) {
  if (!E.active || std::this_thread::get_id() != E.owner || a.size() < 9) return false;
  c10::ArrayRef<c10::IValue> l[3];
  size_t n;
  if (!param_lists(a, 2, l, &n)) return false;
  if (!a[2].isList() || a[2].toListRef().size() != n) return false;
  l[2] = a[2].toListRef();
  const double lr = a[3].toDouble(), mom = a[4].toDouble(), damp = a[5].toDouble(), wd = a[6].toDouble();
  const bool nesterov = a[7].toBool(), maximize = a[8].toBool();
  if (mom == 0) return false;
  const bool first = l[2][0].isNone();
  for (size_t i = 0; i < n; i++) {
    if (l[2][i].isNone() != first) return false;
    if (first) continue;
    if (!l[2][i].isTensor()) return false;
    const at::Tensor &b = l[2][i].toTensor(), &p = l[0][i].toTensor();
    if (!good_tensor(b) || !b.is_contiguous() || b.sizes() != p.sizes() || b.scalar_type() != p.scalar_type())
      return false;
  }
  sync_if_dirty();
  made->clear();
  if (first) {
    c10::impl::ExcludeDispatchKeyGuard guard(kKey);
    made->reserve(n);
    for (size_t i = 0; i < n; i++) made->push_back(at::empty_like(l[0][i].toTensor()));
  }
  static std::vector<Part> parts;
  partition(l[0], {}, &parts);
  StepGroups sg;
  std::vector<at::Tensor> temps;
  std::vector<void *> P, G, B, T, U;
  for (const Part &pt : parts) {
    const size_t m = pt.idx.size();
    const tsr_rt_dtype_t dt = dtype_of(pt.dtype);
    gather(l[0], pt.idx, &P), gather(l[1], pt.idx, &G);
    B.clear();
    for (size_t j : pt.idx) B.push_back((first ? (*made)[j] : l[2][j].toTensor()).data_ptr());
    const at::Tensor &like = l[0][pt.idx[0]].toTensor();
    std::vector<void *> *g = &G;
    if (maximize || wd != 0) {
      temps.push_back(scratch(like, m, pt.numel, &T));
      g = &T;
      step_grad(&sg, &T, &G, &P, maximize, wd, pt.numel, dt);
    }
    if (first) { /* buf = grad (PyTorch's clone) */
      std::vector<void *> *cp[2] = {&B, g};
      sg.op(TSR_RT_OP_COPY, 0.f, 0.f, 1, 0, nullptr, pt.numel, dt, cp);
    } else { /* buf = momentum * buf + (1 - dampening) * grad */
      std::vector<void *> *bb[3] = {&B, &B, g};
      sg.op(TSR_RT_OP_AXPBY, (float)mom, (float)(1.0 - damp), 2, 0, nullptr, pt.numel, dt, bb);
    }
    std::vector<void *> *step_dir = &B;
    if (nesterov) { /* grad + momentum * buf */
      temps.push_back(scratch(like, m, pt.numel, &U));
      std::vector<void *> *ne[3] = {&U, g, &B};
      sg.op(TSR_RT_OP_AXPBY, 1.f, (float)mom, 2, 0, nullptr, pt.numel, dt, ne);
      step_dir = &U;
    }
    std::vector<void *> *pu[3] = {&P, &P, step_dir};
    sg.op(TSR_RT_OP_AXPBY, 1.f, (float)-lr, 2, 0, nullptr, pt.numel, dt, pu);
  }
  /* the buffers held with the lists (the ones made here among the temporaries) */
  for (const at::Tensor &bt : *made) temps.push_back(bt);
  hold_step(sg, l, first ? 2 : 3, n, temps);
  bump(l[0]);
  if (!first) bump(l[2]);
  took(sg.tasks);
  if (++E.since_prune >= 64) prune();
  return true;
}

/* tessera::rms_step(params, grads, sqs, steps, lr, alpha, eps, weight_decay,
 * maximize, adagrad, lr_decay) -> bool: false, having changed nothing, when
 * it does not take the step (PyTorch's code runs). Two passes after the
 * gradient's (maximize, L2), where the foreach forms make five to seven:
 * - RMSprop (adagrad false; momentum 0, not centered: the caller's checks):
 *   sq = alpha * sq + (1 - alpha) * g * g; p += -lr * g / (sqrt(sq) + eps).
 *   steps: its counters, advanced here, or [] where the version keeps them
 *   itself (PyTorch 1.13: a Python int).
 * - Adagrad (adagrad true; steps required): sum = sum + g * g;
 *   p += -clr * g / (sqrt(sum) + eps), clr = lr / (1 + (step - 1) * lr_decay). */
bool rms_step(c10::ArrayRef<c10::IValue> a) {
  if (!E.active || std::this_thread::get_id() != E.owner || a.size() < 11) return false;
  c10::ArrayRef<c10::IValue> l[4];
  size_t n;
  if (!param_lists(a, 3, l, &n)) return false;
  const bool adagrad = a[9].toBool();
  if (!tensor_list(a[3], &l[3]) || (l[3].size() != n && (adagrad || !l[3].empty()))) return false;
  for (const c10::IValue &v : l[3])
    if (!step_counter(v)) return false;
  const double lr = a[4].toDouble(), alpha = a[5].toDouble(), eps = a[6].toDouble(), wd = a[7].toDouble(),
               lr_decay = a[10].toDouble();
  const bool maximize = a[8].toBool();
  sync_if_dirty();
  std::vector<double> steps(l[3].size());
  for (size_t i = 0; i < steps.size(); i++) steps[i] = step_add_one(l[3][i].toTensor());
  static std::vector<Part> parts;
  partition(l[0], adagrad ? steps : std::vector<double>{}, &parts);
  StepGroups sg;
  std::vector<at::Tensor> temps;
  std::vector<void *> P, G, S, T;
  for (const Part &pt : parts) {
    const size_t m = pt.idx.size();
    const tsr_rt_dtype_t dt = dtype_of(pt.dtype);
    gather(l[0], pt.idx, &P), gather(l[1], pt.idx, &G), gather(l[2], pt.idx, &S);
    std::vector<void *> *g = &G;
    if (maximize || wd != 0) {
      temps.push_back(scratch(l[0][pt.idx[0]].toTensor(), m, pt.numel, &T));
      g = &T;
      step_grad(&sg, &T, &G, &P, maximize, wd, pt.numel, dt);
    }
    std::vector<void *> *ss[4] = {&S, &S, g, g};
    sg.op(TSR_RT_OP_AXPBYZ, adagrad ? 1.f : (float)alpha, adagrad ? 1.f : (float)(1.0 - alpha), 3, 0, nullptr,
          pt.numel, dt, ss);
    const double step_lr = adagrad ? lr / (1.0 + (pt.step - 1.0) * lr_decay) : lr;
    std::vector<void *> *up[4] = {&P, &P, g, &S};
    sg.op(TSR_RT_OP_ADAM_UPDATE, (float)-step_lr, (float)eps, 3, 0, nullptr, pt.numel, dt, up);
  }
  hold_step(sg, l, 3, n, temps);
  bump(l[0]), bump(l[2]);
  took(sg.tasks);
  if (++E.since_prune >= 64) prune();
  return true;
}

/* A whole step whose only result is whether it was taken (adam_step, rms_step). */
template <bool (*Step)(c10::ArrayRef<c10::IValue>)>
void step_boxed(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  size_t nargs = op.schema().arguments().size();
  bool took = Step(torch::jit::last(*stack, nargs));
  torch::jit::drop(*stack, nargs);
  torch::jit::push(*stack, took);
}

void sgd_boxed(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  size_t nargs = op.schema().arguments().size();
  /* the buffers go back only when this step made them (a list of every
   * buffer back to Python costs more than the step's own groups) */
  std::vector<at::Tensor> made;
  bool taken = sgd_step(torch::jit::last(*stack, nargs), &made);
  if (!taken) made.clear();
  torch::jit::drop(*stack, nargs);
  torch::jit::push(*stack, taken);
  torch::jit::push(*stack, c10::IValue(std::move(made)));
}

/* Outside a scheduler's thread: not taken. */
void not_taken(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  torch::jit::drop(*stack, op.schema().arguments().size());
  torch::jit::push(*stack, false);
}
void sgd_not_taken(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  torch::jit::drop(*stack, op.schema().arguments().size());
  torch::jit::push(*stack, false);
  torch::jit::push(*stack, c10::IValue(std::vector<at::Tensor>{}));
}

}  // namespace

TORCH_LIBRARY(tessera, m) {
  m.def("adam_step(Tensor[] params, Tensor[] grads, Tensor[] exp_avgs, Tensor[] exp_avg_sqs, Tensor[] steps, "
        "float lr, float beta1, float beta2, float eps, float weight_decay, bool decoupled, bool maximize) -> bool");
  m.def("sgd_step(Tensor[] params, Tensor[] grads, Tensor?[] momentum_buffers, float lr, float momentum, "
        "float dampening, float weight_decay, bool nesterov, bool maximize) -> (bool, Tensor[])");
  m.def("rms_step(Tensor[] params, Tensor[] grads, Tensor[] sqs, Tensor[] steps, float lr, float alpha, float eps, "
        "float weight_decay, bool maximize, bool adagrad, float lr_decay) -> bool");
}

TORCH_LIBRARY_IMPL(tessera, CompositeExplicitAutograd, m) {
  m.impl("adam_step", torch::CppFunction::makeFromBoxedFunction<&not_taken>());
  m.impl("sgd_step", torch::CppFunction::makeFromBoxedFunction<&sgd_not_taken>());
  m.impl("rms_step", torch::CppFunction::makeFromBoxedFunction<&not_taken>());
}

TORCH_LIBRARY_IMPL(tessera, TESTING_ONLY_GenericMode, m) {
  m.impl("adam_step", torch::CppFunction::makeFromBoxedFunction<&step_boxed<&adam_step>>());
  m.impl("sgd_step", torch::CppFunction::makeFromBoxedFunction<&sgd_boxed>());
  m.impl("rms_step", torch::CppFunction::makeFromBoxedFunction<&step_boxed<&rms_step>>());
}

TORCH_LIBRARY_IMPL(_, TESTING_ONLY_GenericMode, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&eager>());
}

TORCH_LIBRARY_IMPL(aten, TESTING_ONLY_GenericMode, m) {
  for (const Entry &e : kTable) m.impl(e.name + 6, torch::CppFunction::makeFromBoxedFunction<&scheduled>());
  for (const FEntry &e : kForeach) m.impl(e.name + 6, torch::CppFunction::makeFromBoxedFunction<&foreach_op>());
  for (const char *n : kFallthrough) m.impl(n + 6, torch::CppFunction::makeFallthrough());
}

/* ---- the control API (python/tessera/torch.py, through ctypes) ------------- */

extern "C" {

#define TSR_TORCH_STATS 7 /* scheduled, eager, fallbacks, tasks, waits, syncs, passed */

static void tsr__torch_err(char *err, size_t n, const char *msg) {
  if (err && n) snprintf(err, n, "%s", msg);
}

/* Starts scheduling this thread's operations onto runtime `rt` (CPU
 * tensors for the CPU backend: cuda 0; else CUDA tensors of device
 * `device_index`). 0, or -1 with the reason in err. */
__attribute__((visibility("default"))) int tsr_torch_enable(tsr_rt_t *rt, int cuda, int device_index,
                                                             int64_t threshold, char *err, size_t n) {
  if (E.active) {
    tsr__torch_err(err, n, "a scheduler is already active (one at a time)");
    return -1;
  }
  if (!rt || threshold < 1) {
    tsr__torch_err(err, n, "no runtime, or a threshold under 1");
    return -1;
  }
#if !defined(TSR_TORCH_CUDA)
  if (cuda) {
    tsr__torch_err(err, n, "libtessera-torch was built without CUDA (PyTorch's CUDA headers were missing)");
    return -1;
  }
#endif
  E.rt = rt;
  E.cuda = cuda != 0;
  E.device_index = device_index;
  E.threshold = threshold;
  E.owner = std::this_thread::get_id();
  E.dirty = true;
  for (int64_t &s : E.stats) s = 0;
  E.run_tasks = 0, E.run_sync_ns = 0, E.short_runs = 0, E.pass_left = 0, E.pass_len = 0;
  E.active = true;
  c10::impl::tls_set_dispatch_key_included(kKey, true);
  return 0;
}

/* Passing (forced_wait) for the next enable and after: 0 off, 1 when the
 * waits cost more than the tasks save (the default), 2 after every short
 * run whatever its wait cost (a test's: the machine's speed then does not
 * decide whether it passes). */
__attribute__((visibility("default"))) void tsr_torch_set_passing(int mode) {
  E.passing = mode < 0 ? 0 : mode > 2 ? 2 : mode;
  end_pass();
  E.short_runs = 0;
}

/* Waits for everything submitted; 0, or -1 with the reason. */
__attribute__((visibility("default"))) int tsr_torch_flush(char *err, size_t n) {
  if (!E.rt) return 0;
  try {
    flush_all();
  } catch (const std::exception &e) {
    tsr__torch_err(err, n, e.what());
    return -1;
  }
  return 0;
}

/* Stops: this thread's operations run eagerly again, after everything
 * submitted has finished. 0, or -1 with the reason (the scheduler stops
 * either way). */
__attribute__((visibility("default"))) int tsr_torch_disable(char *err, size_t n) {
  if (!E.active) return 0;
  end_pass();
  if (std::this_thread::get_id() == E.owner) c10::impl::tls_set_dispatch_key_included(kKey, false);
  int rc = tsr_torch_flush(err, n);
  /* what follows the context is eager work: the kernel makes room for it */
  if (E.cuda) tsr_rt_park(E.rt);
#if defined(TSR_TORCH_SECTIONS)
  for (int i = 0; i < kSecs; i++)
    fprintf(stderr, "tessera-torch: %s %.3f us/op\n", kSecNames[i],
            E.stats[kTasks] ? (double)sec_ns[i] / 1e3 / (double)E.stats[kTasks] : 0.0);
  for (uint64_t &v : sec_ns) v = 0;
#endif
  E.live.clear();
  E.held.clear();
  E.active = false;
  E.rt = nullptr;
  return rc;
}

/* Whether it was built with PyTorch's CUDA support (else CPU tensors only). */
__attribute__((visibility("default"))) int tsr_torch_has_cuda(void) {
#if defined(TSR_TORCH_CUDA)
  return 1;
#else
  return 0;
#endif
}

/* Checks the engine's own structures against plain references (the live
 * set against a std::unordered_map over random adds and removes that force
 * collisions and wrap-around); for the tests. 0, or the failing step + 1. */
__attribute__((visibility("default"))) int tsr_torch_selftest(void) {
  LiveSet set;
  std::unordered_map<const c10::StorageImpl *, uint32_t> ref;
  uint64_t x = 12345;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int step = 0; step < 200000; step++) {
    /* few distinct keys, some sharing a home slot */
    const auto *k = reinterpret_cast<const c10::StorageImpl *>((uintptr_t)(1 + next() % 300) << ((step / 50000) * 8));
    if (next() % 3) {
      set.add(k);
      ref[k]++;
    } else if (ref.count(k)) {
      set.remove(k);
      if (--ref[k] == 0) ref.erase(k);
    }
    if (step % 97 == 0) {
      for (uintptr_t j = 1; j <= 300; j++) {
        const auto *q = reinterpret_cast<const c10::StorageImpl *>(j << ((step / 50000) * 8));
        if (set.has(q) != (ref.count(q) != 0)) return step + 1;
      }
    }
    if (step % 50000 == 49999) {
      set.clear();
      ref.clear();
      if (!set.empty()) return step + 1;
    }
  }
  return 0;
}

/* The counters since the last enable (kept after disable, until the next enable). */
__attribute__((visibility("default"))) void tsr_torch_stats(int64_t out[TSR_TORCH_STATS]) {
  for (int i = 0; i < TSR_TORCH_STATS; i++) out[i] = E.stats[i];
}

}  // extern "C"
