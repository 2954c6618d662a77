#!/usr/bin/env python3
"""Issue 16: the DTensor scripts of mixture-of-experts plans (expert parallelism), run in real
PyTorch on 4 CPU ranks (gloo) against the unsharded Hugging Face model.

Tiny Mixtral and Qwen2-MoE (tests/data/models/mixtral-tiny.json, qwen2-moe-tiny.json: 2
layers, hidden 16, 8 experts, top 2 and top 4; Qwen2-MoE's layer 1 dense, its layer 0 with a
shared expert; capacity factors that make them dropless, as Hugging Face's model is) under
megatron-ep on dp=2,ep=2 and ep=4 are propagated and exported with

    shardscope-cli propagate CONFIG --mesh dp=2,ep=2 --policy megatron-ep --batch 4 --seq 8 -o PLAN
    shardscope-cli export PLAN --format dtensor -o plan_MODEL_MESH.py

and every script's own self_check() runs under torch.distributed.run with 4 processes: the
unsharded model and the parallelized one (ExpertParallel on mesh['ep']: each rank's experts,
the tokens sent to them and back by all_to_all; FSDP2 over dp and ep for everything else)
from the same random weights, on the same tokens, must agree in logits, loss, every gradient
and every parameter after one SGD step within 1e-4 relative. Besides, on every rank:
- each experts module holds only its E/ep experts: the local elements of gate_up_proj and
  down_proj are 1/ep of the model's, and they are experts r E/ep ... (r + 1) E/ep - 1 of the
  unsharded weights for the rank r on ep;
- gradients accumulated over two backward passes (Mixtral on dp=2,ep=2) still match;
- Mixtral with capacity factor 1.25 (3 slots of 8 tokens: tokens are dropped) against the
  unsharded model with the same capacity (which differs from Hugging Face's dropless one);
- controls: the Mixtral dp=2,ep=2 script with the tokens handed to the wrong local expert
  after the dispatch, or with the expert gradients not divided by the data-parallel ranks,
  and the Qwen2-MoE one with them not summed over dp, must fail the check;
- ep=2,mp=2 under megatron-ep alone (its norm and router rules keep the residual stream
  batch-split over ep only, whole on mp, as the experts' dispatch takes it): attention,
  embedding, lm_head and Qwen2-MoE's shared expert tensor-parallel over mp, the experts over
  ep, checked the same way;
- one script runs unchanged as `torchrun -m MODULE --config config.json`;
- on ep=2,mp=2 a plan pinned to split the residual stream's batch over mp around the experts
  (what megatron-ep gave before those rules), which the script cannot do: the export refuses
  with the reasons.

    test-export-dtensor-moe.py        ($SHARDSCOPE_CLI is the built shardscope-cli)

Runs in $SHARDSCOPE_FRAMEWORK_VENV/torch (default .venv-frameworks/ in the checkout; made by
tools/framework-venv.sh); skipped, with the reason, where that Python cannot import torch and
transformers. TAP; the table of errors is printed as comments. $SHARDSCOPE_EXPORT_DIR keeps
the configs, plans and scripts there.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

from framework_venv import HERE, ROOT, into_venv, skip
CLI = os.environ.get("SHARDSCOPE_CLI")

B, S = 4, 8
RANKS = 4
TOL = 1e-4
MODELS = {"mixtral": ("mixtral-tiny.json", {}),
          "qwen2-moe": ("qwen2-moe-tiny.json", {}),
          # 1.25 x top 2 x 8 tokens / 8 experts: 3 slots of a sequence of 8.
          "mixtral-cap": ("mixtral-tiny.json", {"capacity_factor": 1.25})}
# On ep=2,mp=2 megatron-ep keeps the norms and the router batch-split over ep only: attention
# (and Qwen2-MoE's shared expert) is tensor-parallel over mp as in megatron and the experts
# take their tokens whole on mp. The residual add pinned to split the batch over mp as well
# (the policy's plan before those rules) is refused by the export (REFUSED).
SPLIT_PINS = ["model.layers.*.add_mlp=[ep+mp,_,_],[ep+mp,_,_]"]
RUNS = [("mixtral", "dp=2,ep=2", []), ("mixtral", "ep=4", []), ("qwen2-moe", "dp=2,ep=2", []),
        ("qwen2-moe", "ep=4", []), ("mixtral-cap", "dp=2,ep=2", []),
        ("mixtral", "ep=2,mp=2", []), ("qwen2-moe", "ep=2,mp=2", [])]
REFUSED = [("mixtral", "ep=2,mp=2"), ("qwen2-moe", "ep=2,mp=2")]
# (model, mesh, tag, text in the script, its replacement)
CONTROLS = [("mixtral", "dp=2,ep=2", "mapping",
             "got.reshape(ranks, local, rows, C, hidden).transpose(0, 1)",
             "got.reshape(local, ranks, rows, C, hidden)"),
            ("mixtral", "dp=2,ep=2", "undivided", "g = g / replicas", "g = g / 1"),
            ("qwen2-moe", "dp=2,ep=2", "unreduced", "dist.all_reduce(local, group=group)",
             "local")]


def write_configs(folder):
    """Each model's config as transformers saves it (what a user hands to the script)."""
    from transformers import AutoConfig

    paths = {}
    for model, (fname, extra) in MODELS.items():
        with open(os.path.join(ROOT, "tests", "data", "models", fname)) as f:
            fields = json.load(f)
        fields.update(extra)
        config = AutoConfig.for_model(fields.pop("model_type"), **fields)
        # Qwen's 151643 is past the tiny vocabulary.
        config.bos_token_id = config.eos_token_id = None
        d = os.path.join(folder, model)
        config.save_pretrained(d)
        paths[model] = os.path.join(d, "config.json")
    return paths


