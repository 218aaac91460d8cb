"""tessera.torch: unchanged PyTorch code runs its small elementwise work and
reductions through libtessera-rt's persistent kernel.

    import tessera.torch
    with tessera.torch.scheduler_context(size_threshold=65536, auto_flush_ms=1.0):
        y = torch.sigmoid(x * w + b).sum(-1)      # plain PyTorch

Two engines do the work (scheduler_context's `engine`): "native"
(libtessera-torch.so, python/csrc/capture.cpp: each operation taken in
C++ under a dispatch key of its own and submitted as one task at once, no
Python per operation; the default wherever the library loads) and
"python", described here, which fuses. Both give eager's results and
follow the same flush rules (docs/runtime.md).

Inside the python engine's context a TorchDispatchMode sees every aten operation. The
seed's elementwise operators (add, sub, mul, div, maximum, minimum, pow,
relu, sigmoid, tanh, exp, log, sqrt, abs, sin, cos, neg, gelu, hardsigmoid,
hardswish, leaky_relu, hardtanh, elu, softplus, clamp, clamp_min,
clamp_max; functional, out= and in-place forms) and sum and mean over dims,
on float32, float16 and bfloat16 tensors of the runtime's device with at
most `size_threshold` elements, are captured lazily: the result is a real
tensor whose contents are pending. Everything else runs eagerly, as
without the context.

Pending work is planned (tessera.fusion) and submitted as one batch when
it is needed or old: when an operation outside the scheduler touches the
memory of pending or running work (PyTorch's own ops, .item(), .cpu(),
printing, views, autograd's backward; then it also waits for it), when
`auto_flush_ms` passed since the oldest pending operation or 1024 are
pending (then it only submits), when a scheduled write would reorder a
fused read, and on leaving the context (it waits). Chains of elementwise
operations whose intermediate results the program no longer holds are
fused into one JIT expression (one task); a held result is written.

Memory read below PyTorch's operators is not seen: printing is (the
front wraps Tensor.__repr__ while a context is active, since PyTorch 2
prints with dispatch modes off), but torch.save, DLPack, or a custom CUDA
or Triton kernel given a tensor's pointer are not: call the context's
flush() before them.

Results equal eager PyTorch's within float32 tolerance: every operator
computes in float32, as PyTorch's do; a fused float16 or bfloat16 chain
rounds once at its end instead of after every operation (more accurate,
so it may differ from eager by the halves' rounding). Anything the front
cannot reproduce exactly (integer or mixed-device operands, an `alpha`,
non-default parameters, an out= of another shape or dtype, partly
overlapping operands) runs eagerly.

backend="cpu" runs the same front over CPU tensors and the runtime's CPU
backend (the test double used without a GPU).
"""
import collections
import ctypes
import os
import struct
import threading
import time
import weakref

import torch as _torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._mode_utils import no_dispatch as _no_dispatch
from torch.utils._pytree import tree_flatten

from . import fusion as _fusion
from . import optim as _optim
from . import rt as _rt

__all__ = ["scheduler_context", "Scheduler", "NativeScheduler", "runtime", "native_library", "native_unavailable"]

_aten = _torch.ops.aten
_DTYPES = {_torch.float32: "float32", _torch.float16: "float16", _torch.bfloat16: "bfloat16"}
_MAX_PENDING = 1024
_EAGER = object()

_runtimes = {}
_runtimes_lock = threading.Lock()


def _idle_us():
    """TESSERA_RT_IDLE_US: how long the runtime's kernel stays idle before
    it ends (microseconds, 1 to 10,000,000; unset: the runtime's 200)."""
    v = os.environ.get("TESSERA_RT_IDLE_US")
    if v is None or v == "":
        return 0
    if not v.isdigit() or not 1 <= int(v) <= 10000000:
        raise ValueError("TESSERA_RT_IDLE_US=%r: microseconds, 1 to 10000000" % (v,))
    return int(v)


def runtime(backend="cuda", device=0):
    """The process's libtessera-rt runtime for a device (made on first use,
    shared by every scheduler_context; stopped at exit)."""
    key = (backend, int(device))
    with _runtimes_lock:
        r = _runtimes.get(key)
        if r is None:
            r = _rt.Runtime(backend=backend, device=int(device), idle_us=_idle_us())
            r.lock = threading.RLock()
            r.jit = {}       # expression text -> op code (False: does not compile)
            r.jit_lru = {}   # arity -> OrderedDict(op code -> text), least recent first
            _runtimes[key] = r
        return r


_JIT_PER_ARITY = 16  # JIT operators kept registered per arity (each a kernel generation's code)


