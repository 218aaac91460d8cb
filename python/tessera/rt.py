"""tessera.rt: the plain API of libtessera-rt over ctypes.

A Runtime serves one device (backend "cuda") or runs the same protocol on
host threads (backend "cpu", the test double). Tasks are built with
tensor() and task(), submitted in batches, and waited on by ticket:

    with Runtime(backend="cpu") as r:
        t = r.submit([task("relu", tensor(out, "float32", [n]), tensor(x, "float32", [n]))])
        r.wait(t)

Pointers are integers: device pointers on the runtime's device (from
Runtime.alloc, or tensor_from_torch for a CUDA tensor of PyTorch), or host
pointers for the CPU backend. Errors raise TesseraError with the library's
message. The operator names come from the library itself
(tsr_rt_op_name), so this module never disagrees with the C enum.
"""
import ctypes
import ctypes.util
import glob
import os
import pathlib

__all__ = ["TesseraError", "Runtime", "tensor", "tensor_from_torch", "task", "operators", "library_path",
           "DTYPES", "MAX_DIMS"]

MAX_DIMS = 8
DTYPES = {"float32": 1, "float16": 2, "bfloat16": 3, "bool": 4}
_BACKENDS = {"cuda": 1, "cpu": 2}


class TesseraError(RuntimeError):
    """A libtessera-rt call failed; .code is the status code's name."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_uint32),
                ("sizes", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS)]


class _Task(ctypes.Structure):
    _fields_ = [("op", ctypes.c_int), ("scalar", ctypes.c_float * 2), ("reduce_mask", ctypes.c_uint32),
                ("keepdim", ctypes.c_bool), ("out", _Tensor), ("in_", _Tensor * 4),
                ("imm_mask", ctypes.c_uint32), ("imm", ctypes.c_float * 4)]


class _Group(ctypes.Structure):
    _fields_ = [("task", _Task), ("count", ctypes.c_size_t), ("out", ctypes.POINTER(ctypes.c_void_p)),
                ("in_", ctypes.POINTER(ctypes.c_void_p) * 4)]


class _Options(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("device", ctypes.c_uint32), ("lanes", ctypes.c_uint32),
                ("lane_slots", ctypes.c_uint32), ("threads", ctypes.c_uint32), ("cpu_jitter_us", ctypes.c_uint32),
                ("idle_us", ctypes.c_uint32)]


class _Stats(ctypes.Structure):
    _fields_ = [("submitted", ctypes.c_uint64), ("completed", ctypes.c_uint64), ("lanes", ctypes.c_uint32),
                ("lane_slots", ctypes.c_uint32), ("threads", ctypes.c_uint32),
                ("cross_lane_waits", ctypes.c_uint64), ("host_waits", ctypes.c_uint64),
                ("dep_prunes", ctypes.c_uint64), ("dep_drains", ctypes.c_uint64),
                ("device_batches", ctypes.c_uint64), ("device_tasks", ctypes.c_uint64),
                ("device_fetch_cycles", ctypes.c_uint64), ("device_run_cycles", ctypes.c_uint64),
                ("device_wait_cycles", ctypes.c_uint64), ("device_publish_cycles", ctypes.c_uint64),
                ("device_clock_khz", ctypes.c_uint32), ("device_launches", ctypes.c_uint64)]


def _candidates():
    env = os.environ.get("TESSERA_RT_LIBRARY")
    if env:
        yield env
        return
    here = pathlib.Path(__file__).resolve().parent
    yield str(here / "_lib" / "libtessera-rt.so")
    repo = here.parent.parent
    for p in sorted(glob.glob(str(repo / "build" / "*" / "lib" / "libtessera-rt.so"))):
        yield p
    found = ctypes.util.find_library("tessera-rt")
    if found:
        yield found


_lib = None
_lib_path = None


def _load():
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        tried.append(path)
        if os.path.sep in path and not os.path.exists(path):
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        _declare(lib)
        _lib, _lib_path = lib, path
        return lib
    raise TesseraError("unavailable", "libtessera-rt.so not found (tried: %s); set TESSERA_RT_LIBRARY"
                       % (", ".join(tried) or "nothing"))


def library_path():
    """The libtessera-rt.so in use (loading it if need be)."""
    _load()
    return _lib_path


def _declare(lib):
    vp, u64 = ctypes.c_void_p, ctypes.c_uint64
    sigs = {
        "tsr_rt_create": ([ctypes.POINTER(_Options), ctypes.POINTER(vp)], vp),
        "tsr_rt_destroy": ([vp], vp),
        "tsr_rt_submit": ([vp, ctypes.POINTER(_Task), ctypes.c_size_t, ctypes.POINTER(u64)], vp),
        "tsr_rt_submit_group": ([vp, ctypes.POINTER(_Group), ctypes.POINTER(u64), ctypes.POINTER(u64)], vp),
        "tsr_rt_done": ([vp, u64], ctypes.c_bool),
        "tsr_rt_wait": ([vp, u64], vp),
        "tsr_rt_flush": ([vp], vp),
        "tsr_rt_park": ([vp], None),
        "tsr_rt_alloc": ([vp, ctypes.c_size_t, ctypes.POINTER(vp)], vp),
        "tsr_rt_free": ([vp, vp], None),
        "tsr_rt_upload": ([vp, vp, vp, ctypes.c_size_t], vp),
        "tsr_rt_download": ([vp, vp, vp, ctypes.c_size_t], vp),
        "tsr_rt_stats": ([vp, ctypes.POINTER(_Stats)], None),
        "tsr_rt_descriptor_bytes": ([], ctypes.c_size_t),
        "tsr_rt_op_name": ([ctypes.c_int], ctypes.c_char_p),
        "tsr_rt_register": ([vp, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)], vp),
        "tsr_rt_replace": ([vp, ctypes.c_int, ctypes.c_char_p], vp),
        "tsr_status_message": ([vp], ctypes.c_char_p),
        "tsr_status_code": ([vp], ctypes.c_int),
        "tsr_status_code_name": ([ctypes.c_int], ctypes.c_char_p),
        "tsr_status_free": ([vp], None),
    }
    for name, (args, res) in sigs.items():
        f = getattr(lib, name)
        f.argtypes = args
        f.restype = res


def _check(status):
    """Raises TesseraError for a non-NULL status (and frees it)."""
    if not status:
        return
    lib = _lib
    msg = lib.tsr_status_message(status).decode("utf-8", "replace")
    code = lib.tsr_status_code_name(lib.tsr_status_code(status)).decode()
    lib.tsr_status_free(status)
    raise TesseraError(code, msg)


_ops = None


def operators():
    """{name: code} of the builtin operators, as the library names them."""
    global _ops
    if _ops is None:
        lib = _load()
        ops, code = {}, 1
        while True:
            name = lib.tsr_rt_op_name(code).decode()
            if name == "?":
                break
            ops[name] = code
            code += 1
        _ops = ops
    return dict(_ops)


def _contiguous_strides(shape):
    strides, s = [], 1
    for n in reversed(shape):
        strides.append(s)
        s *= max(int(n), 1)
    return list(reversed(strides))


def tensor(ptr, dtype, shape, strides=None):
    """A tensor for a task: `ptr` an integer address of element [0, ...],
    `dtype` "float32", "float16" or "bfloat16", `shape` up to 8 sizes,
    `strides` in elements (default contiguous; 0 broadcasts)."""
    if dtype not in DTYPES:
        raise TesseraError("invalid_argument", "dtype %r: one of %s" % (dtype, ", ".join(DTYPES)))
    shape = [int(n) for n in shape]
    if len(shape) > MAX_DIMS:
        raise TesseraError("invalid_argument", "%d dims (at most %d)" % (len(shape), MAX_DIMS))
    strides = _contiguous_strides(shape) if strides is None else [int(s) for s in strides]
    if len(strides) != len(shape):
        raise TesseraError("invalid_argument", "%d strides for %d dims" % (len(strides), len(shape)))
    t = _Tensor()
    t.data = int(ptr) if ptr else None
    t.dtype = DTYPES[dtype]
    t.ndim = len(shape)
    for i, (n, s) in enumerate(zip(shape, strides)):
        t.sizes[i] = n
        t.strides[i] = s
    return t


_TORCH_DTYPES = {"torch.float32": "float32", "torch.float16": "float16", "torch.bfloat16": "bfloat16",
                 "torch.bool": "bool"}


def tensor_from_torch(t):
    """A tensor for a task from a PyTorch tensor (its storage, shape and
    strides; a CUDA tensor for the CUDA backend, a CPU one for the CPU
    backend). PyTorch is not imported by this module."""
    dt = _TORCH_DTYPES.get(str(t.dtype))
    if dt is None:
        raise TesseraError("invalid_argument", "dtype %s: the runtime takes float32, float16, bfloat16" % t.dtype)
    return tensor(t.data_ptr(), dt, list(t.shape), list(t.stride()))


def task(op, out, *inputs, scalars=(0.0, 0.0), dims=None, keepdim=False):
    """One task: operator `op` (a name of operators(), or the code
    Runtime.register gave) writing `out` from its input tensors (one or two
    for the builtins, the expression's arity for a JIT operator);
    `scalars` for leaky_relu, hardtanh, elu, clamp, clamp_min, clamp_max;
    `dims` (a list of input dims) for sum and mean."""
    if isinstance(op, int):
        code = op
    else:
        ops = operators()
        if op not in ops:
            raise TesseraError("invalid_argument", "unknown operator %r" % (op,))
        code = ops[op]
    if not 1 <= len(inputs) <= 4:
        raise TesseraError("invalid_argument", "%s: one to four inputs, not %d" % (op, len(inputs)))
    k = _Task()
    k.op = code
    k.scalar[0], k.scalar[1] = float(scalars[0]), float(scalars[1])
    k.out = out
    for i, t in enumerate(inputs):
        k.in_[i] = t
    if dims is not None:
        mask = 0
        for d in dims:
            nd = inputs[0].ndim
            d = int(d) + nd if int(d) < 0 else int(d)
            if not 0 <= d < nd:
                raise TesseraError("invalid_argument", "dim %s is out of range for %d dims" % (d, nd))
            mask |= 1 << d
        k.reduce_mask = mask
    k.keepdim = bool(keepdim)
    return k


class Runtime:
    """A libtessera-rt runtime. One thread at a time may submit, wait, flush."""

    def __init__(self, backend="cuda", device=0, lanes=0, lane_slots=0, threads=0, idle_us=0):
        if backend not in _BACKENDS:
            raise TesseraError("invalid_argument", "backend %r: 'cuda' or 'cpu'" % (backend,))
        if not 0 <= int(idle_us) <= 10000000:
            raise TesseraError("invalid_argument", "idle_us %r: 0 (200 us) to 10,000,000" % (idle_us,))
        lib = _load()
        o = _Options(_BACKENDS[backend], int(device), int(lanes), int(lane_slots), int(threads), 0, int(idle_us))
        h = ctypes.c_void_p()
        _check(lib.tsr_rt_create(ctypes.byref(o), ctypes.byref(h)))
        self._h = h
        self.backend = backend

    def _handle(self):
        if not self._h:
            raise TesseraError("failed_precondition", "the runtime is closed")
        return self._h

    def submit(self, tasks):
        """Submits a batch (one doorbell); returns the last task's ticket.
        One bad task refuses the whole batch."""
        tasks = list(tasks)
        arr = (_Task * len(tasks))(*tasks)
        last = ctypes.c_uint64()
        _check(_lib.tsr_rt_submit(self._handle(), arr, len(tasks), ctypes.byref(last)))
        return last.value

    def submit_packed(self, buf, count):
        """Submits `count` tasks laid out as tsr_rt_task_t in the writable
        buffer `buf` (a bytearray; what tessera.torch builds with struct,
        without a ctypes object a task); returns the last ticket."""
        if count < 0 or len(buf) < count * ctypes.sizeof(_Task):
            raise TesseraError("invalid_argument", "%d tasks do not fit %d bytes" % (count, len(buf)))
        arr = (_Task * count).from_buffer(buf) if count else None
        last = ctypes.c_uint64()
        _check(_lib.tsr_rt_submit(self._handle(), arr, count, ctypes.byref(last)))
        return last.value

    def submit_group(self, template, outs, *inputs):
        """Submits a group (tsr_rt_submit_group): len(outs) tasks of
        `template`'s operator and shape (a task(); its own pointers are not
        read), item i writing outs[i] from inputs[0][i], inputs[1][i], ...
        (integer addresses, one list per input the operator takes). The
        same result as submitting the tasks in order, for a fraction of the
        host's cost; one bad item refuses the group. Returns (first, last):
        the tickets of the group's descriptors (every item is done once
        each of them is; first > last for an empty group)."""
        outs = list(outs)
        n = len(outs)
        if not 1 <= len(inputs) <= 4:
            raise TesseraError("invalid_argument", "one to four lists of inputs, not %d" % len(inputs))
        g = _Group()
        g.task = template
        g.count = n
        keep = [(ctypes.c_void_p * max(n, 1))(*[int(p) if p else None for p in outs])]
        for k, ptrs in enumerate(inputs):
            ptrs = list(ptrs)
            if len(ptrs) != n:
                raise TesseraError("invalid_argument", "inputs[%d] has %d pointers for %d outputs" % (k, len(ptrs), n))
            keep.append((ctypes.c_void_p * max(n, 1))(*[int(p) if p else None for p in ptrs]))
        g.out = ctypes.cast(keep[0], ctypes.POINTER(ctypes.c_void_p))
        for k in range(1, len(keep)):
            g.in_[k - 1] = ctypes.cast(keep[k], ctypes.POINTER(ctypes.c_void_p))
        first, last = ctypes.c_uint64(), ctypes.c_uint64()
        _check(_lib.tsr_rt_submit_group(self._handle(), ctypes.byref(g), ctypes.byref(first), ctypes.byref(last)))
        return first.value, last.value

    def register(self, expression):
        """A JIT operator computing `expression` over inputs A, B, C, D
        ("A * B + C"); returns its op code for task()."""
        op = ctypes.c_int()
        _check(_lib.tsr_rt_register(self._handle(), expression.encode(), ctypes.byref(op)))
        return op.value

    def replace(self, op, expression):
        """Hot swap: tasks submitted from now on compute `expression`."""
        _check(_lib.tsr_rt_replace(self._handle(), int(op), expression.encode()))

    def done(self, ticket):
        return bool(_lib.tsr_rt_done(self._handle(), int(ticket)))

    def wait(self, ticket):
        _check(_lib.tsr_rt_wait(self._handle(), int(ticket)))

    def flush(self):
        _check(_lib.tsr_rt_flush(self._handle()))

    def park(self):
        """Hands the device to other kernels: the persistent kernel ends once
        what is posted has run, not after its idle time (tsr_rt_park)."""
        _lib.tsr_rt_park(self._handle())

    def alloc(self, nbytes):
        p = ctypes.c_void_p()
        _check(_lib.tsr_rt_alloc(self._handle(), int(nbytes), ctypes.byref(p)))
        return p.value

    def free(self, ptr):
        _lib.tsr_rt_free(self._handle(), ptr)

    def upload(self, ptr, data):
        """Copies bytes-like `data` to address `ptr`."""
        buf = (ctypes.c_char * len(data)).from_buffer_copy(bytes(data))
        _check(_lib.tsr_rt_upload(self._handle(), ptr, buf, len(data)))

    def download(self, ptr, nbytes):
        buf = (ctypes.c_char * int(nbytes))()
        _check(_lib.tsr_rt_download(self._handle(), buf, ptr, int(nbytes)))
        return bytes(buf)

    def stats(self):
        s = _Stats()
        _lib.tsr_rt_stats(self._handle(), ctypes.byref(s))
        return {f: getattr(s, f) for f, _ in _Stats._fields_}

    @staticmethod
    def descriptor_bytes():
        return _load().tsr_rt_descriptor_bytes()

    def close(self):
        """Runs everything submitted, then stops; raises the first task error."""
        if self._h:
            h, self._h = self._h, None
            _check(_lib.tsr_rt_destroy(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - a destructor must not raise
            pass
