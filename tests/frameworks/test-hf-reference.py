#!/usr/bin/env python3
"""Issue 13's "done when": Shardscope's training step against the Hugging Face model itself.
Issue 16 adds the model zoo's families (ZOO, from tests/data/zoo/), the mixtures of experts
(MOE_MODELS), and T5 and ViT (SEQ2SEQ, VISION; their other inputs go in the checkpoint, their
labels are given with --labels or are the executor's default, see there).

For gpt2, llama, mistral, qwen2 and bert (the real configs in data/models/, shrunk to 2
layers and small sizes, every other field kept: activation, epsilons, rope theta, key/value
head ratio, tied embeddings), transformers builds the model with `from_config` and a fixed
seed and writes it with `save_pretrained` (config.json and model.safetensors). The Hugging
Face model then computes, in torch f32 with dropout off (eval mode), the logits, the loss
(causal LM with labels = the tokens, which it shifts itself; masked LM for BERT with every
position labelled by its own token) and the gradient of every parameter, by the names
`named_parameters` gives (a tied weight once). Each model runs through

    shardscope-cli propagate DIR/config.json --mesh dp=2,tp=2 --policy P --batch 2 --seq 8 ...
    shardscope-cli run PLAN --weights DIR --tokens T.npy --train --outputs OUT.safetensors

(with --tolerance 1e-4: the run's own sharded-against-unsharded check would otherwise stop
at 1e-5, which BERT's key-bias gradient, zero in exact arithmetic and 1e-8 of the largest
gradient in f32, exceeds under dp) under megatron, megatron-sp, dp and a pinned plan, and
`logits`, `loss` and every
`grad.<name>` of OUT (the sharded step) and of --outputs-reference (the unsharded one) must
match the Hugging Face values within 1e-4 relative.

    test-hf-reference.py           ($SHARDSCOPE_CLI is the built shardscope-cli)

Runs in $SHARDSCOPE_FRAMEWORK_VENV/torch (default .venv-frameworks/ in the checkout; made by
tools/framework-venv.sh); skipped, with the reason, where that Python cannot import torch and
transformers. TAP; the table of errors is printed as comments. Arguments: model names, to run
only those; $SHARDSCOPE_HF_REFERENCE_DIR keeps the checkpoints, tokens and plans there.
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

from framework_venv import HERE, ROOT, VENV, VENV_PYTHON, into_venv, skip
CLI = os.environ.get("SHARDSCOPE_CLI")

B, S = 2, 8
MESH = "dp=2,tp=2"
TOL = 1e-4
# A gradient's scale is at least this fraction of the model's largest gradient entry: a
# gradient that is zero in exact arithmetic (BERT's key bias: softmax ignores a constant
# added to every score) is f32 round-off on both sides.
GRAD_FLOOR = 1e-3
GPT2_PINS = ["*.mlp.c_fc=[_,_,_],[_,tp]", "*.mlp.c_proj=[_,dp,tp],[tp,_]"]
LLAMA_PINS = ["*.q_proj=[dp,_,_],[tp,_]", "*.down_proj=[_,_,tp],[_,tp]"]
BERT_PINS = ["*.intermediate.dense=[dp,_,_],[tp,_]"]
NEOX_PINS = ["*.dense_h_to_4h=[dp,_,_],[tp,_]", "*.attention.dense=[_,_,tp],[_,tp]"]
OPT_PINS = ["*.fc1=[dp,_,_],[tp,_]", "*.self_attn.out_proj=[_,_,tp],[_,tp]"]
FALCON_PINS = ["*.dense_h_to_4h=[dp,_,_],[tp,_]", "*.self_attention.dense=[_,_,tp],[_,tp]"]
PHI3_PINS = ["*.gate_up_proj=[dp,_,_],[_,tp,_]", "*.down_proj=[_,_,tp],[_,tp]"]
T5_PINS = ["*.DenseReluDense.wo=[_,_,tp],[_,tp]", "*.EncDecAttention.q=[dp,_,_],[tp,_]"]
VIT_PINS = ["*.intermediate.dense=[dp,_,_],[tp,_]", "*.attention.output.dense=[_,_,tp],[_,tp]"]

# model -> (real config in data/models/, the sizes that shrink it, pins). Head counts keep
# the real key/value ratio where it is grouped (mistral 4:1, qwen2 7:1).
MODELS = {
    "gpt2": ("gpt2.json", {"vocab_size": 96, "n_embd": 16, "n_head": 4, "n_layer": 2,
                           "n_positions": 32, "n_ctx": 32}, GPT2_PINS),
    "llama": ("llama-2-7b.json", {"vocab_size": 80, "hidden_size": 16, "intermediate_size": 24,
                                  "num_hidden_layers": 2, "num_attention_heads": 4,
                                  "num_key_value_heads": 4, "max_position_embeddings": 32},
              LLAMA_PINS),
    "mistral": ("mistral-7b-v0.1.json", {"vocab_size": 80, "hidden_size": 32,
                                         "intermediate_size": 48, "num_hidden_layers": 2,
                                         "num_attention_heads": 8, "num_key_value_heads": 2,
                                         "max_position_embeddings": 64}, LLAMA_PINS),
    "qwen2": ("qwen2-0.5b.json", {"vocab_size": 88, "hidden_size": 56, "intermediate_size": 40,
                                  "num_hidden_layers": 2, "num_attention_heads": 14,
                                  "num_key_value_heads": 2, "max_position_embeddings": 64,
                                  "max_window_layers": 2}, LLAMA_PINS),
    "bert": ("bert-base-uncased.json", {"vocab_size": 72, "hidden_size": 16,
                                        "intermediate_size": 32, "num_hidden_layers": 2,
                                        "num_attention_heads": 4, "max_position_embeddings": 32},
             BERT_PINS),
}
# The model zoo of issue 16: hub configs in tests/data/zoo/, shrunk the same way. A fourth
# member gives propagate more options: llama-3 keeps one kv head for 4 query heads, so on
# tp=2 each kv head is repeated (--kv-replicas 2) and each rank computes its copy.
ZOO = {
    "llama-3": ("llama-3-8b.json", {"vocab_size": 80, "hidden_size": 32, "intermediate_size": 48,
                                    "num_hidden_layers": 2, "num_attention_heads": 4,
                                    "num_key_value_heads": 1, "max_position_embeddings": 64},
                LLAMA_PINS, ["--kv-replicas", "2"]),
    # Llama 3.1's rope_type llama3, with an original context of 64 so that one of the four
    # frequency pairs blends and two slow down.
    "llama-3.1": ("llama-3.1-8b.json", {"vocab_size": 80, "hidden_size": 32,
                                        "intermediate_size": 48, "num_hidden_layers": 2,
                                        "num_attention_heads": 4, "num_key_value_heads": 2,
                                        "max_position_embeddings": 64, "rope_theta": 10000.0,
                                        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
                                                         "high_freq_factor": 4.0,
                                                         "original_max_position_embeddings": 64,
                                                         "rope_type": "llama3"}},
                  LLAMA_PINS),
    # Gemma: the scaled embedding, (1 + weight) norms, GeGLU; head_dim set apart (16, not
    # hidden / heads = 8); multi-query like gemma-2b, so repeated on tp=2.
    "gemma": ("gemma-2b.json", {"vocab_size": 80, "hidden_size": 32, "intermediate_size": 48,
                                "num_hidden_layers": 2, "num_attention_heads": 4,
                                "num_key_value_heads": 1, "head_dim": 16,
                                "max_position_embeddings": 64},
              LLAMA_PINS, ["--kv-replicas", "2"]),
    # Phi-3: fused qkv_proj and gate_up_proj; then with grouped kv heads (qkv_proj whole).
    "phi3": ("phi-3-mini-4k.json", {"vocab_size": 80, "hidden_size": 32,
                                    "intermediate_size": 48, "num_hidden_layers": 2,
                                    "num_attention_heads": 4, "num_key_value_heads": 4,
                                    "max_position_embeddings": 64, "sliding_window": 63,
                                    "pad_token_id": 0},
             PHI3_PINS),
    "phi3-gqa": ("phi-3-mini-4k.json", {"vocab_size": 80, "hidden_size": 32,
                                        "intermediate_size": 48, "num_hidden_layers": 2,
                                        "num_attention_heads": 4, "num_key_value_heads": 2,
                                        "max_position_embeddings": 64, "sliding_window": 63,
                                    "pad_token_id": 0},
                 PHI3_PINS),
    # GPT-NeoX: partial rotary (a quarter of each head), per-head fused qkv, parallel
    # residual; then the sequential residual.
    "pythia": ("pythia-160m.json", {"vocab_size": 80, "hidden_size": 32, "intermediate_size": 48,
                                    "num_hidden_layers": 2, "num_attention_heads": 4,
                                    "max_position_embeddings": 64}, NEOX_PINS),
    "pythia-seq": ("pythia-160m.json", {"vocab_size": 80, "hidden_size": 32,
                                        "intermediate_size": 48, "num_hidden_layers": 2,
                                        "num_attention_heads": 2, "max_position_embeddings": 64,
                                        "use_parallel_residual": False}, NEOX_PINS),
    # OPT: learned positions offset by two, tied, ReLU; opt-350m's norms after the adds and
    # its narrower embedding with project_in/out.
    "opt": ("opt-125m.json", {"vocab_size": 80, "hidden_size": 32, "ffn_dim": 48,
                              "word_embed_proj_dim": 32, "num_hidden_layers": 2,
                              "num_attention_heads": 4, "max_position_embeddings": 64}, OPT_PINS),
    "opt-350m": ("opt-350m.json", {"vocab_size": 80, "hidden_size": 32, "ffn_dim": 48,
                                   "word_embed_proj_dim": 16, "num_hidden_layers": 2,
                                   "num_attention_heads": 4, "max_position_embeddings": 64},
                 OPT_PINS),
    # Falcon: multi-query (the one kv head repeated on tp=2), parallel attention and MLP;
    # then falcon-40b's grouped query_key_value with ln_attn and ln_mlp.
    "falcon": ("falcon-7b.json", {"vocab_size": 80, "hidden_size": 32, "num_hidden_layers": 2,
                                  "num_attention_heads": 4}, FALCON_PINS, ["--kv-replicas", "2"]),
    "falcon-40b": ("falcon-40b.json", {"vocab_size": 80, "hidden_size": 32,
                                       "num_hidden_layers": 2, "num_attention_heads": 8,
                                       "num_kv_heads": 2}, FALCON_PINS),
    # BLOOM: ALiBi with 6 heads (4 of the power of two, 2 interleaved from the next),
    # split 3 per rank; the embedding's LayerNorm.
    "bloom": ("bloom-560m.json", {"vocab_size": 80, "hidden_size": 48, "n_layer": 2, "n_head": 6,
                                  "pad_token_id": 0}, FALCON_PINS),
}
for _name, _entry in ZOO.items():
    MODELS[_name] = (os.path.join("tests", "data", "zoo", _entry[0]),) + _entry[1:]
POLICIES = ["megatron", "megatron-sp", "dp"]

# ---- Mixture of experts (issue 16): the hub configs in data/models/, shrunk the same
# way, with 8 experts so that ep=4 divides them and a capacity_factor of experts / top_k, so
# that every expert has a slot for every token of a row (C = S): Hugging Face runs the experts
# dropless, and so does the graph then. Batch 8 (the dispatch is data-parallel over dp x ep),
# on dp=2,ep=4 under megatron-ep (experts over ep, AllToAll dispatch and combine) and dp.
# qwen2_moe keeps its shared expert and gets one dense layer (mlp_only_layers). save_pretrained
# writes the experts in the hub's per-expert layout (Mixtral's block_sparse_moe.experts.N.w1,
# Qwen2-MoE's mlp.experts.N.gate_proj, ...), which `run --weights` turns into the graph's 3-D
# parameters; the gradients are compared by the names named_parameters gives.
MOE_MODELS = {
    "mixtral": ("mixtral-8x7b-v0.1.json", {"vocab_size": 64, "hidden_size": 16,
                                           "intermediate_size": 24, "num_hidden_layers": 2,
                                           "num_attention_heads": 4, "num_key_value_heads": 2,
                                           "max_position_embeddings": 64,
                                           "capacity_factor": 4.0}),
    "qwen2_moe": ("qwen1.5-moe-a2.7b.json", {"vocab_size": 72, "hidden_size": 16,
                                             "intermediate_size": 20, "num_hidden_layers": 2,
                                             "num_attention_heads": 4, "num_key_value_heads": 4,
                                             "max_position_embeddings": 64, "num_experts": 8,
                                             "moe_intermediate_size": 12,
                                             "shared_expert_intermediate_size": 20,
                                             "mlp_only_layers": [1], "capacity_factor": 2.0}),
}
MOE_DATA = os.path.join(ROOT, "data", "models")  # the zoo's mixtral and qwen2-moe
MOE_B = 8
# (policy, mesh): expert parallelism, plain data parallelism, and the experts tensor-parallel.
MOE_RUNS = [("megatron-ep", "dp=2,ep=4"), ("dp", "dp=2,ep=4"), ("megatron", "dp=2,tp=2"),
            ("megatron-sp", "dp=2,tp=2")]


def model_setup(model):
    """(config file, sizes, batch, runs) of a model of either table; a run is (label, mesh,
    propagate arguments)."""
    if model in MOE_MODELS:
        fname, sizes = MOE_MODELS[model]
        runs = [(p, mesh, ["--policy", p]) for p, mesh in MOE_RUNS]
        return os.path.join(MOE_DATA, fname), sizes, MOE_B, runs
    fname, sizes, pins = MODELS[model][:3]
    # The zoo's entries may add propagate options (--kv-replicas, ...) to every run.
    extra = list(MODELS[model][3]) if len(MODELS[model]) > 3 else []
    runs = [(p, MESH, ["--policy", p] + extra) for p in POLICIES]
    runs.append(("pinned", MESH, sum((["--pin", p] for p in pins), []) + extra))
    path = fname if os.sep in fname else os.path.join("data", "models", fname)
    return os.path.join(ROOT, path), sizes, B, runs





def hf_config(model):
    """The real config, shrunk, as a transformers config object (f32, 2 layers)."""
    from transformers import AutoConfig

    path, sizes = model_setup(model)[:2]
    with open(path) as f:
        real = json.load(f)
    fields = {k: v for k, v in real.items()
              if k not in ("model_type", "architectures", "torch_dtype", "dtype")}
    fields.update(sizes)
    fields["architectures"] = real["architectures"]
    fields["dtype"] = "float32"
    return AutoConfig.for_model(real["model_type"], **fields)


def hf_model(model, config, seed):
    """from_config with a fixed seed, then every parameter drawn again from the same seed:
    Hugging Face's own init (std 0.02, zero biases, unit norm weights) would hide a bias
    added twice, a norm weight misapplied or a transposed matrix in near-zero logits."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    torch.manual_seed(seed)
    cls = AutoModelForMaskedLM if model == "bert" else AutoModelForCausalLM
    m = cls.from_config(config, dtype=torch.float32)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in m.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if p.dim() >= 2:
                p.copy_(0.3 * r)
            elif name.endswith("bias"):
                p.copy_(0.1 * r)
            else:  # norm weights
                p.copy_(1.0 + 0.1 * r)
    m.eval()  # dropout off: what the trial runs
    return m


