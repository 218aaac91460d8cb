"""tessera.optim: torch.optim's steps through the native engine.

While a native scheduler is active (tessera.torch.scheduler_context), the
functional forms of torch.optim's Adam, AdamW, SGD (with momentum), RMSprop
(without momentum, not centered) and Adagrad, the single-tensor and the
foreach ones alike, hand their step to the engine
(`torch.ops.tessera.adam_step`, `sgd_step`, `rms_step`:
python/csrc/capture.cpp). The engine runs the update in few passes (Adam
three, SGD, RMSprop and Adagrad two), each one group
of tasks over every parameter, and advances the step counters in host
memory: no Python between the operations, no wait for the device. The
results are the foreach form's within float rounding. The classes'
_init_group (SGD, Adam, AdamW's where it has its own) is replaced too,
while a scheduler is active: it gathers the same lists without Python per
parameter (below), or runs PyTorch's own for any case it does not cover.

What it does not take runs as PyTorch wrote it (its operations still go
through the engine one by one): amsgrad, capturable, differentiable,
complex parameters, a tensor lr or betas, a grad scaler's inf checks,
sparse gradients, SGD without momentum, RMSprop with momentum or centered,
and a step on another thread than the scheduler's. SGD's first step makes the momentum buffers here, as
PyTorch's does (a copy of the gradient).

install() wraps the functions (once per process; the wrappers hand over
only while a native scheduler is active on the calling thread, so they
cost one check otherwise), uninstall() puts PyTorch's back."""
import operator
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
_RMS_OFF = ("momentum", "centered", "differentiable", "capturable", "has_complex")
_RMS_KNOWN = set(_RMS_OFF) | {"lr", "alpha", "eps", "weight_decay", "maximize", "foreach"}
_ADAGRAD_OFF = ("has_sparse_grad", "differentiable", "has_complex")
_ADAGRAD_KNOWN = set(_ADAGRAD_OFF) | {"lr", "weight_decay", "lr_decay", "eps", "maximize", "grad_scale", "found_inf"}


def _numbers(*xs):
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)


