#!/usr/bin/env python3
"""Issue 14: the JAX export compiled by XLA on 4 CPU devices, its collectives against the plan's.

For llama, qwen2 and mistral (tests/frameworks/test-hf-reference.py's shrunk configs) under
megatron and megatron-sp on dp=2,tp=2 (batch 4, sequence 8),

    shardscope-cli export PLAN --format jax -o plan_jax.py

gives PARAMS (a PartitionSpec per Hugging Face parameter), INPUTS, OUTPUTS, CONSTRAINTS and
COLLECTIVES. A Llama forward pass written here in plain JAX (the Hugging Face parameter names
and shapes; constrain() called before every op the module names) is jitted with those
shardings on XLA_FLAGS=--xla_force_host_platform_device_count=4, and:
- the collectives of the HLO right after spmd-partitioning (an all-reduce whose result is
  dynamic-sliced counted as the reduce-scatter it is), per kind, are exactly the plan's
  COLLECTIVES; constrain_output() on the embedding lookup keeps GSPMD from gathering the token
  ids over dp under megatron-sp (one all-gather more than the plan without it);
- its logits match the same function run unsharded within 1e-5 relative.

Runs in $SHARDSCOPE_FRAMEWORK_VENV/torch (jax and transformers); skipped, with the reason,
where that Python cannot import them. TAP.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

from framework_venv import HERE, ROOT, VENV, VENV_PYTHON, into_venv, skip
CLI = os.environ.get("SHARDSCOPE_CLI")
MESH = "dp=2,tp=2"
B, S = 4, 8
MODELS = ["llama", "qwen2", "mistral"]
POLICIES = ["megatron", "megatron-sp"]
KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")





def llama_forward(plan, mesh, cfg):
    """A Llama forward pass in plain JAX over a dict of Hugging Face parameters."""
    import jax
    import jax.numpy as jnp

    h, nh = cfg.hidden_size, cfg.num_attention_heads
    nkv = cfg.num_key_value_heads
    hd = getattr(cfg, "head_dim", None) or h // nh
    eps, theta = cfg.rms_norm_eps, getattr(cfg, "rope_theta", None) or 10000.0
    layers = cfg.num_hidden_layers

    def c(op, x, k=0):
        return plan.constrain(op, x, k, mesh) if mesh is not None else x

    def co(op, y):
        return plan.constrain_output(op, y, mesh) if mesh is not None else y

    def rms(x, w):
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * w

    def linear(p, name, x):
        y = c(name, x) @ p[name + ".weight"].T
        return y + p[name + ".bias"] if name + ".bias" in p else y

    def rotary(x):
        s = x.shape[2]
        inv = 1.0 / theta ** (jnp.arange(0, hd, 2, dtype=jnp.float32) / hd)
        f = jnp.arange(s, dtype=jnp.float32)[:, None] * inv[None, :]
        emb = jnp.concatenate([f, f], -1)
        cos, sin = jnp.cos(emb), jnp.sin(emb)
        half = jnp.concatenate([-x[..., hd // 2:], x[..., :hd // 2]], -1)
        return x * cos + half * sin

    def forward(p, ids):
        b, s = ids.shape
        x = co("model.embed_tokens", p["model.embed_tokens.weight"][ids])
        mask = jnp.tril(jnp.ones((s, s), bool))
        for i in range(layers):
            pre = "model.layers.%d." % i
            y = rms(c(pre + "input_layernorm", x), p[pre + "input_layernorm.weight"])
            q = linear(p, pre + "self_attn.q_proj", y).reshape(b, s, nh, hd).transpose(0, 2, 1, 3)
            k = linear(p, pre + "self_attn.k_proj", y).reshape(b, s, nkv, hd).transpose(0, 2, 1, 3)
            v = linear(p, pre + "self_attn.v_proj", y).reshape(b, s, nkv, hd).transpose(0, 2, 1, 3)
            q, k = rotary(q), rotary(k)
            k = jnp.repeat(k, nh // nkv, axis=1)
            v = jnp.repeat(v, nh // nkv, axis=1)
            a = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(hd).astype(jnp.float32)
            a = jax.nn.softmax(jnp.where(mask, a, -1e30), axis=-1)
            o = jnp.einsum("bhqk,bhkd->bhqd", a, v).transpose(0, 2, 1, 3).reshape(b, s, nh * hd)
            x = x + linear(p, pre + "self_attn.o_proj", o)
            y = rms(c(pre + "post_attention_layernorm", x), p[pre + "post_attention_layernorm.weight"])
            g = linear(p, pre + "mlp.gate_proj", y)
            u = linear(p, pre + "mlp.up_proj", y)
            x = x + linear(p, pre + "mlp.down_proj", jax.nn.silu(g) * u)
        x = rms(c("model.norm", x), p["model.norm.weight"])
        head = p.get("lm_head.weight", p["model.embed_tokens.weight"])  # tied (qwen2)
        return c("lm_head", x) @ head.T

    return forward


def params_of(cfg, seed):
    import numpy as np

    h, nh, nkv = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads
    hd = getattr(cfg, "head_dim", None) or h // nh
    inter, vocab = cfg.intermediate_size, cfg.vocab_size
    shapes = {"model.embed_tokens.weight": (vocab, h), "model.norm.weight": (h,)}
    if not getattr(cfg, "tie_word_embeddings", False):
        shapes["lm_head.weight"] = (vocab, h)
    bias = getattr(cfg, "attention_bias", False) or cfg.model_type == "qwen2"
    for i in range(cfg.num_hidden_layers):
        pre = "model.layers.%d." % i
        shapes.update({pre + "input_layernorm.weight": (h,),
                       pre + "post_attention_layernorm.weight": (h,),
                       pre + "self_attn.q_proj.weight": (nh * hd, h),
                       pre + "self_attn.k_proj.weight": (nkv * hd, h),
                       pre + "self_attn.v_proj.weight": (nkv * hd, h),
                       pre + "self_attn.o_proj.weight": (h, nh * hd),
                       pre + "mlp.gate_proj.weight": (inter, h),
                       pre + "mlp.up_proj.weight": (inter, h),
                       pre + "mlp.down_proj.weight": (h, inter)})
        if bias:
            for n, d in (("q", nh), ("k", nkv), ("v", nkv)):
                shapes[pre + "self_attn.%s_proj.bias" % n] = (d * hd,)
    rng = np.random.default_rng(seed)
    return {k: (0.3 * rng.standard_normal(v) if len(v) > 1 else 1 + 0.1 * rng.standard_normal(v))
            .astype(np.float32) for k, v in shapes.items()}


def collectives(hlo):
    """Per kind, the collectives of an HLO module (async pairs counted once). An all-reduce
    whose result is dynamic-sliced is a reduce-scatter: GSPMD's partitioner writes one so
    (XLA's reduce-scatter-creator pattern), and the CPU pipeline leaves it that way. A
    sharding constraint is a copy in that HLO: the slice of a copy of an all-reduce counts."""
    counts = {}
    for kind in KINDS:
        counts[kind] = len(re.findall(r"= [^=]*\b%s(-start)?\(" % kind, hlo))
    copies = dict((y, x) for y, x in re.findall(r"(%[\w.\-]+) = \S+ copy\((%[\w.\-]+)\)", hlo))
    sliced = set()
    for x in re.findall(r"dynamic-slice\((%[\w.\-]+)[,)]", hlo):
        while x in copies:
            x = copies[x]
        if re.match(r"%all-reduce(\.\d+)?$", x):
            sliced.add(x)
    counts["all-reduce"] -= len(sliced)
    counts["reduce-scatter"] += len(sliced)
    return counts


def partitioned_hlo(dump):
    """The HLO right after spmd-partitioning of the module with the most collectives."""
    best, text = -1, ""
    for name in os.listdir(dump):
        if "after_spmd-partitioning" in name and name.endswith(".txt"):
            with open(os.path.join(dump, name)) as f:
                t = f.read()
            n = len(re.findall(r"\b(all-reduce|all-gather|all-to-all|reduce-scatter)\(", t))
            if n > best:
                best, text = n, t
    return text


def check(model, policy, script, config_dir, dump=None):
    dump = dump or tempfile.mkdtemp(prefix="xla-dump-")
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=4"
                               + " --xla_dump_to=%s --xla_dump_hlo_pass_re=spmd-partitioning"
                               % dump).strip()
    import jax
    import numpy as np
    from jax.sharding import NamedSharding
    from transformers import AutoConfig

    spec = importlib.util.spec_from_file_location("plan_jax", script)
    plan = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plan)
    cfg = AutoConfig.from_pretrained(config_dir)
    mesh = plan.make_mesh()
    params = params_of(cfg, 7)
    missing = sorted(set(params) ^ set(plan.PARAMS))
    if missing:
        return [(False, "%s under %s: parameters differ from PARAMS: %s" % (model, policy, missing))]
    ids = np.random.default_rng(8).integers(0, cfg.vocab_size, (B, S)).astype(np.int32)
    shardings = plan.param_shardings(mesh)
    f = jax.jit(llama_forward(plan, mesh, cfg),
                in_shardings=(shardings, NamedSharding(mesh, plan.INPUTS["input_ids"])),
                out_shardings=NamedSharding(mesh, plan.OUTPUTS["logits"]))
    compiled = f.lower(params, ids).compile()
    got = collectives(partitioned_hlo(dump))
    final = collectives(compiled.as_text())
    want = {k: plan.COLLECTIVES[k] for k in KINDS}
    logits = np.asarray(f(params, ids))
    ref = np.asarray(jax.jit(llama_forward(plan, None, cfg))(params, ids))
    err = float(np.abs(logits - ref).max() / np.abs(ref).max())
    what = "%s under %s on %s" % (model, policy, MESH)
    return [(got == want,
             "%s: HLO collectives after spmd-partitioning %s (compiled for CPU: %s), the "
             "plan's %s" % (what, got, final, want)),
            (err <= 1e-5, "%s: logits rel %.2g against unsharded (tol 1e-5)" % (what, err))]


def main():
    if len(sys.argv) == 7 and sys.argv[1] == "--check":
        print(json.dumps(check(*sys.argv[2:7])))
        return 0
    into_venv(__file__, ['jax', 'transformers'])
    if not CLI:
        skip("$SHARDSCOPE_CLI is not set (the CLI was not built)")
    spec = importlib.util.spec_from_file_location("hf_reference",
                                                  os.path.join(HERE, "test-hf-reference.py"))
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    results = []
    with tempfile.TemporaryDirectory(prefix="export-jax-") as tmp:
        for model in MODELS:
            folder = os.path.join(tmp, model)
            ref.hf_config(model).save_pretrained(folder)
            for policy in POLICIES:
                plan = os.path.join(tmp, "plan.json")
                script = os.path.join(tmp, "plan_jax_%s_%s.py" % (model, policy.replace("-", "_")))
                p = subprocess.run([CLI, "propagate", os.path.join(folder, "config.json"),
                                    "--mesh", MESH, "--policy", policy, "--batch", str(B),
                                    "--seq", str(S), "-o", plan], capture_output=True, text=True)
                e = subprocess.run([CLI, "export", plan, "--format", "jax", "-o", script],
                                   capture_output=True, text=True)
                if p.returncode != 0 or e.returncode != 0:
                    results.append((False, "%s under %s: propagate/export failed: %s"
                                    % (model, policy, (p.stderr + e.stderr).strip()[-400:])))
                    continue
                # Each check in its own process: XLA_FLAGS is read once, at JAX's start.
                dump = os.path.join(tmp, "xla-%s-%s" % (model, policy))
                c = subprocess.run([sys.executable, os.path.abspath(__file__), "--check", model,
                                    policy, script, folder, dump], capture_output=True, text=True)
                lines = [l for l in c.stdout.splitlines() if l.startswith("[")]
                if c.returncode != 0 or not lines:
                    results.append((False, "%s under %s: the JAX check failed: %s"
                                    % (model, policy, c.stderr.strip()[-800:])))
                    continue
                results.extend(json.loads(lines[-1]))
    print("1..%d" % len(results))
    for i, (ok, what) in enumerate(results):
        print("%s %d - %s" % ("ok" if ok else "not ok", i + 1, what))
    return 0 if all(ok for ok, what in results) else 1


if __name__ == "__main__":
    sys.exit(main())