def hf_reference(m, ids):
    """Logits, loss and the gradient of every named parameter, in f32 torch."""
    import torch

    t = torch.tensor(ids, dtype=torch.long)
    m.zero_grad(set_to_none=True)
    out = m(input_ids=t, labels=t)
    out.loss.backward()
    grads = {name: p.grad.detach().numpy().copy() for name, p in m.named_parameters()}
    return out.logits.detach().numpy().copy(), float(out.loss.detach()), grads


def rel(got, want, floor=0.0):
    import numpy as np

    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.abs(got - want).max() / max(float(np.abs(want).max()), floor, 1e-30))


# transformers 5 names some modules otherwise than the checkpoints on the hub (which its
# save_pretrained still writes, and Shardscope reads): named_parameters -> checkpoint name.
CHECKPOINT_NAMES = {"pythia": {"lm_head.weight": "embed_out.weight"}}


def compare(res, logits, loss, grads, names=None):
    """Max relative errors (logits, loss, grads) and what is wrong, if anything."""
    msgs = []
    if names:
        grads = {names.get(k, k): v for k, v in grads.items()}
    got = res.get("logits")
    if got is None or got.shape != logits.shape:
        msgs.append("logits missing or %s, want %s" % (None if got is None else list(got.shape),
                                                       list(logits.shape)))
        e_logits = float("inf")
    else:
        e_logits = rel(got, logits)
    e_loss = rel(res["loss"], loss) if "loss" in res else float("inf")
    floor = GRAD_FLOOR * max(float(abs(g).max()) for g in grads.values())
    e_grad, worst = 0.0, ""
    for name, want in grads.items():
        g = res.get("grad." + name)
        if g is None or tuple(g.shape) != tuple(want.shape):
            msgs.append("grad.%s missing or %s, want %s" % (
                name, None if g is None else list(g.shape), list(want.shape)))
            e_grad = float("inf")
            continue
        e = rel(g, want, floor)
        if e > e_grad:
            e_grad, worst = e, name
    extra = sorted(k for k in res if k.startswith("grad.") and k[5:] not in grads)
    msgs += ["%s is not a named parameter" % k for k in extra]
    if e_logits > TOL:
        msgs.append("logits rel %.3g" % e_logits)
    if e_loss > TOL:
        msgs.append("loss %.7g vs Hugging Face %.7g" % (float(res.get("loss", float("nan"))), loss))
    if e_grad > TOL:
        msgs.append("worst gradient grad.%s rel %.3g" % (worst, e_grad))
    return e_logits, e_loss, e_grad, worst, msgs