def _jit_code(r, text, arity, before_replace):
    """The op code of expression `text` on runtime `r`: registered on first
    use; past _JIT_PER_ARITY operators of its arity, the least recently
    used one is replaced (hot swap: its earlier tasks still run the old
    expression). None when it does not compile (remembered)."""
    code = r.jit.get(text)
    lru = r.jit_lru.setdefault(arity, collections.OrderedDict())
    if code is not None:
        if code is not False:
            lru.move_to_end(code)
        return code if code is not False else None
    try:
        if len(lru) < _JIT_PER_ARITY:
            code = r.register(text)
        else:
            code, old = next(iter(lru.items()))
            before_replace()
            try:
                r.replace(code, text)
            except _rt.TesseraError:
                r.flush()  # replaced versions still in flight hold their slots
                r.replace(code, text)
            del lru[code]
            del r.jit[old]
    except _rt.TesseraError:
        r.jit[text] = False
        return None
    r.jit[text] = code
    lru[code] = text
    return code


# tsr_rt_task_t as rt.py's ctypes structures lay it out (checked at import):
# op, scalar[2], reduce_mask, keepdim, padding; then out and in[4], each
# data, dtype, ndim, sizes[8], strides[8]
_HEAD = struct.Struct("<iffI?7x")
_TENSOR = struct.Struct("<QiI8q8q")
_TASK_BYTES = 768  # with imm_mask and imm[4] (issue 33)
assert ctypes.sizeof(_rt._Task) == _TASK_BYTES and _rt._Task.out.offset == 24 and _rt._Task.in_.offset == 168
_DTYPE_CODES = {dt: _rt.DTYPES[name] for dt, name in _DTYPES.items()}
_ZEROS = (0,) * 8
_ONES = (1,) * 8


def _pack_tensor(buf, off, t, ndim):
    """libtessera-rt's view of torch tensor `t`, broadcast to `ndim` dims
    (size-1 dims get stride 0), packed at buf[off:off + 144]."""
    shape, stride, k = t.shape, t.stride(), t.dim()
    pad = ndim - k
    if k == ndim == 1:
        _TENSOR.pack_into(buf, off, t.data_ptr(), _DTYPE_CODES[t.dtype], 1, shape[0], 0, 0, 0, 0, 0, 0, 0,
                          stride[0] if shape[0] != 1 else 0, 0, 0, 0, 0, 0, 0, 0)
        return
    sizes = _ONES[:pad] + tuple(shape) + _ZEROS[ndim:]
    strides = _ZEROS[:pad] + tuple(0 if shape[d] == 1 else stride[d] for d in range(k)) + _ZEROS[ndim:]
    _TENSOR.pack_into(buf, off, t.data_ptr(), _DTYPE_CODES[t.dtype], ndim, *sizes, *strides)


_OP_CODES = None


def _op_code(name):
    global _OP_CODES
    if _OP_CODES is None:
        _OP_CODES = _rt.operators()
    return _OP_CODES[name]


class _Batch:
    """Tasks packed for one tsr_rt_submit (room for `n`: a plan's steps, each
    at most one task), and the tensors they use."""
    __slots__ = ("buf", "count", "keep")

    def __init__(self, n):
        self.buf = bytearray(_TASK_BYTES * max(n, 1))  # zeroed
        self.count = 0
        self.keep = []

    def take(self):
        """The offset of a new, zeroed task."""
        off = self.count * _TASK_BYTES
        self.count += 1
        return off

    def clear(self):
        """Empties it (after a submit): the used tasks are zeroed again."""
        self.buf[:self.count * _TASK_BYTES] = bytes(self.count * _TASK_BYTES)
        self.count = 0
        self.keep = []


def _storage_ptr(t):
    """The address of the storage `t` views (two views of one buffer share
    it): its first element's address less its offset (no storage object
    made: PyTorch's untyped_storage() costs ~1 us)."""
    return t.data_ptr() - t.storage_offset() * t.element_size()


def _number(a):
    """A Python number: its value; else None."""
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        return float(a)
    return None


# ---- the operations the front takes: aten overload -> how to read its args ---

def _binary(fn):
    def take(s, args, kwargs, out=None, inplace=False):
        if len(args) != 2 or kwargs.get("alpha", 1) != 1:
            return _EAGER
        return s._elementwise(fn, [args[0], args[1]], [], out, inplace)
    return take


def _unary(fn, params=(), fixed=()):
    """`params`: (name, default) read into the expression's scalars;
    `fixed`: (name, value) that must hold, else eager."""
    def take(s, args, kwargs, out=None, inplace=False):
        vals = []
        for i, (name, default) in enumerate(params):
            v = args[1 + i] if len(args) > 1 + i else kwargs.get(name, default)
            if v is None or isinstance(v, _torch.Tensor) and v.dim() != 0:
                return _EAGER
            vals.append(float(v))
        for j, (name, want) in enumerate(fixed):
            i = 1 + len(params) + j
            v = args[i] if len(args) > i else kwargs.get(name, want)
            if v != want:
                return _EAGER
        return s._elementwise(fn, [args[0]], vals, out, inplace)
    return take


