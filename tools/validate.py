#!/usr/bin/env python3
"""tools/validate.py: Shardscope's estimates next to published training measurements.

Reads data/validation/validation.json (the published figures, copied from their sources), runs
the built shardscope-cli once per row with the row's model, mesh and training options and the
default (uncalibrated) hardware profile, and writes docs/validation.md: the tables, the ratio
estimate / measured per row, and a summary. Nothing is fitted: the script only reads.

    python3 tools/validate.py [--cli build/app/shardscope-cli] [--out docs/validation.md]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIME_TARGET = 0.15
MEMORY_TARGET = 0.10
MiB = 1 << 20


def model_config(row):
    with open(os.path.join(ROOT, "data", "validation", "models", row["model"] + ".json")) as f:
        return json.load(f)


def run(args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


# Training options in a row's "constants" and the propagate flags that set them.
CONSTANT_FLAGS = {"grad_reduce": "--grad-reduce", "backward_prefetch": "--backward-prefetch"}


def constant_flags(row):
    """The flags that set a row's training options (its "constants": members of the plan
    file's "constants")."""
    flags = []
    for key, value in row.get("constants", {}).items():
        if key not in CONSTANT_FLAGS:
            sys.exit("validate.py: row %s: no propagate flag sets constant %r" % (row["id"], key))
        flags += [CONSTANT_FLAGS[key], value]
    return flags


def row_args(cli, row, path):
    """propagate's command line for a time row."""
    args = [cli, "propagate", path,
            "--batch", str(row["global_batch"]), "--seq", str(row["seq"]),
            "--dtype", row.get("dtype", "bf16"),
            "--mesh", row.get("mesh", "dp=%d" % row["gpus"]), "--hardware", row["hardware"],
            "--micro-batch", str(row["micro_batch"]),
            "--recompute", "full" if row["activation_checkpointing"] else "none",
            "--attention", row["attention"]]
    if "policy" in row:
        args += ["--policy", row["policy"]]
    if not row.get("dropout", False):
        args.append("--no-dropout")
    if row.get("sharding") == "FULL_SHARD":
        # FSDP flattens each unit's gradients itself: no DeepSpeed bucket buffers.
        args += ["--zero", "3", "--zero-bucket-elements", "0"]
    elif "zero" in row:
        args += ["--zero", str(row["zero"])]
    # Megatron's local DDP reduces the gradients after the last micro-batch's backward pass.
    if row.get("dp_overlap", True) is False:
        args.append("--no-dp-overlap")
    # Pipeline rows: interleaved 1F1B over virtual stages (1F1B otherwise, the default).
    if row.get("virtual_stages", 1) > 1:
        args += ["--schedule", "interleaved", "--virtual-stages", str(row["virtual_stages"])]
    return args + constant_flags(row) + ["--json"]


def run_row(cli, row, tmp):
    """The estimate for one time row: propagate's JSON summary, its command, the parameters."""
    config = model_config(row)
    # Learned position embeddings sized to the run's sequence, as the benchmark's models were
    # (their published parameter counts grow with it).
    config["n_positions"] = row["seq"]
    path = os.path.join(tmp, "%s.json" % row["id"])
    with open(path, "w") as f:
        json.dump(config, f)
    args = row_args(cli, row, path)
    est = json.loads(run(args))
    # The model's parameter count, from a one-sequence plan on one device (bf16: 2 bytes each).
    one = json.loads(run([cli, "propagate", path, "--batch", "1", "--seq", str(row["seq"]),
                          "--dtype", "bf16", "--mesh", "dp=1", "--hardware", row["hardware"],
                          "--json"]))
    return est, args, one["memory"]["parameters"] // 2


