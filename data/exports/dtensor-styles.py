import copy
import fnmatch
import inspect
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_module, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
    loss_parallel,
    parallelize_module,
)


def _placed(x, mesh, arrives, wanted):
    """x as a DTensor in @wanted: a plain tensor is this rank's shard in @arrives."""
    if not isinstance(x, DTensor):
        x = DTensor.from_local(x, mesh, (arrives,), run_check=False)
    if wanted is not None and x.placements != (wanted,):
        x = x.redistribute(mesh, (wanted,))
    return x


class PrepareBlockInput(PrepareModuleInput):
    """PrepareModuleInput of a block's first input (its hidden states), however the caller
    passes it: positionally (GPT-2's attn, every mlp) or by name (transformers calls
    self_attn(hidden_states=...)). One redistribution serves every projection in the block."""

    def __init__(self, input_layout, desired_input_layout):
        super().__init__(input_layouts=(input_layout,), desired_input_layouts=(desired_input_layout,))

    def _apply(self, module, device_mesh):
        first = next(iter(inspect.signature(module.forward).parameters))
        arrives, wanted = self.input_layouts[0], self.desired_input_layouts[0]

        # Handed over as this rank's local tensor: the block's own ops (a decoder layer's
        # residual Add) compute on plain tensors, and its styles take them as `wanted`.
        def hook(_, args, kwargs):
            if args:
                return (_placed(args[0], device_mesh, arrives, wanted).to_local(),) + tuple(args[1:]), kwargs
            kwargs = dict(kwargs)
            kwargs[first] = _placed(kwargs[first], device_mesh, arrives, wanted).to_local()
            return args, kwargs

        module.register_forward_pre_hook(hook, with_kwargs=True)
        return module


def regroup(t, groups, n, dim=-1):
    """A fused projection's columns [q|k|v] (dim @dim: the last for Conv1D, 0 for a Linear's
    rows) regrouped as [q0 k0 v0|q1 k1 v1|...] so that Shard(dim) over n ranks gives each rank
    its heads of every part."""
    t = t.movedim(dim, -1)
    lead = t.shape[:-1]
    return t.reshape(*lead, groups, n, -1).transpose(-3, -2).reshape(*lead, -1).movedim(-1, dim).contiguous()


def ungroup(t, groups, n, dim=-1):
    """The inverse of regroup: back to the Hugging Face column order, for a checkpoint."""
    t = t.movedim(dim, -1)
    lead = t.shape[:-1]
    return t.reshape(*lead, n, groups, -1).transpose(-3, -2).reshape(*lead, -1).movedim(-1, dim).contiguous()


class FusedColwiseParallel(ParallelStyle):
    """ColwiseParallel for a Linear that fuses @groups equal projections in its rows (Phi-3's
    qkv_proj [q|k|v], gate_up_proj [gate|up]): the rows are regrouped (regroup(dim=0)) so that
    each rank holds its part of every projection, and the module's own split of its output
    (chunk, slices by the local head counts) then finds its local parts."""

    def __init__(self, *, groups, input_layouts=None, output_layouts=None, use_local_output=True):
        super().__init__()
        self.groups = groups
        self.input_layout = input_layouts or Replicate()
        self.output_layout = output_layouts or Shard(-1)
        self.use_local_output = use_local_output

    def _apply(self, module, device_mesh):
        n = device_mesh.size()

        def partition(name, mod, mesh):
            for pname, p in list(mod.named_parameters(recurse=False)):
                t = regroup(p.detach(), self.groups, n, dim=0)
                mod.register_parameter(
                    pname, nn.Parameter(distribute_tensor(t, mesh, [Shard(0)]), requires_grad=p.requires_grad)
                )

        def input_fn(mod, inputs, mesh):
            x = inputs[0]
            arrives = self.input_layout
            if isinstance(arrives, Shard) and arrives.dim < 0:
                arrives = Shard(arrives.dim + x.dim())
            return (_placed(x, mesh, arrives, Replicate()),) + tuple(inputs[1:])

        def output_fn(mod, out, mesh):
            want = self.output_layout
            if isinstance(want, Shard) and want.dim < 0:
                want = Shard(want.dim + out.dim())
            if out.placements != (want,):
                out = out.redistribute(mesh, (want,))
            return out.to_local() if self.use_local_output else out

        return distribute_module(module, device_mesh, partition, input_fn, output_fn)