def _clamp(s, args, kwargs, out=None, inplace=False):
    lo = args[1] if len(args) > 1 else kwargs.get("min")
    hi = args[2] if len(args) > 2 else kwargs.get("max")
    if isinstance(lo, _torch.Tensor) or isinstance(hi, _torch.Tensor):
        return _EAGER
    if lo is None and hi is None:
        return _EAGER
    if lo is None:
        return s._elementwise("clamp_max", [args[0]], [float(hi)], out, inplace)
    if hi is None:
        return s._elementwise("clamp_min", [args[0]], [float(lo)], out, inplace)
    return s._elementwise("clamp", [args[0]], [float(lo), float(hi)], out, inplace)


def _reduction(fn, all_dims):
    def take(s, args, kwargs, out=None, inplace=False):
        if kwargs.get("dtype") is not None:
            return _EAGER
        x = args[0]
        if all_dims:
            if len(args) > 1:
                return _EAGER
            dims, keepdim = list(range(x.dim())), False
        else:
            dims = args[1] if len(args) > 1 else kwargs.get("dim")
            keepdim = bool(args[2] if len(args) > 2 else kwargs.get("keepdim", False))
            if len(args) > 3 or not dims:
                return _EAGER
        return s._reduce(fn, x, list(dims), keepdim, out)
    return take


def _table():
    """{OpOverload: (take, kind)} with kind "fn" (a new tensor), "out"
    (writes kwargs['out']) or "inplace" (writes args[0])."""
    t = {}

    def add(packet_name, overload, take):
        packet = getattr(_aten, packet_name, None)
        ov = getattr(packet, overload, None) if packet is not None else None
        if ov is not None:
            t[ov] = (take, "fn")
        out = getattr(packet, "out", None) if packet is not None else None
        if out is not None and overload in ("Tensor", "default") and out not in t:
            t[out] = (take, "out")
        ip = getattr(_aten, packet_name + "_", None)
        ipo = getattr(ip, overload, None) if ip is not None else None
        if ipo is not None:
            t[ipo] = (take, "inplace")

    for name in ("add", "sub", "mul", "div"):
        add(name, "Tensor", _binary(name))
        add(name, "Scalar", _binary(name))
    for name in ("maximum", "minimum"):
        add(name, "default", _binary(name))
    add("pow", "Tensor_Tensor", _binary("pow"))
    add("pow", "Tensor_Scalar", _binary("pow"))
    add("pow", "Scalar", _binary("pow"))
    for name in ("relu", "sigmoid", "tanh", "exp", "log", "sqrt", "abs", "sin", "cos", "neg", "hardsigmoid",
                 "hardswish"):
        add(name, "default", _unary(name))
    add("gelu", "default", _unary("gelu", fixed=(("approximate", "none"),)))
    add("leaky_relu", "default", _unary("leaky_relu", params=(("negative_slope", 0.01),)))
    add("hardtanh", "default", _unary("hardtanh", params=(("min_val", -1.0), ("max_val", 1.0))))
    add("elu", "default", _unary("elu", params=(("alpha", 1.0),), fixed=(("scale", 1), ("input_scale", 1))))
    add("softplus", "default", _unary("softplus", fixed=(("beta", 1), ("threshold", 20))))
    add("clamp", "default", _clamp)
    add("clamp_min", "default", _unary("clamp_min", params=(("min", None),)))
    add("clamp_max", "default", _unary("clamp_max", params=(("max", None),)))
    for packet, name, overload in ((_aten.sum, "sum", "IntList_out"), (_aten.mean, "mean", "out")):
        ov = getattr(packet, overload, None)
        if ov is not None:
            t[ov] = (_reduction(name, False), "out")
    t[_aten.sum.dim_IntList] = (_reduction("sum", False), "fn")
    t[_aten.sum.default] = (_reduction("sum", True), "fn")
    t[_aten.mean.dim] = (_reduction("mean", False), "fn")
    t[_aten.mean.default] = (_reduction("mean", True), "fn")
    return t


_TABLE = None


# PyTorch 2's printing turns dispatch modes off (torch._tensor_str reads
# the data below them): while a scheduler is active, Tensor.__repr__ first
# finishes what the tensor's memory is waiting for.
_active = []
_repr = None


def _repr_after_flush(self, *args, **kwargs):
    for s in list(_active):
        if s._nodes or s._tracked:
            try:
                touches = s._touches(self)
            except Exception:  # noqa: BLE001 - a tensor we cannot read: be safe
                touches = True
            if touches:
                s._sync()
    return _repr(self, *args, **kwargs)


def _activate(s):
    global _repr
    if not _active:
        _repr = _torch.Tensor.__repr__
        _torch.Tensor.__repr__ = _repr_after_flush
    _active.append(s)


def _deactivate(s):
    if s in _active:
        _active.remove(s)
    if not _active and _repr is not None:
        _torch.Tensor.__repr__ = _repr


