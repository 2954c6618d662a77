#!/usr/bin/env python3
"""Issue 14: the MindSpore exports read by MindSpore itself (2.x, CPU).

For llama, qwen2 and mistral (tests/frameworks/test-hf-reference.py's shrunk configs) under
megatron and megatron-sp on dp=2,tp=2,

    shardscope-cli export PLAN --format mindspore -o strategy.json
    shardscope-cli export PLAN --format mindspore-shard -o shard_plan.py

and then, in MindSpore:
- mindspore.build_searched_strategy() reads strategy.json: one layout per parameter, with the
  plan's device matrix and tensor map;
- every key of parallel_strategy_item is <Primitive>_<parameter>, as MindSpore looks strategies
  up: the primitive exists in mindspore.ops, the parameter is in parallel_layout_item, the
  strategy has no more inputs than the primitive's input_names, the parameter's entry sits at
  the primitive's own input position (Gather: the table first; MatMul: the weight second) with
  the splits of the parameter's own layout, and the other inputs have the primitive's ranks (MatMul's x is 2-D);
  Primitive.shard() accepts it;
- shard_plan.apply() runs over a cell tree with the primitives where SHARDS says, and each
  .shard() call is accepted (Layout objects where a dim is split by two axes).

MindSpore's CPU backend refuses semi_auto_parallel compiles ("only support Ascend/GPU"), so no
compile applies the strategies here. Runs in $SHARDSCOPE_FRAMEWORK_VENV/mindspore; skipped, with
the reason, where that Python cannot import mindspore. TAP.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV = os.environ.get("SHARDSCOPE_FRAMEWORK_VENV") or os.path.join(ROOT, ".venv-frameworks")
MS_PYTHON = os.path.join(VENV, "mindspore", "bin", "python")
TORCH_PYTHON = os.path.join(VENV, "torch", "bin", "python")
CLI = os.environ.get("SHARDSCOPE_CLI")
MESH = "dp=2,tp=2"
# A mesh where the table (vocab over tp=4) and the ids (batch over dp=2) split differently, so a
# Gather with its inputs swapped shows.
MESH_WIDE = "dp=2,tp=4"
MODELS = ["llama", "qwen2", "mistral"]
POLICIES = ["megatron", "megatron-sp", "dp"]  # dp: batch over dp+tp, a Layout per input
# Where the parameter sits among the primitive's inputs, and every input's rank.
PRIMITIVES = {"MatMul": (1, (2, 2)), "Gather": (0, (2, 2)), "RmsNorm": (1, (3, 1)),
              "LayerNorm": (1, (3, 1, 1)), "Add": (1, (2, 1))}


# Pipelined plans (issue 18) of a 4-layer llama: 1F1B, GPipe (MindSpore runs it only as an
# interleaved schedule) and 2 virtual stages.
PIPELINES = [("llama4", "megatron", "pp=2,tp=2", ["--micro-batches", "4", "--schedule", s])
             for s in ("1f1b", "gpipe")] + [
    ("llama4", "megatron", "pp=2,tp=2", ["--micro-batches", "4", "--virtual-stages", "2"])]


def want_pipeline(summary, mesh):
    """What MindSpore should read from the plan's own stages (summary.stages): each cell's
    stage (the layers, the embedding with layer 0, the final norm and head with the last),
    each chunk's segment, and the context; {} without a pipeline."""
    if "pipeline" not in summary:
        return {}
    pipe = summary["pipeline"]
    cells, segments = {}, {}
    for stage in summary["stages"]:
        for k, part in enumerate(stage["layers"].split(",")):
            a, _, b = part.partition("-")
            for layer in range(int(a), int(b or a) + 1):
                cells["model.layers.%d" % layer] = stage["stage"]
                segments["model.layers.%d" % layer] = k
    last = "model.layers.%d" % (pipe["layers"] - 1)
    for name, at in (("model.embed_tokens", "model.layers.0"), ("model.norm", last),
                     ("lm_head", last)):
        cells[name], segments[name] = cells[at], segments[at]
    sizes = dict(part.split("=") for part in mesh.split(","))
    return {"cells": cells, "segments": segments, "stages": pipe["stages"],
            "micro_batches": pipe["micro_batches"],
            "interleave": pipe["schedule"] != "1f1b",
            "scheduler": "gpipe" if pipe["schedule"] == "gpipe" else "1f1b",
            "stage_devices": len(summary["stages"][0]["devices"])}