class ReplicatedParallel(ParallelStyle):
    """A module computed whole on every rank whose output each rank uses a part of: the one
    key/value head that a rank's query heads share (Gemma's, Llama 3's k_proj and v_proj when
    the ranks outnumber the key/value heads). Its parameters Replicate; its output leaves as
    the whole local tensor, and its gradient, each rank's share, is summed over the axis."""

    def __init__(self, *, input_layouts=None, segments=None):
        super().__init__()
        self.input_layout = input_layouts or Replicate()
        # ((columns, split), ...): a fused output [q|k|v] of which each rank keeps its share
        # of a split part (q's heads) and all of a whole one (Falcon's one key/value head).
        self.segments = segments

    def _apply(self, module, device_mesh):
        def partition(name, mod, mesh):
            for pname, p in list(mod.named_parameters(recurse=False)):
                mod.register_parameter(
                    pname, nn.Parameter(distribute_tensor(p.detach(), mesh, [Replicate()]), requires_grad=p.requires_grad)
                )

        def input_fn(mod, inputs, mesh):
            x = inputs[0]
            arrives = self.input_layout
            if isinstance(arrives, Shard) and arrives.dim < 0:
                arrives = Shard(arrives.dim + x.dim())
            return (_placed(x, mesh, arrives, Replicate()),) + tuple(inputs[1:])

        def output_fn(mod, out, mesh):
            out = out.to_local(grad_placements=(Partial(),))
            if not self.segments:
                return out
            n, rank = mesh.size(), mesh.get_local_rank()
            kept, offset = [], 0
            for columns, split in self.segments:
                if split:
                    per = columns // n
                    kept.append(out[..., offset + rank * per:offset + (rank + 1) * per])
                else:
                    kept.append(out[..., offset:offset + columns])
                offset += columns
            return torch.cat(kept, -1)

        return distribute_module(module, device_mesh, partition, input_fn, output_fn)


