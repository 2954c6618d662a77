#!/usr/bin/env python3
"""Issue 14: the DTensor scripts Shardscope exports, run in real PyTorch on 4 CPU ranks (gloo).

For llama, qwen2, mistral and gpt2 (the real configs in data/models/, shrunk to 2 layers as
tests/frameworks/test-hf-reference.py shrinks them), each of megatron, megatron-sp, dp, a
pinned plan (and, for llama and gpt2, megatron with one layer-0 projection pinned whole) on
dp=2,tp=2 is propagated and exported with

    shardscope-cli propagate CONFIG --mesh dp=2,tp=2 --policy P --batch 4 --seq 8 -o PLAN
    shardscope-cli export PLAN --format dtensor -o plan_MODEL_P.py

and every script's own self_check() runs under torch.distributed.run with 4 processes: the
unsharded Hugging Face model and the parallelized one (tensor parallelism on mesh['tp'],
FSDP2 on mesh['dp']) from the same random weights, on the same tokens, must agree in logits,
loss, every gradient and every parameter after one SGD step within 1e-4 relative (the largest
error over the largest reference value). Half the plans get a mesh the caller built, the other
half build their own. Besides:
- one script runs unchanged as `torchrun -m plan_llama_megatron_sp --config config.json`;
- controls: the gpt2 megatron script with lm_head untied, or with c_attn cut in plain halves
  (not by heads of q, k and v), must fail the check, so the check can see a broken script;
- pinned plans the styles cannot express are refused at export (exit 1, the reasons listed).

    test-export-dtensor.py        ($SHARDSCOPE_CLI is the built shardscope-cli)

Issue 16's model zoo (ZOO: test-hf-reference.py's shrunk configs from tests/data/zoo/) runs
under megatron the same way: gemma and llama-3 (one kv head repeated on tp=2), phi3 and
phi3-gqa (fused qkv_proj, gate_up_proj), pythia and pythia-seq (GPT-NeoX), bloom (ALiBi), opt
and opt-350m, falcon (multi-query) and falcon-40b, vit (random images and labels, the
classifier's cross-entropy) and t5 (random encoder and decoder tokens, a cross-entropy of the
decoder's logits). Controls break the phi3, bloom, gemma and falcon scripts once each
(qkv_proj cut in plain thirds, heads left at the model's count, the kv gradient not summed,
the kv head split) and must fail.

Runs in $SHARDSCOPE_FRAMEWORK_VENV/torch (default .venv-frameworks/ in the checkout; made by
tools/framework-venv.sh); skipped, with the reason, where that Python cannot import torch and
transformers. TAP; the table of errors is printed as comments. Arguments: model names, to run
only those; $SHARDSCOPE_EXPORT_DIR keeps the configs, plans and scripts there.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

from framework_venv import HERE, ROOT, VENV, VENV_PYTHON, into_venv, skip
CLI = os.environ.get("SHARDSCOPE_CLI")

B, S = 4, 8
MESH = "dp=2,tp=2"
RANKS = 4
TOL = 1e-4
LLAMA_PINS = ["*.q_proj=[dp,_,_],[tp,_]", "*.k_proj=[dp,_,_],[tp,_]", "*.v_proj=[dp,_,_],[tp,_]",
              "*.o_proj=[dp,_,tp],[_,tp]", "*.gate_proj=[dp,_,_],[tp,_]",
              "*.up_proj=[dp,_,_],[tp,_]", "*.down_proj=[dp,_,tp],[_,tp]",
              "*layernorm=[dp,_,_]", "model.norm=[dp,_,_]"]
GPT2_PINS = ["transformer.h.*.attn.c_attn=[dp,_,_],[_,_,tp,_]",
             "transformer.h.*.attn.c_proj=[dp,_,tp],[tp,_]",
             "*.mlp.c_fc=[dp,_,_],[_,tp]", "*.mlp.c_proj=[dp,_,tp],[tp,_]"]
PINS = {"llama": LLAMA_PINS, "qwen2": LLAMA_PINS, "mistral": LLAMA_PINS, "gpt2": GPT2_PINS}
# Megatron with one projection of layer 0 pinned whole: its output is sliced for the next op
# (PrepareModuleOutput), the other layers keep their wildcard keys.
ONE_WHOLE = {"llama": "model.layers.0.mlp.up_proj=[dp,_,_],[_,_]",
             "gpt2": "transformer.h.0.mlp.c_fc=[dp,_,_],[_,_]"}
POLICIES = ["megatron", "megatron-sp", "dp"]
# The model zoo (issue 16), test-hf-reference.py's shrunk configs from tests/data/zoo/, under
# megatron: model -> its extra propagate options. Gemma and Llama 3 keep one kv head for 4
# query heads, repeated on tp=2 (each rank computes its copy: ReplicatedParallel); Phi-3 fuses
# qkv_proj and gate_up_proj (FusedColwiseParallel); GPT-NeoX and BLOOM fuse query_key_value by
# head (ColwiseParallel); BLOOM's ALiBi is cut to each rank's heads; OPT's learned positions.
ZOO = {"gemma": ["--kv-replicas", "2"], "llama-3": ["--kv-replicas", "2"], "phi3": [],
       "phi3-gqa": [], "pythia": [], "pythia-seq": [], "bloom": [], "opt": [], "opt-350m": [],
       "falcon": ["--kv-replicas", "2"], "falcon-40b": [], "vit": [], "t5": []}
# Images, not tokens: no --seq; the self-check feeds random images and labels.
VISION = {"vit"}
# GPT-2 with a vocabulary tp=2 does not divide (as 50257 over 4): megatron keeps wte and lm_head
# whole (the logits whole, no loss_parallel); megatron-sp splits them on the sequence
# (ActivationParallel) and gathers the logits.
VARIANTS = {"gpt2-v97": ("gpt2", {"vocab_size": 97}, ["megatron", "megatron-sp"])}
# Plans the styles cannot say: the batch split over tp in one region and whole in the next
# (llama), heads gathered between two ops that are no modules (llama, MLP pins only), the
# sequence split over dp (gpt2).
REFUSED = [("llama", ["*.q_proj=[dp,_,_],[tp,_]", "*.down_proj=[_,_,tp],[_,tp]"]),
           ("llama", ["*.gate_proj=[dp,_,_],[tp,_]", "*.up_proj=[dp,_,_],[tp,_]",
                      "*.down_proj=[dp,_,tp],[_,tp]"]),
           # test-hf-reference.py's gpt2 pins: c_proj's sequence split over dp.
           ("gpt2", ["*.mlp.c_fc=[_,_,_],[_,tp]", "*.mlp.c_proj=[_,dp,tp],[tp,_]"])]





def shrunk_configs(folder, models):
    """test-hf-reference.py's shrunk configs, written as config.json per model."""
    spec = importlib.util.spec_from_file_location("hf_reference",
                                                  os.path.join(HERE, "test-hf-reference.py"))
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    paths = {}
    for model in models:
        base, sizes, _ = VARIANTS.get(model, (model, {}, None))
        if base in ref.VISION or base in ref.SEQ2SEQ:
            fname, shrunk = (ref.VISION.get(base) or ref.SEQ2SEQ[base])[:2]
            with open(os.path.join(ROOT, "tests", "data", "zoo", fname)) as f:
                real = json.load(f)
            fields = {k: v for k, v in real.items()
                      if k not in ("model_type", "torch_dtype", "dtype", "label2id")}
            fields.update(shrunk)
            fields["dtype"] = "float32"
            from transformers import AutoConfig
            config = AutoConfig.for_model(real["model_type"], **fields)
        else:
            config = ref.hf_config(base)
        for k, v in sizes.items():
            setattr(config, k, v)
        config.bos_token_id = config.eos_token_id = None  # GPT-2's 50256 is past the shrunk vocab
        d = os.path.join(folder, model)
        config.save_pretrained(d)
        paths[model] = os.path.join(d, "config.json")
    return paths


