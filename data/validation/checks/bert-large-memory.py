#!/usr/bin/env python3
"""The v100-bert-large-fp32 memory row, measured with PyTorch on the CPU.

BertForSequenceClassification (bert-large-uncased's shape), batch 4, sequence 512, f32, eager
attention, dropout 0.1, AdamW, as the Hugging Face 'Model training anatomy' run. Two figures:

1. the bytes autograd saves for the backward pass (saved_tensors_hooks, each storage once);
2. the peak of live bytes over one steady-state training step (forward, backward, optimizer
   step, grads kept between steps as torch 1.13's zero_grad() did), from torch.profiler's
   memory timeline, by category.

Dropout on the CPU keeps its mask as a float tensor; CUDA's fused dropout (native_dropout) keeps
a bool one, so F.dropout is routed through torch.native_dropout to count what the GPU keeps.
The caching allocator's reserve is not in either figure: it is what nvidia-smi adds on top.

    /work/main/.venv-frameworks/torch/bin/python data/validation/checks/bert-large-memory.py
"""

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline
from transformers import BertConfig, BertForSequenceClassification

MiB = 1 << 20


def cuda_like_dropout(input, p=0.5, training=True, inplace=False):
    if not training or p == 0:
        return input
    return torch.native_dropout(input, p, True)[0]


def main():
    F.dropout = cuda_like_dropout
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=1024, num_hidden_layers=24,
                     num_attention_heads=16, intermediate_size=4096, max_position_embeddings=512,
                     type_vocab_size=2, attn_implementation="eager")
    model = BertForSequenceClassification(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=False)
    ids = torch.randint(0, cfg.vocab_size, (4, 512))
    labels = torch.randint(0, 2, (4,))

    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            saved[s.data_ptr()] = max(saved.get(s.data_ptr(), 0), s.nbytes())
        return t

    def step(hooks=False):
        if hooks:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                loss = model(input_ids=ids, labels=labels).loss
        else:
            loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        model.zero_grad(set_to_none=False)

    step(hooks=True)  # also creates the optimizer states, as in steady state
    n = sum(p.numel() for p in model.parameters())
    print("parameters %d (%.1f MiB f32)" % (n, n * 4 / MiB))
    print("saved for backward: %.1f MiB" % (sum(saved.values()) / MiB))

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        step()
    times, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(
        torch.device("cpu"))
    totals = [sum(s) for s in sizes]
    peak = max(range(len(totals)), key=totals.__getitem__)
    print("peak live bytes over one step: %.1f MiB" % (totals[peak] / MiB))
    for category, index in _CATEGORY_TO_INDEX.items():
        name = category.name if category is not None else "unknown"
        print("  %-16s %8.1f MiB" % (name, sizes[peak][index + 1] / MiB))


if __name__ == "__main__":
    main()