def cli(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True)


def expert_shards(plan, config_path, mesh):
    """On this rank: for every experts module of the parallelized model, whether its local
    weights are exactly its experts of the unsharded ones, and the local and whole element
    counts of the expert weights."""
    import copy

    import torch
    from torch.distributed.tensor import DTensor
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(config_path)
    torch.manual_seed(0)
    reference = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plan._randomize(reference, 0)
    model = copy.deepcopy(reference)
    mesh = plan.parallelize(model, mesh=mesh, device_type="cpu")
    ep = mesh[plan.EP_DIM]
    n, r = ep.size(), ep.get_local_rank()
    local = whole = 0
    modules, wrong = 0, []
    for name, m in model.named_modules():
        if not name.endswith("mlp.experts"):
            continue
        modules += 1
        for pname in ("gate_up_proj", "down_proj"):
            p = getattr(m, pname)
            want = reference.get_submodule(name).get_parameter(pname).detach()
            per = want.shape[0] // n
            mine = p.to_local() if isinstance(p, DTensor) else p
            local += mine.numel()
            whole += want.numel()
            if mine.shape != want[r * per:(r + 1) * per].shape or not torch.equal(
                    mine.detach(), want[r * per:(r + 1) * per]):
                wrong.append("%s.%s" % (name, pname))
    return {"modules": modules, "local": local, "whole": whole, "ep": n, "ep_rank": r,
            "wrong": wrong}


def accumulated(plan, config_path, mesh):
    """Two backward passes on two batches without a step between, as gradient accumulation
    does: the worst relative error of the expert weights' gradients and of all of them
    against the unsharded model's accumulated gradients."""
    import copy

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(config_path)
    torch.manual_seed(0)
    reference = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plan._randomize(reference, 0)
    model = copy.deepcopy(reference)
    mesh = plan.parallelize(model, mesh=mesh, device_type="cpu")
    rows = plan.local_rows(mesh, B)
    g = torch.Generator().manual_seed(2)
    for _ in range(2):
        ids = torch.randint(0, config.vocab_size, (B, S), generator=g)
        pos = plan.positions(ids)
        plan.causal_lm_loss(reference(ids, position_ids=pos).logits, ids).backward()
        plan.causal_lm_loss(model(ids[rows], position_ids=pos).logits, ids[rows]).backward()
    floor = 1e-2 * max(p.grad.abs().max().item() for p in reference.parameters())
    errors = {n: plan._rel(plan._full(p.grad), reference.get_parameter(n).grad, floor)
              for n, p in model.named_parameters()}
    return {"experts": max(e for n, e in errors.items() if ".experts." in n),
            "all": max(errors.values())}