def skip(reason):
    print("1..0 # SKIP %s" % reason)
    sys.exit(0)


CHECK = r'''
import inspect, json, sys
import mindspore as ms
from mindspore import nn, ops
from mindspore.ops.operations import nn_ops
from mindspore.ops.auto_generate import gen_ops_prim
def primitive(name):
    return getattr(ops, name, None) or getattr(nn_ops, name, None) or getattr(gen_ops_prim, name)
strategy_file, shard_file = sys.argv[1:3]
PRIMITIVES = json.loads(sys.argv[3])
out = []
layouts = ms.build_searched_strategy(strategy_file)
data = json.load(open(strategy_file))
items, plan_layouts = data["parallel_strategy_item"], data["parallel_layout_item"]
out.append((sorted(layouts) == sorted(plan_layouts)
            and all(list(layouts[p].dev_matrix[0].dim) == plan_layouts[p]["dev_matrix"]
                    and list(layouts[p].tensor_map[0].dim) == plan_layouts[p]["tensor_map"]
                    for p in layouts),
            "build_searched_strategy reads %d parameter layouts as written" % len(layouts)))
bad = []
for key, item in items.items():
    prim_name, _, param = key.partition("_")
    strategy = tuple(tuple(d) for d in item["parallel_strategy"])
    if prim_name not in PRIMITIVES or not hasattr(ops, prim_name) or param not in plan_layouts:
        bad.append("%s: no such primitive or parameter" % key)
        continue
    at, ranks = PRIMITIVES[prim_name]
    prim = getattr(ops, prim_name)(transpose_b=True) if prim_name == "MatMul" else getattr(ops, prim_name)()
    names = list(inspect.signature(type(prim).__call__).parameters)[1:]
    if len(strategy) > len(names) or tuple(len(s) for s in strategy) != tuple(ranks):
        bad.append("%s: %d inputs of ranks %s for %s %s" % (key, len(strategy), [len(s) for s in strategy], prim_name, names))
        continue
    lay = plan_layouts[param]
    dev, tmap = lay["dev_matrix"], lay["tensor_map"]
    want = tuple(1 if m < 0 else dev[len(dev) - 1 - m] for m in tmap)
    if strategy[at] != want:
        bad.append("%s: input %d (%s) is split %s, the parameter's layout %s"
                   % (key, at, names[at], strategy[at], want))
        continue
    try:
        prim.shard(strategy)
    except Exception as e:
        bad.append("%s: shard() refused %s: %s" % (key, strategy, e))
out.append((not bad and len(items) > 0,
            "%d strategies keyed <Primitive>_<parameter>, inputs in the primitive's order, "
            "shard() accepts each%s" % (len(items), "" if not bad else ": " + "; ".join(bad[:4]))))
spec = importlib_util = __import__("importlib.util").util
spec = importlib_util.spec_from_file_location("shard_plan", shard_file)
mod = importlib_util.module_from_spec(spec)
spec.loader.exec_module(mod)

class Node:
    pass

net = Node()
for op, path, attr, prim_name, strategy in mod.SHARDS:
    cell = net
    for part in path.split(".") if path else ():
        if part.isdigit():
            lst = cell.__dict__.setdefault("_items", {})
            cell = lst.setdefault(int(part), Node())
        else:
            cell = cell.__dict__.setdefault(part, Node())
    if prim_name == "FlashAttentionScore":  # as MindFormers imports it
        prim = nn_ops.FlashAttentionScore(head_num=1, input_layout="BNSD")
    else:
        prim = primitive(prim_name)()
    setattr(cell, attr, prim)
Node.__getitem__ = lambda self, i: self._items[i]
try:
    n = mod.apply(net)
    out.append((n == len(mod.SHARDS) and n > 0, "shard_plan.apply() made %d .shard() calls" % n))
except Exception as e:
    out.append((False, "shard_plan.apply() failed: %s: %s" % (type(e).__name__, e)))
if hasattr(mod, "PIPELINE_STAGES"):
    # A pipelined plan (issue 18): MindSpore's own context and Pipeline wrapper take its stages.
    want = json.loads(sys.argv[4])
    ms.set_auto_parallel_context(**mod.PARALLEL_CONTEXT)
    ctx = (ms.get_auto_parallel_context("pipeline_stages"),
           ms.get_auto_parallel_context("pipeline_interleave"),
           ms.get_auto_parallel_context("pipeline_scheduler"))
    out.append((ctx == (want["stages"], want["interleave"], want["scheduler"]),
                "set_auto_parallel_context(**PARALLEL_CONTEXT) takes pipeline_stages, "
                "pipeline_interleave, pipeline_scheduler = %s" % (ctx,)))

    class Box(nn.Cell):
        def construct(self, x):
            return x

    root, sizes = Box(), {}
    for name in mod.STAGES:
        parts = name.split(".")
        for k in range(1, len(parts)):
            if parts[k].isdigit():
                key = ".".join(parts[:k])
                sizes[key] = max(sizes.get(key, 0), int(parts[k]) + 1)
    names = {".".join(n.split(".")[:k]) for n in mod.STAGES for k in range(1, n.count(".") + 2)}
    for name in sorted(names, key=lambda n: n.count(".")):
        parent, _, attr = name.rpartition(".")
        cell = root
        for part in parent.split(".") if parent else ():
            cell = cell[int(part)] if part.isdigit() else getattr(cell, part)
        if attr.isdigit():
            continue
        setattr(cell, attr, nn.CellList([Box() for _ in range(sizes[name])]) if name in sizes else Box())
    try:
        mod.pipeline(root)
        got = {n: c.pipeline_stage for n, c in root.cells_and_names() if n in mod.STAGES}
        seg = {n: c.pipeline_segment for n, c in root.cells_and_names()
               if n in mod.STAGES} if mod.SEGMENTS else None
        out.append((got == want["cells"] and (mod.SEGMENTS is None or seg == want["segments"]),
                    "mindspore.parallel.nn.Pipeline(net, %d, stage_config=STAGES, "
                    "segment_config=SEGMENTS) sets each cell's pipeline_stage%s as the plan's "
                    "stages: %s" % (mod.MICRO_BATCHES, " and pipeline_segment"
                                    if mod.SEGMENTS else "", got if got != want["cells"] else
                                    "%d cells" % len(got))))
    except Exception as e:
        out.append((False, "pipeline(net) failed: %s: %s" % (type(e).__name__, str(e)[:300])))
    def cell_of(param):
        owners = [c for c in want["cells"] if param.startswith(c + ".")]
        return max(owners, key=len) if owners else None
    wrong = ["%s: stage %s, its cell %s is on %s" % (k, v["stage"], cell_of(k.partition("_")[2]),
                                                   want["cells"].get(cell_of(k.partition("_")[2])))
             for k, v in items.items()
             if v["stage"] != want["cells"].get(cell_of(k.partition("_")[2]))]
    out.append((not wrong, "strategy.json: every item's stage is its cell's stage in the plan%s"
                % ("" if not wrong else ": " + "; ".join(wrong[:3]))))
    out.append((mod.MICRO_BATCHES == want["micro_batches"] and
                all(d == 1 or a != "pp" for d, a in zip(mod.DEVICE_MATRIX, mod.ALIAS)) and
                all(dev_prod == want["stage_devices"] for dev_prod in
                    [__import__("math").prod(l["dev_matrix"]) for l in plan_layouts.values()]),
                "MICRO_BATCHES %d; device matrices of one stage's %d devices, pp left out"
                % (mod.MICRO_BATCHES, want["stage_devices"])))
print(json.dumps(out))
'''


