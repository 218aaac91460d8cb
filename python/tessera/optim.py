"""tessera.optim: torch.optim's steps through the native engine.

While a native scheduler is active (tessera.torch.scheduler_context), the
functional forms of torch.optim's Adam, AdamW and SGD (with momentum), the
single-tensor and the foreach ones alike, hand their step to the engine
(`torch.ops.tessera.adam_step`, `sgd_step`: python/csrc/capture.cpp). The
engine runs the foreach form's operations, each one group of tasks over
every parameter, and advances the step counters in host memory: no Python
between the operations, no wait for the device. The results are the
foreach form's (equal to the single-tensor form's within float rounding).

What it does not take runs as PyTorch wrote it (its operations still go
through the engine one by one): amsgrad, capturable, differentiable,
complex parameters, a tensor lr or betas, a grad scaler's inf checks,
sparse gradients, SGD without momentum, and a step on another thread than
the scheduler's. SGD's first step makes the momentum buffers here, as
PyTorch's does (a copy of the gradient).

install() wraps the functions (once per process; the wrappers hand over
only while a native scheduler is active on the calling thread, so they
cost one check otherwise), uninstall() puts PyTorch's back."""
import threading

import torch

__all__ = ["install", "uninstall", "installed", "activate"]

_lock = threading.Lock()
_saved = {}  # (module, name) -> the original function
_owner = None  # the thread whose native scheduler is active (set by tessera.torch)


def activate(thread_id):
    """The native scheduler of thread `thread_id` is active (None: none is)."""
    global _owner
    _owner = thread_id

# keyword arguments of the functional steps that must have these values
_ADAM_OFF = ("amsgrad", "capturable", "differentiable", "has_complex")
_ADAM_KNOWN = set(_ADAM_OFF) | {"beta1", "beta2", "lr", "weight_decay", "eps", "maximize",
                                "decoupled_weight_decay", "foreach", "fused", "grad_scale", "found_inf"}
_SGD_KNOWN = {"weight_decay", "momentum", "lr", "dampening", "nesterov", "maximize", "has_sparse_grad",
              "foreach", "fused", "grad_scale", "found_inf"}


def _numbers(*xs):
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)


def _adam_wrapper(orig, decoupled_default):
    def step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *extra, **kw):
        ok = (not any(e is not None for e in extra) and set(kw) <= _ADAM_KNOWN
              and not any(kw.get(k) for k in _ADAM_OFF)
              and kw.get("grad_scale") is None and kw.get("found_inf") is None
              and _numbers(kw.get("lr"), kw.get("beta1"), kw.get("beta2"), kw.get("eps"), kw.get("weight_decay")))
        if ok and params and _owner == threading.get_ident():
            took = torch.ops.tessera.adam_step(
                params, grads, exp_avgs, exp_avg_sqs, state_steps, float(kw["lr"]), float(kw["beta1"]),
                float(kw["beta2"]), float(kw["eps"]), float(kw["weight_decay"]),
                bool(kw.get("decoupled_weight_decay", decoupled_default)), bool(kw.get("maximize", False)))
            if took:
                return None
        return orig(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *extra, **kw)
    step.__wrapped__ = orig
    return step


def _sgd_wrapper(orig):
    def step(params, grads, momentum_buffer_list, *extra, **kw):
        ok = (not any(e is not None for e in extra) and set(kw) <= _SGD_KNOWN and not kw.get("has_sparse_grad")
              and kw.get("grad_scale") is None and kw.get("found_inf") is None
              and _numbers(kw.get("lr"), kw.get("momentum"), kw.get("dampening"), kw.get("weight_decay"))
              and kw.get("momentum"))
        if ok and params and _owner == threading.get_ident():
            bufs = torch.ops.tessera.sgd_step(
                params, grads, momentum_buffer_list, float(kw["lr"]), float(kw["momentum"]),
                float(kw["dampening"]), float(kw["weight_decay"]), bool(kw.get("nesterov", False)),
                bool(kw.get("maximize", False)))
            if bufs:
                if momentum_buffer_list[0] is None:  # the first step made them
                    momentum_buffer_list[:] = bufs
                return None
        return orig(params, grads, momentum_buffer_list, *extra, **kw)
    step.__wrapped__ = orig
    return step


def _targets():
    import importlib
    out = []
    for modname, names, wrap in (
            ("torch.optim.adam", ("_single_tensor_adam", "_multi_tensor_adam"), lambda f: _adam_wrapper(f, False)),
            ("torch.optim.adamw", ("_single_tensor_adamw", "_multi_tensor_adamw"), lambda f: _adam_wrapper(f, True)),
            ("torch.optim.sgd", ("_single_tensor_sgd", "_multi_tensor_sgd"), _sgd_wrapper)):
        try:
            mod = importlib.import_module(modname)
        except ImportError:
            continue
        for n in names:
            f = getattr(mod, n, None)
            if callable(f):
                out.append((mod, n, wrap))
    return out


def install():
    """Wraps torch.optim's Adam, AdamW and SGD steps (idempotent). False when
    the engine's operators are not there (libtessera-torch.so not loaded)."""
    try:
        torch.ops.tessera.adam_step
    except (AttributeError, RuntimeError):
        return False
    with _lock:
        for mod, name, wrap in _targets():
            if (mod, name) in _saved:
                continue
            orig = getattr(mod, name)
            _saved[(mod, name)] = orig
            setattr(mod, name, wrap(orig))
    return True


def uninstall():
    """Puts PyTorch's functions back."""
    with _lock:
        for (mod, name), orig in _saved.items():
            setattr(mod, name, orig)
        _saved.clear()


def installed():
    return bool(_saved)