class Scheduler(TorchDispatchMode):
    """The mode scheduler_context returns; `stats` counts what it did:
    scheduled (operations captured), eager (operations run eagerly),
    fallbacks (captured but outside what the front reproduces: eager),
    tasks, fused_tasks (tasks of more than one operation), eager_steps
    (planned work PyTorch computed because its JIT operator did not
    compile), submits, waits; submit_us and wait_us, the host time spent
    planning and submitting, and waiting for the runtime."""

    engine = "python"

    def __init__(self, size_threshold=65536, auto_flush_ms=1.0, backend="cuda", device=None):
        super().__init__()
        global _TABLE
        if _TABLE is None:
            _TABLE = _table()
        if backend not in ("cuda", "cpu"):
            raise ValueError("backend %r: 'cuda' or 'cpu'" % (backend,))
        if int(size_threshold) < 1:
            raise ValueError("size_threshold %r: a positive number of elements" % (size_threshold,))
        if float(auto_flush_ms) < 0:
            raise ValueError("auto_flush_ms %r: 0 or more milliseconds" % (auto_flush_ms,))
        self.size_threshold = int(size_threshold)
        self.auto_flush_s = float(auto_flush_ms) / 1e3
        self.backend = backend
        if backend == "cuda":
            dev = _torch.device("cuda", _torch.cuda.current_device() if device is None else int(device))
        else:
            dev = _torch.device("cpu")
        self.device = dev
        self._dev_index = dev.index if backend == "cuda" else -1  # Tensor.get_device()'s numbering
        self.rt = runtime(backend, dev.index or 0)
        self.stats = dict(scheduled=0, eager=0, fallbacks=0, tasks=0, fused_tasks=0, eager_steps=0, submits=0, waits=0,
                          submit_us=0, wait_us=0)
        self._nodes = []        # pending, program order
        self._fresh = {}        # id(tensor) -> (weakref, node): pending fresh results
        self._leaf_reads = set()  # storages read by pending fresh nodes
        self._tracked = set()   # storages of pending and submitted, not waited, work
        self._inflight = []     # [first ticket not known done, last ticket, tensors]: submitted, not waited
        self._t_first = 0.0
        self._dirty = True      # eager work may be queued on the stream

    # ---- the mode -----------------------------------------------------------

    def __enter__(self):
        self._dirty = True
        _activate(self)
        return super().__enter__()

    def __exit__(self, exc_type, exc, tb):
        r = super().__exit__(exc_type, exc, tb)
        _deactivate(self)
        try:
            self.flush()
        except Exception:
            if exc_type is None:
                raise
        if self.backend == "cuda":
            self.rt.park()  # what follows the context is eager work
        return r

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        entry = _TABLE.get(func)
        if entry is not None:
            take, kind = entry
            if kind == "out":
                res = take(self, args, kwargs, kwargs.get("out"), False)
            elif kind == "inplace":
                res = take(self, args, kwargs, args[0], True)
            else:
                res = take(self, args, kwargs)
            if res is not _EAGER:
                self.stats["scheduled"] += 1
                return res
            self.stats["fallbacks"] += 1
        return self._outside(func, args, kwargs)

    def _outside(self, func, args, kwargs):
        """An operation the front does not take: first what it touches is
        finished, then it runs eagerly."""
        self.stats["eager"] += 1
        if self._nodes or self._tracked:
            for a in tree_flatten((args, kwargs))[0]:
                if isinstance(a, _torch.Tensor) and self._touches(a):
                    self._sync()
                    break
        if not self._dirty and self.backend == "cuda":
            self.rt.park()  # eager device work next: the runtime's kernel makes room for it at once
        self._dirty = True
        return func(*args, **kwargs)

    def _touches(self, t):
        f = self._fresh.get(id(t))
        if f is not None and f[0]() is t:
            return True
        try:
            return _storage_ptr(t) in self._tracked
        except (RuntimeError, NotImplementedError):
            return True  # a tensor without storage (a subclass): be safe

    # ---- capture --------------------------------------------------------------

    def _operand(self, a):
        """A fusion argument for tensor `a`, or None when the front cannot take it."""
        if a.get_device() != self._dev_index or a.dtype not in _DTYPES or a.layout != _torch.strided:
            return None
        f = self._fresh.get(id(a))
        if f is not None and f[0]() is a:
            return f[1]
        return _fusion.Leaf(a, id(a))

    def _scalar(self, a):
        """The value of a Python number, or of a 0-dim CPU tensor (how
        PyTorch passes a number) of a CUDA scheduler; else None."""
        if isinstance(a, _torch.Tensor):
            if self.backend == "cuda" and a.dim() == 0 and not a.is_cuda and a.dtype.is_floating_point:
                return float(a.item())
            return None
        return _number(a)

    def _elementwise(self, fn, operands, params, out, inplace):
        scalars = [self._scalar(a) for a in operands]
        tensors = [a for a, c in zip(operands, scalars) if c is None and isinstance(a, _torch.Tensor)]
        if not tensors:
            return _EAGER
        dtype = tensors[0].dtype
        for t in tensors[1:]:
            if t.dtype != dtype:
                dtype = None
        if dtype is None or len(tensors) < len(operands):
            dtype = _torch.result_type(*operands) if len(operands) == 2 else tensors[0].dtype
        if dtype not in _DTYPES:
            return _EAGER
        shape = tensors[0].shape
        for t in tensors[1:]:
            if t.shape != shape:
                try:
                    shape = _torch.broadcast_shapes(shape, t.shape)
                except RuntimeError:
                    return _EAGER
        numel = 1
        for n in shape:
            numel *= n
        if numel > self.size_threshold or numel == 0:
            return _EAGER
        for p in params:
            if _fusion.const_text(p) is None:
                return _EAGER
        args = []
        for a, c in zip(operands, scalars):
            if c is not None:
                if _fusion.const_text(c) is None:
                    return _EAGER
                args.append(c)
                continue
            op = self._operand(a)
            if op is None:
                return _EAGER
            args.append(op)
        args.extend(params)
        if out is not None:
            if not isinstance(out, _torch.Tensor) or out.get_device() != self._dev_index or out.dtype != dtype \
                    or tuple(out.shape) != tuple(shape) or not self._writable(out, tensors, inplace):
                return _EAGER
            sp = _storage_ptr(out)
            if sp in self._leaf_reads or (id(out) in self._fresh and self._fresh[id(out)][0]() is out):
                # a fused read of this memory is pending: keep it before the write
                self._submit()
            node = _fusion.Node(fn, args, shape, dtype, target=out)
            self._record(node, tensors, out, sp)
            return out
        like = tensors[0]
        if like.shape == shape and like.dtype == dtype and like.is_contiguous():
            res = _torch.empty_like(like)
        else:
            res = _torch.empty(shape, dtype=dtype, device=self.device)
        node = _fusion.Node(fn, args, shape, dtype, ref=weakref.ref(res))
        self._fresh[id(res)] = (node.ref, node)
        self._record(node, tensors, None, None)
        return res

    def _writable(self, out, inputs, inplace):
        """out= or in place: `out` may be an input only as the very same
        view (PyTorch's rule for an elementwise op in place); no other
        overlap, and no internal overlap."""
        if not out.is_contiguous() and _torch._debug_has_internal_overlap(out) != 0:
            return False
        sp = _storage_ptr(out)
        for t in inputs:
            if _storage_ptr(t) != sp:
                continue
            if t.data_ptr() != out.data_ptr() or t.stride() != out.stride() or t.shape != out.shape:
                return False
        return True

    def _reduce(self, fn, x, dims, keepdim, out=None):
        if not isinstance(x, _torch.Tensor) or x.dim() == 0 or x.numel() == 0 or x.numel() > self.size_threshold:
            return _EAGER
        nd = x.dim()
        norm = []
        for d in dims:
            d = int(d)
            d = d + nd if d < 0 else d
            if not 0 <= d < nd or d in norm:
                return _EAGER
            norm.append(d)
        op = self._operand(x)
        if op is None:
            return _EAGER
        shape = [1 if d in norm else n for d, n in enumerate(x.shape) if keepdim or d not in norm]
        if out is not None:
            if not isinstance(out, _torch.Tensor) or out.get_device() != self._dev_index or out.dtype != x.dtype \
                    or list(out.shape) != shape or _storage_ptr(out) == _storage_ptr(x) \
                    or (not out.is_contiguous() and _torch._debug_has_internal_overlap(out) != 0):
                return _EAGER
            sp = _storage_ptr(out)
            if sp in self._leaf_reads or id(out) in self._fresh:
                self._submit()
            node = _fusion.Node(fn, [op], shape, x.dtype, target=out, dims=norm, keepdim=keepdim)
            self._record(node, [x], out, sp)
            return out
        res = _torch.empty(shape, dtype=x.dtype, device=self.device)
        node = _fusion.Node(fn, [op], shape, x.dtype, ref=weakref.ref(res), dims=norm, keepdim=keepdim)
        self._fresh[id(res)] = (node.ref, node)
        self._record(node, [x], None, None)
        return res

    def _record(self, node, inputs, target, target_sp):
        if not self._nodes:
            self._t_first = time.perf_counter()
        self._nodes.append(node)
        for t in inputs:
            f = self._fresh.get(id(t))
            if f is not None and f[0]() is t:
                continue
            sp = _storage_ptr(t)
            self._tracked.add(sp)
            if target is None:
                self._leaf_reads.add(sp)
        if target is not None:
            self._tracked.add(target_sp)
        if len(self._nodes) >= _MAX_PENDING or time.perf_counter() - self._t_first >= self.auto_flush_s:
            self._submit()

    # ---- submission -----------------------------------------------------------

    def _alloc(self, node):
        return _torch.empty(node.shape, dtype=node.dtype, device=self.device)

    def _submit(self):
        """Plans and submits what is pending (no wait)."""
        if not self._nodes:
            return
        t0 = time.perf_counter()
        nodes, self._nodes = self._nodes, []
        self._fresh = {}
        self._leaf_reads = set()
        with _no_dispatch():
            steps = _fusion.plan(nodes, self._alloc, rounds=lambda n: n.dtype != _torch.float32)
            if self._dirty and self.backend == "cuda":
                _torch.cuda.current_stream(self.device).synchronize()
            self._dirty = False
            r = self.rt
            with r.lock:
                b = _Batch(len(steps))

                def submit_so_far():
                    # before a JIT operator's code is given another
                    # expression: the tasks that name it must be in
                    self._run(b)
                for st in steps:
                    if not self._pack(st, b, submit_so_far):
                        # outside what the runtime can take (a JIT operator
                        # that does not compile): what came before runs,
                        # then this step eagerly
                        submit_so_far()
                        r.flush()
                        self._eval(st)
                        self.stats["eager_steps"] += 1
                        self._dirty = True
                        continue
                    if st.fused > 1:
                        self.stats["fused_tasks"] += 1
                self._run(b)
                self._prune()
        for st in steps:
            self._tracked.add(_storage_ptr(st.node.out))
        self.stats["submit_us"] += int((time.perf_counter() - t0) * 1e6)

    def _prune(self):
        """Forgets the tensors of batches whose every task has finished
        (then they may go back to the allocator). Tasks on different lanes
        finish out of order: a batch's last ticket done says nothing of
        its first, so each ticket is asked, from the oldest on."""
        r = self.rt
        while self._inflight:
            e = self._inflight[0]
            while e[0] <= e[1] and r.done(e[0]):
                e[0] += 1
            if e[0] <= e[1]:
                return
            self._inflight.pop(0)

    def _run(self, b):
        """Submits the tasks packed in batch `b` (then empties it)."""
        if not b.count:
            return
        if self._dirty and self.backend == "cuda":
            _torch.cuda.current_stream(self.device).synchronize()
            self._dirty = False
        last = self.rt.submit_packed(b.buf, b.count)
        self._inflight.append([last - b.count + 1, last, b.keep])
        self.stats["tasks"] += b.count
        self.stats["submits"] += 1
        b.clear()

    def _pack(self, st, b, submit_so_far):
        """Packs the runtime's task for a step into `b` (keeping its
        tensors); False when its JIT operator does not compile."""
        if st.kind == "expr":
            code = _jit_code(self.rt, st.text, len(st.inputs), submit_so_far)
            if code is None:
                return False
            scalars, mask, keepdim = (0.0, 0.0), 0, False
        elif st.kind == "builtin":
            code, scalars, mask, keepdim = _op_code(st.op), st.scalars, 0, False
        else:
            code, scalars, keepdim = _op_code(st.op), (0.0, 0.0), bool(st.keepdim)
            mask = 0
            for d in st.dims:
                mask |= 1 << d
        out = st.node.out
        nd = out.dim()
        off = b.take()
        buf = b.buf
        _HEAD.pack_into(buf, off, code, scalars[0], scalars[1], mask, keepdim)
        _pack_tensor(buf, off + 24, out, nd)
        b.keep.append(out)
        at = off + 168
        for leaf in st.inputs:
            t = leaf.tensor
            b.keep.append(t)
            _pack_tensor(buf, at, t, t.dim() if st.kind == "reduce" else nd)
            at += 144
        return True

    def _eval(self, st):
        """A step computed by PyTorch (the fallback), into its tensor."""
        def val(a):
            if isinstance(a, _fusion.Node):
                return a.out.float() if a.materialized else expr(a)
            if isinstance(a, _fusion.Leaf):
                return a.tensor.float()
            return a

        def expr(n):
            v = [val(a) for a in n.args]
            return _EVAL[n.fn](*v)
        node = st.node
        if st.kind == "reduce":
            x = val(node.args[0])
            res = (_torch.sum if node.fn == "sum" else _torch.mean)(x, dim=node.dims, keepdim=node.keepdim)
        else:
            res = expr(node)
        node.out.copy_(res)

    def _sync(self):
        """Submits what is pending and waits for everything submitted."""
        self._submit()
        if self._inflight or self._tracked:
            t0 = time.perf_counter()
            with self.rt.lock:
                self.rt.flush()
            self.stats["waits"] += 1
            self.stats["wait_us"] += int((time.perf_counter() - t0) * 1e6)
        self._inflight = []
        self._tracked = set()

    def flush(self):
        """Submits what is pending and waits until it is done."""
        self._sync()


