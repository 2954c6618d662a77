#!/usr/bin/env python3
"""The loss path and the RMSNorm of a Llama training step, measured with PyTorch on the CPU.

A small LlamaForCausalLM (transformers' own code: eager LlamaRMSNorm, SDPA attention, which on
the CPU in bf16 is the flash kernel keeping q, k, v, the output and the fp32 logsumexp), bf16
weights, batch 1, sequence 1024, vocabulary 32000, labels given, so the loss is transformers'
ForCausalLMLoss (logits.float(), cross_entropy). It prints:

1. the bytes autograd saves for the backward pass (saved_tensors_hooks, each storage once, no
   parameters), in total and for one LlamaRMSNorm alone;
2. the peak of live bytes over forward + backward (torch.profiler's memory timeline) above the
   parameters, and the peak of the loss alone (ForCausalLMLoss and its backward on given
   logits) above the logits.

Shardscope's figures for the same configuration (data/validation/checks/llama-small.json,
`propagate ... --batch 1 --seq 1024 --dtype bf16 --mesh dp=1 --no-dropout --json`) are
`memory.activations` (the stored tensors, the bf16 logits among them) and `memory.loss` (the
loss path's temporaries at their peak: 12 bytes a logit).

    /work/main/.venv-frameworks/torch/bin/python data/validation/checks/llama-loss-memory.py
"""

import json
import os

import torch
from torch.profiler import ProfilerActivity, profile
from torch.profiler._memory_profiler import MemoryProfileTimeline
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.loss.loss_utils import ForCausalLMLoss

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
B, S = 1, 1024


def saved_bytes(fn, exclude):
    saved = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in exclude:
            saved[s.data_ptr()] = max(saved.get(s.data_ptr(), 0), s.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return sum(saved.values()), out


def peak_live(fn):
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        fn()
    _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(
        torch.device("cpu"))
    totals = [sum(s) for s in sizes]
    return max(totals) - totals[0]


def main():
    torch.manual_seed(0)
    with open(os.path.join(HERE, "llama-small.json")) as f:
        raw = json.load(f)
    cfg = LlamaConfig(**{k: v for k, v in raw.items() if k not in ("architectures", "torch_dtype")})
    cfg._attn_implementation = "sdpa"
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.train()
    ids = torch.randint(0, cfg.vocab_size, (B, S))
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    n = sum(p.numel() for p in model.parameters())
    print("parameters %d (%.3f MiB bf16)" % (n, n * 2 / MiB))

    # 1. saved for backward: the whole step, and one RMSNorm alone.
    total, out = saved_bytes(lambda: model(input_ids=ids, labels=ids), params)
    logits = out.logits.untyped_storage().nbytes()
    print("saved for backward: %.3f MiB (of which log_softmax's fp32 output %.3f MiB); the "
          "returned bf16 logits %.3f MiB" % (total / MiB, B * S * cfg.vocab_size * 4 / MiB,
                                              logits / MiB))
    out.loss.backward()
    model.zero_grad(set_to_none=True)
    norm = model.model.layers[0].input_layernorm
    x = torch.randn(B, S, cfg.hidden_size, dtype=torch.bfloat16, requires_grad=True)
    nbytes, _ = saved_bytes(lambda: norm(x), params | {x.untyped_storage().data_ptr()})
    kept_x = 0
    # Whether the norm keeps its own bf16 input (it should not: it keeps the fp32 copy).
    probe = {}

    def pack(t):
        probe[t.untyped_storage().data_ptr()] = t.dtype
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        norm(x)
    kept_x = x.untyped_storage().data_ptr() in probe
    print("one LlamaRMSNorm over [%d, %d, %d] bf16: saves %d bytes = %.2f bytes an element; "
          "its bf16 input kept: %s" % (B, S, cfg.hidden_size, nbytes,
                                       nbytes / (B * S * cfg.hidden_size), kept_x))

    # 2. peak live bytes above the parameters: forward + backward, and the loss alone.
    def step():
        o = model(input_ids=ids, labels=ids)
        o.loss.backward()
        del o

    step()
    model.zero_grad(set_to_none=True)
    print("peak live over forward + backward, above the parameters: %.3f MiB"
          % (peak_live(step) / MiB))
    model.zero_grad(set_to_none=True)
    lg = torch.randn(B, S, cfg.vocab_size, dtype=torch.bfloat16, requires_grad=True)

    def loss_only():
        ForCausalLMLoss(lg, ids, cfg.vocab_size).backward()

    loss_only()
    lg.grad = None
    peak = peak_live(loss_only)
    print("the loss alone on bf16 logits [%d, %d, %d]: peak %.3f MiB above the logits = %.2f "
          "bytes a logit (the 16-bit gradient of the logits, %.3f MiB, is left at the end)"
          % (B, S, cfg.vocab_size, peak / MiB, peak / (B * S * cfg.vocab_size),
             lg.numel() * 2 / MiB))


if __name__ == "__main__":
    main()