def dropped_differs(plan, config_path):
    """Whether the plan's capacity changes the unsharded model's logits (tokens dropped)."""
    import copy

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(config_path)
    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plan._randomize(hf, 0)
    capped = copy.deepcopy(hf)
    plan._plan_capacity(capped, config, S)
    ids = torch.randint(0, config.vocab_size, (B, S), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = hf(ids).logits, capped(ids).logits
    return plan._rel(b, a)


def worker(jobs_file):
    """One rank: every job's script imported and self-checked, in the same order on each rank."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    with open(jobs_file) as f:
        jobs = json.load(f)
    results = []
    for job in jobs:
        spec = importlib.util.spec_from_file_location(job["module"], job["script"])
        plan = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(plan)
        mesh = init_device_mesh("cpu", plan.MESH_SHAPE, mesh_dim_names=plan.MESH_DIM_NAMES)
        try:
            figures = plan.self_check(job["config"], mesh=mesh, tolerance=TOL)
            if not job.get("control"):
                shards = [None] * dist.get_world_size()
                dist.all_gather_object(shards, expert_shards(plan, job["config"], mesh))
                figures["shards"] = shards
            if job["model"] == "mixtral" and job["mesh"] == "dp=2,ep=2" and not job.get("control"):
                acc = accumulated(plan, job["config"], mesh)
                worst = [None] * dist.get_world_size()
                dist.all_gather_object(worst, acc)
                figures["accumulated"] = {k: max(w[k] for w in worst) for k in acc}
            if job["model"] == "mixtral-cap":
                figures["dropped"] = dropped_differs(plan, job["config"])
        except Exception as e:  # a script that crashes is a failure, reported as such
            figures = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        results.append(figures)
        dist.barrier()
    if dist.get_rank() == 0:
        with open(jobs_file + ".out", "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()


def torchrun(*args, cwd=None):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", str(RANKS), *args],
                          capture_output=True, text=True, cwd=cwd, env=env)


def shard_result(job, shards):
    """Each rank holds its E/ep experts of every MoE layer, and only those."""
    ok = all(s["modules"] > 0 and not s["wrong"] and s["local"] * s["ep"] == s["whole"]
             for s in shards)
    first = shards[0]
    return (ok, "%s: each of %d ranks holds 1/%d of the expert weights (%d of %d elements in "
            "%d experts modules), its own experts by its rank on ep%s"
            % (job["what"], len(shards), first["ep"], first["local"], first["whole"],
               first["modules"],
               "" if ok else ": " + "; ".join("rank %d: %s" % (i, s["wrong"] or s["local"])
                                              for i, s in enumerate(shards))))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        return worker(sys.argv[2])
    into_venv(__file__, ['torch', 'torch.distributed', 'transformers'])
    if not CLI:
        skip("$SHARDSCOPE_CLI is not set (the CLI was not built)")
    results, table, jobs = [], [], []
    keep = os.environ.get("SHARDSCOPE_EXPORT_DIR")
    with tempfile.TemporaryDirectory(prefix="export-dtensor-moe-") as tmp:
        if keep:
            tmp = keep
            os.makedirs(tmp, exist_ok=True)
        configs = write_configs(tmp)
        scripts = {}
        for model, mesh, pins in RUNS:
            name = "plan_%s_%s" % (model.replace("-", "_"),
                                   mesh.replace("=", "").replace(",", "_"))
            plan = os.path.join(tmp, name + ".json")
            script = os.path.join(tmp, name + ".py")
            what = "%s under megatron-ep%s on %s" % (model, " + %d pins" % len(pins) if pins else "",
                                                     mesh)
            p = cli("propagate", configs[model], "--mesh", mesh, "--policy", "megatron-ep",
                    *sum((["--pin", x] for x in pins), []),
                    "--batch", str(B), "--seq", str(S), "-o", plan)
            if p.returncode != 0:
                results.append((False, "%s: propagate failed: %s" % (what, p.stderr.strip())))
                continue
            p = cli("export", plan, "--format", "dtensor", "-o", script)
            if p.returncode != 0:
                results.append((False, "%s: export refused: %s" % (what, p.stderr.strip())))
                continue
            with open(script, encoding="ascii") as f:
                text = f.read()
            # The plan's AllToAlls are the style's (the CLI's notes say so), and the header
            # names the expert parallelism.
            tp = "mp" in mesh
            results.append(("ExpertParallel's all_to_all over ep" in p.stderr
                             and "Expert parallelism over ep" in text
                             and ("TP_DIM = 'mp'" in text and "RowwiseParallel()" in text
                                  if tp else "TP_DIM = None" in text),
                             "%s: the dispatch and combine AllToAlls are ExpertParallel's "
                             "(notes and header)%s" % (what, ", attention tensor-parallel over "
                                                       "mp" if tp else "")))
            scripts[(model, mesh)] = script
            jobs.append({"what": what, "model": model, "mesh": mesh, "module": name,
                         "script": script, "config": configs[model]})
        for model, mesh, tag, old, new in CONTROLS:
            if (model, mesh) not in scripts:
                continue
            with open(scripts[(model, mesh)], encoding="ascii") as f:
                text = f.read()
            name = "plan_%s_%s" % (model.replace("-", "_"), tag)
            broken = os.path.join(tmp, name + ".py")
            with open(broken, "w", encoding="ascii") as f:
                f.write(text.replace(old, new))
            jobs.append({"what": "control: %s on %s with %s for %s" % (model, mesh, new, old),
                         "model": model, "mesh": mesh, "module": name, "script": broken,
                         "config": configs[model], "control": True, "broken": old in text})
        jobs_file = os.path.join(tmp, "jobs.json")
        with open(jobs_file, "w") as f:
            json.dump(jobs, f)
        if jobs:
            p = torchrun(os.path.abspath(__file__), "--worker", jobs_file)
            if p.returncode != 0 or not os.path.exists(jobs_file + ".out"):
                results.append((False, "torch.distributed.run of %d scripts failed (exit %d): %s"
                                % (len(jobs), p.returncode, p.stderr.strip()[-1500:])))
            else:
                with open(jobs_file + ".out") as f:
                    for job, fig in zip(jobs, json.load(f)):
                        if job.get("control"):
                            results.append((job["broken"] and not fig["ok"],
                                            "%s: the self-check fails it: %s"
                                            % (job["what"], fig.get("error") or
                                               "logits rel %.2g, gradients rel %.2g (worst %s)"
                                               % (fig["logits"], fig["grads"],
                                                  fig["worst_grad"]))))
                            continue
                        if "error" in fig:
                            results.append((False, "%s: the script crashed: %s"
                                            % (job["what"], fig["error"][:600])))
                            continue
                        table.append((job["model"], job["mesh"], fig))
                        results.append((fig["ok"], "%s: logits rel %.2g, loss rel %.2g, "
                                        "%d gradients rel %.2g (worst %s), parameters after SGD "
                                        "rel %.2g (tol %g)" % (
                                            job["what"], fig["logits"], fig["loss"],
                                            fig["parameters"], fig["grads"], fig["worst_grad"],
                                            fig["params"], TOL)))
                        results.append(shard_result(job, fig["shards"]))
                        if "accumulated" in fig:
                            acc = fig["accumulated"]
                            results.append((acc["all"] < TOL, "%s: gradients accumulated over two "
                                            "backward passes: experts rel %.2g, all rel %.2g"
                                            % (job["what"], acc["experts"], acc["all"])))
                        if "dropped" in fig:
                            results.append((fig["dropped"] > 1e-3,
                                            "%s: the plan's 3 slots drop tokens: its unsharded "
                                            "model's logits differ from Hugging Face's dropless "
                                            "ones by %.2g relative" % (job["what"],
                                                                       fig["dropped"])))
        # Unchanged, as a user runs it: torchrun -m MODULE --config CONFIG.
        if ("qwen2-moe", "ep=4") in scripts:
            j = [j for j in jobs if j["model"] == "qwen2-moe" and j["mesh"] == "ep=4"][0]
            p = torchrun("-m", j["module"], "--config", j["config"], cwd=tmp)
            line = [l for l in p.stdout.splitlines() if l.startswith("self-check ")]
            fig = json.loads(line[0][len("self-check "):]) if line else {}
            results.append((p.returncode == 0 and fig.get("ok") is True,
                            "torchrun --nproc-per-node %d -m %s --config config.json: exit %d, "
                            "gradients rel %s%s" % (RANKS, j["module"], p.returncode,
                                                    fig.get("grads"),
                                                    "" if line else ": " + p.stderr[-800:])))
        for model, mesh in REFUSED:
            plan = os.path.join(tmp, "refused.json")
            out = os.path.join(tmp, "refused.py")
            p = cli("propagate", configs[model], "--mesh", mesh, "--policy", "megatron-ep",
                    *sum((["--pin", x] for x in SPLIT_PINS), []),
                    "--batch", str(B), "--seq", str(S), "-o", plan)
            e = cli("export", plan, "--format", "dtensor", "-o", out)
            results.append((p.returncode == 0 and e.returncode == 1
                            and "cannot run this plan" in e.stderr and "on mp" in e.stderr
                            and not os.path.exists(out),
                            "%s under megatron-ep + %s on %s: export refused with the reasons "
                            "(exit %d): %s" % (model, SPLIT_PINS[0], mesh, e.returncode,
                                               e.stderr.strip().splitlines()[1:2])))
    print("1..%d" % len(results))
    for i, (ok, what) in enumerate(results):
        print("%s %d - %s" % ("ok" if ok else "not ok", i + 1, what))
    print("# %-12s %-10s %10s %10s %10s %10s" % ("model", "mesh", "logits", "loss", "grads",
                                                 "params"))
    for model, mesh, fig in table:
        print("# %-12s %-10s %10.2g %10.2g %10.2g %10.2g" % (model, mesh, fig["logits"],
                                                              fig["loss"], fig["grads"],
                                                              fig["params"]))
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