def _t(x):
    return x if isinstance(x, _torch.Tensor) else _torch.tensor(x, dtype=_torch.float32)


_EVAL = {
    "add": lambda a, b: _torch.add(_t(a), b), "sub": lambda a, b: _torch.sub(_t(a), b),
    "mul": lambda a, b: _torch.mul(_t(a), b), "div": lambda a, b: _torch.div(_t(a), b),
    "pow": lambda a, b: _torch.pow(a, b),
    "maximum": lambda a, b: _torch.maximum(_t(a), _t(b)), "minimum": lambda a, b: _torch.minimum(_t(a), _t(b)),
    "relu": _torch.relu, "sigmoid": _torch.sigmoid, "tanh": _torch.tanh, "exp": _torch.exp, "log": _torch.log,
    "sqrt": _torch.sqrt, "abs": _torch.abs, "sin": _torch.sin, "cos": _torch.cos, "neg": _torch.neg,
    "gelu": _torch.nn.functional.gelu, "hardsigmoid": _torch.nn.functional.hardsigmoid,
    "hardswish": _torch.nn.functional.hardswish, "softplus": _torch.nn.functional.softplus,
    "leaky_relu": _torch.nn.functional.leaky_relu, "elu": _torch.nn.functional.elu,
    "clamp_min": _torch.clamp_min, "clamp_max": _torch.clamp_max, "clamp": _torch.clamp,
    "hardtanh": _torch.nn.functional.hardtanh,
}


