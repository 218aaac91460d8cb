"""tessera.fusion: planning the lazily captured elementwise work of the
PyTorch front (tessera.torch) into libtessera-rt tasks. Pure Python: no
PyTorch, no library; the front gives it nodes and callbacks.

A captured operation is a Node: an expression function of the runtime's
JIT grammar (docs/runtime.md; "add", "relu", "leaky_relu", ...) over
arguments that are other Nodes, Leafs (real tensors: inputs that exist)
or float constants. A Node either writes an existing tensor (out= or in
place: `target`) or a fresh one that the user may still hold (`ref()`,
None once the user dropped it), or it is a reduction (sum or mean of one
argument over dims).

plan() turns the nodes, in program order, into Steps:
  - a node is materialized (gets a task that writes its tensor) when it
    writes an existing tensor, when its fresh tensor is still held, when a
    reduction reads it, when two or more nodes read it, or when inlining
    it would pass the limits of one expression (4 inputs, MAX_DEPTH,
    MAX_NODES); a node that is none of these is inlined into its readers
    (fused), and a node nobody reads or holds is dropped; a node whose
    value rounds to a type narrower than float32 is always materialized
    (it rounds where PyTorch would);
  - a materialized node becomes a "builtin" step when it is one builtin
    operator over tensors (the runtime's own op code, no compile), else an
    "expr" step: the expression text over inputs A..D, which the front
    registers once as a JIT operator (cached by text).
A materialized node whose fresh tensor was dropped gets one from
`alloc(node)` (a temporary).
"""
import math
import struct

__all__ = ["Leaf", "Node", "Step", "plan", "const_text", "MAX_INPUTS", "MAX_DEPTH", "MAX_NODES", "BUILTIN",
           "ARITY"]

MAX_INPUTS = 4      # A, B, C, D
MAX_DEPTH = 24      # function calls inside one another (the runtime's limit is 64, counted more ways)
MAX_NODES = 120     # expression nodes: calls, inputs, constants (the runtime's limit is 256)
FLOAT_MAX = 3.4028234663852886e38

# the expression functions the front emits, with their tensor-argument count
# and their scalar parameters after them (the JIT grammar's order)
ARITY = {
    "add": (2, 0), "sub": (2, 0), "mul": (2, 0), "div": (2, 0), "pow": (2, 0), "maximum": (2, 0),
    "minimum": (2, 0), "relu": (1, 0), "sigmoid": (1, 0), "tanh": (1, 0), "exp": (1, 0), "log": (1, 0),
    "sqrt": (1, 0), "abs": (1, 0), "sin": (1, 0), "cos": (1, 0), "neg": (1, 0), "gelu": (1, 0),
    "hardsigmoid": (1, 0), "hardswish": (1, 0), "softplus": (1, 0), "leaky_relu": (1, 1), "elu": (1, 1),
    "clamp_min": (1, 1), "clamp_max": (1, 1), "clamp": (1, 2), "hardtanh": (1, 2),
}
# functions that are also the runtime's builtin operators when every tensor
# argument is a tensor (not a constant, not an inlined node): name -> the
# builtin's name and how its scalar parameters map to the task's scalars
BUILTIN = {name: name for name in ARITY if name != "neg"}


def const_text(c):
    """A constant as the JIT grammar reads it: the float32 nearest to `c`,
    printed so that the parser reads back the same float32; None when the
    grammar has no spelling for it (inf, NaN, beyond float32's range)."""
    c = float(c)
    if math.isnan(c) or math.isinf(c) or abs(c) > FLOAT_MAX:
        return None
    f = struct.unpack("f", struct.pack("f", c))[0]
    return repr(f) if f >= 0 else "(" + repr(f) + ")"


class Leaf:
    """A tensor that exists: `tensor` is whatever the front passes to
    tasks; `key` identifies the same view (two Leafs with one key are one
    input of an expression)."""
    __slots__ = ("tensor", "key")

    def __init__(self, tensor, key):
        self.tensor = tensor
        self.key = key


class Node:
    """One captured operation; see the module's text. `fn` a key of ARITY,
    or "sum" / "mean" with `dims` and `keepdim` (args: one tensor)."""
    __slots__ = ("fn", "args", "target", "ref", "shape", "dtype", "dims", "keepdim", "readers", "out",
                 "materialized", "depth", "size", "leaves")

    def __init__(self, fn, args, shape, dtype, target=None, ref=None, dims=None, keepdim=False):
        if fn not in ARITY and fn not in ("sum", "mean"):
            raise ValueError("unknown function %r" % (fn,))
        self.fn = fn
        self.args = list(args)
        self.target = target
        self.ref = ref
        self.shape = tuple(shape)
        self.dtype = dtype
        self.dims = dims
        self.keepdim = keepdim
        self.readers = 0
        self.out = None
        self.materialized = False

    @property
    def reduction(self):
        return self.fn in ("sum", "mean")

    def held(self):
        """The tensor this node writes, if it exists now."""
        if self.target is not None:
            return self.target
        return self.ref() if self.ref is not None else None