def measured_step(row):
    """The measured step time (s) a time row's published figure implies."""
    m, tokens = row["measured"], row["global_batch"] * row["seq"]
    if m["kind"] == "tokens_per_s_per_gpu":
        return tokens / (m["value"] * row["gpus"])
    if m["kind"] == "sc21_tflops_per_gpu":
        # Narayanan et al. 2021: F = 96 B s l h^2 (1 + s / 6h + V / 16 l h) per step (full
        # recompute counted), reported per GPU.
        c = model_config(row)
        b, s, l, h, v = row["global_batch"], row["seq"], c["n_layer"], c["n_embd"], c["vocab_size"]
        flops = 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))
        return flops / (m["value"] * 1e12 * row["gpus"])
    if m["kind"] == "causal6_tflops_per_gpu":
        # ml-engineering's bench_decompose.py (flops_split): 6 N tokens over the linear layers
        # and the LM head, plus causal attention 6 b s^2 head_dim heads layers, per GPU.
        c = model_config(row)
        h, L = c["hidden_size"], c["num_hidden_layers"]
        hd = c.get("head_dim") or h // c["num_attention_heads"]
        q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
        n = (3 * h * c["intermediate_size"] + h * (2 * q + 2 * kv)) * L + c["vocab_size"] * h
        b, s = row["micro_batch"], row["seq"]
        flops = 6 * n * b * s + 6 * b * s * s * hd * c["num_attention_heads"] * L
        return flops * row["grad_accum"] / (m["value"] * 1e12)
    raise ValueError("%s: unknown measured kind %s" % (row["id"], m["kind"]))


def measured_text(row):
    m = row["measured"]
    if m["kind"] == "tokens_per_s_per_gpu":
        return "%d tokens/s/GPU" % m["value"]
    return "%g TFLOP/s/GPU" % m["value"]


def estimated_text(row, step_s):
    m, tokens = row["measured"], row["global_batch"] * row["seq"]
    if m["kind"] == "tokens_per_s_per_gpu":
        return "%.0f tokens/s/GPU" % (tokens / (step_s * row["gpus"]))
    return "%.0f TFLOP/s/GPU" % (m["value"] * measured_step(row) / step_s)


# ---- collectives: a two-op graph whose plan holds exactly the one collective ----

def collective_graph(step, nbytes):
    """A graph JSON and pins whose plan on mp=N moves @nbytes (f32) in one @step."""
    cols = 1024 if nbytes >= 4096 else nbytes // 4  # a 1 KiB row holds 256 floats
    rows = nbytes // 4 // cols
    if step == "AllGather":
        # ReLU split on rows, then a ReLU that needs the whole tensor: one AllGather.
        tensors = [{"name": "x", "dtype": "f32", "kind": "input", "shape": [rows, cols]}]
        ops = [{"name": "a", "type": "ReLU", "inputs": ["x"], "outputs": ["y"]},
               {"name": "b", "type": "ReLU", "inputs": ["y"], "outputs": ["z"]}]
        pins = ["a=[mp,_]", "b=[_,_]"]
    else:
        # A row-parallel MatMul leaves its output partial; the ReLU after it needs it whole
        # (AllReduce) or split on rows (ReduceScatter).
        tensors = [{"name": "x", "dtype": "f32", "kind": "input", "shape": [rows, 8]},
                   {"name": "w", "dtype": "f32", "kind": "parameter", "shape": [8, cols]}]
        ops = [{"name": "mm", "type": "MatMul", "inputs": ["x", "w"], "outputs": ["y"]},
               {"name": "act", "type": "ReLU", "inputs": ["y"], "outputs": ["z"]}]
        pins = ["mm=[_,mp],[mp,_]", "act=[_,_]" if step == "AllReduce" else "act=[mp,_]"]
    graph = {"shardscope_graph": 1, "name": step.lower(), "tensors": tensors, "ops": ops,
             "outputs": ["z"]}
    return graph, pins


def run_collective(cli, row, tmp):
    graph, pins = collective_graph(row["step"], row["bytes"])
    path = os.path.join(tmp, row["id"] + ".graph.json")
    with open(path, "w") as f:
        json.dump(graph, f)
    args = [cli, "propagate", path, "--mesh", "mp=%d" % row["gpus"], "--hardware",
            row["hardware"]]
    for p in pins:
        args += ["--pin", p]
    est = json.loads(run(args + ["--json"]))
    kinds = {k: v for k, v in est["collectives"].items() if v}
    if kinds != {row["step"]: 1}:
        raise RuntimeError("%s: the plan holds %s, not one %s" % (row["id"], kinds, row["step"]))
    return est["comm_time_us"] * 1e-6, args


def measured_collective(row):
    """Seconds, from a time or a busbw (nccl-tests' factor: 2(n-1)/n for AllReduce, (n-1)/n
    for AllGather and ReduceScatter, the size being the whole buffer)."""
    m, n = row["measured"], row["gpus"]
    if m["kind"] == "time_us":
        return m["value"] * 1e-6
    factor = 2 * (n - 1) / n if row["step"] == "AllReduce" else (n - 1) / n
    return factor * row["bytes"] / (m["value"] * 1e9)