# ---- the native engine (python/csrc/capture.cpp: libtessera-torch.so) -----

_NATIVE_STATS = ("scheduled", "eager", "fallbacks", "tasks", "waits", "syncs", "passed")
_native_lib = None
_native_why = None


def _native_candidates():
    env = os.environ.get("TESSERA_TORCH_LIBRARY")
    if env:
        yield env
        return
    try:
        yield os.path.join(os.path.dirname(_rt.library_path()), "libtessera-torch.so")
    except _rt.TesseraError:
        pass
    yield os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib", "libtessera-torch.so")


def native_library():
    """The ctypes handle of libtessera-torch.so (the native engine), or None
    when it is not there or does not load; native_unavailable() says why."""
    global _native_lib, _native_why
    if _native_lib is not None or _native_why is not None:
        return _native_lib
    tried = []
    for path in _native_candidates():
        tried.append(path)
        if not os.path.exists(path):
            continue
        try:
            # the rt library first, so the engine's dependency resolves to it
            _rt.library_path()
            lib = ctypes.CDLL(path)
        except (OSError, _rt.TesseraError) as e:
            _native_why = "%s does not load: %s" % (path, e)
            return None
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        lib.tsr_torch_enable.argtypes = [vp, ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_char_p, sz]
        lib.tsr_torch_enable.restype = ctypes.c_int
        lib.tsr_torch_flush.argtypes = [ctypes.c_char_p, sz]
        lib.tsr_torch_flush.restype = ctypes.c_int
        lib.tsr_torch_disable.argtypes = [ctypes.c_char_p, sz]
        lib.tsr_torch_disable.restype = ctypes.c_int
        lib.tsr_torch_stats.argtypes = [ctypes.POINTER(ctypes.c_int64)]
        lib.tsr_torch_stats.restype = None
        lib.tsr_torch_has_cuda.argtypes = []
        lib.tsr_torch_has_cuda.restype = ctypes.c_int
        lib.tsr_torch_set_passing.argtypes = [ctypes.c_int]
        lib.tsr_torch_set_passing.restype = None
        _native_lib = lib
        return lib
    _native_why = "libtessera-torch.so not found (tried: %s); set TESSERA_TORCH_LIBRARY" % ", ".join(tried)
    return None


