#!/usr/bin/env python3
"""`run PLAN --weights --tokens --outputs --outputs-reference` (issue 13): Hugging Face style
checkpoints written here with NumPy, by the models' own parameter names, and the logits of
the sharded and the reference run against a NumPy forward written from the Hugging Face
modelling code's definitions (GPT2LMHeadModel, LlamaForCausalLM and its Mistral and Qwen2
variants), 2 layers, under megatron, megatron-sp and dp on dp=2,tp=2. Then the refusals:
missing, extra and misshapen tensors, hostile safetensors files and bad token files.

    test-weights.py            ($SHARDSCOPE_CLI is the built shardscope-cli)

TAP; skipped without NumPy.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("1..0 # SKIP NumPy is not installed (Debian: python3-numpy)")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_safetensors as st  # noqa: E402

CLI = os.environ.get("SHARDSCOPE_CLI")
B, S = 2, 8
MESH = "dp=2,tp=2"
POLICIES = ["megatron", "megatron-sp", "dp"]
TOL = 1e-4  # the bar for f32 logits
# A pinned plan per family, beside the policies.
GPT2_PINS = ["*.mlp.c_fc=[_,_,_],[_,tp]", "*.mlp.c_proj=[_,dp,tp],[tp,_]"]
LLAMA_PINS = ["*.q_proj=[dp,_,_],[tp,_]", "*.down_proj=[_,_,tp],[_,tp]"]
BERT_PINS = ["*.intermediate.dense=[dp,_,_],[tp,_]"]
rng = np.random.default_rng(13)

results = []


def tap(ok, what):
    results.append((bool(ok), what))


def cli(*args):
    return subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True)


# ---- NumPy forwards, from the Hugging Face modelling code ----

def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * w


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def causal_attention(q, k, v):  # [B, h, S, d], k/v already repeated to h heads
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    n = s.shape[-1]
    s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    return softmax(s) @ v


def heads(x, n):  # [B, S, n*d] -> [B, n, S, d]
    b, s, _ = x.shape
    return x.reshape(b, s, n, -1).transpose(0, 2, 1, 3)


def merge(x):  # [B, n, S, d] -> [B, S, n*d]
    b, n, s, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, n * d)


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gpt2_forward(cfg, w, ids):
    H, n = cfg["n_embd"], cfg["n_head"]
    eps = cfg["layer_norm_epsilon"]
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][np.arange(ids.shape[1])]
    for i in range(cfg["n_layer"]):
        p = "transformer.h.%d." % i
        h = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = np.split(qkv, 3, -1)
        a = merge(causal_attention(heads(q, n), heads(k, n), heads(v, n)))
        x = x + a @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        h = gelu_new(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    return x @ w["transformer.wte.weight"].T  # tied lm_head


def gelu_erf(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def bert_forward(cfg, w, ids):  # BertForMaskedLM, post-LN, token_type_ids 0
    n, eps = cfg["num_attention_heads"], cfg["layer_norm_eps"]

    def lin(x, name):
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    def ln(x, name):
        return layer_norm(x, w[name + ".weight"], w[name + ".bias"], eps)

    e = "bert.embeddings."
    x = (w[e + "word_embeddings.weight"][ids] + w[e + "position_embeddings.weight"][np.arange(ids.shape[1])]
         + w[e + "token_type_embeddings.weight"][np.zeros_like(ids)])
    x = ln(x, e + "LayerNorm")
    for i in range(cfg["num_hidden_layers"]):
        p = "bert.encoder.layer.%d." % i
        q, k, v = (heads(lin(x, p + "attention.self." + t), n) for t in ("query", "key", "value"))
        s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # no mask: bidirectional
        a = lin(merge(softmax(s) @ v), p + "attention.output.dense")
        x = ln(a + x, p + "attention.output.LayerNorm")
        h = lin(gelu_erf(lin(x, p + "intermediate.dense")), p + "output.dense")
        x = ln(h + x, p + "output.LayerNorm")
    t = ln(gelu_erf(lin(x, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
    return t @ w[e + "word_embeddings.weight"].T + w["cls.predictions.bias"]  # tied decoder


def rope(x, theta):  # LlamaRotaryEmbedding, apply_rotary_pos_emb (rotate_half)
    d = x.shape[-1]
    inv = 1.0 / theta ** (np.arange(0, d, 2) / d)
    f = np.outer(np.arange(x.shape[-2]), inv)
    emb = np.concatenate([f, f], -1)
    rot = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1)
    return x * np.cos(emb) + rot * np.sin(emb)


def llama_forward(cfg, w, ids):
    n, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    bias = cfg["model_type"] == "qwen2"

    def lin(x, name, b=False):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if b else y

    x = w["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = rope(heads(lin(h, p + "self_attn.q_proj", bias), n), theta)
        k = rope(heads(lin(h, p + "self_attn.k_proj", bias), kv), theta)
        v = heads(lin(h, p + "self_attn.v_proj", bias), kv)
        k, v = np.repeat(k, n // kv, 1), np.repeat(v, n // kv, 1)  # repeat_kv
        x = x + lin(merge(causal_attention(q, k, v)), p + "self_attn.o_proj")
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = lin(h, p + "mlp.gate_proj")
        x = x + lin(g / (1 + np.exp(-g)) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
    return x @ head.T


# ---- configs and checkpoints ----

def gpt2_config():
    return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 96,
            "n_positions": 32, "n_embd": 16, "n_layer": 2, "n_head": 4,
            "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}


def llama_config(model_type="llama"):
    cfg = {"model_type": model_type, "vocab_size": 80, "hidden_size": 16,
           "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "max_position_embeddings": 32, "rms_norm_eps": 1e-6,
           "rope_theta": 10000.0 if model_type != "mistral" else 1e6, "hidden_act": "silu",
           "tie_word_embeddings": model_type == "qwen2", "torch_dtype": "float32"}
    cfg["architectures"] = [{"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                             "qwen2": "Qwen2ForCausalLM"}[model_type]]
    return cfg


def mat(*shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def norm_weight(n):
    return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)


def gpt2_weights(cfg):
    H, V, P, F = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"], 4 * cfg["n_embd"]
    w = {"transformer.wte.weight": mat(V, H), "transformer.wpe.weight": mat(P, H, scale=0.1)}
    for i in range(cfg["n_layer"]):
        p = "transformer.h.%d." % i
        w.update({p + "ln_1.weight": norm_weight(H), p + "ln_1.bias": mat(H, scale=0.1),
                  p + "attn.c_attn.weight": mat(H, 3 * H), p + "attn.c_attn.bias": mat(3 * H, scale=0.1),
                  p + "attn.c_proj.weight": mat(H, H), p + "attn.c_proj.bias": mat(H, scale=0.1),
                  p + "ln_2.weight": norm_weight(H), p + "ln_2.bias": mat(H, scale=0.1),
                  p + "mlp.c_fc.weight": mat(H, F), p + "mlp.c_fc.bias": mat(F, scale=0.1),
                  p + "mlp.c_proj.weight": mat(F, H), p + "mlp.c_proj.bias": mat(H, scale=0.1)})
    w["transformer.ln_f.weight"], w["transformer.ln_f.bias"] = norm_weight(H), mat(H, scale=0.1)
    return w


def bert_config():
    return {"model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": 72,
            "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 32, "hidden_act": "gelu", "max_position_embeddings": 32,
            "type_vocab_size": 2, "layer_norm_eps": 1e-12}


def bert_weights(cfg):
    H, V, F = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    e = "bert.embeddings."
    w = {e + "word_embeddings.weight": mat(V, H), e + "position_embeddings.weight": mat(32, H, scale=0.1),
         e + "token_type_embeddings.weight": mat(2, H, scale=0.1),
         e + "LayerNorm.weight": norm_weight(H), e + "LayerNorm.bias": mat(H, scale=0.1)}

    def linear(name, o, i):
        w[name + ".weight"], w[name + ".bias"] = mat(o, i), mat(o, scale=0.1)

    def ln(name):
        w[name + ".weight"], w[name + ".bias"] = norm_weight(H), mat(H, scale=0.1)

    for i in range(cfg["num_hidden_layers"]):
        p = "bert.encoder.layer.%d." % i
        for t in ("query", "key", "value"):
            linear(p + "attention.self." + t, H, H)
        linear(p + "attention.output.dense", H, H)
        ln(p + "attention.output.LayerNorm")
        linear(p + "intermediate.dense", F, H)
        linear(p + "output.dense", H, F)
        ln(p + "output.LayerNorm")
    linear("cls.predictions.transform.dense", H, H)
    ln("cls.predictions.transform.LayerNorm")
    w["cls.predictions.bias"] = mat(V, scale=0.1)
    return w


def llama_weights(cfg):
    H, V, F = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    n, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = H // n
    w = {"model.embed_tokens.weight": mat(V, H)}
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        w.update({p + "input_layernorm.weight": norm_weight(H),
                  p + "self_attn.q_proj.weight": mat(n * hd, H),
                  p + "self_attn.k_proj.weight": mat(kv * hd, H),
                  p + "self_attn.v_proj.weight": mat(kv * hd, H),
                  p + "self_attn.o_proj.weight": mat(H, n * hd),
                  p + "post_attention_layernorm.weight": norm_weight(H),
                  p + "mlp.gate_proj.weight": mat(F, H), p + "mlp.up_proj.weight": mat(F, H),
                  p + "mlp.down_proj.weight": mat(H, F)})
        if cfg["model_type"] == "qwen2":
            for t, m in (("q", n), ("k", kv), ("v", kv)):
                w[p + "self_attn.%s_proj.bias" % t] = mat(m * hd, scale=0.1)
    w["model.norm.weight"] = norm_weight(H)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = mat(V, H)
    return w


def bf16_round(a):
    bits = a.astype(np.float32).view(np.uint32)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32)


def save_index(folder, w, n_shards=2):
    names = list(w)
    weight_map = {}
    for s in range(n_shards):
        part = names[s::n_shards]
        fname = "model-%05d-of-%05d.safetensors" % (s + 1, n_shards)
        st.save(os.path.join(folder, fname), {k: w[k] for k in part})
        weight_map.update({k: fname for k in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)


def rel(got, want):
    return float(np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max())


# ---- the checks ----

def check_model(tmp, name, cfg, weights, forward, layout, token_dtype, dtypes=None, pins=()):
    folder = os.path.join(tmp, name)
    os.makedirs(folder)
    config = os.path.join(folder, "config.json")
    with open(config, "w") as f:
        json.dump(cfg, f)
    stored = dict(weights)
    if layout == "folder":
        st.save(os.path.join(folder, "model.safetensors"), weights, dtypes)
        path = folder
    elif layout == "index":
        save_index(folder, weights)
        path = folder
    else:
        path = os.path.join(folder, "weights.safetensors")
        st.save(path, weights, dtypes)
    if dtypes:  # what the file holds is the rounded value
        stored = {k: bf16_round(v) if dtypes.get(k) == "BF16" else v.astype(np.float16).astype(np.float32)
                  if dtypes.get(k) == "F16" else v for k, v in weights.items()}
    vocab = cfg["vocab_size"]
    ids = rng.integers(0, vocab, size=(B, S)).astype(token_dtype)
    tokens = os.path.join(folder, "tokens.npy")
    np.save(tokens, ids)
    want = forward(cfg, {k: np.asarray(v, np.float64) for k, v in stored.items()}, ids.astype(np.int64))
    what = "%s (%s, %s tokens%s)" % (name, layout, np.dtype(token_dtype).name,
                                    ", " + "/".join(sorted(set(dtypes.values()))) if dtypes else "")
    runs = [(p, ["--policy", p]) for p in POLICIES]
    if pins:
        runs.append(("pinned " + " ".join(pins), sum((["--pin", p] for p in pins), [])))
    for policy, how in runs:
        plan = os.path.join(folder, "plan-%d.json" % len(os.listdir(folder)))
        p = cli("propagate", config, "--mesh", MESH, *how, "--batch", B, "--seq", S,
                "--hardware", "cpu-local", "--allow-tied", "-o", plan)
        if p.returncode != 0:
            tap(False, "%s %s: propagate failed: %s" % (what, policy, p.stderr.strip()))
            continue
        out, ref = os.path.join(folder, "out.safetensors"), os.path.join(folder, "ref.safetensors")
        p = cli("run", plan, "--weights", path, "--tokens", tokens, "--outputs", out,
                "--outputs-reference", ref, "--repeat", 1, "--warmup", 0)
        if p.returncode != 0:
            tap(False, "%s %s: run failed (%d): %s" % (what, policy, p.returncode, p.stderr.strip()))
            continue
        e_out = rel(st.load(out)["logits"], want)
        e_ref = rel(st.load(ref)["logits"], want)
        tap(e_out <= TOL and e_ref <= TOL,
            "%s under %s on %s: logits vs NumPy, sharded rel error %.2g, reference %.2g (tol %g)"
            % (what, policy, MESH, e_out, e_ref, TOL))
    return folder, path, tokens


def lm_loss(logits, ids, causal):
    """Hugging Face's LM loss: causal labels = ids shifted left (last position ignored);
    masked LM here labels every position with its own id."""
    v = logits.shape[-1]
    if causal:
        z, y = logits[:, :-1].reshape(-1, v), ids[:, 1:].reshape(-1)
    else:
        z, y = logits.reshape(-1, v), ids.reshape(-1)
    m = z.max(-1, keepdims=True)
    lse = np.log(np.exp(z - m).sum(-1)) + m[:, 0]
    return float(np.mean(lse - z[np.arange(len(y)), y]))


def check_train(tmp, name, cfg, weights, forward, causal, pins):
    """run --train under each policy: the loss, every parameter's gradient (directional finite
    differences of the NumPy loss, no hand-derived gradient) and the SGD and Adam steps, for
    the sharded step (--outputs) and the unsharded reference (--outputs-reference)."""
    folder = os.path.join(tmp, "train-" + name)
    os.makedirs(folder)
    config = os.path.join(folder, "config.json")
    with open(config, "w") as f:
        json.dump(cfg, f)
    ckpt = os.path.join(folder, "w.safetensors")
    st.save(ckpt, weights)
    ids = rng.integers(0, cfg["vocab_size"], size=(B, S))
    tokens = os.path.join(folder, "tokens.npy")
    np.save(tokens, ids)
    w64 = {k: v.astype(np.float64) for k, v in weights.items()}

    def loss(w):
        return lm_loss(forward(cfg, w, ids), ids, causal)

    want = loss(w64)
    # The same directions and finite differences for every run.
    probes = []
    for pname, w in w64.items():
        for _ in range(2):
            v = rng.standard_normal(w.shape)
            h = 1e-6 * max(1.0, float(np.abs(w).max()))
            fd = (loss(dict(w64, **{pname: w + h * v})) - loss(dict(w64, **{pname: w - h * v}))) / (2 * h)
            probes.append((pname, v, fd))

    def check(what, res, opt, lr):
        e = abs(float(res["loss"]) - want) / abs(want)
        ok = e <= 1e-5
        msgs = [] if ok else ["loss %.6f vs NumPy %.6f" % (float(res["loss"]), want)]
        # A gradient that is zero in exact arithmetic (BERT's key bias: softmax ignores a
        # constant added to every score) is f32 round-off: its error is measured against the
        # whole gradient's norm.
        total = math.sqrt(sum(float((np.asarray(v, np.float64) ** 2).sum())
                              for k, v in res.items() if k.startswith("grad.")))
        worst = 0.0
        for pname, v, fd in probes:
            g = res.get("grad." + pname)
            if g is None or g.shape != v.shape:
                msgs.append("grad.%s missing or misshapen" % pname)
                continue
            g = np.asarray(g, np.float64)
            dot = float((g * v).sum())
            err = abs(dot - fd) / max(float(np.linalg.norm(g) * np.linalg.norm(v)), abs(fd),
                                      1e-4 * total * float(np.linalg.norm(v)), 1e-30)
            worst = max(worst, err)
            if err > 1e-4:
                msgs.append("grad.%s: <g, v> %.6g vs finite difference %.6g" % (pname, dot, fd))
        extra = [k for k in res if k.startswith("grad.") and k[5:] not in w64]
        msgs += ["extra %s" % k for k in extra]
        upd = 0.0
        for pname, w in weights.items():
            g = res["grad." + pname].astype(np.float64)
            step = lr * g if opt == "sgd" else lr * g / (np.abs(g) + 1e-8)
            upd = max(upd, float(np.abs(res["updated." + pname] - (w - step)).max()))
        if upd > 1e-6:
            msgs.append("updated weights differ from w - step by %.2g" % upd)
        tap(not msgs, "%s: loss rel %.2g, gradients of %d parameters vs NumPy finite differences "
            "(worst %.2g), %s step (max abs %.2g)%s" % (what, e, len(w64), worst, opt, upd,
                                                        "" if not msgs else "; " + "; ".join(msgs[:3])))

    runs = [(p, ["--policy", p], "sgd", 0.1) for p in POLICIES]
    runs.append(("pinned " + " ".join(pins), sum((["--pin", p] for p in pins), []), "sgd", 0.1))
    runs.append(("megatron", ["--policy", "megatron"], "adam", 0.01))
    for policy, how, opt, lr in runs:
        plan = os.path.join(folder, "plan-%d.json" % len(os.listdir(folder)))
        p = cli("propagate", config, "--mesh", MESH, *how, "--batch", B, "--seq", S,
                "--hardware", "cpu-local", "--allow-tied", "-o", plan)
        assert p.returncode == 0, p.stderr
        out = os.path.join(folder, "out.safetensors")
        ref = os.path.join(folder, "ref.safetensors")
        p = cli("run", plan, "--weights", ckpt, "--tokens", tokens, "--train", "--optimizer", opt,
                "--lr", lr, "--outputs", out, "--outputs-reference", ref, "--repeat", 1,
                "--warmup", 0, *(["--json"] if opt == "adam" else []))
        if p.returncode == 0 and opt == "adam":
            t = json.loads(p.stdout).get("train", {})
            tap(t.get("passed") is True and t.get("parameters") == len(w64)
                and t.get("optimizer") == "adam" and t.get("grad_max_rel_error", 1) <= 1e-5,
                "%s --train --json: the train object says passed, %s parameters, grad max rel "
                "error %s" % (name, t.get("parameters"), t.get("grad_max_rel_error")))
        if p.returncode != 0:
            tap(False, "%s --train %s %s: exit %d: %s" % (name, policy, opt, p.returncode,
                                                         p.stderr.strip()[:300]))
            continue
        check("%s --train --optimizer %s under %s on %s, sharded" % (name, opt, policy, MESH),
              st.load(out), opt, lr)
        if policy == "megatron":
            check("%s --train --optimizer %s, unsharded reference" % (name, opt), st.load(ref), opt, lr)


def expect_refusal(what, args, *needles):
    p = cli(*args)
    ok = p.returncode == 1 and all(n in p.stderr for n in needles)
    tap(ok, "refused: %s%s" % (what, "" if ok else " -- exit %d, stderr: %s" % (
        p.returncode, p.stderr.strip()[:400])))


def raw_safetensors(path, header, data=b"", hlen=None):
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text) if hlen is None else hlen))
        f.write(text)
        f.write(data)


def check_refusals(tmp, cfg, weights):
    folder = os.path.join(tmp, "bad")
    os.makedirs(folder)
    config = os.path.join(folder, "config.json")
    with open(config, "w") as f:
        json.dump(cfg, f)
    plan = os.path.join(folder, "plan.json")
    p = cli("propagate", config, "--mesh", MESH, "--policy", "megatron", "--batch", B, "--seq", S,
            "--hardware", "cpu-local", "-o", plan)
    assert p.returncode == 0, p.stderr
    ids = rng.integers(0, cfg["vocab_size"], size=(B, S))
    tokens = os.path.join(folder, "tokens.npy")
    np.save(tokens, ids)

    def run_with(ckpt, *more):
        return ["run", plan, "--weights", ckpt, "--tokens", tokens, "--repeat", 1] + list(more)

    def ckpt(name, w, dtypes=None):
        path = os.path.join(folder, name + ".safetensors")
        st.save(path, w, dtypes)
        return path

    w = dict(weights)
    del w["transformer.h.1.mlp.c_fc.bias"]
    expect_refusal("a missing parameter", run_with(ckpt("missing", w)),
                   "1 parameter is missing", "transformer.h.1.mlp.c_fc.bias")
    w = dict(weights, **{"transformer.h.0.attn.extra.weight": mat(2, 2)})
    expect_refusal("an extra tensor", run_with(ckpt("extra", w)),
                   "is not a parameter of the model", "transformer.h.0.attn.extra.weight")
    w = dict(weights, **{"transformer.h.0.mlp.c_fc.weight": mat(64, 16)})
    expect_refusal("a transposed (misshapen) tensor", run_with(ckpt("misshapen", w)),
                   "misshapen", "transformer.h.0.mlp.c_fc.weight is [64, 16]", "[16, 64]")
    w = dict(weights, **{"transformer.ln_f.bias": np.arange(16, dtype=np.int64)})
    expect_refusal("an integer tensor for a float parameter", run_with(ckpt("int", w)),
                   "transformer.ln_f.bias is an integer tensor")
    # Buffers save_pretrained may write (GPT-2's causal masks) are not parameters: accepted.
    w = dict(weights, **{"transformer.h.0.attn.bias": np.ones((1, 1, 32, 32), np.float32)})
    p = cli(*run_with(ckpt("buffers", w)))
    tap(p.returncode == 0, "accepted: GPT-2's attn.bias buffer beside the weights%s" % (
        "" if p.returncode == 0 else " -- " + p.stderr.strip()[:300]))

    good = ckpt("good", weights)
    size = os.path.getsize(good)
    with open(good, "rb") as f:
        blob = f.read()
    trunc = os.path.join(folder, "trunc.safetensors")
    with open(trunc, "wb") as f:
        f.write(blob[:size - 100])
    expect_refusal("a truncated file", run_with(trunc), "trunc.safetensors", "data_offsets")
    tiny = os.path.join(folder, "tiny.safetensors")
    with open(tiny, "wb") as f:
        f.write(b"\x01\x02")
    expect_refusal("a 2-byte file", run_with(tiny), "not a safetensors file")
    huge = os.path.join(folder, "huge.safetensors")
    raw_safetensors(huge, {}, hlen=1 << 62)
    expect_refusal("a header length of 2^62", run_with(huge), "huge.safetensors", "header says")
    garbage = os.path.join(folder, "garbage.safetensors")
    with open(garbage, "wb") as f:
        f.write(struct.pack("<Q", 12) + b"{not json!!!")
    expect_refusal("a header that is not JSON", run_with(garbage), "does not parse")
    oob = os.path.join(folder, "oob.safetensors")
    raw_safetensors(oob, {"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1 << 40]}},
                    b"\0" * 16)
    expect_refusal("data_offsets beyond the file", run_with(oob), "outside the 16 bytes")
    wrong = os.path.join(folder, "wrong.safetensors")
    raw_safetensors(wrong, {"x": {"dtype": "F32", "shape": [1 << 30, 1 << 30],
                                  "data_offsets": [0, 16]}}, b"\0" * 16)
    expect_refusal("a shape far larger than its bytes", run_with(wrong), "tensor x")
    neg = os.path.join(folder, "neg.safetensors")
    raw_safetensors(neg, {"x": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}},
                    b"\0" * 16)
    expect_refusal("a negative dim", run_with(neg), "shape dim 0 is not a size")
    u8 = os.path.join(folder, "u8.safetensors")
    raw_safetensors(u8, {"x": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}, b"\0" * 4)
    expect_refusal("an unsupported dtype", run_with(u8), "dtype U8 is not supported")
    idx = os.path.join(folder, "evil")
    os.makedirs(idx)
    with open(os.path.join(idx, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": {"transformer.wte.weight": "../good.safetensors"}}, f)
    expect_refusal("an index pointing outside its folder", run_with(idx), "beside the index")
    empty = os.path.join(folder, "empty")
    os.makedirs(empty)
    expect_refusal("a folder without a checkpoint", run_with(empty),
                   "neither model.safetensors nor model.safetensors.index.json")

    # Tokens.
    def run_tokens(path):
        return ["run", plan, "--weights", good, "--tokens", path, "--repeat", 1]

    t = os.path.join(folder, "t-shape.npy")
    np.save(t, ids[:, :4])
    expect_refusal("tokens of another shape", run_tokens(t), "[2, 8]", "--seq")
    t = os.path.join(folder, "t-float.npy")
    np.save(t, ids.astype(np.float32))
    expect_refusal("float tokens", run_tokens(t), "int32 or int64")
    t = os.path.join(folder, "t-vocab.npy")
    np.save(t, ids + cfg["vocab_size"])
    expect_refusal("token ids beyond the vocabulary", run_tokens(t), "outside the vocabulary of 96")
    t = os.path.join(folder, "t-trunc.npy")
    np.save(t, ids)
    with open(t, "r+b") as f:
        f.truncate(os.path.getsize(t) - 8)
    expect_refusal("a truncated .npy", run_tokens(t), "the file has")


def main():
    if not CLI:
        print("1..0 # SKIP $SHARDSCOPE_CLI is not set (the CLI was not built)")
        return 0
    with tempfile.TemporaryDirectory(prefix="weights-") as tmp:
        g = gpt2_config()
        gw = gpt2_weights(g)
        check_model(tmp, "gpt2", g, gw, gpt2_forward, "folder", np.int64, pins=GPT2_PINS)
        cfg = llama_config("llama")
        check_model(tmp, "llama", cfg, llama_weights(cfg), llama_forward, "index", np.int32,
                    pins=LLAMA_PINS)
        cfg = bert_config()
        check_model(tmp, "bert", cfg, bert_weights(cfg), bert_forward, "folder", np.int64,
                    pins=BERT_PINS)
        cfg = llama_config("mistral")
        lw = llama_weights(cfg)
        check_model(tmp, "mistral", cfg, lw, llama_forward, "file", np.int64,
                    {k: "BF16" for k in lw})
        cfg = llama_config("qwen2")
        qw = llama_weights(cfg)
        check_model(tmp, "qwen2", cfg, qw, llama_forward, "file", np.int64,
                    {k: "F16" for k in qw})
        check_refusals(tmp, g, gw)
        check_train(tmp, "gpt2", g, gw, gpt2_forward, True, GPT2_PINS)
        cfg = llama_config("llama")
        check_train(tmp, "llama", cfg, llama_weights(cfg), llama_forward, True, LLAMA_PINS)
        cfg = bert_config()
        check_train(tmp, "bert", cfg, bert_weights(cfg), bert_forward, False, BERT_PINS)
        cfg = llama_config("qwen2")
        check_train(tmp, "qwen2", cfg, llama_weights(cfg), llama_forward, True, LLAMA_PINS)
    print("1..%d" % len(results))
    for i, (ok, what) in enumerate(results):
        print("%s %d - %s" % ("ok" if ok else "not ok", i + 1, what))
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
