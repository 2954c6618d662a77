#!/usr/bin/env python3
"""Convergence (issue 13, part 4): a tiny model trained for many steps on a fixed synthetic
task under each built-in policy tracks the unsharded loss curve, as ShardFormer's tests do.

    bench-convergence.py SHARDSCOPE_CLI [STEPS] [MODEL]     (MODEL: gpt2 or llama)

Each step is one `run --train` (SGD): the unsharded chain takes the reference's updated
weights from a plan on one device (`--outputs-reference`), each policy's chain the sharded
run's (`--outputs`), so the chains drift apart only by their own rounding. The task: next
token of fixed cyclic sequences (learnable, so the loss falls). Prints the loss curves every
10 steps and, per policy, the largest |sharded - unsharded| / unsharded loss over the steps
against the tolerance (1e-3: f32 rounding compounding over the steps). A benchmark, not a
test: its wall time is printed, never asserted.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import golden_safetensors as st  # noqa: E402

TOL = 1e-3
POLICIES = ["megatron", "megatron-sp", "dp"]


def main():
    cli = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    model = sys.argv[3] if len(sys.argv) > 3 else "gpt2"
    rng = np.random.default_rng(7)
    V, B, S, H = 32, 4, 16, 32
    if model == "gpt2":
        cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V,
               "n_positions": S, "n_embd": H, "n_layer": 2, "n_head": 4,
               "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}
    else:
        cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": V,
               "hidden_size": H, "intermediate_size": 64, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": S,
               "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu",
               "tie_word_embeddings": False, "torch_dtype": "float32"}
    # Fixed task: each row counts up from its own start, modulo the vocabulary.
    ids = (np.arange(S)[None, :] * 3 + np.arange(B)[:, None] * 5) % V
    with tempfile.TemporaryDirectory(prefix="converge-") as tmp:
        config = os.path.join(tmp, "config.json")
        with open(config, "w") as f:
            json.dump(cfg, f)
        tokens = os.path.join(tmp, "tokens.npy")
        np.save(tokens, ids.astype(np.int64))
        plans = {}
        for name, mesh, how in [("unsharded", "a=1", [])] + [
                (p, "dp=2,tp=2", ["--policy", p]) for p in POLICIES]:
            plans[name] = os.path.join(tmp, name + ".plan.json")
            subprocess.run([cli, "propagate", config, "--mesh", mesh, *how, "--batch", str(B),
                            "--seq", str(S), "--hardware", "cpu-local", "--allow-tied", "-o",
                            plans[name]], check=True, capture_output=True)
        # Initial weights: the trial's seeded random ones, as the reference writes them.
        init = os.path.join(tmp, "init.safetensors")
        out = subprocess.run([cli, "run", plans["unsharded"], "--tokens", tokens, "--train",
                              "--lr", "1e-9", "--outputs-reference", init, "--repeat", "1",
                              "--warmup", "0"], capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr)
            return 1
        w0 = {k[len("updated."):]: v for k, v in st.load(init).items() if k.startswith("updated.")}
        # The updated weights after a 1e-9 step are the initial ones to f32 precision; start
        # every chain from exactly the same file.
        weights = {name: os.path.join(tmp, name + ".w.safetensors") for name in plans}
        for name in plans:
            st.save(weights[name], w0)
        losses = {name: [] for name in plans}
        t0 = time.time()
        for step in range(steps):
            for name in plans:
                res = os.path.join(tmp, name + ".out.safetensors")
                which = "--outputs-reference" if name == "unsharded" else "--outputs"
                p = subprocess.run([cli, "run", plans[name], "--weights", weights[name],
                                    "--tokens", tokens, "--train", "--lr", "0.1", which, res,
                                    "--repeat", "1", "--warmup", "0"],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    print("%s step %d: %s" % (name, step, p.stderr.strip()))
                    return 1
                r = st.load(res)
                losses[name].append(float(r["loss"]))
                st.save(weights[name], {k[len("updated."):]: v for k, v in r.items()
                                        if k.startswith("updated.")})
        wall = time.time() - t0
        print("%s, 2 layers, batch %d x seq %d, vocab %d, SGD lr 0.1, %d steps, dp=2,tp=2" % (
            model, B, S, V, steps))
        print("%6s " % "step" + " ".join("%12s" % n for n in plans))
        for s in list(range(0, steps, 10)) + [steps - 1]:
            print("%6d " % s + " ".join("%12.6f" % losses[n][s] for n in plans))
        ok = True
        ref = np.array(losses["unsharded"])
        for p in POLICIES:
            dev = float(np.max(np.abs(np.array(losses[p]) - ref) / ref))
            ok &= dev <= TOL
            print("%-12s max |loss - unsharded| / unsharded over %d steps: %.3g (tolerance %g) %s"
                  % (p, steps, dev, TOL, "tracks" if dev <= TOL else "DIVERGES"))
        print("loss %.4f -> %.4f (unsharded); %.1f s for %d runs (%.0f ms each)" % (
            ref[0], ref[-1], wall, steps * len(plans), 1e3 * wall / (steps * len(plans))))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