class Step:
    """A task to submit: kind "builtin" (`op` a builtin operator's name,
    `scalars`), "expr" (`text` over `inputs`), or "reduce" (`op` "sum" or
    "mean", `dims`, `keepdim`); `inputs` are Leafs, `node` the node whose
    tensor (`node.out`) it writes."""
    __slots__ = ("kind", "node", "op", "text", "inputs", "scalars", "dims", "keepdim", "fused")

    def __init__(self, kind, node, inputs, op=None, text=None, scalars=(0.0, 0.0), dims=None, keepdim=False,
                 fused=1):
        self.kind = kind
        self.node = node
        self.inputs = inputs
        self.op = op
        self.text = text
        self.scalars = scalars
        self.dims = dims
        self.keepdim = keepdim
        self.fused = fused  # captured operations it computes

    def __repr__(self):
        what = self.text if self.kind == "expr" else self.op
        return "Step(%s %s, %d inputs)" % (self.kind, what, len(self.inputs))


def _leaf_of(node):
    return Leaf(node.out, ("node", id(node)))


def _measure(node):
    """Depth, size and distinct input keys of the node's expression with
    every unmaterialized node inlined (its arguments' figures computed
    before, in program order)."""
    depth, size, leaves = 1, 1, {}
    for a in node.args:
        if isinstance(a, Node):
            if a.materialized:
                leaves.setdefault(("node", id(a)), None)
                size += 1
            else:
                depth = max(depth, a.depth + 1)
                size += a.size
                for k in a.leaves:
                    leaves.setdefault(k, None)
        elif isinstance(a, Leaf):
            leaves.setdefault(a.key, None)
            size += 1
        else:
            size += 1
    node.depth, node.size, node.leaves = depth, size, leaves


def _fits(node):
    return len(node.leaves) <= MAX_INPUTS and node.depth <= MAX_DEPTH and node.size <= MAX_NODES


def _materialize(node, alloc):
    node.materialized = True
    node.out = node.held()
    if node.out is None:
        node.out = alloc(node)


def plan(nodes, alloc, rounds=None):
    """Steps for `nodes` (program order); see the module's text. `alloc(node)`
    returns a tensor for a node that must be materialized and whose fresh
    tensor was dropped. `rounds(node)`, when given, says that the node's
    value is rounded to a narrower type than the float32 an expression
    computes in (float16, bfloat16): such a node is always materialized,
    so it rounds where PyTorch's operator would, not once at the end of a
    fused chain (where chained rounding made a result differ from eager's
    by more than the halves' tolerance: a random program on the H100,
    2026-11-27)."""
    for n in nodes:
        n.readers = 0
        n.materialized = False
        n.out = None
    for n in nodes:
        for a in n.args:
            if isinstance(a, Node):
                a.readers += 1
    for n in nodes:
        must = n.target is not None or n.reduction or n.held() is not None or n.readers >= 2 \
            or (rounds is not None and rounds(n))
        for a in n.args:
            if isinstance(a, Node) and not a.materialized and n.reduction:
                _materialize(a, alloc)
        inlines = False
        for a in n.args:
            if type(a) is Node and not a.materialized:
                inlines = True
                break
        if not n.reduction and (inlines or not must):
            _measure(n)
            # too big to inline as a whole: materialize the largest inlined
            # argument until it fits (each one it takes out is one input)
            while not _fits(n):
                inl = [a for a in n.args if isinstance(a, Node) and not a.materialized]
                if not inl:
                    break
                big = max(inl, key=lambda a: (len(a.leaves), a.size))
                _materialize(big, alloc)
                _measure(n)
        if must:
            _materialize(n, alloc)
        elif n.readers == 0:
            pass  # nobody reads it, nobody holds it: dropped
    # the steps, in program order, of what is materialized
    steps = []
    for n in nodes:
        if n.materialized:
            steps.append(_step(n))
    return steps


def _step(node):
    if node.reduction:
        a = node.args[0]
        leaf = _leaf_of(a) if isinstance(a, Node) else a
        return Step("reduce", node, [leaf], op=node.fn, dims=node.dims, keepdim=node.keepdim)
    ntensor = ARITY[node.fn][0]
    args = node.args
    builtin = node.fn in BUILTIN
    inputs = []
    for k, a in enumerate(args):
        if not builtin:
            break
        if k < ntensor:
            if type(a) is Leaf:
                inputs.append(a)
            elif type(a) is Node and a.materialized:
                inputs.append(_leaf_of(a))
            else:
                builtin = False
        elif type(a) is Leaf or type(a) is Node:
            builtin = False
    if builtin:
        sc = (float(args[ntensor]) if len(args) > ntensor else 0.0,
              float(args[ntensor + 1]) if len(args) > ntensor + 1 else 0.0)
        return Step("builtin", node, inputs, op=BUILTIN[node.fn], scalars=sc)
    letters = {}
    inputs = []
    fused = [0]

    def text(n):
        fused[0] += 1
        parts = []
        for a in n.args:
            if isinstance(a, Node) and not a.materialized:
                parts.append(text(a))
                continue
            if isinstance(a, (Node, Leaf)):
                leaf = _leaf_of(a) if isinstance(a, Node) else a
                if leaf.key not in letters:
                    letters[leaf.key] = "ABCD"[len(inputs)]
                    inputs.append(leaf)
                parts.append(letters[leaf.key])
            else:
                parts.append(const_text(a))
        return "%s(%s)" % (n.fn, ", ".join(parts))

    t = text(node)
    return Step("expr", node, inputs, text=t, fused=fused[0])
