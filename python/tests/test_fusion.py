"""tessera.fusion: planning captured elementwise work into tasks (pure
Python: no PyTorch, no library)."""
import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tessera import fusion  # noqa: E402
from tessera.fusion import Leaf, Node  # noqa: E402


class T:
    """A stand-in tensor."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


def leaf(name):
    return Leaf(T(name), name)


def held(fn, args, keep):
    """A node whose fresh result the program still holds (in `keep`)."""
    t = T(fn)
    keep.append(t)
    return Node(fn, args, (4,), "float32", ref=lambda: t)


def dropped(fn, args):
    return Node(fn, args, (4,), "float32", ref=lambda: None)


class Alloc:
    def __init__(self):
        self.made = []

    def __call__(self, node):
        t = T("tmp%d" % len(self.made))
        self.made.append(node)
        return t


class Plan(unittest.TestCase):
    def test_nodes_that_round_are_never_fused(self):
        """A half-precision chain rounds after every operation, as PyTorch's
        operators do: each node is its own step; the float32 node after it
        still fuses what follows (nothing here)."""
        keep = []
        a, b = leaf("a"), leaf("b")
        x = Node("mul", [a, 3.0], (4,), "bfloat16", ref=lambda: None)
        y = Node("add", [x, b], (4,), "bfloat16", ref=lambda: None)
        z = Node("relu", [y], (4,), "bfloat16", ref=lambda: None)
        out = Node("sigmoid", [z], (4,), "bfloat16", ref=lambda: keep[0] if keep else None)
        keep.append(T("out"))
        alloc = Alloc()
        steps = fusion.plan([x, y, z, out], alloc, rounds=lambda n: n.dtype != "float32")
        self.assertEqual(len(steps), 4)
        self.assertEqual(len(alloc.made), 3)  # x, y and z get temporaries
        self.assertEqual([s.kind for s in steps[1:]], ["builtin", "builtin", "builtin"])
        # the same chain in float32 (or with no rule) is one expression
        steps = fusion.plan([x, y, z, out], Alloc())
        self.assertEqual(len(steps), 1)
        self.assertEqual(steps[0].kind, "expr")

    def test_a_chain_of_dropped_results_is_one_expression(self):
        keep = []
        a, b, c, d = leaf("a"), leaf("b"), leaf("c"), leaf("d")
        x = dropped("add", [a, b])
        y = dropped("mul", [x, c])
        z = dropped("relu", [y])
        w = dropped("sigmoid", [z])
        out = held("div", [w, d], keep)
        steps = fusion.plan([x, y, z, w, out], Alloc())
        self.assertEqual(len(steps), 1)
        s = steps[0]
        self.assertEqual(s.kind, "expr")
        self.assertEqual(s.text, "div(sigmoid(relu(mul(add(A, B), C))), D)")
        self.assertEqual([i.key for i in s.inputs], ["a", "b", "c", "d"])
        self.assertEqual(s.fused, 5)
        self.assertIs(s.node.out, keep[0])

    def test_a_held_result_is_written_and_read_as_an_input(self):
        keep = []
        a, b = leaf("a"), leaf("b")
        x = held("add", [a, b], keep)
        y = held("relu", [x], keep)
        steps = fusion.plan([x, y], Alloc())
        self.assertEqual([s.kind for s in steps], ["builtin", "builtin"])
        self.assertEqual(steps[0].op, "add")
        self.assertIs(steps[1].inputs[0].tensor, keep[0])

    def test_one_builtin_with_its_scalars(self):
        keep = []
        n = held("hardtanh", [leaf("a"), -0.5, 2.0], keep)
        (s,) = fusion.plan([n], Alloc())
        self.assertEqual((s.kind, s.op, s.scalars), ("builtin", "hardtanh", (-0.5, 2.0)))

    def test_a_constant_operand_makes_an_expression(self):
        keep = []
        n = held("add", [leaf("a"), -2.5], keep)
        (s,) = fusion.plan([n], Alloc())
        self.assertEqual((s.kind, s.text), ("expr", "add(A, (-2.5))"))

    def test_the_same_leaf_is_one_input(self):
        keep = []
        a = leaf("a")
        x = dropped("mul", [a, a])
        y = held("add", [x, Leaf(a.tensor, "a")], keep)
        (s,) = fusion.plan([x, y], Alloc())
        self.assertEqual(s.text, "add(mul(A, A), A)")
        self.assertEqual(len(s.inputs), 1)

    def test_nothing_for_a_result_nobody_reads_or_holds(self):
        x = dropped("add", [leaf("a"), leaf("b")])
        self.assertEqual(fusion.plan([x], Alloc()), [])

    def test_a_result_read_twice_is_written_once(self):
        keep = []
        alloc = Alloc()
        x = dropped("exp", [leaf("a")])
        y = held("add", [x, leaf("b")], keep)
        z = held("mul", [x, leaf("c")], keep)
        steps = fusion.plan([x, y, z], alloc)
        self.assertEqual(len(steps), 3)
        self.assertEqual(alloc.made, [x])  # its result had been dropped: a temporary
        self.assertEqual(steps[0].op, "exp")

    def test_more_than_four_inputs_split(self):
        keep = []
        alloc = Alloc()
        names = "abcdefghij"
        acc = dropped("add", [leaf("a"), leaf("b")])
        nodes = [acc]
        for k in names[2:]:
            acc = dropped("add", [acc, leaf(k)])
            nodes.append(acc)
        final = held("relu", [acc], keep)
        nodes.append(final)
        steps = fusion.plan(nodes, alloc)
        self.assertGreater(len(steps), 1)
        for s in steps:
            self.assertLessEqual(len(s.inputs), fusion.MAX_INPUTS)
        self.assertIs(steps[-1].node, final)
        # every leaf is read by some step
        read = {i.key for s in steps for i in s.inputs}
        self.assertTrue(set(names) <= read)

    def test_a_long_chain_is_cut_within_the_limits(self):
        keep = []
        alloc = Alloc()
        x = leaf("x")
        nodes = []
        for i in range(200):
            x = dropped("sigmoid" if i % 2 else "tanh", [x])
            nodes.append(x)
        last = held("relu", [x], keep)
        nodes.append(last)
        steps = fusion.plan(nodes, alloc)
        self.assertGreaterEqual(len(steps), 201 // fusion.MAX_DEPTH)
        self.assertEqual(sum(s.fused for s in steps), 201)
        for s in steps:
            self.assertLessEqual(s.text.count("("), fusion.MAX_DEPTH)
        self.assertEqual(len(alloc.made), len(steps) - 1)

    def test_a_reduction_reads_a_written_result(self):
        alloc = Alloc()
        x = dropped("mul", [leaf("a"), leaf("b")])
        total = T("total")
        r = Node("sum", [x], (1,), "float32", ref=lambda: total, dims=[0])
        steps = fusion.plan([x, r], alloc)
        self.assertEqual([s.kind for s in steps], ["builtin", "reduce"])
        self.assertEqual(alloc.made, [x])
        self.assertEqual(steps[1].dims, [0])

    def test_a_write_into_an_existing_tensor_is_always_a_step(self):
        target = T("out")
        x = dropped("neg", [leaf("a")])
        w = Node("add", [x, leaf("b")], (4,), "float32", target=target)
        (s,) = fusion.plan([x, w], Alloc())
        self.assertIs(s.node.out, target)
        self.assertEqual(s.text, "add(neg(A), B)")

    def test_unknown_function(self):
        with self.assertRaises(ValueError):
            Node("frobnicate", [leaf("a")], (1,), "float32")


class Constants(unittest.TestCase):
    def test_float32_round_trip(self):
        for c in (0.1, 1.0, -3.75, 1e-30, 3.0e38, 123456789.0, 2.0 ** -149):
            t = fusion.const_text(c)
            v = float(t.strip("()"))
            self.assertEqual(struct.pack("f", v), struct.pack("f", c))

    def test_no_spelling(self):
        for c in (float("inf"), float("-inf"), float("nan"), 1e39, -1e300):
            self.assertIsNone(fusion.const_text(c))

    def test_negative_in_brackets(self):
        self.assertEqual(fusion.const_text(-2), "(-2.0)")


if __name__ == "__main__":
    unittest.main()