# NCCL's own tuning model (src/graph/tuning.cc, ncclTopoTuneModel and ncclTopoGetAlgoTime, NVIDIA/nccl
# commit 5067397c), one node: time = latency + bytes / algorithm bandwidth, the fastest of ring
# LL / LL128 / Simple and, where the profile has NVLink SHARP, NVLS Simple. The ring's busbw is
# the profile's intra link (NCCL's own figure is channels x per-channel bandwidth); LL runs at half
# of it capped by llMaxBw, LL128 at 92%; NVLS at the profile's nvls_bandwidth_GBps.
NCCL_BASE_US = {"LL": 6.6, "LL128": 14.0, "Simple": 8.4}  # baseLatencies, Ring
NCCL_NVLINK_STEP_US = {"LL": 0.6, "LL128": 1.9, "Simple": 3.4}  # hwLatencies[NVLINK], Ring
NCCL_NVLS_US = 25.0  # hwLatencies[NVLINK][NVLS][Simple], base 0
NCCL_LL_MAX_BW = {"a100-sxm": 87.7, "h100-sxm": 141.0, "h200-sxm": 141.0}  # llMaxBws, one node


def nccl_model_time(row, profile):
    n, size = row["gpus"], row["bytes"]
    steps = 2 * (n - 1) if row["step"] == "AllReduce" else n - 1
    bw = profile["links"]["intra"]["bandwidth_GBps"]
    busbw = {"LL": min(NCCL_LL_MAX_BW[row["hardware"]], 0.5 * bw), "LL128": 0.92 * bw,
             "Simple": bw}
    times = [NCCL_BASE_US[p] + steps * NCCL_NVLINK_STEP_US[p]
             + size / (busbw[p] * n / steps * 1e3) for p in busbw]
    nvls = profile.get("efficiency", {}).get("nvls_bandwidth_GBps", 0)
    if row["step"] == "AllReduce" and nvls > 0 and n > 4:
        times.append(NCCL_NVLS_US + size / (nvls * n / steps * 1e3))
    return min(times) * 1e-6


