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

        def hook(_, args, kwargs):
            if args:
                return (_placed(args[0], device_mesh, arrives, wanted),) + tuple(args[1:]), kwargs
            kwargs = dict(kwargs)
            kwargs[first] = _placed(kwargs[first], device_mesh, arrives, wanted)
            return args, kwargs

        module.register_forward_pre_hook(hook, with_kwargs=True)
        return module


def regroup(t, groups, n):
    """A fused projection's columns [q|k|v] (the last dim) regrouped as [q0 k0 v0|q1 k1 v1|...]
    so that Shard(-1) over n ranks gives each rank its heads of every part."""
    lead = t.shape[:-1]
    return t.reshape(*lead, groups, n, -1).transpose(-3, -2).reshape(*lead, -1)


def ungroup(t, groups, n):
    """The inverse of regroup: back to the Hugging Face column order, for a checkpoint."""
    lead = t.shape[:-1]
    return t.reshape(*lead, n, groups, -1).transpose(-3, -2).reshape(*lead, -1)


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