def cli(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True)


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
        mesh = None
        if job["own_mesh"]:
            mesh = init_device_mesh("cpu", plan.MESH_SHAPE, mesh_dim_names=plan.MESH_DIM_NAMES)
        try:
            figures = plan.self_check(job["config"], mesh=mesh, tolerance=TOL)
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


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        return worker(sys.argv[2])
    into_venv(__file__, ['torch', 'torch.distributed', 'transformers'])
    if not CLI:
        skip("$SHARDSCOPE_CLI is not set (the CLI was not built)")
    only = sys.argv[1:]
    models = [m for m in list(PINS) + list(VARIANTS) + list(ZOO) if not only or m in only]
    results, table, jobs = [], [], []
    keep = os.environ.get("SHARDSCOPE_EXPORT_DIR")
    with tempfile.TemporaryDirectory(prefix="export-dtensor-") as tmp:
        if keep:
            tmp = keep
            os.makedirs(tmp, exist_ok=True)
        configs = shrunk_configs(tmp, models)
        for model in models:
            if model in VARIANTS:
                runs = [(p, ["--policy", p]) for p in VARIANTS[model][2]]
            elif model in ZOO:
                runs = [("megatron", ["--policy", "megatron"] + ZOO[model])]
            else:
                runs = [(p, ["--policy", p]) for p in POLICIES]
                runs.append(("pinned", sum((["--pin", p] for p in PINS[model]), [])))
                if model in ONE_WHOLE:
                    runs.append(("megatron+pin", ["--policy", "megatron", "--pin",
                                                  ONE_WHOLE[model]]))
            for policy, how in runs:
                name = "plan_%s_%s" % (model.replace("-", "_"),
                                       policy.replace("-", "_").replace("+", "_"))
                plan = os.path.join(tmp, name + ".json")
                script = os.path.join(tmp, name + ".py")
                what = "%s under %s on %s" % (model, policy, MESH)
                seq = [] if model in VISION else ["--seq", str(S)]
                p = cli("propagate", configs[model], "--mesh", MESH, *how, "--batch", str(B),
                        *seq, "--allow-tied", "-o", plan)
                if p.returncode != 0:
                    results.append((False, "%s: propagate failed: %s" % (what, p.stderr.strip())))
                    continue
                p = cli("export", plan, "--format", "dtensor", "-o", script)
                if p.returncode != 0:
                    results.append((False, "%s: export refused: %s" % (what, p.stderr.strip())))
                    continue
                with open(script, encoding="ascii") as f:
                    text = f.read()
                # The header names the config by its file name only.
                results.append((tmp not in text, "%s: the script holds no absolute path of "
                                "the config" % what))
                jobs.append({"what": what, "model": model, "policy": policy, "module": name,
                             "script": script, "config": configs[model],
                             "own_mesh": len(jobs) % 2 == 1})
        # Controls: broken copies of the gpt2 megatron script must fail the check, so it can
        # see a wrong script: lm_head untied from wte (an extra parameter, its gradient
        # wrong), c_attn cut in plain halves instead of by heads of q, k and v.
        # The zoo's: Phi-3's qkv_proj cut in plain thirds of its rows (not regrouped by
        # heads of q, k and v), BLOOM's heads left at the model's count (ALiBi uncut), Gemma's
        # k_proj and v_proj gradients not summed over tp (each rank's share alone).
        checked = len(jobs)
        for model, tag, old, new in (
                ("gpt2", "untied", "TIED = ((", "TIED = () and (("),
                ("gpt2", "halves", "groups=3)", "groups=1)"),
                ("phi3", "thirds", "FusedColwiseParallel(groups=3)", "ColwiseParallel()"),
                ("bloom", "heads", "HEADS = {", "HEADS = {} and {"),
                ("gemma", "kvgrad", "grad_placements=(Partial(),)", "grad_placements=(Replicate(),)"),
                ("falcon", "kvcut", "(8, False), (8, False)", "(8, True), (8, True)")):
            control = [j for j in jobs if j["model"] == model and j["policy"] == "megatron"]
            if not control:
                continue
            with open(control[0]["script"], encoding="ascii") as f:
                text = f.read()
            broken = os.path.join(tmp, "plan_%s_%s.py" % (model, tag))
            with open(broken, "w", encoding="ascii") as f:
                f.write(text.replace(old, new))
            jobs.append(dict(control[0], what="control: %s megatron with %s for %s"
                             % (model, new, old), module="plan_%s_%s" % (model, tag),
                             script=broken, control=True, broken=old in text))
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
                                               "logits rel %.2g, gradients rel %.2g" %
                                               (fig["logits"], fig["grads"]))))
                            continue
                        if "error" in fig:
                            results.append((False, "%s: the script crashed: %s"
                                            % (job["what"], fig["error"][:600])))
                            continue
                        table.append((job["model"], job["policy"], fig))
                        results.append((fig["ok"], "%s (%s mesh): logits rel %.2g, loss rel %.2g, "
                                        "%d gradients rel %.2g (worst %s), parameters after SGD "
                                        "rel %.2g (tol %g)" % (
                                            job["what"], "caller's" if job["own_mesh"] else "own",
                                            fig["logits"], fig["loss"], fig["parameters"],
                                            fig["grads"], fig["worst_grad"], fig["params"], TOL)))
        # Unchanged, as a user runs it: torchrun -m MODULE --config CONFIG.
        sp = [j for j in jobs if j["policy"] == "megatron-sp" and not j.get("control")]
        if sp:
            j = sp[0]
            p = torchrun("-m", j["module"], "--config", j["config"], cwd=tmp)
            line = [l for l in p.stdout.splitlines() if l.startswith("self-check ")]
            fig = json.loads(line[0][len("self-check "):]) if line else {}
            results.append((p.returncode == 0 and fig.get("ok") is True,
                            "torchrun --nproc-per-node %d -m %s --config config.json: exit %d, "
                            "gradients rel %s%s" % (RANKS, j["module"], p.returncode,
                                                    fig.get("grads"),
                                                    "" if line else ": " + p.stderr[-800:])))
        for model, pins in REFUSED:
            if model not in configs:
                continue
            plan = os.path.join(tmp, "refused.json")
            p = cli("propagate", configs[model], "--mesh", MESH, *sum((["--pin", x] for x in pins), []),
                    "--batch", str(B), "--seq", str(S), "--allow-tied", "-o", plan)
            e = cli("export", plan, "--format", "dtensor", "-o", os.path.join(tmp, "refused.py"))
            results.append((p.returncode == 0 and e.returncode == 1
                            and "cannot run this plan" in e.stderr
                            and not os.path.exists(os.path.join(tmp, "refused.py")),
                            "%s pinned %s: export refused with the reasons (exit %d): %s"
                            % (model, " ".join(pins), e.returncode,
                               e.stderr.strip().splitlines()[1:2])))
    print("1..%d" % len(results))
    for i, (ok, what) in enumerate(results):
        print("%s %d - %s" % ("ok" if ok else "not ok", i + 1, what))
    print("# %-8s %-12s %10s %10s %10s %10s" % ("model", "plan", "logits", "loss", "grads",
                                                "params"))
    for model, policy, fig in table:
        print("# %-8s %-12s %10.2g %10.2g %10.2g %10.2g" % (model, policy, fig["logits"],
                                                             fig["loss"], fig["grads"],
                                                             fig["params"]))
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