def size_text(nbytes):
    if nbytes < MiB:
        return "%d KiB" % (nbytes // 1024)
    return "%d GiB" % (nbytes // (1024 * MiB)) if nbytes >= 1024 * MiB else "%d MiB" % (
        nbytes // MiB)


# ---- memory ----

def run_memory(cli, row):
    args = [cli, "propagate",
            os.path.join(ROOT, "data", "validation", "models", row["model"] + ".json"),
            "--batch", str(row["global_batch"]), "--seq", str(row["seq"]),
            "--dtype", row["dtype"], "--mesh", "dp=%d" % row["gpus"],
            "--hardware", row["hardware"], "--attention", row["attention"],
            "--optimizer", row["optimizer"]]
    if row.get("zero"):
        args += ["--zero", str(row["zero"])]
    est = json.loads(run(args + ["--json"]))
    mem, m = est["memory"], row["measured"]
    states = mem["parameters"] + mem["gradients"] + mem["optimizer"]
    if m["kind"] == "memory_MiB":
        measured = (m["value"] - m.get("context_MiB", 0)) * MiB
        # The reserved estimate the published counter sees (issue 12): nvidia-smi everything the
        # process holds (less the CUDA context when the source measured it and the row takes it
        # off: then the estimate's context is taken off too); max_memory_reserved the caching
        # allocator's segments: the tensors, their rounding and cuBLAS's workspace (allocated
        # through the allocator), not the context or NCCL's buffers.
        counter = m["counter"]
        if counter == "nvidia-smi":
            estimate = mem["reserved_total"] - (mem["cuda_context"] if "context_MiB" in m else 0)
        elif counter == "max_memory_reserved":
            estimate = mem["total"] + mem["allocator"] + mem["cublas_workspace"]
        else:
            raise ValueError("%s: unknown counter %s" % (row["id"], counter))
        return dict(measured=measured, estimate=estimate, tensors=mem["total"], states=states,
                    cmd=args, est=est)
    if m["kind"] == "model_states_GB":
        return dict(measured=m["value"] * 1e9, estimate=states, tensors=states, states=states,
                    cmd=args, est=est)
    raise ValueError("%s: unknown measured kind %s" % (row["id"], m["kind"]))


# ---- ranking ----

def rank(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    for r, i in enumerate(order):
        ranks[i] = r
    return ranks


def spearman(a, b):
    n = len(a)
    if n < 2:
        return float("nan")
    ra, rb = rank(a), rank(b)
    d2 = sum((x - y) ** 2 for x, y in zip(ra, rb))
    return 1 - 6 * d2 / (n * (n * n - 1))


def within(ratio, target):
    return abs(ratio - 1) <= target


def yes(ratio, target, row=None):
    if within(ratio, target):
        return "yes"
    # A measurement that includes a cost the model leaves out by design says so.
    return "**no**: %s" % row["outside_model"] if row and "outside_model" in row else "**no**"


def parallel_text(row):
    if row.get("sharding") == "FULL_SHARD":
        text = "%d GPUs, FSDP FULL_SHARD (ZeRO-3)" % row["gpus"]
    else:
        text = "%d GPUs, `%s`%s, %s" % (row["gpus"], row.get("mesh", "dp=%d" % row["gpus"]),
                                        " `%s`" % row["policy"] if "policy" in row else "",
                                        row["sharding"])
    extra = []
    if row.get("dp_overlap", True) is False:
        extra.append("gradient sync after the backward pass")
    if row.get("virtual_stages", 1) > 1:
        extra.append("interleaved 1F1B, %d virtual stages" % row["virtual_stages"])
    elif "pp=" in row.get("mesh", ""):
        extra.append("1F1B")
    if row["activation_checkpointing"]:
        extra.append("full recompute")
    extra.append("%s attention" % row["attention"])
    for k, v in sorted(row.get("constants", {}).items()):
        extra.append("%s=%s" % (k, v))
    return text + ", " + ", ".join(extra)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", default=os.path.join(ROOT, "build", "app", "shardscope-cli"))
    parser.add_argument("--config", default=os.path.join(ROOT, "data", "validation",
                                                         "validation.json"))
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "validation.md"))
    args = parser.parse_args()

    with open(args.config) as f:
        doc = json.load(f)

    results, collectives, memory = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for row in doc["rows"]:
            est, cmd, params = run_row(args.cli, row, tmp)
            step_s = est["step_time_us"] * 1e-6
            meas = measured_step(row)
            results.append(dict(row=row, est=est, step_s=step_s, measured_step=meas,
                                ratio=step_s / meas, params=params, cmd=cmd))
        for row in doc.get("collective_rows", []):
            t, cmd = run_collective(args.cli, row, tmp)
            meas = measured_collective(row)
            with open(os.path.join(ROOT, "data", "hardware", row["hardware"] + ".json")) as f:
                nccl = nccl_model_time(row, json.load(f))
            collectives.append(dict(row=row, estimate=t, measured=meas, ratio=t / meas, cmd=cmd,
                                    nccl=nccl))
        fits = []
        for ref in doc.get("fit_references", []):
            points = []
            for nbytes, us in ref["points_us"]:
                row = dict(id="%s-%d" % (ref["id"], nbytes), step=ref["step"], bytes=nbytes,
                           gpus=ref["gpus"], hardware=ref["hardware"])
                t, _ = run_collective(args.cli, row, tmp)
                points.append((nbytes, us * 1e-6, t))
            fits.append(dict(ref=ref, points=points))
    for row in doc.get("memory_rows", []):
        r = run_memory(args.cli, row)
        r.update(row=row, ratio=r["estimate"] / r["measured"],
                 tensors_ratio=r["tensors"] / r["measured"])
        memory.append(r)

    lines = []
    w = lines.append
    w("# Validation: estimates against published measurements")
    w("")
    w("Written by `python3 tools/validate.py` from `data/validation/validation.json` with the "
      "default, uncalibrated hardware profiles (`data/hardware/`). Rerun it after any change to "
      "the cost model or the profiles; do not edit this file by hand.")
    w("")
    w("**Ratio** is estimate / measurement (a step time, a collective's time, a memory "
      "figure): below 1 the estimate is too fast or too small. Target: every time within 15%, "
      "every memory figure within 10%, and the same ranking. A measured step is global batch "
      "x sequence / (tokens/s/GPU x GPUs), or the paper's FLOPs per step / (TFLOP/s/GPU x "
      "GPUs). No constant of the profiles is taken from a row below (their `description` "
      "names each constant's source).")
    w("")
    for key, s in doc["sources"].items():
        w("- Source `%s`: %s, <%s>, %s." % (key, s["title"], s["url"], s["where"]))
    w("")
    w("## Training steps")
    w("")
    w("| row | source | model (params: published / ours) | GPU, profile | parallel configuration "
      "| global batch (micro x accum x DP) | seq | measured | estimated | step measured / "
      "estimated (s) | ratio | within 15% |")
    w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        row = r["row"]
        dp = row["global_batch"] // (row["micro_batch"] * row["grad_accum"])
        w("| %s | `%s` | %s (%.3fB / %.3fB) | %s, `%s` | %s | %d (%d x %d x %d) | %d | %s | %s | "
          "%.3f / %.3f | %.2f | %s |" % (
              row["id"], row["source"], row["model"], row["published_params"] / 1e9,
              r["params"] / 1e9, row["gpu"], row["hardware"], parallel_text(row),
              row["global_batch"], row["micro_batch"], row["grad_accum"], dp, row["seq"],
              measured_text(row), estimated_text(row, r["step_s"]), r["measured_step"],
              r["step_s"], r["ratio"], yes(r["ratio"], TIME_TARGET)))
    w("")
    w("Where each estimate's time goes (ms per step; `dp_sync_exposed` includes the slowdown of "
      "the compute that the hidden sync overlaps):")
    w("")
    w("| row | forward | backward | recompute | tp_comm_exposed | dp_sync_exposed | dp_sync_hidden "
      "| overhead | pipeline_bubble | pipeline_comm |")
    w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        b = r["est"]["step_breakdown_us"]
        w("| %s | %s |" % (r["row"]["id"], " | ".join(
            "%.0f" % (b.get(k, 0) / 1e3) for k in (
                "forward", "backward", "recompute", "tp_comm_exposed", "dp_sync_exposed",
                "dp_sync_hidden", "overhead", "pipeline_bubble", "pipeline_comm"))))
    w("")
    piped = [r for r in results if "bubble_fraction" in r["est"]]
    if piped:
        w("The pipeline rows' stages (the per-GPU memory is the fullest stage's, with the "
          "micro-batches it holds in flight):")
        w("")
        w("| row | stages x layers | micro-batches m | virtual stages v | bubble fraction "
          "(p-1)/(vm+p-1) | activation at a boundary (per micro-batch and GPU), its send | memory, fullest stage: tensors / reserved |")
        w("| --- | --- | --- | --- | --- | --- | --- |")
        for r in piped:
            est, pl = r["est"], r["est"]["pipeline"]
            layers = sorted({s["n_layers"] for s in est["stages"]})
            send = pl["sends"][0] if pl["sends"] else None
            w("| %s | %d x %s | %d | %d | %.4f | %s | %.1f / %.1f GB |" % (
                r["row"]["id"], pl["stages"], "/".join(str(n) for n in layers),
                pl["micro_batches"], pl["virtual_stages"], est["bubble_fraction"],
                "%.1f MiB, %.0f us (%s)" % (send["bytes"] / MiB, send["time_us"], send["link"])
                if send else "-", est["memory"]["total"] / 1e9,
                est["memory"]["reserved_total"] / 1e9))
    w("")

    if collectives:
        w("## Collectives")
        w("")
        w("One collective over the GPUs of one node, as a two-op plan on `mp=8` holds it (the "
          "graph and pins are in `tools/validate.py`); measured time, or the time a published "
          "busbw implies.")
        w("")
        w("The last two columns are NCCL's own tuning model (`src/graph/tuning.cc`: per protocol "
          "LL / LL128 / Simple a base latency, a latency per ring step and a bandwidth, NVLS with "
          "its 25 us; the constants are in `tools/validate.py`), computed with the same profile "
          "bandwidths: a check of what a faithful copy of NCCL's model would estimate. The "
          "estimate takes the same LL, LL128 and Simple-ring constants (the profiles' `ll_*`, "
          "`ll128_*` and `ring_*`), so the two agree where NVLS is not in play (`a100-sxm`, "
          "AllGather, ReduceScatter); for AllReduce on `h100-sxm` and `h200-sxm` they differ by "
          "NVLS, which the estimate models by chunks.")
        w("")
        w("| row | GPUs, profile | collective | size | measured | measured / estimated (us) | "
          "ratio | within 15% | NCCL's model (us) | its ratio |")
        w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in collectives:
            row, m = r["row"], r["row"]["measured"]
            meas = ("%g us" % m["value"]) if m["kind"] == "time_us" else (
                "busbw %g GB/s" % m["value"])
            w("| %s | %s, `%s` | %s | %s | %s (%s) | %.1f / %.1f | %.2f | %s | %.1f | %.2f |" % (
                row["id"], row["gpu"], row["hardware"], row["step"], size_text(row["bytes"]),
                meas, row["where"], r["measured"] * 1e6, r["estimate"] * 1e6, r["ratio"],
                yes(r["ratio"], TIME_TARGET, row), r["nccl"] * 1e6, r["nccl"] / r["measured"]))
        w("")

    for f in fits:
        ref = f["ref"]
        w("### The curve behind the NVLS constants (`%s`)" % ref["id"])
        w("")
        w("%s. %s" % (ref["source"], ref["use"]))
        w("")
        w("| size | measured (us) | estimated, `%s` (us) | ratio |" % ref["hardware"])
        w("| --- | --- | --- | --- |")
        for nbytes, meas, est in f["points"]:
            size = size_text(nbytes) if nbytes >= MiB else "%d KiB" % (nbytes // 1024)
            w("| %s | %.1f | %.1f | %.2f |" % (size, meas * 1e6, est * 1e6, est / meas))
        w("")

    if memory:
        w("## Memory")
        w("")
        w("The estimate compared is what the published counter sees (issue 12): for nvidia-smi "
          "the reserved total (the tensors, what the caching allocator holds beyond them over the "
          "step's allocations and frees replayed, the CUDA context, cuBLAS's workspace and NCCL's "
          "buffers; with the source's measured CUDA context taken off the measurement, the "
          "profile's is taken off the estimate), for max_memory_reserved the tensors, their "
          "allocator part and cuBLAS's workspace (the allocator's own segments). `tensors ratio` is "
          "the tensors' total alone against the same figure, the comparison before the "
          "reserved estimate.")
        w("")
        w("| row | source | model | configuration | batch | seq | measured | estimated | "
          "tensors ratio | ratio | within 10% | note |")
        w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in memory:
            row, m, mem = r["row"], r["row"]["measured"], r["est"]["memory"]
            config = "%d GPU%s, %s, %s, %s attention%s" % (
                row["gpus"], "s" if row["gpus"] > 1 else "", row["dtype"], row["optimizer"],
                row["attention"], ", ZeRO-%d" % row["zero"] if "zero" in row else "")
            if m["kind"] == "memory_MiB":
                meas = ("%d - %d (CUDA context) = %.0f MiB" % (
                    m["value"], m["context_MiB"], r["measured"] / MiB) if "context_MiB" in m
                        else "%d MiB" % m["value"])
                est = "%.0f MiB = %.0f tensors (%.0f states + %.0f activations" % (
                    r["estimate"] / MiB, mem["total"] / MiB, r["states"] / MiB,
                    mem["activations"] / MiB)
                if mem.get("loss"):
                    est += " + %.0f loss" % (mem["loss"] / MiB)
                if mem.get("buffers"):
                    est += " + %.0f ZeRO buckets" % (mem["buffers"] / MiB)
                est += ") + %.0f allocator + %.1f cuBLAS" % (
                    mem["allocator"] / MiB, mem["cublas_workspace"] / MiB)
                if m["counter"] == "nvidia-smi":
                    est += " + %.0f NCCL" % (mem["nccl_buffers"] / MiB)
                    if "context_MiB" not in m:
                        est += " + %.0f CUDA context" % (mem["cuda_context"] / MiB)
            else:
                meas = "%g GB model states" % m["value"]
                est = "%.2f GB model states" % (r["estimate"] / 1e9)
            w("| %s | `%s` | %s | %s | %d | %d | %s | %s | %.2f | %.2f | %s | %s |" % (
                row["id"], row["source"], row["model"], config, row["global_batch"], row["seq"],
                meas, est, r["tensors_ratio"], r["ratio"], yes(r["ratio"], MEMORY_TARGET, row),
                row["note"]))
        w("")

    ratios = [r["ratio"] for r in results]
    w("## Summary")
    w("")
    w("- Training steps: %d rows from %d sources; median ratio %.2f (min %.2f, max %.2f); "
      "within 15%%: %d of %d." % (
          len(ratios), len({r["row"]["source"] for r in results}), statistics.median(ratios),
          min(ratios), max(ratios), sum(within(x, TIME_TARGET) for x in ratios), len(ratios)))
    for profile in sorted({r["row"]["hardware"] for r in results}):
        for source in sorted({r["row"]["source"] for r in results}):
            sub = [r for r in results
                   if r["row"]["hardware"] == profile and r["row"]["source"] == source]
            if len(sub) < 2:
                continue
            # Rank by the figure the source publishes per GPU: measured vs estimated throughput.
            meas = [1 / r["measured_step"] * r["row"]["global_batch"] * r["row"]["seq"]
                    / r["row"]["gpus"] for r in sub]
            est = [1 / r["step_s"] * r["row"]["global_batch"] * r["row"]["seq"]
                   / r["row"]["gpus"] for r in sub]
            pairs = agree = 0
            for i in range(len(sub)):
                for j in range(i + 1, len(sub)):
                    pairs += 1
                    agree += (meas[i] > meas[j]) == (est[i] > est[j])
            w("- `%s`, `%s`: median ratio %.2f; ranking of its %d runs by tokens/s/GPU: "
              "Spearman %.2f, %d of %d pairs in the measured order." % (
                  profile, source, statistics.median([r["ratio"] for r in sub]), len(sub),
                  spearman(meas, est), agree, pairs))
    if collectives:
        c = [r["ratio"] for r in collectives]
        big = [r["ratio"] for r in collectives if r["row"]["bytes"] >= 256 * MiB]
        w("- Collectives: %d rows; median ratio %.2f; within 15%%: %d of %d (of the %d at 256 "
          "MiB and more: %d). Outside the target: %s." % (
              len(c), statistics.median(c), sum(within(x, TIME_TARGET) for x in c), len(c),
              len(big), sum(within(x, TIME_TARGET) for x in big),
              ", ".join("%s (%.2f%s)" % (r["row"]["id"], r["ratio"],
                                         ", outside the model" if "outside_model" in r["row"]
                                         else "") for r in collectives
                        if not within(r["ratio"], TIME_TARGET)) or "none"))
    if memory:
        w("- Memory: %d rows; ratios %s (the tensors' total alone: %s); within 10%%: %d of %d.%s" % (
            len(memory), ", ".join("%.2f" % r["ratio"] for r in memory),
            ", ".join("%.2f" % r["tensors_ratio"] for r in memory),
            sum(within(r["ratio"], MEMORY_TARGET) for r in memory), len(memory),
            "".join(" Outside the target: %s (%.2f, outside the model: %s)." % (
                r["row"]["id"], r["ratio"], r["row"]["outside_model"]) for r in memory
                    if not within(r["ratio"], MEMORY_TARGET) and "outside_model" in r["row"])))
    for profile in ("a100-sxm", "h100-sxm", "h200-sxm"):
        n_time = sum(1 for r in results if r["row"]["hardware"] == profile)
        n_coll = sum(1 for r in collectives if r["row"]["hardware"] == profile)
        w("- `%s`: %d training-step row%s, %d collective row%s." % (
            profile, n_time, "" if n_time == 1 else "s", n_coll, "" if n_coll == 1 else "s"))
    w("")
    w("## Published runs Shardscope cannot express")
    w("")
    w("| source | model | configuration | measured | why not |")
    w("| --- | --- | --- | --- | --- |")
    for n in doc.get("not_expressible", []):
        w("| %s | %s | %s | %s | %s |" % (n["source"], n["model"], n["config"], n["measured"],
                                          n["why"]))
    w("")
    for section in doc.get("notes", []):
        w("## " + section["title"])
        w("")
        for paragraph in section["text"]:
            w(paragraph)
            w("")
    w("## Commands")
    w("")
    w("Each training row's estimate is `shardscope-cli propagate` with (the model config written "
      "with `n_positions` = seq):")
    w("")
    w("```")
    for r in results:
        w(" ".join(a if a != r["cmd"][2] else "MODEL(%s)" % r["row"]["model"]
                   for a in r["cmd"][1:]))
    for r in collectives:
        w(" ".join(a if not a.endswith(".graph.json") else "GRAPH(%s %s)" % (
            r["row"]["step"], size_text(r["row"]["bytes"])) for a in r["cmd"][1:]))
    for r in memory:
        w(" ".join(os.path.relpath(a, ROOT) if a.startswith(ROOT) else a for a in r["cmd"][1:]))
    w("```")
    text = "\n".join(lines) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
