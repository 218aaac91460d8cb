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
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>
#if defined(TSR_TORCH_CUDA)
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <ATen/ExpandUtils.h>
#include <c10/util/SmallVector.h>

#include "tessera/rt.h"

namespace {

constexpr c10::DispatchKey kKey = c10::DispatchKey::TESTING_ONLY_GenericMode;

enum class Kind { fn, out, inplace };
enum class Form {
  binary,     /* (self, other[, alpha]) */
  unary,      /* (self) */
  gelu,       /* (self, approximate) */
  leaky_relu, /* (self, negative_slope) */
  hardtanh,   /* (self, min_val, max_val) */
  elu,        /* (self, alpha, scale, input_scale) */
  softplus,   /* (self, beta, threshold) */
  clamp,      /* (self, min?, max?) */
  scalar1,    /* (self, s): clamp_min, clamp_max */
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

#define TSR_BIN(n, OP)                                                                                       \
  {n ".Tensor", {OP, Kind::fn, Form::binary}}, {n ".out", {OP, Kind::out, Form::binary}},                        \
      {n "_.Tensor", {OP, Kind::inplace, Form::binary}}
#define TSR_UN(n, OP, F)                                                                                         \
  {n, {OP, Kind::fn, F}}, {n ".out", {OP, Kind::out, F}}, {n "_", {OP, Kind::inplace, F}}

const Entry kTable[] = {
    TSR_BIN("aten::add", TSR_RT_OP_ADD),
    TSR_BIN("aten::sub", TSR_RT_OP_SUB),
    TSR_BIN("aten::mul", TSR_RT_OP_MUL),
    TSR_BIN("aten::div", TSR_RT_OP_DIV),
    {"aten::maximum", {TSR_RT_OP_MAXIMUM, Kind::fn, Form::binary}},
    {"aten::maximum.out", {TSR_RT_OP_MAXIMUM, Kind::out, Form::binary}},
    {"aten::minimum", {TSR_RT_OP_MINIMUM, Kind::fn, Form::binary}},
    {"aten::minimum.out", {TSR_RT_OP_MINIMUM, Kind::out, Form::binary}},
    {"aten::pow.Tensor_Tensor", {TSR_RT_OP_POW, Kind::fn, Form::binary}},
    {"aten::pow.Tensor_Tensor_out", {TSR_RT_OP_POW, Kind::out, Form::binary}},
    {"aten::pow_.Tensor", {TSR_RT_OP_POW, Kind::inplace, Form::binary}},
    {"aten::relu", {TSR_RT_OP_RELU, Kind::fn, Form::unary}},
    {"aten::relu_", {TSR_RT_OP_RELU, Kind::inplace, Form::unary}},
    TSR_UN("aten::sigmoid", TSR_RT_OP_SIGMOID, Form::unary),
    TSR_UN("aten::tanh", TSR_RT_OP_TANH, Form::unary),
    TSR_UN("aten::exp", TSR_RT_OP_EXP, Form::unary),
    TSR_UN("aten::log", TSR_RT_OP_LOG, Form::unary),
    TSR_UN("aten::sqrt", TSR_RT_OP_SQRT, Form::unary),
    TSR_UN("aten::abs", TSR_RT_OP_ABS, Form::unary),
    TSR_UN("aten::sin", TSR_RT_OP_SIN, Form::unary),
    TSR_UN("aten::cos", TSR_RT_OP_COS, Form::unary),
    TSR_UN("aten::hardsigmoid", TSR_RT_OP_HARDSIGMOID, Form::unary),
    TSR_UN("aten::hardswish", TSR_RT_OP_HARDSWISH, Form::unary),
    TSR_UN("aten::gelu", TSR_RT_OP_GELU, Form::gelu),
    TSR_UN("aten::leaky_relu", TSR_RT_OP_LEAKY_RELU, Form::leaky_relu),
    TSR_UN("aten::hardtanh", TSR_RT_OP_HARDTANH, Form::hardtanh),
    TSR_UN("aten::elu", TSR_RT_OP_ELU, Form::elu),
    {"aten::softplus", {TSR_RT_OP_SOFTPLUS, Kind::fn, Form::softplus}},
    {"aten::softplus.out", {TSR_RT_OP_SOFTPLUS, Kind::out, Form::softplus}},
    TSR_UN("aten::clamp", TSR_RT_OP_CLAMP, Form::clamp),
    TSR_UN("aten::clamp_min", TSR_RT_OP_CLAMP_MIN, Form::scalar1),
    TSR_UN("aten::clamp_max", TSR_RT_OP_CLAMP_MAX, Form::scalar1),
    {"aten::sum.dim_IntList", {TSR_RT_OP_SUM, Kind::fn, Form::reduce}},
    {"aten::sum.IntList_out", {TSR_RT_OP_SUM, Kind::out, Form::reduce}},
    {"aten::sum", {TSR_RT_OP_SUM, Kind::fn, Form::reduce_all}},
    {"aten::mean.dim", {TSR_RT_OP_MEAN, Kind::fn, Form::reduce}},
    {"aten::mean.out", {TSR_RT_OP_MEAN, Kind::out, Form::reduce}},
    {"aten::mean", {TSR_RT_OP_MEAN, Kind::fn, Form::reduce_all}},
};
#undef TSR_BIN
#undef TSR_UN

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

enum Stat { kScheduled, kEager, kFallbacks, kTasks, kWaits, kSyncs, kStats };

/* A task's storages, held until it is done (out and up to two inputs). */
struct Held {
  uint64_t ticket;
  uint8_t n;
  c10::Storage storages[3];
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

#if defined(TSR_TORCH_SECTIONS)
/* where a taken operation's time goes (a profiling build: -DTSR_TORCH_SECTIONS) */
enum Section { kSecBuild, kSecAlloc, kSecSubmit, kSecTrack, kSecs };
const char *const kSecNames[kSecs] = {"checks and task", "allocation", "tsr_rt_submit", "holding"};
uint64_t sec_ns[kSecs];
inline uint64_t now_ns() {
  return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
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
  std::unordered_map<const c10::FunctionSchema *, const OpInfo *> ops; /* a cache of kTable */
};

Engine E;

[[noreturn]] void fail(tsr_status_t st, const char *what) {
  std::string msg = std::string("tessera: ") + what + ": " + tsr_status_message(st);
  tsr_status_free(st);
  TORCH_CHECK(false, msg);
}

/* Drops what finished from the front of `held` (lanes finish out of
 * order: it stops at the first task not done). */
void prune() {
  while (!E.held.empty() && tsr_rt_done(E.rt, E.held.front().ticket)) {
    Held &h = E.held.front();
    for (int i = 0; i < h.n; i++) E.live.remove(h.storages[i].unsafeGetStorageImpl());
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

/* Runs an operation eagerly, below this key: first the runtime finishes
 * whatever the operation's tensors are waiting for. */
void eager(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  size_t nargs = op.schema().arguments().size();
  if (E.active && !E.live.empty()) {
    bool touch = false;
    for (const c10::IValue &v : torch::jit::last(*stack, nargs)) touch = touch || touches_live(v);
    if (touch) {
      prune();
      touch = false;
      for (const c10::IValue &v : torch::jit::last(*stack, nargs)) touch = touch || touches_live(v);
      if (touch) flush_all();
    }
  }
  if (E.active) {
    E.stats[kEager]++;
    tsr_rt_post(E.rt); /* the device runs what is deferred while this runs */
  }
  bool dev = false;
  if (E.active && E.cuda && !E.dirty)
    for (const c10::IValue &v : torch::jit::last(*stack, nargs)) dev = dev || on_device(v);
  {
    c10::impl::ExcludeDispatchKeyGuard guard(kKey);
    op.callBoxed(stack);
  }
  if (E.active && E.cuda && !E.dirty) {
    size_t nret = op.schema().returns().size();
    for (const c10::IValue &v : torch::jit::last(*stack, nret)) dev = dev || on_device(v);
    if (dev) E.dirty = true;
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

bool good_tensor(const at::Tensor &t) {
  if (!t.defined() || t.layout() != c10::kStrided || !t.has_storage()) return false;
  if (E.cuda ? !(t.is_cuda() && t.get_device() == E.device_index) : !t.device().is_cpu()) return false;
  c10::ScalarType s = t.scalar_type();
  if (s != at::kFloat && s != at::kHalf && s != at::kBFloat16) return false;
  if (t.dim() > TSR_RT_MAX_DIMS || t.numel() == 0 || t.numel() > E.threshold) return false;
  if (at::GradMode::is_enabled() && t.requires_grad()) return false;
  return t.data_ptr() != nullptr;
}

tsr_rt_dtype_t dtype_of(const at::Tensor &t) {
  switch (t.scalar_type()) {
  case at::kHalf:
    return TSR_RT_F16;
  case at::kBFloat16:
    return TSR_RT_BF16;
  default:
    return TSR_RT_F32;
  }
}

/* t as a task operand of `ndim` dims (leading dims of size 1 added). */
void operand(tsr_rt_tensor_t *o, const at::Tensor &t, int64_t ndim) {
  o->data = t.data_ptr();
  o->dtype = dtype_of(t);
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

typedef c10::SmallVector<int64_t, TSR_RT_MAX_DIMS> Shape;

/* The tensors a taken operation reads (pointers into the call's stack). */
struct Inputs {
  const at::Tensor *t[2];
  int n = 0;
  void push_back(const at::Tensor &x) { t[n++] = &x; }
};

/* Reads an operation's arguments into a task; false: not one the runtime
 * takes (it runs eagerly). `res` gets the tensor the operation returns
 * (out, self, or undefined for a new one of out_shape). */
bool build(const OpInfo &info, c10::ArrayRef<c10::IValue> a, tsr_rt_task_t *k, at::Tensor *res, Shape *out_shape,
           Inputs *ins) {
  *k = tsr_rt_task_t{};
  k->op = info.op;
  size_t n = a.size();
  if (n == 0 || !a[0].isTensor()) return false;
  const at::Tensor &self = a[0].toTensor();
  if (!good_tensor(self)) return false;
  ins->push_back(self);
  size_t last = n; /* one past the last argument before out */
  if (info.kind == Kind::out) {
    if (!a[n - 1].isTensor()) return false;
    *res = a[n - 1].toTensor();
    last = n - 1;
  } else if (info.kind == Kind::inplace) {
    *res = self;
  }
  out_shape->assign(self.sizes().begin(), self.sizes().end()); /* elementwise: self's, unless broadcast */
  switch (info.form) {
  case Form::binary: {
    if (last < 2 || !a[1].isTensor()) return false;
    const at::Tensor &other = a[1].toTensor();
    if (!good_tensor(other) || other.scalar_type() != self.scalar_type()) return false;
    if (last >= 3 && !scalar_is(a[2], 1.0)) return false; /* alpha */
    ins->push_back(other);
    try {
      auto s = at::infer_size_dimvector(self.sizes(), other.sizes());
      out_shape->assign(s.begin(), s.end());
    } catch (const c10::Error &) {
      return false; /* shapes that do not broadcast: PyTorch's error */
    }
    break;
  }
  case Form::unary:
    break;
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
    if (last < 4 || !scalar_arg(a[1], &k->scalar[0]) || !scalar_is(a[2], 1.0) || !scalar_is(a[3], 1.0)) return false;
    break;
  case Form::softplus:
    if (last < 3 || !scalar_is(a[1], 1.0) || !scalar_is(a[2], 20.0)) return false;
    break;
  case Form::clamp: {
    if (last < 3) return false;
    bool lo = !a[1].isNone(), hi = !a[2].isNone();
    if (lo && !scalar_arg(a[1], &k->scalar[0])) return false;
    if (hi && !scalar_arg(a[2], lo ? &k->scalar[1] : &k->scalar[0])) return false;
    if (lo && hi) k->op = TSR_RT_OP_CLAMP;
    else if (lo) k->op = TSR_RT_OP_CLAMP_MIN;
    else if (hi) k->op = TSR_RT_OP_CLAMP_MAX;
    else return false;
    break;
  }
  case Form::scalar1:
    if (last < 2 || !scalar_arg(a[1], &k->scalar[0])) return false;
    break;
  case Form::reduce:
  case Form::reduce_all: {
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
    break;
  }
  }
  int64_t numel = 1;
  for (int64_t d : *out_shape) numel *= d;
  if (numel == 0 || numel > E.threshold) return false;
  if (res->defined()) {
    /* out= or in place: PyTorch resizes (or refuses) what does not match */
    if (!good_tensor(*res) || res->scalar_type() != self.scalar_type() ||
        res->sizes() != c10::IntArrayRef(out_shape->data(), out_shape->size()))
      return false;
    if (res->is_inference() && !c10::InferenceMode::is_enabled()) return false;
  }
  return true;
}

void scheduled(const c10::OperatorHandle &op, c10::DispatchKeySet ks, torch::jit::Stack *stack) {
  if (!E.active || std::this_thread::get_id() != E.owner) return eager(op, stack);
  const OpInfo *info = nullptr;
  auto it = E.ops.find(&op.schema());
  if (it != E.ops.end()) {
    info = it->second;
  } else {
    const std::string name = op.schema().name() + (op.schema().overload_name().empty() ? "" : "." + op.schema().overload_name());
    for (const Entry &e : kTable)
      if (name == e.name) info = &e.info;
    E.ops[&op.schema()] = info;
  }
  size_t nargs = op.schema().arguments().size();
  TSR_SEC_START;
  tsr_rt_task_t k;
  at::Tensor res;
  Shape shape;
  Inputs ins;
  if (!info || !plain_path(ks) || !build(*info, torch::jit::last(*stack, nargs), &k, &res, &shape, &ins)) {
    E.stats[kFallbacks]++;
    return eager(op, stack);
  }
  if (E.dirty) {
#if defined(TSR_TORCH_CUDA)
    if (E.cuda) {
      c10::cuda::getCurrentCUDAStream((c10::DeviceIndex)E.device_index).synchronize();
      E.stats[kSyncs]++;
    }
#endif
    E.dirty = false;
  }
  bool reduce = info->form == Form::reduce || info->form == Form::reduce_all;
  TSR_SEC(kSecBuild);
  if (!res.defined()) {
    c10::impl::ExcludeDispatchKeyGuard guard(kKey);
    res = at::empty(c10::IntArrayRef(shape.data(), shape.size()), ins.t[0]->options());
  }
  TSR_SEC(kSecAlloc);
  int64_t nd = reduce ? res.dim() : (int64_t)shape.size();
  operand(&k.out, res, nd);
  for (int i = 0; i < ins.n; i++) operand(&k.in[i], *ins.t[i], reduce ? ins.t[i]->dim() : nd);
  tsr_rt_ticket_t ticket = 0;
  tsr_status_t st = tsr_rt_submit_deferred(E.rt, &k, 1, &ticket);
  if (st) {
    if (tsr_status_code(st) != TSR_INVALID_ARGUMENT) fail(st, "submit");
    tsr_status_free(st); /* e.g. operands that partly overlap: PyTorch's rules apply */
    E.stats[kFallbacks]++;
    return eager(op, stack);
  }
  TSR_SEC(kSecSubmit);
  E.stats[kScheduled]++;
  E.stats[kTasks]++;
  E.held.emplace_back();
  Held &h = E.held.back();
  h.ticket = ticket;
  h.n = (uint8_t)(1 + ins.n);
  h.storages[0] = res.storage();
  for (int i = 0; i < ins.n; i++) h.storages[1 + i] = ins.t[i]->storage();
  for (int i = 0; i < h.n; i++) E.live.add(h.storages[i].unsafeGetStorageImpl());
  if (info->kind != Kind::fn && !res.is_inference()) res.unsafeGetTensorImpl()->bump_version();
  torch::jit::drop(*stack, nargs);
  torch::jit::push(*stack, std::move(res));
  TSR_SEC(kSecTrack);
  if (++E.since_prune >= 64) prune();
}

}  // namespace

TORCH_LIBRARY_IMPL(_, TESTING_ONLY_GenericMode, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&eager>());
}

TORCH_LIBRARY_IMPL(aten, TESTING_ONLY_GenericMode, m) {
  for (const Entry &e : kTable) m.impl(e.name + 6, torch::CppFunction::makeFromBoxedFunction<&scheduled>());
  for (const char *n : kFallthrough) m.impl(n + 6, torch::CppFunction::makeFallthrough());
}

/* ---- the control API (python/tessera/torch.py, through ctypes) ------------- */

extern "C" {

#define TSR_TORCH_STATS 6 /* scheduled, eager, fallbacks, tasks, waits, syncs */

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
  E.active = true;
  c10::impl::tls_set_dispatch_key_included(kKey, true);
  return 0;
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
  if (std::this_thread::get_id() == E.owner) c10::impl::tls_set_dispatch_key_included(kKey, false);
  int rc = tsr_torch_flush(err, n);
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