def main():
    if not os.access(MS_PYTHON, os.X_OK):
        skip("%s is missing: make it with tools/framework-venv.sh (or set "
             "$SHARDSCOPE_FRAMEWORK_VENV)" % MS_PYTHON)
    p = subprocess.run([MS_PYTHON, "-c", "import mindspore"], capture_output=True, text=True)
    if p.returncode != 0:
        skip("%s cannot import mindspore: %s" % (MS_PYTHON, (p.stderr.strip().splitlines()
                                                             or ["?"])[-1]))
    if not os.access(TORCH_PYTHON, os.X_OK):
        skip("%s is missing: the configs are written with transformers" % TORCH_PYTHON)
    if not CLI:
        skip("$SHARDSCOPE_CLI is not set (the CLI was not built)")
    results = []
    with tempfile.TemporaryDirectory(prefix="export-mindspore-") as tmp:
        # The shrunk configs, written by test-hf-reference.py's own code in the torch venv.
        code = ("import importlib.util, sys\n"
                "spec = importlib.util.spec_from_file_location('r', %r)\n"
                "r = importlib.util.module_from_spec(spec); spec.loader.exec_module(r)\n"
                "for m in %r: r.hf_config(m).save_pretrained(%r + '/' + m)\n"
                "c = r.hf_config('llama'); c.num_hidden_layers = 4\n"
                "c.save_pretrained(%r + '/llama4')\n"
                % (os.path.join(HERE, "test-hf-reference.py"), MODELS, tmp, tmp))
        # test-hf-reference.py imports framework_venv from its folder.
        p = subprocess.run([TORCH_PYTHON, "-c", code], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=HERE))
        if p.returncode != 0:
            skip("the shrunk configs could not be written: %s" % p.stderr.strip()[-300:])
        for model, policy, mesh, extra in [(m, p, MESH, []) for m in MODELS for p in POLICIES] + [
                ("llama", "megatron", MESH_WIDE, [])] + PIPELINES:
            if True:
                what = "%s under %s on %s" % (model, policy, mesh)
                plan = os.path.join(tmp, "plan.json")
                strategy = os.path.join(tmp, "strategy.json")
                shard = os.path.join(tmp, "shard_plan.py")
                steps = [["propagate", os.path.join(tmp, model, "config.json"), "--mesh", mesh,
                          "--policy", policy, "--batch", "4", "--seq", "8", *extra, "-o", plan],
                         ["export", plan, "--format", "mindspore", "-o", strategy],
                         ["export", plan, "--format", "mindspore-shard", "-o", shard]]
                failed = None
                for args in steps:
                    p = subprocess.run([CLI, *args], capture_output=True, text=True)
                    if p.returncode != 0:
                        failed = "%s: %s" % (args[0], p.stderr.strip()[-300:])
                        break
                if failed:
                    results.append((False, "%s: %s" % (what, failed)))
                    continue
                if extra:
                    what += " " + " ".join(extra)
                with open(plan) as f:
                    want = want_pipeline(json.load(f)["summary"], mesh)
                p = subprocess.run([MS_PYTHON, "-c", CHECK, strategy, shard,
                                    json.dumps(PRIMITIVES), json.dumps(want)],
                                   capture_output=True, text=True)
                lines = [l for l in p.stdout.splitlines() if l.startswith("[")]
                if p.returncode != 0 or not lines:
                    results.append((False, "%s: MindSpore check failed: %s"
                                    % (what, p.stderr.strip()[-600:])))
                    continue
                for ok, text in json.loads(lines[-1]):
                    results.append((ok, "%s: %s" % (what, text)))
    print("1..%d" % len(results))
    for i, (ok, what) in enumerate(results):
        print("%s %d - %s" % ("ok" if ok else "not ok", i + 1, what))
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