# Encoder-decoder and vision (issue 16): T5ForConditionalGeneration and
# ViTForImageClassification, their other inputs given with the weights (decoder_input_ids,
# pixel_values beside the parameters in model.safetensors), trained one step as the decoder
# families are (megatron, megatron-sp, dp and a pinned plan): logits, loss and every gradient
# against the Hugging Face model's. T5's loss is
# Hugging Face's with labels = the decoder's tokens shifted left and the last position -100
# (the executor's default for a graph with decoder_input_ids: they are the labels shifted
# right); t5-gated gives random labels with --labels, one of them -100 (left out of the mean);
# ViT gives one random class per image with --labels. The reference is the same model in f64
# (the f32 weights and inputs, converted): torch's own f32 gradients are 8.9e-5 (t5-gated's
# cross-attention q) and 9.1e-5 (ViT's key bias, zero in exact arithmetic, against the floor)
# from its f64 ones, the executor's 5.5e-5 and 1.9e-5, so against torch f32 the two
# round-offs add up to the tolerance.
SEQ2SEQ = {
    "t5": ("t5-small.json", {"vocab_size": 80, "d_model": 32, "d_kv": 8, "d_ff": 48,
                             "num_layers": 2, "num_heads": 4,
                             "relative_attention_num_buckets": 8,
                             "relative_attention_max_distance": 6}, T5_PINS),
    "t5-gated": ("t5-small.json", {"vocab_size": 80, "d_model": 32, "d_kv": 8, "d_ff": 48,
                                   "num_layers": 2, "num_heads": 4,
                                   "feed_forward_proj": "gated-gelu",
                                   "tie_word_embeddings": False}, T5_PINS),
}