def native_unavailable():
    """Why the native engine cannot be used (None when it can)."""
    native_library()
    return _native_why


class NativeScheduler:
    """The native engine's context (engine="native"): every operation the
    runtime takes becomes one task, submitted at once, with no Python run
    per operation (docs/runtime.md). `stats` counts scheduled (operations
    taken), eager (run eagerly), fallbacks (looked at, then run eagerly),
    tasks, waits (the runtime finished everything because an eager
    operation touched its memory, or at flush and exit), syncs (the
    current stream synchronized because eager work came before a task) and
    passed (an estimate, in steps of 8, of the aten calls, nested ones
    included, that went straight to PyTorch during passes: such waits kept
    coming after only a few tasks; see docs/runtime.md)."""

    engine = "native"

    def __init__(self, size_threshold=65536, backend="cuda", device=None, passing=None):
        lib = native_library()
        if lib is None:
            raise _rt.TesseraError("unavailable", "the native engine: %s" % _native_why)
        if backend not in ("cuda", "cpu"):
            raise ValueError("backend %r: 'cuda' or 'cpu'" % (backend,))
        if int(size_threshold) < 1:
            raise ValueError("size_threshold %r: a positive number of elements" % (size_threshold,))
        if backend == "cuda" and not lib.tsr_torch_has_cuda():
            raise _rt.TesseraError("unavailable", "libtessera-torch.so was built without PyTorch's CUDA support")
        if passing is None:
            v = os.environ.get("TESSERA_TORCH_PASSING", "1")
            if v not in ("0", "1"):
                raise ValueError("TESSERA_TORCH_PASSING=%r: 0 or 1" % (v,))
            passing = v == "1"
        if passing not in (True, False, "always"):
            raise ValueError("passing %r: True, False or 'always'" % (passing,))
        self.passing = passing
        self._lib = lib
        self.size_threshold = int(size_threshold)
        self.backend = backend
        if backend == "cuda":
            self.device = _torch.device("cuda", _torch.cuda.current_device() if device is None else int(device))
        else:
            self.device = _torch.device("cpu")
        self.rt = runtime(backend, self.device.index or 0)
        self._active = False
        self._final = dict.fromkeys(_NATIVE_STATS, 0)

    def _read_stats(self):
        buf = (ctypes.c_int64 * len(_NATIVE_STATS))()
        self._lib.tsr_torch_stats(buf)
        return dict(zip(_NATIVE_STATS, buf))

    @property
    def stats(self):
        return self._read_stats() if self._active else dict(self._final)

    def __enter__(self):
        if self._active:
            raise RuntimeError("this scheduler is already active")
        self.rt.lock.acquire()
        self._lib.tsr_torch_set_passing(2 if self.passing == "always" else 1 if self.passing else 0)
        err = ctypes.create_string_buffer(512)
        rc = self._lib.tsr_torch_enable(self.rt._h, 1 if self.backend == "cuda" else 0,
                                        self.device.index if self.backend == "cuda" else -1, self.size_threshold,
                                        err, len(err))
        if rc:
            self.rt.lock.release()
            raise _rt.TesseraError("failed_precondition", err.value.decode(errors="replace"))
        self._active = True
        if _optim.install():  # torch.optim's Adam, AdamW and SGD steps as whole steps (tessera/optim.py)
            _optim.activate(threading.get_ident())
        return self

    def __exit__(self, exc_type, exc, tb):
        _optim.activate(None)
        err = ctypes.create_string_buffer(512)
        rc = self._lib.tsr_torch_disable(err, len(err))
        self._final = self._read_stats()  # the engine keeps its counters until the next enable
        self._active = False
        self.rt.lock.release()
        if rc and exc_type is None:
            raise _rt.TesseraError("unavailable", err.value.decode(errors="replace"))
        return False

    def flush(self):
        """Waits until everything submitted is done."""
        if not self._active:
            return
        err = ctypes.create_string_buffer(512)
        if self._lib.tsr_torch_flush(err, len(err)):
            raise _rt.TesseraError("unavailable", err.value.decode(errors="replace"))