def local_heads(module, tp, kv_split):
    """An attention module whose heads the ranks of @tp split: the head counts it reads in
    its forward made this rank's (BLOOM's num_heads, Phi-3's config.num_attention_heads);
    @kv_split False: the key/value heads are whole on each rank (ReplicatedParallel), so each
    serves fewer local query heads (num_key_value_groups). A forward argument `alibi` (BLOOM:
    [batch * heads, 1, keys], every head's slopes) is cut to this rank's heads."""
    n, rank = tp.size(), tp.get_local_rank()
    heads = None
    for attr in ("num_heads", "num_attention_heads", "n_head", "n_heads"):
        v = getattr(module, attr, None)
        if isinstance(v, int) and not isinstance(v, bool):
            heads = v
            setattr(module, attr, v // n)
    # T5 reshapes the attention's output to inner_dim (heads x head size).
    if heads and isinstance(getattr(module, "inner_dim", None), int):
        module.inner_dim //= n
    for attr in ("num_key_value_heads", "num_kv_heads"):
        v = getattr(module, attr, None)
        if kv_split and isinstance(v, int) and v > 1:
            setattr(module, attr, v // n)
    if not kv_split and isinstance(getattr(module, "num_key_value_groups", None), int):
        module.num_key_value_groups //= n
    config = getattr(module, "config", None)
    if config is not None and isinstance(getattr(config, "num_attention_heads", None), int):
        config = copy.copy(config)
        heads = heads or config.num_attention_heads
        config.num_attention_heads //= n
        if kv_split and isinstance(getattr(config, "num_key_value_heads", None), int):
            config.num_key_value_heads //= n
        module.config = config
    if "alibi" in inspect.signature(module.forward).parameters and heads:
        position = list(inspect.signature(module.forward).parameters).index("alibi")
        per = heads // n

        def hook(_, args, kwargs):
            first = args[0] if args else next(iter(kwargs.values()))
            batch = first.shape[0]  # the block's input, whole on tp (PrepareBlockInput)

            def cut(alibi):
                if alibi is None:  # Falcon with rotary positions passes none
                    return alibi
                rows, one, keys = alibi.shape
                # Built from a batch split over tp (the embedding's norm on its rows): gathered.
                if rows // heads < batch:
                    alibi = DTensor.from_local(alibi, tp, (Shard(0),), run_check=False).full_tensor()
                    rows = alibi.shape[0]
                return alibi.view(rows // heads, heads, one, keys)[:, rank * per:(rank + 1) * per].reshape(-1, one, keys)

            if "alibi" in kwargs:
                kwargs = dict(kwargs, alibi=cut(kwargs["alibi"]))
            elif len(args) > position:
                args = args[:position] + (cut(args[position]),) + args[position + 1:]
            return args, kwargs

        module.register_forward_pre_hook(hook, with_kwargs=True)


class Conv1DParallel(ParallelStyle):
    """ColwiseParallel / RowwiseParallel for transformers' Conv1D (GPT-2: weight [in, out],
    y = x @ W + b): colwise splits the weight's columns and the bias, rowwise the weight's
    rows. groups > 1: a fused projection ([q|k|v] in c_attn) whose columns are regrouped
    (regroup()) so each rank holds its heads of q, k and v, and whose parent attention then
    splits its local output in local thirds."""

    def __init__(self, colwise, *, input_layouts=None, output_layouts=None, use_local_output=True, groups=1):
        super().__init__()
        self.colwise = colwise
        self.input_layout = input_layouts or (Replicate() if colwise else Shard(-1))
        self.output_layout = output_layouts or (Shard(-1) if colwise else Replicate())
        self.use_local_output = use_local_output
        self.groups = groups

    def _apply(self, module, device_mesh):
        n = device_mesh.size()

        def partition(name, mod, mesh):
            for pname, p in list(mod.named_parameters(recurse=False)):
                t = p.detach()
                if self.groups > 1:
                    t = regroup(t, self.groups, n)
                if self.colwise:
                    place = Shard(t.dim() - 1)
                else:
                    place = Shard(0) if t.dim() == 2 else Replicate()
                mod.register_parameter(
                    pname, nn.Parameter(distribute_tensor(t, mesh, [place]), requires_grad=p.requires_grad)
                )

        def input_fn(mod, inputs, mesh):
            x = inputs[0]
            rank = x.dim()
            arrives = self.input_layout
            if isinstance(arrives, Shard) and arrives.dim < 0:
                arrives = Shard(arrives.dim + rank)
            wanted = Replicate() if self.colwise else Shard(rank - 1)
            return (_placed(x, mesh, arrives, wanted),) + tuple(inputs[1:])

        def output_fn(mod, out, mesh):
            want = self.output_layout
            if isinstance(want, Shard) and want.dim < 0:
                want = Shard(want.dim + out.dim())
            if out.placements != (want,):
                out = out.redistribute(mesh, (want,))
            return out.to_local() if self.use_local_output else out

        return distribute_module(module, device_mesh, partition, input_fn, output_fn)


class ActivationParallel(ParallelStyle):
    """A module that computes on this rank's shard of its activations, dim @dim of its input
    and of its output (the batch; the sequence of an embedding or lm_head): its parameters
    Replicate (DTensor sums their gradients over the axis), its input Shard(dim) (a whole one
    is sliced), its output Shard(dim) unless output_layouts says otherwise."""

    def __init__(self, dim, *, input_layouts=None, output_layouts=None, use_local_output=True):
        super().__init__()
        self.dim = dim
        self.input_layout = input_layouts or Shard(dim)
        self.output_layout = output_layouts or Shard(dim)
        self.use_local_output = use_local_output

    def _apply(self, module, device_mesh):
        def partition(name, mod, mesh):
            for pname, p in list(mod.named_parameters(recurse=False)):
                mod.register_parameter(
                    pname, nn.Parameter(distribute_tensor(p.detach(), mesh, [Replicate()]), requires_grad=p.requires_grad)
                )

        def input_fn(mod, inputs, mesh):
            x = inputs[0]
            arrives = self.input_layout
            if isinstance(arrives, Shard) and arrives.dim < 0:
                arrives = Shard(arrives.dim + x.dim())
            return (_placed(x, mesh, arrives, Shard(self.dim)),) + tuple(inputs[1:])

        def output_fn(mod, out, mesh):
            want = self.output_layout
            if isinstance(want, Shard) and want.dim < 0:
                want = Shard(want.dim + out.dim())
            if out.placements != (want,):
                out = out.redistribute(mesh, (want,))
            return out.to_local() if self.use_local_output else out

        return distribute_module(module, device_mesh, partition, input_fn, output_fn)


def _all_to_all(x, group):
    """x [ranks * n, ...] -> [ranks * n, ...]: chunk j to rank j, chunk i from rank i (equal
    chunks), differentiable: the backward is the reverse exchange."""
    from torch.distributed import _functional_collectives as funcol

    out = funcol.all_to_all_single_autograd(x.contiguous(), None, None, group)
    return funcol.wait_tensor(out)


def moe_experts(module, hidden_states, top_k_index, top_k_weights, *, experts, capacity, rows,
                group=None, ranks=1):
    """The plan's MoE layer on a Hugging Face experts module (weights stacked by expert on dim
    0: gate_up_proj [E, 2I, H], down_proj [E, H, I]), on this rank's tokens hidden_states
    [rows * seq, H] routed by top_k_index / top_k_weights [rows * seq, k]. Each batch row is a
    routing group whose token s takes slot c at expert e, c the number of earlier tokens of
    the row routed to e, kept when c < @capacity (a token past it gets nothing from e). The
    slots [rows, E, C, H] go to the experts' ranks with one all_to_all over @group (@ranks
    ranks, each holding E / ranks experts: its local gate_up_proj and down_proj), each rank
    runs its experts on every rank's rows, and a second all_to_all brings the outputs back,
    summed per token with the router's weights. @group None: one rank with all experts."""
    tokens, hidden = hidden_states.shape
    seq, k, E = tokens // rows, top_k_index.shape[-1], experts
    C = min(capacity, seq)
    local = E // ranks
    x = hidden_states.view(rows, seq, hidden)
    index = top_k_index.view(rows, seq, k)
    with torch.no_grad():
        routed = F.one_hot(index, E).sum(2)  # [rows, seq, E], 0 or 1
        slot = routed.cumsum(1) - routed  # earlier tokens of the row sent to e
        kept = (routed > 0) & (slot < C)
        trash = E * C  # one extra slot for the dropped
        position = torch.where(kept, torch.arange(E, device=x.device) * C + slot,
                               torch.full_like(slot, trash))  # [rows, seq, E]
        source = torch.full((rows, trash + 1), seq, dtype=torch.long, device=x.device)
        tok = torch.arange(seq, device=x.device).view(1, seq, 1).expand(rows, seq, E)
        source.scatter_(1, position.reshape(rows, -1), tok.reshape(rows, -1))
        source = source[:, :trash]  # [rows, E * C]: the token in each slot, seq if none
        back = torch.gather(position, 2, index)  # [rows, seq, k]: each choice's slot
    padded = torch.cat([x, x.new_zeros(rows, 1, hidden)], 1)
    slots = torch.gather(padded, 1, source.unsqueeze(-1).expand(-1, -1, hidden))
    # Dispatch: [rows, E, C, H] as [E, rows, C, H], chunk j (rank j's experts) to rank j.
    slots = slots.view(rows, E, C, hidden).transpose(0, 1)
    got = _all_to_all(slots, group) if group is not None else slots
    # [source rank, local expert, rows, C, H] -> each local expert's slots of every rank's rows
    got = got.reshape(ranks, local, rows, C, hidden).transpose(0, 1).reshape(local, ranks * rows * C, hidden)
    gate_up, down = module.gate_up_proj, module.down_proj
    if isinstance(gate_up, DTensor):
        gate_up, down = gate_up.to_local(), down.to_local()
    gate, up = torch.bmm(got, gate_up.transpose(1, 2)).chunk(2, dim=-1)
    y = torch.bmm(module.act_fn(gate) * up, down.transpose(1, 2))  # [local, ranks rows C, H]
    # Combine: back to the ranks whose tokens they are.
    y = y.view(local, ranks, rows, C, hidden).transpose(0, 1).reshape(E, rows, C, hidden)
    if group is not None:
        y = _all_to_all(y, group)
    y = y.transpose(0, 1).reshape(rows, E * C, hidden)
    y = torch.cat([y, y.new_zeros(rows, 1, hidden)], 1)
    picked = torch.gather(y, 1, back.reshape(rows, seq * k, 1).expand(-1, -1, hidden))
    weights = top_k_weights.view(rows, seq, k, 1).to(picked.dtype)
    out = (picked.view(rows, seq, k, hidden) * weights).sum(2)
    return out.reshape(tokens, hidden).to(hidden_states.dtype)


def expert_rows(block, experts):
    """A pre-hook on the MoE block @block that tells @experts how many batch rows its
    flattened tokens are (the routing groups)."""
    def hook(_, args, kwargs):
        x = args[0] if args else next(iter(kwargs.values()))
        experts.expert_rows = x.shape[0] if x.dim() == 3 else 1
        return None

    block.register_forward_pre_hook(hook, with_kwargs=True)


class ExpertParallel(ParallelStyle):
    """Expert parallelism for a Hugging Face experts module whose weights are stacked by
    expert on dim 0 (transformers 5's MixtralExperts, Qwen2MoeExperts; forward(hidden_states
    [T, H], top_k_index [T, k], top_k_weights [T, k])): its parameters Shard(0) over the mesh
    (rank r holds experts r E/n ... (r + 1) E/n - 1), its forward moe_experts() with the
    dispatch and combine as all_to_all over the mesh. The router before it stays whole on
    every rank. @capacity: the plan's slots per expert and batch row; @dropless: a slot for
    every token of the sequence (Hugging Face's model), whatever the sequence. The gradients
    of the expert weights are each rank's sum over the ranks' tokens (the backward
    all_to_all); parallelize() adds their data-parallel reduction. The parent module must
    set expert_rows (expert_rows())."""

    def __init__(self, *, experts, capacity, dropless=False):
        super().__init__()
        self.experts = experts
        self.capacity = capacity
        self.dropless = dropless

    def _apply(self, module, device_mesh):
        n = device_mesh.size()
        if self.experts % n:
            raise ValueError("ExpertParallel: %d experts do not split over %d ranks" % (self.experts, n))
        group = device_mesh.get_group()
        style = self

        # moe_experts() computes act(gate) * up from gate_up_proj [gate; up] rows and
        # down_proj, untransposed, without biases: transformers' layout for Mixtral and
        # Qwen2-MoE; another layout is refused rather than computed wrongly.
        if (getattr(module, "is_transposed", False) or getattr(module, "has_bias", False)
                or getattr(module, "is_concatenated", True) is not True
                or not all(hasattr(module, a) for a in ("gate_up_proj", "down_proj", "act_fn"))):
            raise ValueError("ExpertParallel: %s is not an experts module with stacked "
                             "gate_up_proj [E, 2I, H] and down_proj [E, H, I]" % type(module).__name__)

        def partition(name, mod, mesh):
            for pname, p in list(mod.named_parameters(recurse=False)):
                if p.dim() < 1 or p.shape[0] != style.experts:
                    raise ValueError("ExpertParallel: %s.%s %s is not stacked by expert on dim 0"
                                     % (name, pname, tuple(p.shape)))
                mod.register_parameter(
                    pname, nn.Parameter(distribute_tensor(p.detach(), mesh, [Shard(0)]), requires_grad=p.requires_grad)
                )

        distribute_module(module, device_mesh, partition)

        def forward(hidden_states, top_k_index, top_k_weights):
            capacity = hidden_states.shape[0] if style.dropless else style.capacity
            return moe_experts(module, hidden_states, top_k_index, top_k_weights, experts=style.experts,
                               capacity=capacity, rows=module.expert_rows, group=group, ranks=n)

        module.forward = forward
        return module