VISION = {
    "vit": ("vit-base-patch16-224.json", {"hidden_size": 32, "intermediate_size": 48,
                                          "num_hidden_layers": 2, "num_attention_heads": 4,
                                          "image_size": 8, "patch_size": 2,
                                          "id2label": {str(i): "l%d" % i for i in range(6)}},
            VIT_PINS),
}


def grads_of(m):
    return {name: p.grad.detach().numpy().copy() for name, p in m.named_parameters()}


def checkpoint_names(m, folder):
    """named_parameters -> the checkpoint's name where transformers 5 renames a module (ViT's
    vit.layers.N.attention.q_proj is vit.encoder.layer.N.attention.attention.query in the
    file save_pretrained writes): the one stored tensor with the parameter's values (every
    parameter is drawn at random, so no two are equal)."""
    import numpy as np
    from safetensors.numpy import load_file

    stored = load_file(os.path.join(folder, "model.safetensors"))
    names = {}
    for name, p in m.named_parameters():
        if name in stored:
            continue
        value = p.detach().numpy()
        same = [k for k, v in stored.items() if v.shape == value.shape and np.array_equal(v, value)]
        if len(same) == 1:
            names[name] = same[0]
    return names


def train_runs(tmp, model, folder, m, logits, loss, grads, pins, results, table, tokens=None,
               labels=None):
    """propagate under each policy and with @pins, run --train, logits, loss and every
    gradient (sharded and unsharded) against m's."""
    from safetensors.numpy import load_file

    names = checkpoint_names(m, folder)
    runs = [(p, ["--policy", p]) for p in POLICIES]
    runs.append(("pinned", sum((["--pin", p] for p in pins), [])))
    for policy, how in runs:
        plan = os.path.join(tmp, "%s-%s.plan.json" % (model, policy))
        out = os.path.join(tmp, "out.safetensors")
        ref = os.path.join(tmp, "ref.safetensors")
        what = "%s under %s on %s" % (model, policy, MESH)
        seq = ["--seq", str(S)] if tokens else []
        p = subprocess.run([CLI, "propagate", os.path.join(folder, "config.json"), "--mesh", MESH,
                            *how, "--batch", str(B), *seq, "--hardware", "cpu-local",
                            "--allow-tied", "-o", plan],
                           capture_output=True, text=True)
        if p.returncode != 0:
            results.append((False, "%s: propagate failed: %s" % (what, p.stderr.strip())))
            continue
        more = (["--tokens", tokens] if tokens else []) + (["--labels", labels] if labels else [])
        p = subprocess.run([CLI, "run", plan, "--weights", folder, *more, "--train",
                            "--outputs", out, "--outputs-reference", ref, "--repeat", "1",
                            "--warmup", "0", "--tolerance", str(TOL)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            results.append((False, "%s: run --train exit %d: %s" % (what, p.returncode,
                                                                    p.stderr.strip()[:600])))
            continue
        for side, f in (("sharded", out), ("unsharded", ref)):
            el, ez, eg, worst, msgs = compare(load_file(f), logits, loss, grads, names)
            if side == "sharded":
                table.append((model, policy, el, ez, eg, worst))
            results.append((not msgs, "%s, %s: vs Hugging Face %s, logits rel %.2g, loss rel "
                            "%.2g, %d gradients rel %.2g (tol %g)%s" % (
                                what, side, type(m).__name__, el, ez, len(grads), eg, TOL,
                                "" if not msgs else "; " + "; ".join(msgs[:4]))))


def seq2seq_runs(tmp, only, results, table):
    import numpy as np
    import torch
    from safetensors.numpy import load_file, save_file
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    for k, (model, (fname, sizes, pins)) in enumerate(SEQ2SEQ.items()):
        if only and model not in only:
            continue
        with open(os.path.join(ROOT, "tests", "data", "zoo", fname)) as f:
            real = json.load(f)
        fields = {key: v for key, v in real.items()
                  if key not in ("model_type", "torch_dtype", "dtype")}
        fields.update(sizes)
        fields["dtype"] = "float32"
        config = AutoConfig.for_model(real["model_type"], **fields)
        torch.manual_seed(41 + k)
        m = AutoModelForSeq2SeqLM.from_config(config, dtype=torch.float32)
        g = torch.Generator().manual_seed(41 + k)
        with torch.no_grad():
            for name, p in m.named_parameters():
                r = torch.randn(p.shape, generator=g, dtype=torch.float32)
                p.copy_(0.3 * r if p.dim() >= 2 else 1.0 + 0.1 * r)
        m.eval()
        folder = os.path.join(tmp, model)
        m.save_pretrained(folder)
        rng = np.random.default_rng(41 + k)
        ids = rng.integers(0, config.vocab_size, size=(B, S)).astype(np.int64)
        dec = rng.integers(0, config.vocab_size, size=(B, S)).astype(np.int64)
        tokens = os.path.join(tmp, model + "-tokens.npy")
        np.save(tokens, ids)
        path = os.path.join(folder, "model.safetensors")
        weights = load_file(path)
        weights["decoder_input_ids"] = dec
        save_file(weights, path)
        labels = None
        if k == 0:  # the default: the decoder's next token, the last position left out
            lab = np.concatenate([dec[:, 1:], np.full((B, 1), -100, np.int64)], axis=1)
        else:
            lab = rng.integers(0, config.vocab_size, size=(B, S)).astype(np.int64)
            lab[1, 3] = -100
            labels = os.path.join(tmp, model + "-labels.npy")
            np.save(labels, lab)
        m64 = copy.deepcopy(m).double()
        out = m64(input_ids=torch.tensor(ids), decoder_input_ids=torch.tensor(dec),
                  labels=torch.tensor(lab))
        out.loss.backward()
        train_runs(tmp, model, folder, m, out.logits.detach().numpy(), float(out.loss.detach()),
                   grads_of(m64), pins, results, table, tokens, labels)


def vision_runs(tmp, only, results, table):
    import numpy as np
    import torch
    from safetensors.numpy import load_file, save_file
    from transformers import AutoConfig, AutoModelForImageClassification

    for k, (model, (fname, sizes, pins)) in enumerate(VISION.items()):
        if only and model not in only:
            continue
        with open(os.path.join(ROOT, "tests", "data", "zoo", fname)) as f:
            real = json.load(f)
        fields = {key: v for key, v in real.items()
                  if key not in ("model_type", "torch_dtype", "dtype", "label2id")}
        fields.update(sizes)
        fields["dtype"] = "float32"
        config = AutoConfig.for_model(real["model_type"], **fields)
        torch.manual_seed(31 + k)
        m = AutoModelForImageClassification.from_config(config, dtype=torch.float32)
        g = torch.Generator().manual_seed(31 + k)
        with torch.no_grad():
            for name, p in m.named_parameters():
                r = torch.randn(p.shape, generator=g, dtype=torch.float32)
                p.copy_(0.3 * r if p.dim() >= 2 else (0.1 * r if name.endswith("bias")
                                                      else 1.0 + 0.1 * r))
        m.eval()
        folder = os.path.join(tmp, model)
        m.save_pretrained(folder)
        pixels = torch.randn(B, config.num_channels, config.image_size, config.image_size,
                             generator=g)
        path = os.path.join(folder, "model.safetensors")
        weights = load_file(path)
        weights["pixel_values"] = pixels.numpy()
        save_file(weights, path)
        lab = np.random.default_rng(31 + k).integers(0, config.num_labels, size=(B,))
        labels = os.path.join(tmp, model + "-labels.npy")
        np.save(labels, lab.astype(np.int64))
        m64 = copy.deepcopy(m).double()
        out = m64(pixel_values=pixels.double(), labels=torch.tensor(lab, dtype=torch.long))
        out.loss.backward()
        train_runs(tmp, model, folder, m, out.logits.detach().numpy(), float(out.loss.detach()),
                   grads_of(m64), pins, results, table, labels=labels)


def main():
    into_venv(__file__, ['torch', 'transformers', 'safetensors', 'numpy'])
    if not CLI:
        skip("$SHARDSCOPE_CLI is not set (the CLI was not built)")
    import numpy as np
    import torch
    from safetensors.numpy import load_file

    torch.set_num_threads(1)
    only = sys.argv[1:]  # optional model names, for a quick look at one
    results, table = [], []
    keep = os.environ.get("SHARDSCOPE_HF_REFERENCE_DIR")  # keep the files, to look at them
    with tempfile.TemporaryDirectory(prefix="hf-reference-") as tmp:
        if keep:
            tmp = keep
            os.makedirs(tmp, exist_ok=True)
        for k, model in enumerate(list(MODELS) + list(MOE_MODELS)):
            if only and model not in only:
                continue
            _, _, batch, runs = model_setup(model)
            folder = os.path.join(tmp, model)
            config = hf_config(model)
            m = hf_model(model, config, 13 + k)
            m.save_pretrained(folder)
            rng = np.random.default_rng(13 + k)
            ids = rng.integers(0, config.vocab_size, size=(batch, S)).astype(np.int64)
            tokens = os.path.join(tmp, model + "-tokens.npy")
            np.save(tokens, ids)
            logits, loss, grads = hf_reference(m, ids)
            for policy, mesh, how in runs:
                plan = os.path.join(tmp, "%s-%s.plan.json" % (model, policy))
                out = os.path.join(tmp, "out.safetensors")
                ref = os.path.join(tmp, "ref.safetensors")
                what = "%s under %s on %s" % (model, policy, mesh)
                p = subprocess.run([CLI, "propagate", os.path.join(folder, "config.json"),
                                    "--mesh", mesh, *how, "--batch", str(batch), "--seq", str(S),
                                    "--hardware", "cpu-local", "--allow-tied", "-o", plan],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    results.append((False, "%s: propagate failed: %s" % (what, p.stderr.strip())))
                    continue
                p = subprocess.run([CLI, "run", plan, "--weights", folder, "--tokens", tokens,
                                    "--train", "--outputs", out, "--outputs-reference", ref,
                                    "--repeat", "1", "--warmup", "0", "--tolerance", str(TOL)],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    results.append((False, "%s: run --train exit %d: %s" % (
                        what, p.returncode, p.stderr.strip()[:600])))
                    continue
                for side, path in (("sharded", out), ("unsharded", ref)):
                    el, ez, eg, worst, msgs = compare(
                        load_file(path), logits, loss, grads,
                        CHECKPOINT_NAMES.get(model.split("-")[0]))
                    if side == "sharded":
                        table.append((model, policy, el, ez, eg, worst))
                    results.append((not msgs, "%s, %s: vs Hugging Face %s, logits rel %.2g, "
                                    "loss rel %.2g, %d gradients rel %.2g (tol %g)%s" % (
                                        what, side, type(m).__name__, el, ez, len(grads), eg,
                                        TOL, "" if not msgs else "; " + "; ".join(msgs[:4]))))
        seq2seq_runs(tmp, only, results, table)
        vision_runs(tmp, only, results, table)
    print("1..%d" % len(results))
    for i, (ok, what) in enumerate(results):
        print("%s %d - %s" % ("ok" if ok else "not ok", i + 1, what))
    print("# %-8s %-12s %10s %10s %10s  worst gradient" % ("model", "plan", "logits", "loss",
                                                           "grads"))
    for model, policy, el, ez, eg, worst in table:
        print("# %-8s %-12s %10.2g %10.2g %10.2g  %s" % (model, policy, el, ez, eg, worst))
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
