#!/usr/bin/env python3
"""Golden values for every op type (issue 13): random shapes and inputs, the executor's CPU
kernels (through tests/golden-run) against a NumPy reference written here from each op's
mathematical definition, not from Shardscope's code. Each case also runs sharded on a 2x2
mesh (default strategies: the batch dim split), gathered and checked against the same
reference.

    test-golden.py GOLDEN_RUN [--backend NAME]

With --backend cuda the forward runs on the CUDA kernels (the gpu suite; skipped with the
backend's reason where no device answers); the backward check always runs on the CPU.

TAP output; skipped (with the reason) where NumPy is missing. GOLDEN_SEED picks the random
cases (default fixed, so a failure reproduces).
"""
import math
import os
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

MESH = "a=2,b=2"
# f32 kernels against a float64 reference on the same f32 inputs: max |error| / max |ref|.
TOL = 2e-5
# The backward: for random directions v, <grad, v> against the central difference of
# <g, f(x + t v)> in float64, over max(|grad| |v|, |difference|).
TOL_GRAD = 1e-5
N_DIRECTIONS = 3

rng = np.random.default_rng(int(os.environ.get("GOLDEN_SEED", "20261201")))


def dims(n, lo=2, hi=6):
    return [int(v) for v in rng.integers(lo, hi + 1, size=n)]


def normal(shape, scale=1.0, offset=0.0):
    return (rng.standard_normal(shape) * scale + offset).astype(np.float32)


class Case:
    def __init__(self, op_type, label):
        self.op_type, self.label = op_type, label
        self.sources, self.ops, self.expect = [], [], {}

    def src(self, name, array, kind="input", dtype=None):
        a = np.asarray(array)
        if dtype is None:
            dtype = "i64" if a.dtype == np.int64 else "f32"
        self.sources.append((name, kind, a, dtype))
        return name

    def values(self, replace=None):
        """The sources as NumPy computes with them: floats in float64, ids as they are."""
        out = {n: (a if a.dtype == np.int64 else a.astype(np.float64)) for n, _, a, _ in self.sources}
        out.update(replace or {})
        return out

    def op(self, inputs, fn, attrs=None, op_type=None):
        """fn: the sources (self.values()) -> the outputs by name."""
        self.fn = fn
        outputs = fn(self.values())
        o = {"name": "op%d" % len(self.ops), "type": op_type or self.op_type,
             "inputs": inputs, "outputs": list(outputs)}
        if attrs:
            o["attrs"] = attrs
        self.ops.append(o)
        self.expect.update(outputs)

    def graph(self):
        return {
            "shardscope_graph": 1,
            "name": self.label,
            "tensors": [{"name": n, "dtype": dt, "kind": k, "shape": list(a.shape)}
                        for n, k, a, dt in self.sources],
            "ops": self.ops,
            "outputs": list(self.expect),
        }


def f64(a):
    return np.asarray(a, dtype=np.float64)


# ---- references, from the definitions ----