_ENGINES = ("auto", "native", "python")


def scheduler_context(size_threshold=65536, auto_flush_ms=1.0, backend="cuda", device=None, engine=None,
                      passing=None):
    """A context in which small elementwise operations and reductions run
    through libtessera-rt (see the module's text). size_threshold: the most
    elements a scheduled operation's tensors have (larger ones run eagerly);
    auto_flush_ms: pending work older than this is submitted at the next
    operation (the python engine; the native one submits at once); backend:
    "cuda" (tensors on `device`, default the current one) or "cpu" (CPU
    tensors, the runtime's CPU backend). engine: "native" (no Python per
    operation, one task an operation), "python" (a TorchDispatchMode that
    fuses chains into JIT operators), or "auto" (the default, or the
    environment's TESSERA_TORCH_ENGINE): native when libtessera-torch.so
    loads and supports the backend, else python. passing (the native
    engine): whether it may pass operations to eager PyTorch while eager
    device work keeps forcing waits that cost more than its tasks save
    (default on; TESSERA_TORCH_PASSING=0 turns it off; "always": after
    every few tasks whatever the waits cost, for tests)."""
    if engine is None:
        engine = os.environ.get("TESSERA_TORCH_ENGINE", "auto")
    if engine not in _ENGINES:
        raise ValueError("engine %r: one of %s" % (engine, ", ".join(_ENGINES)))
    if float(auto_flush_ms) < 0:
        raise ValueError("auto_flush_ms %r: 0 or more milliseconds" % (auto_flush_ms,))
    if engine == "auto":
        lib = native_library()
        engine = "native" if lib is not None and (backend != "cuda" or lib.tsr_torch_has_cuda()) else "python"
    if engine == "native":
        return NativeScheduler(size_threshold=size_threshold, backend=backend, device=device, passing=passing)
    return Scheduler(size_threshold=size_threshold, auto_flush_ms=auto_flush_ms, backend=backend, device=device)