def _adam_wrapper(orig, decoupled_default):
    def step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *extra, **kw):
        ok = (not any(e is not None for e in extra) and kw.keys() <= _ADAM_KNOWN
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
        if (params and _owner == threading.get_ident() and kw.get("momentum")
                and not any(e is not None for e in extra) and kw.keys() <= _SGD_KNOWN and not kw.get("has_sparse_grad")
                and kw.get("grad_scale") is None and kw.get("found_inf") is None
                and _numbers(kw.get("lr"), kw.get("momentum"), kw.get("dampening"), kw.get("weight_decay"))):
            took, made = torch.ops.tessera.sgd_step(
                params, grads, momentum_buffer_list, float(kw["lr"]), float(kw["momentum"]),
                float(kw["dampening"]), float(kw["weight_decay"]), bool(kw.get("nesterov", False)),
                bool(kw.get("maximize", False)))
            if took:
                if made:  # the first step made them: step() writes them into the state
                    momentum_buffer_list[:] = made
                elif (_gathered.lists is not None and _gathered.lists[0] is params
                      and _gathered.lists[1] is momentum_buffer_list):
                    # lists SGD.step made and _init_group below filled from the state: the
                    # buffers were updated in place, each already its parameter's state, and
                    # step()'s loop that writes them back (a Tensor.__hash__ and two dict
                    # stores a parameter, the largest cost left in a step) would store each
                    # where it is; emptied, both lists give that loop nothing to do
                    params.clear()
                    momentum_buffer_list.clear()
                _gathered.lists = None
                return None
        return orig(params, grads, momentum_buffer_list, *extra, **kw)
    step.__wrapped__ = orig
    return step


def _rmsprop_wrapper(orig):
    # (params, grads, square_avgs, grad_avgs, momentum_buffer_list[, state_steps]): PyTorch 1.13
    # keeps RMSprop's step count in Python, later versions pass the counters
    def step(params, grads, square_avgs, grad_avgs, momentum_buffer_list, *rest, **kw):
        if (params and _owner == threading.get_ident() and len(rest) <= 1 and kw.keys() <= _RMS_KNOWN
                and not any(kw.get(k) for k in _RMS_OFF)
                and _numbers(kw.get("lr"), kw.get("alpha"), kw.get("eps"), kw.get("weight_decay"))
                and torch.ops.tessera.rms_step(
                    params, grads, square_avgs, list(rest[0]) if rest else [], float(kw["lr"]), float(kw["alpha"]),
                    float(kw["eps"]), float(kw["weight_decay"]), bool(kw.get("maximize", False)), False, 0.0)):
            return None
        return orig(params, grads, square_avgs, grad_avgs, momentum_buffer_list, *rest, **kw)
    step.__wrapped__ = orig
    return step


def _adagrad_wrapper(orig):
    def step(params, grads, state_sums, state_steps, *extra, **kw):
        if (params and _owner == threading.get_ident() and not any(e is not None for e in extra)
                and kw.keys() <= _ADAGRAD_KNOWN and not any(kw.get(k) for k in _ADAGRAD_OFF)
                and kw.get("grad_scale") is None and kw.get("found_inf") is None
                and _numbers(kw.get("lr"), kw.get("eps"), kw.get("weight_decay"), kw.get("lr_decay"))
                and torch.ops.tessera.rms_step(
                    params, grads, state_sums, state_steps, float(kw["lr"]), 0.0, float(kw["eps"]),
                    float(kw["weight_decay"]), bool(kw.get("maximize", False)), True, float(kw["lr_decay"]))):
            return None
        return orig(params, grads, state_sums, state_steps, *extra, **kw)
    step.__wrapped__ = orig
    return step


# ---- the optimizers' _init_group, without Python per parameter -------------
#
# step() gathers each group's parameters, gradients and state in
# _init_group, a Python loop that costs more than the engine's whole step
# (about 0.5 us a parameter on the H200: p.grad twice, a dict lookup through
# Tensor.__hash__, a few appends). These do the same for the common case,
# with list comprehensions, and the state's values in its own order when
# its keys are the group's parameters, identity by identity (no hashing):
# every gradient there and dense, every parameter with its state made, not
# fused, not differentiable. Anything else (the first step, a missing
# gradient, amsgrad, ...) runs PyTorch's own _init_group, which does it all
# again from the start: nothing is appended before the checks pass.


def _not_none(x):
    return x is not None


def _states(opt, ps):
    """The state dicts of the parameters ps (an empty one made for a
    parameter that has none, as PyTorch's defaultdict does)."""
    st = opt.state
    if len(st) == len(ps):
        keys = list(st)
        if all(map(operator.is_, keys, ps)):
            return list(st.values())
    return [st[p] for p in ps]


def _grads(group):
    """The group's parameters and gradients when every gradient is there
    and dense, else None."""
    ps = group["params"]
    gs = [p.grad for p in ps]
    if not ps or not all(map(_not_none, gs)) or any(g.is_sparse for g in gs):
        return None
    return ps, gs


class _Gathered(threading.local):
    lists = None  # (params, momentum_buffer_list) the last fast SGD _init_group filled on this thread


_gathered = _Gathered()


def _sgd_init_group(orig):
    def init_group(self, group, params, grads, momentum_buffer_list):
        _gathered.lists = None
        if _owner == threading.get_ident() and not group.get("fused") and not group.get("differentiable"):
            pg = _grads(group)
            if pg is not None:
                params.extend(pg[0])
                grads.extend(pg[1])
                if group["momentum"] != 0:
                    momentum_buffer_list.extend([s.get("momentum_buffer") for s in _states(self, pg[0])])
                    _gathered.lists = (params, momentum_buffer_list)
                return False
        return orig(self, group, params, grads, momentum_buffer_list)
    init_group.__wrapped__ = orig
    return init_group


def _adam_init_group(orig):
    def init_group(self, group, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *extra):
        if (_owner == threading.get_ident() and not extra and not group.get("fused") and not group.get("amsgrad")
                and not group.get("differentiable") and not group.get("capturable")
                and not torch.is_tensor(group.get("lr"))):
            pg = _grads(group)
            if pg is not None and not any(map(torch.is_complex, pg[0])):
                sts = _states(self, pg[0])
                if all(sts):  # every state made (the first step makes them: PyTorch's code)
                    params.extend(pg[0])
                    grads.extend(pg[1])
                    exp_avgs.extend([s["exp_avg"] for s in sts])
                    exp_avg_sqs.extend([s["exp_avg_sq"] for s in sts])
                    state_steps.extend([s["step"] for s in sts])
                    return False
        return orig(self, group, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *extra)
    init_group.__wrapped__ = orig
    return init_group


def _targets():
    import importlib
    out = []
    for modname, names, wrap in (
            ("torch.optim.adam", ("_single_tensor_adam", "_multi_tensor_adam"), lambda f: _adam_wrapper(f, False)),
            ("torch.optim.adamw", ("_single_tensor_adamw", "_multi_tensor_adamw"), lambda f: _adam_wrapper(f, True)),
            ("torch.optim.sgd", ("_single_tensor_sgd", "_multi_tensor_sgd"), _sgd_wrapper),
            ("torch.optim.rmsprop", ("_single_tensor_rmsprop", "_multi_tensor_rmsprop"), _rmsprop_wrapper),
            ("torch.optim.adagrad", ("_single_tensor_adagrad", "_multi_tensor_adagrad"), _adagrad_wrapper)):
        try:
            mod = importlib.import_module(modname)
        except ImportError:
            continue
        for n in names:
            f = getattr(mod, n, None)
            if callable(f):
                out.append((mod, n, wrap))
    # the classes' _init_group (a subclass that defines its own gets its own wrapper)
    for cls, wrap in ((getattr(torch.optim, "SGD", None), _sgd_init_group),
                      (getattr(torch.optim, "Adam", None), _adam_init_group),
                      (getattr(torch.optim, "AdamW", None), _adam_init_group)):
        if cls is not None and callable(cls.__dict__.get("_init_group")):
            out.append((cls, "_init_group", wrap))
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
