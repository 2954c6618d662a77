#!/usr/bin/env python3
"""Issue 18: the DTensor scripts Shardscope exports for a mesh with a pipeline axis pp, run in
real PyTorch (torch.distributed.pipelining) on CPU ranks with gloo.

A 4-layer llama and an untied 4-layer gpt2 (data/models/'s configs shrunk as
tests/frameworks/test-hf-reference.py shrinks them, with 4 layers) are propagated and exported
with

    shardscope-cli propagate CONFIG --mesh MESH [--policy P] --batch B --seq 8 \\
        --micro-batches 4 --schedule S [--virtual-stages 2] -o PLAN
    shardscope-cli export PLAN --format dtensor -o plan_NAME.py

for pp=2 (2 ranks; gpipe, 1f1b), pp=2,tp=2 (4 ranks; megatron under gpipe and 1f1b, megatron-sp
under 1f1b, megatron interleaved with 2 virtual stages) and pp=2,dp=2 (4 ranks; FSDP within
each stage); gpt2 on pp=2,tp=2 under 1f1b. Each script's chunk split, schedule and micro-batches must be the plan's
(summary.stages, summary.pipeline), and its self_check() under torch.distributed.run must give
the unsharded Hugging Face model's loss and logits, every gradient after the backward pass and
every parameter after one SGD step within 1e-4 relative (the largest error over the largest
reference value, the worst over all ranks), each parameter held on exactly one stage. Besides:
- one script runs unchanged as `torchrun --nproc-per-node 4 plan.py --config config.json`;
- gpt2 with its lm_head tied to wte (first and last stage) is refused at export (exit 1, the
  reason named);
- control: the pp=2,tp=2 1f1b script with its two chunks swapped (the embedding then feeds
  layers 2-3, and the norm and lm_head follow layers 0-1) must fail the check.

    test-export-pipeline.py        ($SHARDSCOPE_CLI is the built shardscope-cli)

Runs in $SHARDSCOPE_FRAMEWORK_VENV/torch (default .venv-frameworks/ in the checkout); skipped,
with the reason, where that Python cannot import torch, torch.distributed.pipelining and
transformers. TAP; the table of errors is printed as comments. $SHARDSCOPE_EXPORT_DIR keeps
the configs, plans and scripts there.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

from framework_venv import HERE, into_venv, skip

CLI = os.environ.get("SHARDSCOPE_CLI")
S, LAYERS, M = 8, 4, 4
TOL = 1e-4
# (name, mesh, ranks, batch, propagate options)
RUNS = [
    ("pp2_gpipe", "pp=2", 2, 4, ["--schedule", "gpipe"]),
    ("pp2_1f1b", "pp=2", 2, 4, ["--schedule", "1f1b"]),
    ("pp2tp2_gpipe", "pp=2,tp=2", 4, 4, ["--policy", "megatron", "--schedule", "gpipe"]),
    ("pp2tp2_1f1b", "pp=2,tp=2", 4, 4, ["--policy", "megatron", "--schedule", "1f1b"]),
    ("pp2tp2_sp_1f1b", "pp=2,tp=2", 4, 4, ["--policy", "megatron-sp", "--schedule", "1f1b"]),
    ("pp2tp2_interleaved", "pp=2,tp=2", 4, 4, ["--policy", "megatron", "--virtual-stages", "2"]),
    ("pp2dp2_1f1b", "pp=2,dp=2", 4, 8, ["--policy", "dp", "--schedule", "1f1b"]),
    # GPT-2 untied: its position embedding is a pass-through of zeros on the later stage.
    ("gpt2_pp2tp2_1f1b", "pp=2,tp=2", 4, 4, ["--policy", "megatron", "--schedule", "1f1b"]),
]
SCHEDULES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B",
             "interleaved": "ScheduleInterleaved1F1B"}


def shrunk_configs(folder):
    """llama and gpt2 (tied, and untied) with LAYERS layers."""
    spec = importlib.util.spec_from_file_location("hf_reference",
                                                  os.path.join(HERE, "test-hf-reference.py"))
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    paths = {}
    for name, model, tied in (("llama", "llama", False), ("gpt2", "gpt2", True),
                              ("gpt2_untied", "gpt2", False)):
        config = ref.hf_config(model)
        config.num_hidden_layers = LAYERS
        config.bos_token_id = config.eos_token_id = None
        if model == "gpt2":
            config.tie_word_embeddings = tied
        d = os.path.join(folder, name)
        config.save_pretrained(d)
        paths[name] = os.path.join(d, "config.json")
    return paths


def cli(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True)


def worker(jobs_file):
    """One rank: every job's script imported and self-checked, in the same order on each rank."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    with open(jobs_file) as f:
        jobs = json.load(f)
    results = []
    for job in jobs:
        spec = importlib.util.spec_from_file_location(job["module"], job["script"])
        plan = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(plan)
        try:
            figures = plan.self_check(job["config"], tolerance=TOL)
        except Exception as e:  # a script that crashes is a failure, reported as such
            figures = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        results.append(figures)
        dist.barrier()
    if dist.get_rank() == 0:
        with open(jobs_file + ".out", "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()


def torchrun(ranks, *args, cwd=None):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", str(ranks), *args],
                          capture_output=True, text=True, cwd=cwd, env=env)


