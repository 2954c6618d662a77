#!/usr/bin/env python3
"""The v100-bert-large-fp32 row's allocation order, measured with PyTorch on the CPU.

The same model and step as bert-large-memory.py (BertForSequenceClassification at
bert-large-uncased's shape, batch 4, sequence 512, f32, eager attention, dropout 0.1 with CUDA's
bool masks, AdamW with foreach=False, gradients kept between steps). torch.profiler records
every allocation and free of two steps from a fresh model (the first creates the gradients and
Adam's states) in the order they happen; they are replayed through PyTorch's caching-allocator
rules as Shardscope replays its own sequence (c10/cuda/CUDACachingAllocator.cpp: 512 B
rounding, 2 MiB small segments up to 1 MiB, 20 MiB segments under 10 MiB, 2 MiB rounding above,
best fit, split when more than 1 MiB (512 B small) remains, freed neighbours merged, nothing
given back). Prints the live peak and the segments' high-water mark: what the caching
allocator would reserve for this exact sequence on a GPU.

    /work/main/.venv-frameworks/torch/bin/python data/validation/checks/bert-large-allocator-replay.py
"""

import bisect

import torch
import torch.nn.functional as F
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile
from torch.profiler._memory_profiler import OpTree
from transformers import BertConfig, BertForSequenceClassification

MiB = 1 << 20
KMIN, KSMALL, KSMALLBUF, KLARGEBUF, KMINLARGE, KROUND = 512, MiB, 2 * MiB, 20 * MiB, 10 * MiB, 2 * MiB


class Sim:
    def __init__(self):
        self.free = [[], []]  # per pool: (size, segment, offset), sorted (BlockComparatorSize)
        self.blocks = {}      # (segment, offset) -> [size, used, pool]
        self.ends = {}        # (segment, end offset) -> offset: each block's left neighbour
        self.segs = 0
        self.reserved = self.peak = self.live = self.live_peak = 0

    def _put(self, seg, off, size, used, pool):
        self.blocks[(seg, off)] = [size, used, pool]
        self.ends[(seg, off + size)] = off
        if not used:
            bisect.insort(self.free[pool], (size, seg, off))

    def _drop(self, seg, off):
        size, used, pool = self.blocks.pop((seg, off))
        del self.ends[(seg, off + size)]
        if not used:
            self.free[pool].remove((size, seg, off))
        return size

    def malloc(self, n):
        self.live += n
        self.live_peak = max(self.live_peak, self.live)
        size = KMIN if n < KMIN else (n + KMIN - 1) // KMIN * KMIN
        pool = 0 if size <= KSMALL else 1
        i = bisect.bisect_left(self.free[pool], (size, -1, -1))
        if i < len(self.free[pool]):
            bsize, seg, off = self.free[pool][i]
            self._drop(seg, off)
        else:
            bsize = KSMALLBUF if size <= KSMALL else KLARGEBUF if size < KMINLARGE else \
                (size + KROUND - 1) // KROUND * KROUND
            seg, off = self.segs, 0
            self.segs += 1
            self.reserved += bsize
            self.peak = max(self.peak, self.reserved)
        rest = bsize - size
        if (rest >= KMIN) if pool == 0 else (rest > KSMALL):
            self._put(seg, off + size, rest, False, pool)
            bsize = size
        self._put(seg, off, bsize, True, pool)
        return (seg, off, n)

    def release(self, h):
        seg, off, n = h
        self.live -= n
        pool = self.blocks[(seg, off)][2]
        size = self._drop(seg, off)
        nxt = self.blocks.get((seg, off + size))
        if nxt and not nxt[1]:
            size += self._drop(seg, off + size)
        po = self.ends.get((seg, off))
        if po is not None and not self.blocks[(seg, po)][1]:
            size += self._drop(seg, po)
            off = po
        self._put(seg, off, size, False, pool)


def main():
    F.dropout = lambda x, p=0.5, training=True, inplace=False: (
        x if not training or p == 0 else torch.native_dropout(x, p, True)[0])
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=1024, num_hidden_layers=24,
                     num_attention_heads=16, intermediate_size=4096, max_position_embeddings=512,
                     type_vocab_size=2, attn_implementation="eager")
    model = BertForSequenceClassification(cfg)
    model.train()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        # what model.to("cuda") does: one allocation per parameter and buffer, in order
        with torch.no_grad():
            for t in list(model.parameters()) + list(model.buffers()):
                t.data = t.data.clone()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=False)
        ids = torch.randint(0, cfg.vocab_size, (4, 512))
        labels = torch.randint(0, 2, (4,))
        for _ in range(2):
            loss = model(input_ids=ids, labels=labels).loss
            loss.backward()
            opt.step()
            model.zero_grad(set_to_none=False)
    events = []
    for node in OpTree(prof.profiler.kineto_results).sorted_nodes:
        if node.typed[0] == _EventType.Allocation:
            f = node.typed[1]
            events.append((node.start_time_ns, f.ptr, f.alloc_size))
    sim, live = Sim(), {}
    for _, ptr, size in events:
        if size > 0:
            live[ptr] = sim.malloc(size)
        elif ptr in live:
            sim.release(live.pop(ptr))
    print("allocations %d" % sum(1 for e in events if e[2] > 0))
    print("live peak %.1f MiB, segments' high-water mark %.1f MiB, beyond the live peak %.1f MiB"
          % (sim.live_peak / MiB, sim.peak / MiB, (sim.peak - sim.live_peak) / MiB))


if __name__ == "__main__":
    main()