def gelu_erf(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_tanh(x):  # Hugging Face's gelu_new / PyTorch's approximate="tanh"
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def rms_norm(x, g, eps):  # LlamaRMSNorm
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * g


def rotary(x, theta):  # LlamaRotaryEmbedding + apply_rotary_pos_emb, positions 0..S-1
    d = x.shape[-1]
    inv_freq = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    freqs = np.outer(np.arange(x.shape[-2], dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], -1)
    half = d // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * np.cos(emb) + rot * np.sin(emb)


def sdpa(q, k, v, causal, scale):  # F.scaled_dot_product_attention after repeat_kv
    group = q.shape[1] // k.shape[1]
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    s = q @ np.swapaxes(k, -1, -2) * (scale or 1.0 / math.sqrt(q.shape[-1]))
    if causal:  # top-left aligned, as is_causal=True
        sq, sk = s.shape[-2:]
        s = np.where(np.tril(np.ones((sq, sk), dtype=bool)), s, -np.inf)
    return softmax(s, -1) @ v


def cross_entropy(logits, labels):  # F.cross_entropy, mean over every row
    z = logits.reshape(-1, logits.shape[-1])
    y = labels.reshape(-1)
    m = z.max(-1, keepdims=True)
    lse = np.log(np.exp(z - m).sum(-1)) + m[:, 0]
    return np.array(np.mean(lse - z[np.arange(len(y)), y]))


def conv2d(x, w, b, stride, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * pad[0], wd + 2 * pad[1]))
    xp[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + wd] = x
    oh = (h + 2 * pad[0] - kh) // stride[0] + 1
    ow = (wd + 2 * pad[1] - kw) // stride[1] + 1
    y = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw]
            y[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return y + (b[None, :, None, None] if b is not None else 0)


# ---- cases: several random shapes for every op type of the rule tables ----

def cases_matmul():
    for i in range(3):
        lead = dims(int(rng.integers(1, 3)))
        k, n = dims(2, 2, 9)
        c = Case("MatMul", "MatMul %s" % ["bias", "transpose_b", "bias+transpose_b"][i])
        tb = i > 0
        x = normal(lead + [k])
        w = normal([n, k] if tb else [k, n], 0.5)
        ins = [c.src("x", x), c.src("w", w, "parameter")]
        if i != 1:
            ins.append(c.src("b", normal([n]), "parameter"))
        c.op(ins, lambda s, tb=tb: {"y": s["x"] @ (s["w"].T if tb else s["w"]) + s.get("b", 0)},
             {"transpose_b": True} if tb else None)
        yield c


def cases_batch_matmul():
    for i, (sa, sb) in enumerate([("BHMK", "BHKN"), ("BHMK", "HKN"), ("BHMK", "B1KN")]):
        B, H, M, K, N = dims(5)
        size = {"B": B, "H": H, "M": M, "K": K, "N": N, "1": 1}
        a = normal([size[ch] for ch in sa])
        b = normal([size[ch] for ch in sb])
        c = Case("BatchMatMul", "BatchMatMul %s@%s" % (sa, sb))
        c.op([c.src("a", a), c.src("b", b)], lambda s: {"y": s["a"] @ s["b"]})
        yield c


def cases_einsum():
    specs = [("bsh,hqnd->bsqnd", True), ("bhqd,bhkd->bhqk", False), ("ij->i", False),
             ("ik,kj->ji", False), ("bij,bjk->bik", False)]
    for eq, bias in specs:
        lhs, out = eq.split("->")
        letters = sorted(set(lhs.replace(",", "")))
        size = dict(zip(letters, dims(len(letters))))
        ops = [normal([size[ch] for ch in term]) for term in lhs.split(",")]
        c = Case("Einsum", "Einsum %s%s" % (eq, " +bias" if bias else ""))
        ins = [c.src("x%d" % i, a, "parameter" if i else "input") for i, a in enumerate(ops)]
        if bias:
            ins.append(c.src("bias", normal([size[ch] for ch in out[-3:]]), "parameter"))
        n_ops = len(ops)
        c.op(ins, lambda s, eq=eq, n_ops=n_ops: {
            "y": np.einsum(eq, *[s["x%d" % i] for i in range(n_ops)]) + s.get("bias", 0)},
            {"equation": eq})
        yield c


def cases_binary(op_type, fn):
    for sb in ("same", "last", "middle1"):
        A, B, C = dims(3)
        a = normal([A, B, C])
        shape_b = {"same": [A, B, C], "last": [C], "middle1": [A, 1, C]}[sb]
        b = normal(shape_b)
        if op_type == "Div":  # away from zero
            b = (np.sign(b) * (0.5 + np.abs(b))).astype(np.float32)
        c = Case(op_type, "%s broadcast %s" % (op_type, sb))
        c.op([c.src("a", a), c.src("b", b)], lambda s: {"y": fn(s["a"], s["b"])})
        yield c


def cases_unary(op_type, fn, attrs=None, label=None, scale=2.0):
    for _ in range(2):
        x = normal(dims(int(rng.integers(1, 5))), scale)
        c = Case(op_type, label or op_type)
        c.op([c.src("x", x)], lambda s: {"y": fn(s["x"])}, attrs)
        yield c


def cases_cast():
    x = normal(dims(3), 3.0)
    c = Case("Cast", "Cast f32->f32")
    c.op([c.src("x", x)], lambda s: {"y": s["x"]}, {"dtype": "f32"})
    yield c
    c = Case("Cast", "Cast f32->i64 (truncates toward zero)")
    c.op([c.src("x", x)], lambda s: {"y": np.trunc(s["x"]).astype(np.int64)}, {"dtype": "i64"})
    yield c
    ids = rng.integers(-50, 50, size=dims(2))
    c = Case("Cast", "Cast i64->f32")
    c.op([c.src("x", ids)], lambda s: {"y": s["x"].astype(np.float64)}, {"dtype": "f32"})
    yield c


def cases_softmax():
    for axis in (-1, 0, 1):
        x = normal(dims(3), 3.0)
        c = Case("Softmax", "Softmax axis %d" % axis)
        c.op([c.src("x", x)], lambda s, axis=axis: {"y": softmax(s["x"], axis)}, {"axis": axis})
        yield c


def cases_layer_norm():
    for eps in (1e-5, 0.5):
        shape = dims(3)
        x = normal(shape, 0.3, 2.0)
        g, b = normal(shape[-1:]), normal(shape[-1:])
        c = Case("LayerNorm", "LayerNorm eps %g" % eps)
        c.op([c.src("x", x), c.src("g", g, "parameter"), c.src("b", b, "parameter")],
             lambda s, eps=eps: {"y": layer_norm(s["x"], s["g"], s["b"], eps)}, {"eps": eps})
        yield c


def cases_rms_norm():
    for eps in (1e-6, 0.5):
        shape = dims(3)
        x = normal(shape, 0.5, 1.0)
        g = normal(shape[-1:])
        c = Case("RMSNorm", "RMSNorm eps %g" % eps)
        c.op([c.src("x", x), c.src("g", g, "parameter")],
             lambda s, eps=eps: {"y": rms_norm(s["x"], s["g"], eps)}, {"eps": eps})
        yield c


def cases_embedding():
    for _ in range(2):
        v, h = int(rng.integers(4, 20)), int(rng.integers(2, 9))
        ids = rng.integers(0, v, size=dims(2))
        table = normal([v, h])
        c = Case("Embedding", "Embedding V=%d" % v)
        c.op([c.src("ids", ids), c.src("table", table, "parameter")],
             lambda s: {"y": s["table"][s["ids"]]})
        yield c


def cases_reshape():
    A, B, C = dims(3)
    x = normal([A, B, C])
    c = Case("Reshape", "Reshape merge")
    c.op([c.src("x", x)], lambda s: {"y": s["x"].reshape(-1, C)}, {"ints": [-1, C]})
    yield c
    x = normal([A, B, 6])
    c = Case("Reshape", "Reshape split last")
    c.op([c.src("x", x)], lambda s: {"y": s["x"].reshape(A, B, 2, 3)}, {"ints": [A, B, 2, 3]})
    yield c


def cases_transpose():
    for rank in (2, 3, 4):
        x = normal(dims(rank))
        perm = [int(p) for p in rng.permutation(rank)]
        if perm == sorted(perm):
            perm = perm[::-1]
        c = Case("Transpose", "Transpose %s" % perm)
        c.op([c.src("x", x)], lambda s, perm=perm: {"y": np.transpose(s["x"], perm)},
             {"ints": perm})
        yield c


def cases_reduce(op_type, fn):
    for axes, keep in (([1], False), ([0, 2], True), ([], False)):
        x = normal(dims(3))
        c = Case(op_type, "%s axes %s%s" % (op_type, axes or "all", " keepdims" if keep else ""))
        attrs = {"ints": axes} if axes else {}
        if keep:
            attrs["keepdims"] = True
        c.op([c.src("x", x)],
             lambda s, axes=axes, keep=keep: {"y": fn(s["x"], axis=tuple(axes) or None, keepdims=keep)},
             attrs or None)
        yield c


def cases_concat():
    for axis in (0, 1, 2):
        base = dims(3)
        parts = []
        for _ in range(int(rng.integers(2, 4))):
            s = list(base)
            s[axis] = int(rng.integers(1, 5))
            parts.append(normal(s))
        c = Case("Concat", "Concat axis %d of %d" % (axis, len(parts)))
        k = len(parts)
        c.op([c.src("x%d" % i, p) for i, p in enumerate(parts)],
             lambda s, axis=axis, k=k: {"y": np.concatenate([s["x%d" % i] for i in range(k)], axis)},
             {"axis": axis})
        yield c


def cases_split():
    for axis in (1, 2):
        shape = dims(3)
        shape[axis] = 7
        x = normal(shape)
        sizes = [2, 5] if axis == 1 else [3, 1, 3]
        c = Case("Split", "Split axis %d into %s" % (axis, sizes))
        c.op([c.src("x", x)], lambda s, axis=axis, sizes=sizes: {
            "y%d" % i: p for i, p in enumerate(np.split(s["x"], np.cumsum(sizes)[:-1], axis))},
             {"axis": axis, "ints": sizes})
        yield c


def cases_slice():
    for axis in (0, 2):
        shape = dims(3)
        shape[axis] = 8
        x = normal(shape)
        start, end = int(rng.integers(0, 4)), int(rng.integers(5, 9))
        c = Case("Slice", "Slice axis %d [%d:%d]" % (axis, start, end))
        c.op([c.src("x", x)], lambda s, a=axis, r=range(start, end): {"y": np.take(s["x"], r, a)},
             {"axis": axis, "start": start, "end": end})
        yield c


def cases_rotary():
    for theta in (10000.0, 500000.0):
        B, H, S = dims(3)
        D = 2 * int(rng.integers(2, 5))
        x = normal([B, H, S + 4, D])
        c = Case("RotaryEmbedding", "RotaryEmbedding theta %g" % theta)
        c.op([c.src("x", x)], lambda s, theta=theta: {"y": rotary(s["x"], theta)}, {"theta": theta})
        yield c


def cases_sdpa():
    for causal, gqa, scale, sq_eq in ((True, 1, 0, True), (True, 2, 0, True),
                                     (False, 1, 0.3, False), (True, 1, 0, False)):
        B, Hkv = dims(2, 1, 3)
        H = Hkv * gqa
        Sk = int(rng.integers(3, 9))
        Sq = Sk if sq_eq else int(rng.integers(2, Sk))
        D, Dv = dims(2, 2, 6)
        q, k, v = normal([B, H, Sq, D]), normal([B, Hkv, Sk, D]), normal([B, Hkv, Sk, Dv])
        c = Case("ScaledDotProductAttention",
                 "SDPA %s gqa %d Sq %d Sk %d%s" % ("causal" if causal else "full", gqa, Sq, Sk,
                                                    " scale %g" % scale if scale else ""))
        attrs = {}
        if causal:
            attrs["causal"] = True
        if scale:
            attrs["scale"] = scale
        c.op([c.src("q", q), c.src("k", k), c.src("v", v)],
             lambda s, causal=causal, scale=scale: {"y": sdpa(s["q"], s["k"], s["v"], causal, scale)},
             attrs or None)
        yield c


def cases_cross_entropy():
    for lead in (dims(2), dims(1)):
        V = int(rng.integers(3, 17))
        logits = normal(lead + [V], 2.0)
        labels = rng.integers(0, V, size=lead)
        c = Case("CrossEntropyLoss", "CrossEntropy %s x V=%d" % (lead, V))
        c.op([c.src("logits", logits), c.src("labels", labels)],
             lambda s: {"loss": cross_entropy(s["logits"], s["labels"])})
        yield c


def cases_conv2d():
    for stride, pad, bias in (((1, 1), (1, 1), True), ((2, 1), (0, 2), False)):
        N, C, O = dims(3, 1, 3)
        H, W = dims(2, 5, 7)
        kh, kw = dims(2, 1, 3)
        x, w = normal([N, C, H, W]), normal([O, C, kh, kw], 0.5)
        b = normal([O]) if bias else None
        c = Case("Conv2d", "Conv2d stride %s pad %s%s" % (stride, pad, " bias" if bias else ""))
        ins = [c.src("x", x), c.src("w", w, "parameter")]
        if bias:
            ins.append(c.src("b", b, "parameter"))
        c.op(ins, lambda s, stride=stride, pad=pad: {
            "y": conv2d(s["x"], s["w"], s.get("b"), stride, pad)},
             {"ints": list(stride) + list(pad)})
        yield c


# ---- mixture of experts (issue 16): the router, dispatch and combine from their definitions
# (planner/README.md "Mixture of experts"), in one case so that the gates the backward check
# perturbs are the router's logits (a gate moved off 0 would route a token). ----

def moe_router(logits, k, renorm):  # softmax over the experts, the top k kept, the rest 0
    p = softmax(logits, -1)
    top = np.argsort(-p, axis=-1, kind="stable")[..., :k]
    mask = np.zeros(p.shape, dtype=bool)
    np.put_along_axis(mask, top, True, -1)
    g = np.where(mask, p, 0.0)
    return g / g.sum(-1, keepdims=True) if renorm else g


def moe_slots(gates, capacity):  # slot of token s at expert e in its row: earlier routed tokens
    B, S, E = gates.shape
    slot = -np.ones((B, S, E), dtype=np.int64)
    for b in range(B):
        for e in range(E):
            n = 0
            for s in range(S):
                if gates[b, s, e] != 0:
                    if n < capacity:
                        slot[b, s, e] = n
                    n += 1
    return slot


def moe_dispatch(x, gates, capacity):
    B, S, E = gates.shape
    out = np.zeros((B, E, capacity, x.shape[-1]))
    for (b, s, e), n in np.ndenumerate(moe_slots(gates, capacity)):
        if n >= 0:
            out[b, e, n] = x[b, s]
    return out


def moe_combine(y, gates):
    B, S, E = gates.shape
    out = np.zeros((B, S, y.shape[-1]))
    for (b, s, e), n in np.ndenumerate(moe_slots(gates, y.shape[2])):
        if n >= 0:
            out[b, s] += gates[b, s, e] * y[b, e, n]
    return out


def cases_moe():
    # The router: top k of E, renormalized (Mixtral) or not (Qwen2-MoE's default).
    for E, k, renorm in ((4, 2, True), (6, 3, False)):
        logits = normal([2, int(rng.integers(2, 5)), E], 2.0)
        c = Case("MoERouter", "MoERouter E=%d top %d%s" % (E, k, " renormalized" if renorm else ""))
        c.op([c.src("logits", logits)], lambda s, k=k, r=renorm: {"g": moe_router(s["logits"], k, r)},
             {"ints": [k], "variant": 1 if renorm else 0})
        yield c
    # Dispatch and combine, dropless and with fewer slots than tokens. The backward check moves
    # every gate a little, and a gate moved off 0 would route a token, so these gates are all
    # non-zero (every token routed everywhere); the zeros' routing is the router's output in
    # whole models (test-moe, test-hf-reference.py).
    for capacity in (None, 2):
        B, S, E, H = 2, int(rng.integers(3, 6)), 3, int(rng.integers(2, 5))
        C = capacity or S
        gates = (rng.uniform(0.1, 1.0, [B, S, E]) * rng.choice([-1, 1], [B, S, E])).astype(np.float32)
        c = Case("MoEDispatch", "MoEDispatch %d slots of %d tokens" % (C, S))
        c.op([c.src("x", normal([B, S, H])), c.src("gates", gates)],
             lambda s, C=C: {"y": moe_dispatch(s["x"], s["gates"], C)}, {"ints": [C]})
        yield c
        c = Case("MoECombine", "MoECombine %d slots of %d tokens" % (C, S))
        c.op([c.src("y", normal([B, E, C, H])), c.src("gates", gates)],
             lambda s: {"out": moe_combine(s["y"], s["gates"])})
        yield c


# ---- the model zoo's op types (issue 16): CPU kernels only ----

def alibi_slopes(n):  # Press et al.; BLOOM's build_alibi_tensor for n not a power of two
    closest = 2 ** int(math.floor(math.log2(n)))
    base = 2.0 ** (-(2.0 ** -(math.log2(closest) - 3)))
    slopes = [base ** i for i in range(1, closest + 1)]
    if closest != n:
        extra = 2.0 ** (-(2.0 ** -(math.log2(2 * closest) - 3)))
        slopes += [extra ** i for i in range(1, 1 + 2 * (n - closest), 2)]
    return np.array(slopes, dtype=np.float64)


def sdpa_alibi(q, k, v):  # BloomAttention: alibi + q k^T / sqrt(d), causal
    n, sq, sk = q.shape[1], q.shape[2], k.shape[2]
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    s = s + alibi_slopes(n)[None, :, None, None] * np.arange(sk, dtype=np.float64)
    s = np.where(np.tril(np.ones((sq, sk), dtype=bool)), s, -np.inf)
    return softmax(s, -1) @ v


def rotary_llama3(x, theta, factor, low, high, original):
    """transformers' _compute_llama3_parameters, then apply_rotary_pos_emb."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > original / low, inv / factor, inv)
    smooth = (original / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < original / high) & ~(wavelen > original / low)
    inv = np.where(medium, blended, scaled)
    freqs = np.outer(np.arange(x.shape[-2], dtype=np.float64), inv)
    emb = np.concatenate([freqs, freqs], -1)
    half = d // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * np.cos(emb) + rot * np.sin(emb)


def sdpa_bias(q, k, v, bias, causal):  # T5Attention: q k^T (unscaled) + position bias
    s = q @ np.swapaxes(k, -1, -2) + bias
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.tril(np.ones((sq, sk), dtype=bool)), s, -np.inf)
    return softmax(s, -1) @ v


def cases_zoo():
    for causal, per_batch in ((False, False), (True, True)):
        B, H = int(rng.integers(1, 3)), int(rng.integers(2, 4))
        S, D = int(rng.integers(3, 7)), int(rng.integers(2, 5))
        q, k, v = normal([B, H, S, D]), normal([B, H, S, D]), normal([B, H, S, D])
        bias = normal([B if per_batch else 1, H, S, S])
        c = Case("ScaledDotProductAttention", "SDPA score bias %s%s" % (
            "causal" if causal else "full", " per batch" if per_batch else ""))
        attrs = {"scale": 1.0}
        if causal:
            attrs["causal"] = True
        c.op([c.src("q", q), c.src("k", k), c.src("v", v), c.src("bias", bias)],
             lambda s, causal=causal: {"y": sdpa_bias(s["q"], s["k"], s["v"], s["bias"], causal)},
             attrs)
        c.cpu_only = True
        yield c
    # d = 8 and theta 10000 with an original context of 64: pair 0 keeps its frequency, pair 1
    # blends, pairs 2 and 3 slow down by the factor.
    x = normal([2, 3, 7, 8])
    c = Case("RotaryEmbedding", "RotaryEmbedding llama3 (keep, blend, slow)")
    c.op([c.src("x", x)], lambda s: {"y": rotary_llama3(s["x"], 10000.0, 8.0, 1.0, 4.0, 64)},
         {"theta": 10000.0, "variant": 1, "rope_factor": 8.0, "rope_low_freq": 1.0,
          "rope_high_freq": 4.0, "rope_original_max": 64})
    c.cpu_only = True
    yield c
    for axis, r in ((1, 2), (0, 3)):
        x = normal(dims(3))
        c = Case("RepeatInterleave", "RepeatInterleave axis %d x%d" % (axis, r))
        c.op([c.src("x", x)], lambda s, axis=axis, r=r: {"y": np.repeat(s["x"], r, axis=axis)},
             {"axis": axis, "ints": [r]})
        c.cpu_only = True
        yield c
    c = Case("Scale", "Scale by sqrt(2048)")
    c.op([c.src("x", normal(dims(3)))], lambda s: {"y": s["x"] * math.sqrt(2048.0)},
         {"scale": math.sqrt(2048.0)})
    c.cpu_only = True
    yield c
    for n in (4, 6):
        B, S = int(rng.integers(1, 3)), int(rng.integers(3, 8))
        D = int(rng.integers(2, 6))
        q, k, v = normal([B, n, S, D]), normal([B, n, S, D]), normal([B, n, S, D])
        c = Case("ScaledDotProductAttention", "SDPA ALiBi %d heads" % n)
        c.op([c.src("q", q), c.src("k", k), c.src("v", v)],
             lambda s: {"y": sdpa_alibi(s["q"], s["k"], s["v"])},
             {"causal": True, "variant": 1})
        c.cpu_only = True
        yield c


def all_cases():
    yield from cases_matmul()
    yield from cases_batch_matmul()
    yield from cases_einsum()
    yield from cases_binary("Add", lambda a, b: a + b)
    yield from cases_binary("Sub", lambda a, b: a - b)
    yield from cases_binary("Mul", lambda a, b: a * b)
    yield from cases_binary("Div", lambda a, b: a / b)
    yield from cases_unary("ReLU", lambda x: np.maximum(x, 0))
    yield from cases_unary("GeLU", gelu_erf, None, "GeLU erf")
    yield from cases_unary("GeLU", gelu_tanh, {"variant": 1}, "GeLU tanh (gelu_new)")
    yield from cases_unary("SiLU", lambda x: x / (1 + np.exp(-x)))
    yield from cases_unary("Tanh", np.tanh)
    yield from cases_unary("Exp", np.exp, scale=1.5)
    yield from cases_unary("Neg", np.negative)
    yield from cases_cast()
    yield from cases_unary("Dropout", lambda x: x, None, "Dropout (identity: eval mode)")
    yield from cases_softmax()
    yield from cases_layer_norm()
    yield from cases_rms_norm()
    yield from cases_embedding()
    yield from cases_reshape()
    yield from cases_transpose()
    yield from cases_reduce("ReduceSum", np.sum)
    yield from cases_reduce("ReduceMean", np.mean)
    yield from cases_concat()
    yield from cases_split()
    yield from cases_slice()
    yield from cases_rotary()
    yield from cases_sdpa()
    yield from cases_cross_entropy()
    yield from cases_conv2d()
    yield from cases_unary("Sigmoid", lambda x: 1 / (1 + np.exp(-x)))
    yield from cases_moe()
    yield from cases_zoo()


def rel_error(got, want):
    want = np.asarray(want, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    if got.shape != want.shape:
        return math.inf, "shape %s, expected %s" % (list(got.shape), list(want.shape))
    if want.size == 0:
        return 0.0, ""
    scale = max(np.abs(want).max(), 1e-30)
    return float(np.abs(got - want).max() / scale), ""


def upstream(c):
    """A random gradient for every output (zeros, as i64, for integer outputs)."""
    out = {}
    for name, want in c.expect.items():
        want = np.asarray(want)
        out["grad." + name] = (np.zeros(want.shape, np.int64) if want.dtype == np.int64
                               else normal(list(want.shape)))
    return out


def check_backward(c, gouts, grads):
    """Directional derivatives of <g, f> from the NumPy forward: no hand-derived gradient."""
    msgs, worst = [], 0.0
    base = c.values()

    def loss(values):
        out = c.fn(values)
        return sum(float((gouts["grad." + n].astype(np.float64) * out[n]).sum())
                   for n in out if np.asarray(out[n]).dtype != np.int64)

    for name, _, a, dt in c.sources:
        if dt != "f32":
            continue
        got = grads.get("grad." + name)
        if got is None:
            msgs.append("backward: no grad.%s" % name)
            continue
        got = np.asarray(got, np.float64)
        if got.shape != a.shape:
            msgs.append("backward: grad.%s is %s, expected %s" % (name, list(got.shape), list(a.shape)))
            continue
        for _ in range(N_DIRECTIONS):
            v = rng.standard_normal(a.shape)
            h = 1e-6 * max(1.0, float(np.abs(base[name]).max()))
            fd = (loss(c.values({name: base[name] + h * v}))
                  - loss(c.values({name: base[name] - h * v}))) / (2 * h)
            dot = float((got * v).sum())
            err = abs(dot - fd) / max(float(np.linalg.norm(got) * np.linalg.norm(v)), abs(fd), 1e-30)
            worst = max(worst, err)
            if err > TOL_GRAD:
                msgs.append("backward grad.%s: <grad, v> %.6g, finite difference %.6g (rel %.2g > %.0e)"
                            % (name, dot, fd, err, TOL_GRAD))
                break
    return msgs, worst


def main():
    import json

    run = sys.argv[1]
    extra = sys.argv[2:]
    cases = list(all_cases())
    # GOLDEN_ONLY=OpType keeps that op type's cases (the same random ones): the mutation
    # check's fast path.
    only = os.environ.get("GOLDEN_ONLY")
    if only:
        cases = [c for c in cases if c.op_type == only]
    if "cuda" in extra or "nccl" in extra:  # no GPU kernels for these yet (executor/README.md)
        cases = [c for c in cases
                 if c.op_type not in ("Sigmoid", "MoERouter", "MoEDispatch", "MoECombine")]
    # The model zoo's kernels are CPU ones: other backends refuse them by name.
    if "--backend" in extra and extra[extra.index("--backend") + 1] != "cpu":
        cases = [c for c in cases if not getattr(c, "cpu_only", False)]
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        prefixes = []
        for i, c in enumerate(cases):
            prefix = os.path.join(tmp, "case%03d" % i)
            with open(prefix + ".graph.json", "w") as f:
                json.dump(c.graph(), f)
            st.save(prefix + ".in.safetensors", {n: a for n, _, a, _ in c.sources})
            c.gouts = upstream(c)
            st.save(prefix + ".gout.safetensors", c.gouts)
            prefixes.append(prefix)
        proc = subprocess.run([run, "--mesh", MESH] + extra + prefixes, capture_output=True,
                              text=True)
        if proc.returncode == 77:
            # A GPU backend without a device: skipped with its reason, never passed.
            print("1..0 # SKIP %s" % proc.stderr.strip().splitlines()[-1])
            return 0
        if proc.returncode != 0:
            print("1..1")
            print("not ok 1 - golden-run failed: %s" % proc.stderr.strip().replace("\n", " "))
            return 1
        print("1..%d" % len(cases))
        failed = 0
        for i, (c, prefix) in enumerate(zip(cases, prefixes)):
            msgs = []
            worst = 0.0
            for which in ("out", "sharded"):
                got = st.load(prefix + ".%s.safetensors" % which)
                for name, want in c.expect.items():
                    if name not in got:
                        msgs.append("%s: no output %s" % (which, name))
                        continue
                    err, why = rel_error(got[name], want)
                    worst = max(worst, err)
                    if err > TOL:
                        msgs.append("%s %s: rel error %.3g > %.1g %s" % (
                            "reference" if which == "out" else "sharded " + MESH, name, err, TOL,
                            why))
            bmsgs, bworst = check_backward(c, c.gouts, st.load(prefix + ".gin.safetensors"))
            msgs += bmsgs
            status = "ok" if not msgs else "not ok"
            failed += bool(msgs)
            print("%s %d - %s (%s): max rel error %.2g, backward %.2g%s" % (
                status, i + 1, c.label, c.op_type, worst, bworst,
                "" if not msgs else "; " + "; ".join(msgs)))
        types = sorted({c.op_type for c in cases})
        print("# %d cases over %d op types: %s" % (len(cases), len(types), ", ".join(types)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
