#!/usr/bin/env python3
"""The mutation check (issue 13): each op type's kernel broken on purpose must make the
golden test fail.

    test-mutations.py GOLDEN_RUN_MUTANT

GOLDEN_RUN_MUTANT is tests/golden-run linked with a test-only copy of the CPU kernels
compiled with SHARDSCOPE_KERNEL_MUTATIONS: $SHARDSCOPE_KERNEL_MUTATION=OpType breaks that op
type's kernel (executor-cpu-kernels.c, one plausible bug each; tests/README.md lists them).
$SHARDSCOPE_BACKWARD_MUTATION=OpType scales that op type's input gradients by 0.9.
Test 1: with no mutation the mutant binary passes the whole golden test (so a failure below
is the mutation's). Then, per op type, its forward and then its backward mutated: the golden
test, on that op type's cases (GOLDEN_ONLY), must fail. TAP; skipped without NumPy.
"""
import os
import re
import subprocess
import sys

try:
    import numpy  # noqa: F401
except ImportError:
    print("1..0 # SKIP NumPy is not installed (Debian: python3-numpy)")
    sys.exit(0)

# planner_op_type_to_string's names, the 30 op types of the rule tables.
OP_TYPES = [
    "MatMul", "BatchMatMul", "Einsum", "Add", "Sub", "Mul", "Div", "ReLU", "GeLU", "SiLU",
    "Tanh", "Exp", "Neg", "Cast", "Dropout", "Softmax", "LayerNorm", "RMSNorm", "Embedding",
    "Reshape", "Transpose", "ReduceSum", "ReduceMean", "Concat", "Split", "Slice",
    "RotaryEmbedding", "ScaledDotProductAttention", "CrossEntropyLoss", "Conv2d",
]

golden = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test-golden.py")


def run_golden(mutant, mutation, backward=False):
    env = dict(os.environ)
    for k in ("SHARDSCOPE_KERNEL_MUTATION", "SHARDSCOPE_BACKWARD_MUTATION", "GOLDEN_ONLY"):
        env.pop(k, None)
    if mutation:
        env["SHARDSCOPE_BACKWARD_MUTATION" if backward else "SHARDSCOPE_KERNEL_MUTATION"] = mutation
        env["GOLDEN_ONLY"] = mutation
    p = subprocess.run([sys.executable, golden, mutant], env=env, capture_output=True,
                       text=True)
    failed = re.findall(r"^not ok \d+ - .*\((\w+)\):", p.stdout, re.M)
    return p.returncode, failed, p.stdout + p.stderr


def main():
    mutant = sys.argv[1]
    print("1..%d" % (2 * len(OP_TYPES) + 1))
    rc, failed, out = run_golden(mutant, None)
    ok = rc == 0 and not failed
    print("%s 1 - unmutated: the golden test passes%s" % (
        "ok" if ok else "not ok", "" if ok else " (%s)" % out.strip()[-300:].replace("\n", " ")))
    bad = not ok
    n = 1
    for t in OP_TYPES:
        for backward in (False, True):
            rc, failed, out = run_golden(mutant, t, backward)
            caught = rc != 0 and len(failed) > 0
            bad |= not caught
            n += 1
            print("%s %d - %s %s mutated: golden fails %d of its cases" % (
                "ok" if caught else "not ok", n, t, "backward" if backward else "forward",
                len(failed)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