def script_split(text):
    """CHUNK_LAYERS, SCHEDULE and MICRO_BATCHES as the script states them."""
    values = {}
    for line in text.splitlines():
        for key in ("CHUNK_LAYERS", "SCHEDULE", "MICRO_BATCHES", "PP_DIM"):
            if line.startswith(key + " = "):
                values[key] = eval(line[len(key) + 3:].split("#")[0])  # literals the CLI wrote
    return values


def plan_split(summary):
    """The chunks of the plan's stages in chunk order: stage s runs chunks s, s + p, ..."""
    p = summary["pipeline"]["stages"]
    chunks = {}
    for stage in summary["stages"]:
        for k, part in enumerate(stage["layers"].split(",")):
            a, _, b = part.partition("-")
            chunks[stage["stage"] + k * p] = list(range(int(a), int(b or a) + 1))
    return [chunks[c] for c in sorted(chunks)]


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        return worker(sys.argv[2])
    into_venv(__file__, ["torch", "torch.distributed.pipelining", "transformers"])
    if not CLI:
        skip("$SHARDSCOPE_CLI is not set (the CLI was not built)")
    results, table = [], []
    jobs = {2: [], 4: []}
    keep = os.environ.get("SHARDSCOPE_EXPORT_DIR")
    with tempfile.TemporaryDirectory(prefix="export-pipeline-") as tmp:
        if keep:
            tmp = keep
            os.makedirs(tmp, exist_ok=True)
        configs = shrunk_configs(tmp)
        # GPT-2 tied: wte on the first stage and lm_head on the last share a weight whose
        # gradients the script would have to sum between stages; refused with the reason.
        plan = os.path.join(tmp, "plan_gpt2_tied.json")
        p = cli("propagate", configs["gpt2"], "--mesh", "pp=2,tp=2", "--policy", "megatron",
                "--batch", "4", "--seq", str(S), "--micro-batches", str(M), "--allow-tied",
                "-o", plan)
        e = cli("export", plan, "--format", "dtensor", "-o", os.path.join(tmp, "refused.py"))
        results.append((p.returncode == 0 and e.returncode == 1
                        and "transformer.wte.weight: used by transformer.wte on chunk 0 and by "
                        "lm_head on chunk 1" in e.stderr
                        and not os.path.exists(os.path.join(tmp, "refused.py")),
                        "gpt2 tied on pp=2,tp=2: export refused with the reason (exit %d): %s"
                        % (e.returncode, e.stderr.strip().splitlines()[-1:])))
        for name, mesh, ranks, batch, how in RUNS:
            config = configs["gpt2_untied" if name.startswith("gpt2") else "llama"]
            plan = os.path.join(tmp, "plan_%s.json" % name)
            script = os.path.join(tmp, "plan_%s.py" % name)
            what = "%s %d layers on %s %s" % ("gpt2 untied" if name.startswith("gpt2") else
                                              "llama", LAYERS, mesh, " ".join(how))
            p = cli("propagate", config, "--mesh", mesh, *how, "--batch", str(batch), "--seq",
                    str(S), "--micro-batches", str(M), "-o", plan)
            if p.returncode != 0:
                results.append((False, "%s: propagate failed: %s" % (what, p.stderr.strip())))
                continue
            p = cli("export", plan, "--format", "dtensor", "-o", script)
            if p.returncode != 0:
                results.append((False, "%s: export refused: %s" % (what, p.stderr.strip())))
                continue
            with open(plan) as f:
                summary = json.load(f)["summary"]
            with open(script, encoding="ascii") as f:
                got = script_split(f.read())
            want = {"PP_DIM": "pp", "CHUNK_LAYERS": plan_split(summary),
                    "SCHEDULE": SCHEDULES[summary["pipeline"]["schedule"]],
                    "MICRO_BATCHES": summary["pipeline"]["micro_batches"]}
            got["CHUNK_LAYERS"] = [list(r) for r in got.get("CHUNK_LAYERS", ())]
            results.append((got == want and want["MICRO_BATCHES"] == M,
                            "%s: the script's split and schedule are the plan's: %s"
                            % (what, got if got != want else
                               "chunks %s, %s, %d micro-batches" % (
                                   want["CHUNK_LAYERS"], want["SCHEDULE"],
                                   want["MICRO_BATCHES"]))))
            jobs[ranks].append({"what": what, "name": name, "module": "plan_" + name,
                                "script": script, "config": config})
        # Control: the chunks swapped, every parameter still on one stage, the layers in the
        # wrong order around the embedding and the head.
        control = [j for j in jobs[4] if j["name"] == "pp2tp2_1f1b"]
        if control:
            with open(control[0]["script"], encoding="ascii") as f:
                text = f.read()
            old = "CHUNK_LAYERS = ((0, 1), (2, 3))"
            broken = os.path.join(tmp, "plan_pp2tp2_swapped.py")
            with open(broken, "w", encoding="ascii") as f:
                f.write(text.replace(old, "CHUNK_LAYERS = ((2, 3), (0, 1))"))
            results.append((old in text, "control: the pp=2,tp=2 1f1b script holds %s" % old))
            jobs[4].append(dict(control[0], what="control: pp=2,tp=2 1f1b with its chunks "
                                "swapped", module="plan_pp2tp2_swapped", script=broken,
                                control=True))
        for ranks, batch in jobs.items():
            if not batch:
                continue
            jobs_file = os.path.join(tmp, "jobs%d.json" % ranks)
            with open(jobs_file, "w") as f:
                json.dump(batch, f)
            p = torchrun(ranks, os.path.abspath(__file__), "--worker", jobs_file)
            if p.returncode != 0 or not os.path.exists(jobs_file + ".out"):
                results.append((False, "torch.distributed.run of %d scripts on %d ranks failed "
                                "(exit %d): %s" % (len(batch), ranks, p.returncode,
                                                   p.stderr.strip()[-1500:])))
                continue
            with open(jobs_file + ".out") as f:
                for job, fig in zip(batch, json.load(f)):
                    if job.get("control"):
                        results.append((not fig["ok"], "%s: the self-check fails it: %s"
                                        % (job["what"], fig.get("error") or
                                           "loss rel %.2g, gradients rel %.2g" %
                                           (fig["loss"], fig["grads"]))))
                        continue
                    if "error" in fig:
                        results.append((False, "%s: the script crashed: %s"
                                        % (job["what"], fig["error"][:600])))
                        continue
                    table.append((job["name"], fig))
                    results.append((fig["ok"], "%s (%d ranks): logits rel %.2g, loss rel %.2g, "
                                    "%d gradients rel %.2g (worst %s), parameters after SGD "
                                    "rel %.2g (tol %g)" % (
                                        job["what"], ranks, fig["logits"], fig["loss"],
                                        fig["parameters"], fig["grads"], fig["worst_grad"],
                                        fig["params"], TOL)))
        # Unchanged, as a user runs it.
        if control:
            j = control[0]
            p = torchrun(4, os.path.basename(j["script"]), "--config", j["config"], cwd=tmp)
            line = [l for l in p.stdout.splitlines() if l.startswith("self-check ")]
            fig = json.loads(line[0][len("self-check "):]) if line else {}
            results.append((p.returncode == 0 and fig.get("ok") is True,
                            "torchrun --nproc-per-node 4 %s --config config.json: exit %d, "
                            "gradients rel %s%s" % (os.path.basename(j["script"]), p.returncode,
                                                    fig.get("grads"),
                                                    "" if line else ": " + p.stderr[-800:])))
    print("1..%d" % len(results))
    for i, (ok, what) in enumerate(results):
        print("%s %d - %s" % ("ok" if ok else "not ok", i + 1, what))
    print("# %-20s %10s %10s %10s %10s" % ("plan", "logits", "loss", "grads", "params"))
    for name, fig in table:
        print("# %-20s %10.2g %10.2g %10.2g %10.2g" % (name, fig["logits"], fig["loss"],
                                                       fig["grads"], fig["params"]))
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
