#!/usr/bin/env python3
"""tools/validate.py: Shardscope's estimates next to published training measurements.

Reads data/validation/validation.json (the published figures, copied from their sources), runs
the built shardscope-cli once per row with the row's model, mesh and training options and the
default (uncalibrated) hardware profile, and writes docs/validation.md: the table, the ratio
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


def propagate(args, constants, tmp, name):
    """propagate's JSON summary for @args; training options that propagate has no flag for
    (@constants: members of the plan file's "constants") are set in the plan file it writes,
    and the plan is derived again from that file (a derived plan keeps its parent's options)."""
    if not constants:
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout
    plan = os.path.join(tmp, name + ".plan.json")
    subprocess.run([a for a in args if a != "--json"] + ["-o", plan], check=True,
                   capture_output=True, text=True)
    with open(plan) as f:
        doc = json.load(f)
    doc["constants"].update(constants)
    with open(plan, "w") as f:
        json.dump(doc, f)
    return subprocess.run([args[0], "propagate", "--from", plan, "--json"], check=True,
                          capture_output=True, text=True).stdout


def run_row(cli, row, tmp):
    """The estimate for one row: propagate's JSON summary."""
    with open(os.path.join(ROOT, "data", "validation", "models", row["model"] + ".json")) as f:
        config = json.load(f)
    # Learned position embeddings sized to the run's sequence, as the benchmark's models were
    # (their published parameter counts grow with it).
    config["n_positions"] = row["seq"]
    path = os.path.join(tmp, "%s.json" % row["id"])
    with open(path, "w") as f:
        json.dump(config, f)
    args = [
        cli, "propagate", path,
        "--batch", str(row["global_batch"]), "--seq", str(row["seq"]), "--dtype", "bf16",
        "--mesh", "dp=%d" % row["gpus"], "--hardware", row["hardware"],
        "--micro-batch", str(row["micro_batch"]),
        "--recompute", "full" if row["activation_checkpointing"] else "none",
        "--attention", row["attention"], "--no-dropout", "--json",
    ]
    if row.get("sharding") == "FULL_SHARD":
        args += ["--zero", "3"]
    out = propagate(args, row.get("constants"), tmp, row["id"])
    # The model's parameter count, from a one-sequence plan on one device (bf16: 2 bytes each).
    count = [cli, "propagate", path, "--batch", "1", "--seq", str(row["seq"]), "--dtype", "bf16",
             "--mesh", "dp=1", "--hardware", row["hardware"], "--json"]
    one = json.loads(subprocess.run(count, check=True, capture_output=True, text=True).stdout)
    return json.loads(out), args, one["memory"]["parameters"] // 2


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", default=os.path.join(ROOT, "build", "app", "shardscope-cli"))
    parser.add_argument("--config", default=os.path.join(ROOT, "data", "validation",
                                                         "validation.json"))
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "validation.md"))
    args = parser.parse_args()

    with open(args.config) as f:
        doc = json.load(f)

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for row in doc["rows"]:
            est, cmd, params = run_row(args.cli, row, tmp)
            tokens = row["global_batch"] * row["seq"]
            step_s = est["step_time_us"] * 1e-6
            estimate = tokens / (step_s * row["gpus"])
            measured = row["measured"]["value"]
            measured_step = tokens / (measured * row["gpus"])
            results.append(dict(row=row, est=est, estimate=estimate, measured=measured,
                                step_s=step_s, measured_step=measured_step,
                                ratio=measured_step and step_s / measured_step,
                                params=params, cmd=cmd))

    memory = []
    with tempfile.TemporaryDirectory() as tmp:
        for row in doc.get("memory_rows", []):
            cmd = [args.cli, "propagate",
                   os.path.join(ROOT, "data", "validation", "models", row["model"] + ".json"),
                   "--batch", str(row["global_batch"]), "--seq", str(row["seq"]),
                   "--dtype", row["dtype"], "--mesh", "dp=%d" % row["gpus"],
                   "--hardware", row["hardware"], "--attention", row["attention"],
                   "--optimizer", row["optimizer"], "--json"]
            est = json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                            text=True).stdout)
            m = row["measured"]
            measured = (m["value"] - m.get("context_MiB", 0)) * 1048576
            memory.append(dict(row=row, est=est, measured=measured,
                               ratio=est["memory"]["total"] / measured, cmd=cmd))

    src = doc["sources"]
    lines = []
    w = lines.append
    w("# Validation: estimates against published measurements")
    w("")
    w("Written by `python3 tools/validate.py` from `data/validation/validation.json` with the "
      "default, uncalibrated hardware profiles (`data/hardware/`). Rerun it after any change to "
      "the cost model or the profiles; do not edit this file by hand.")
    w("")
    w("**Ratio** is estimated step time / measured step time (measured step = global batch x "
      "sequence / (tokens/s/GPU x GPUs)): below 1 the estimate is too fast. Target: every time "
      "within 15%, every memory figure within 10%, and the same ranking.")
    w("")
    for key, s in src.items():
        w("Source `%s`: %s, <%s>, %s." % (key, s["title"], s["url"], s["where"]))
    w("")
    w("| row | model (params: published / ours) | GPU, profile | parallel configuration | "
      "global batch (micro x accum x GPUs) | seq | measured tokens/s/GPU | estimated | "
      "step measured / estimated (s) | ratio | within 15% | MFU published / implied by the "
      "estimate |")
    w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        row = r["row"]
        par = "%d GPUs, FSDP %s (ZeRO-3)%s" % (
            row["gpus"], row["sharding"],
            ", activation checkpointing (full recompute)" if row["activation_checkpointing"]
            else "")
        ok = abs(r["ratio"] - 1) <= TIME_TARGET
        mfu = row.get("published_mfu_percent")
        mfu_text = "%.1f%% / %.1f%%" % (mfu, mfu / r["ratio"]) if mfu else "-"
        w("| %s | %s (%.3fB / %.3fB) | %s, `%s` | %s | %d (%d x %d x %d) | %d | %d | %.0f | "
          "%.3f / %.3f | %.2f | %s | %s |" % (
              row["id"], row["model"], row["published_params"] / 1e9, r["params"] / 1e9,
              row["gpu"], row["hardware"], par, row["global_batch"], row["micro_batch"],
              row["grad_accum"], row["gpus"], row["seq"], r["measured"], r["estimate"],
              r["measured_step"], r["step_s"], r["ratio"], "yes" if ok else "**no**",
              mfu_text))
    w("")

    if memory:
        w("### Memory")
        w("")
        w("| row | model | GPU | configuration | batch | seq | measured (MiB) | estimated "
          "(MiB): states + activations | ratio | within 10% | note |")
        w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in memory:
            row, mem = r["row"], r["est"]["memory"]
            m = row["measured"]
            w("| %s | %s | %s | 1 GPU, %s, %s, %s attention | %d | %d | %d - %d (context) = "
              "%.0f | %.0f = %.0f + %.0f | %.2f | %s | %s |" % (
                  row["id"], row["model"], row["gpu"], row["dtype"], row["optimizer"],
                  row["attention"], row["global_batch"], row["seq"], m["value"],
                  m.get("context_MiB", 0), r["measured"] / 1048576, mem["total"] / 1048576,
                  (mem["parameters"] + mem["gradients"] + mem["optimizer"]) / 1048576,
                  mem["activations"] / 1048576, r["ratio"],
                  "yes" if abs(r["ratio"] - 1) <= MEMORY_TARGET else "**no**", row["note"]))
        w("")

    ratios = [r["ratio"] for r in results]
    within = sum(1 for x in ratios if abs(x - 1) <= TIME_TARGET)
    w("## Summary")
    w("")
    w("- Time rows: %d; median ratio %.2f (min %.2f, max %.2f); within 15%%: %d of %d." % (
        len(ratios), statistics.median(ratios), min(ratios), max(ratios), within, len(ratios)))
    for profile in sorted({r["row"]["hardware"] for r in results}):
        sub = [r for r in results if r["row"]["hardware"] == profile]
        rho = spearman([r["measured"] for r in sub], [r["estimate"] for r in sub])
        pairs = agree = 0
        for i in range(len(sub)):
            for j in range(i + 1, len(sub)):
                pairs += 1
                a = sub[i]["measured"] - sub[j]["measured"]
                b = sub[i]["estimate"] - sub[j]["estimate"]
                agree += (a > 0) == (b > 0)
        w("- `%s`: median ratio %.2f; ranking of its %d runs by tokens/s/GPU: Spearman %.2f, "
          "%d of %d pairs in the measured order." % (
              profile, statistics.median([r["ratio"] for r in sub]), len(sub), rho, agree,
              pairs))
    if memory:
        w("- Memory rows: %d; ratios %s (target: within 10%%). The only measured per-device "
          "figure with its full configuration found in this session is an nvidia-smi reading, "
          "which includes the allocator's cache; the memory terms are also checked against the "
          "Korthikanti et al. formulas and the ZeRO paper's model-state figures in "
          "`tests/test-train.c` and `tests/test-cost.c`." % (
              len(memory), ", ".join("%.2f" % r["ratio"] for r in memory)))
    w("- Collective rows: none. No nccl-tests curve was read in this session; the collective "
      "model is unchanged for intra-node groups (see planner/README.md).")
    w("- `h200-sxm`: no published BF16 training measurement on H200 was found; it is not "
      "validated here.")
    w("")
    w("## Published runs Shardscope cannot express")
    w("")
    w("| source | model | configuration | measured | why not |")
    w("| --- | --- | --- | --- | --- |")
    for n in doc.get("not_expressible", []):
        w("| %s | %s | %s | %s | %s |" % (n["source"], n["model"], n["config"], n["measured"],
                                          n["why"]))
    w("")
    w("## Where the gap is")
    w("")
    w("The target is not met: the estimates are still too fast on every run, by less on A100 "
      "than on H100, while the ranking of the runs on each GPU is right. The implied MFU "
      "column shows why: for the estimate to be right the runs would have reached that "
      "fraction of the dense peak, and the uncalibrated GEMM table (a best-case cuBLAS curve, "
      "up to 82% of peak on A100 and 75% on H100) is above what these PyTorch FSDP runs got. "
      "The runs with activation checkpointing (longer steps, the same GEMMs twice) come "
      "closest. The constants were not changed to close the gap: a profile fitted to this "
      "table would no longer be checked by it. `shardscope-cli calibrate` now measures the "
      "GEMM table on the CPU backend; measuring it for bf16 on a GPU is the next step. "
      "The memory row is 14% under an nvidia-smi reading that also holds the caching "
      "allocator's free blocks and the temporaries of the step, which the model leaves out "
      "on purpose (it counts what the backward pass keeps).")
    w("")
    w("## What the estimates leave out")
    w("")
    w("- The benchmark's FSDP `DEFAULT` mixed precision (H100 table) reduces gradients in fp32; "
      "Shardscope syncs them in the parameters' bf16.")
    w("- FSDP's AllGathers and ReduceScatters are modelled per micro-batch and per 25 MiB "
      "bucket (prefetched in the forward pass, behind the backward pass); FSDP's own unit is "
      "the wrapped block, and `limit_all_gathers` throttles the prefetch.")
    w("- Communication kernels do not slow the compute they overlap with.")
    w("")
    w("## Commands")
    w("")
    w("Each row's estimate is `shardscope-cli propagate` with (model config written with "
      "`n_positions` = seq):")
    w("")
    w("```")
    for r in results:
        w(" ".join(a if a != r["cmd"][2] else "MODEL(%s)" % r["row"]["model"]
                   for a in r["cmd"][1:]))
    for r in memory:
        w(" ".join(os.path.relpath(a, ROOT) if a.startswith(ROOT) else a for a in r["cmd"][1:]))
    w("```")
    text = "\n".join(lines) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
