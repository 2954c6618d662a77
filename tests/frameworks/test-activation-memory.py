#!/usr/bin/env python3
"""Shardscope's activation memory against what PyTorch's autograd keeps for the backward pass.

BERT-large's layer shape (data/validation/models/bert-large-uncased.json, the validation row
v100-bert-large-fp32) cut to 2 layers, batch 4, sequence 512, f32, eager (unfused) attention,
dropout 0.1, in training mode. transformers builds BertModel from that config; one forward
pass runs under torch.autograd.graph.saved_tensors_hooks, which sees every tensor autograd
saves, and each storage counts once (views of one buffer are one allocation), parameters
excluded; with the model's output, which is live when the backward pass starts, that is what
the forward pass leaves for the backward pass. Dropout runs through torch.native_dropout, which keeps a bool mask as CUDA's fused
dropout does (the CPU's default dropout keeps a float one). The sum must equal

    shardscope-cli propagate CONFIG --batch 4 --seq 512 --dtype f32 --mesh dp=1
        --attention unfused --json        -> memory.activations

within 1%. With --attention flash Shardscope drops the stored scores, and the same comparison
must then fail (the check can tell the kernels apart).

    test-activation-memory.py           ($SHARDSCOPE_CLI is the built shardscope-cli)

Runs in $SHARDSCOPE_FRAMEWORK_VENV/torch (default .venv-frameworks/ in the checkout); skipped,
with the reason, where that Python cannot import torch and transformers. TAP.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV = os.environ.get("SHARDSCOPE_FRAMEWORK_VENV") or os.path.join(ROOT, ".venv-frameworks")
VENV_PYTHON = os.path.join(VENV, "torch", "bin", "python")
CLI = os.environ.get("SHARDSCOPE_CLI")
CONFIG = os.path.join(ROOT, "data", "validation", "models", "bert-large-uncased.json")
LAYERS, BATCH, SEQ = 2, 4, 512
TOL = 0.01


def skip(reason):
    print("1..0 # SKIP %s" % reason)
    sys.exit(0)


def torch_saved_bytes(config):
    import torch
    import torch.nn.functional as F
    from transformers import BertConfig, BertModel

    def cuda_like_dropout(input, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return input
        return torch.native_dropout(input, p, True)[0]

    F.dropout = cuda_like_dropout
    torch.manual_seed(0)
    keys = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "intermediate_size", "max_position_embeddings", "type_vocab_size", "hidden_act",
            "layer_norm_eps")
    cfg = BertConfig(attn_implementation="eager", **{k: config[k] for k in keys})
    model = BertModel(cfg, add_pooling_layer=False)
    model.train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            saved[s.data_ptr()] = max(saved.get(s.data_ptr(), 0), s.nbytes())
        return t

    ids = torch.randint(0, cfg.vocab_size, (BATCH, SEQ))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids=ids).last_hidden_state
    # The output is live too when the backward pass starts (the loss reads it), though autograd
    # does not save it.
    pack(out)
    return sum(saved.values())


def shardscope_activations(path, attention):
    out = subprocess.run([CLI, "propagate", path, "--batch", str(BATCH), "--seq", str(SEQ),
                          "--dtype", "f32", "--mesh", "dp=1", "--hardware", "a100-sxm",
                          "--attention", attention, "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["memory"]["activations"]


def main():
    if "--inner" not in sys.argv:
        if not os.path.exists(VENV_PYTHON):
            skip("no framework venv at %s (tools/framework-venv.sh makes it)" % VENV)
        probe = subprocess.run([VENV_PYTHON, "-c", "import torch, transformers"],
                               capture_output=True)
        if probe.returncode != 0:
            skip("%s cannot import torch and transformers" % VENV_PYTHON)
        if not CLI:
            skip("SHARDSCOPE_CLI is not set")
        sys.exit(subprocess.run([VENV_PYTHON, os.path.abspath(__file__), "--inner"]).returncode)

    with open(CONFIG) as f:
        config = json.load(f)
    config["num_hidden_layers"] = LAYERS
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bert-large-2-layers.json")
        with open(path, "w") as f:
            json.dump(config, f)
        unfused = shardscope_activations(path, "unfused")
        flash = shardscope_activations(path, "flash")
    saved = torch_saved_bytes(config)

    print("1..2")
    print("# torch keeps %d bytes (%.1f MiB); shardscope unfused %d (%.1f MiB), flash %d"
          % (saved, saved / 2**20, unfused, unfused / 2**20, flash))
    ok = abs(unfused / saved - 1) <= TOL
    print("%s 1 - unfused attention: shardscope / torch = %.4f (within %g)"
          % ("ok" if ok else "not ok", unfused / saved, TOL))
    differs = abs(flash / saved - 1) > TOL
    print("%s 2 - flash attention's estimate differs from the unfused run's saved bytes: %.4f"
          % ("ok" if differs else "not ok", flash / saved))
    sys.exit(0 if ok and differs else 1)


if __name__ == "__main__":
    main()
