

# ---- pipeline parallelism over PP_DIM (torch.distributed.pipelining) ----
#
# Every rank keeps the chunks of the layers its pp coordinate runs (CHUNK_LAYERS[c] on pp rank
# c % mesh[PP_DIM].size()), each a copy of the Hugging Face model with the rest taken out: the layers of
# other chunks become pass-throughs (the model's own forward still loops over every index, so
# masks and layer types stay as transformers computes them), the modules before the first layer
# (FIRST_MODULES) stay on chunk 0 only, those after the last (LAST_MODULES) on the last chunk
# only. parallelize() then applies PLAN and FSDP to each chunk as it does to a whole model.

import contextlib

import torch.distributed.pipelining
from torch.distributed.pipelining import PipelineStage


class _Skip(nn.Module):
    """A layer of another chunk: hands its input on."""

    pipeline_placeholder = True

    def __init__(self, layer):
        super().__init__()
        # Families that pick a mask by the layer's own attention type (sliding or full).
        if hasattr(layer, "attention_type"):
            self.attention_type = layer.attention_type

    def forward(self, hidden_states, *args, **kwargs):
        return hidden_states


class _Absent(nn.Module):
    """The token embedding on a later chunk, which receives hidden states instead."""

    pipeline_placeholder = True

    def forward(self, *args, **kwargs):
        raise RuntimeError("this pipeline chunk receives hidden states, not token ids")


class _Zero(nn.Module):
    """Another module before the first layer (GPT-2's position embedding) on a later chunk:
    its sum is already in the hidden states the chunk receives."""

    pipeline_placeholder = True

    def forward(self, x, *args, **kwargs):
        return torch.zeros((), dtype=torch.get_default_dtype(), device=x.device)


class _Pass(nn.Module):
    """A module after the last layer (final norm, lm_head) on an earlier chunk."""

    pipeline_placeholder = True

    def forward(self, x, *args, **kwargs):
        return x


def _set_submodule(model, name, module):
    parent, _, attr = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, attr, module)


def pipeline_chunk(model, chunk, seq):
    """Turns @model (a Hugging Face causal LM, this rank's own copy) into pipeline chunk @chunk
    in place: the layers CHUNK_LAYERS[chunk], with the embedding on chunk 0 and the final norm
    and lm_head on the last. Called with token ids [batch, seq] (chunk 0) or the previous chunk's
    hidden states, it returns hidden states, or the logits on the last chunk. @seq: the whole
    sequence length, for the position ids (under sequence parallelism a chunk receives only its
    part of the sequence). Returns the model."""
    first, last = chunk == 0, chunk == len(CHUNK_LAYERS) - 1
    keep = set(CHUNK_LAYERS[chunk])
    layers = model.get_submodule(LAYER_LIST)
    if len(layers) != PIPELINE_LAYERS:
        raise ValueError("pipeline_chunk: the plan splits %d layers of %s into %d chunks; the "
                         "model has %d" % (PIPELINE_LAYERS, LAYER_LIST, len(CHUNK_LAYERS), len(layers)))
    for i in range(len(layers)):
        if i not in keep:
            layers[i] = _Skip(layers[i])
    if not first:
        token_embedding = model.get_input_embeddings()
        for name in FIRST_MODULES:
            module = model.get_submodule(name)
            _set_submodule(model, name, _Absent() if module is token_embedding else _Zero())
    if not last:
        for name in LAST_MODULES:
            _set_submodule(model, name, _Pass())

    def as_kwargs(module, args, kwargs):
        (x,) = args
        pos = torch.arange(seq, device=x.device).unsqueeze(0)
        kwargs = dict(kwargs, position_ids=pos, use_cache=False)
        kwargs["input_ids" if first else "inputs_embeds"] = x
        return (), kwargs

    # The hooks keep the model itself the stage's module, so its parameters keep their
    # Hugging Face names and FSDP's root is the stage's (the schedule drives its gradient
    # reduction).
    model.register_forward_pre_hook(as_kwargs, with_kwargs=True)
    model.register_forward_hook(lambda module, args, out: out.logits)
    return model


def pipeline_chunks(mesh):
    """The chunks this rank runs: its pp coordinate, + PP_SIZE, ..."""
    return list(range(mesh[PP_DIM].get_local_rank(), len(CHUNK_LAYERS), mesh[PP_DIM].size()))


def build_pipeline(model, mesh=None, device_type="cuda", seq=None, loss_fn=None):
    """This rank's share of the pipeline: a pruned copy of @model per chunk of
    pipeline_chunks(mesh), each parallelized (PLAN on mesh[TP_DIM], FSDP over DP_DIMS), wrapped
    in a PipelineStage on mesh[PP_DIM], and the plan's schedule (SCHEDULE, MICRO_BATCHES) over
    them with @loss_fn(output, target) (default: causal_lm_loss). @model is left as it is.
    Returns (schedule, chunk modules, mesh).

        schedule.step(ids, target=ids, losses=losses)   # the first stage feeds the ids
        schedule.step(target=ids, losses=losses)        # the last stage takes the targets
        schedule.step()                                 # the stages in between
    """
    if mesh is None:
        mesh = init_device_mesh(device_type, MESH_SHAPE, mesh_dim_names=MESH_DIM_NAMES)
    _check_mesh(mesh)
    seq = seq or SEQ
    pp = mesh[PP_DIM]
    device = torch.device(device_type, torch.cuda.current_device()) if device_type == "cuda" \
        else torch.device(device_type)
    modules, stages = [], []
    for c in pipeline_chunks(mesh):
        chunk = pipeline_chunk(copy.deepcopy(model), c, seq)
        parallelize(chunk, mesh=mesh, device_type=device_type)
        modules.append(chunk)
        stages.append(PipelineStage(chunk, c, len(CHUNK_LAYERS), device, group=pp.get_group()))
    schedule_class = getattr(torch.distributed.pipelining, SCHEDULE)
    loss_fn = loss_fn or causal_lm_loss
    if SCHEDULE == "ScheduleInterleaved1F1B":
        schedule = schedule_class(stages, n_microbatches=MICRO_BATCHES, loss_fn=loss_fn)
    else:
        schedule = schedule_class(stages[0], n_microbatches=MICRO_BATCHES, loss_fn=loss_fn)
    return schedule, modules, mesh


def pipeline_step(schedule, modules, mesh, input_ids):
    """One forward and backward pass of @input_ids (this data-parallel replica's rows) through
    the pipeline: the ids go into chunk 0, the targets to the last chunk. Returns the mean loss
    over the micro-batches and the logits on the rank holding the last chunk, (None, None)
    elsewhere. Inside loss_parallel() when LOSS_PARALLEL (the backward runs in step())."""
    chunks = pipeline_chunks(mesh)
    first, last = 0 in chunks, len(CHUNK_LAYERS) - 1 in chunks
    args = (input_ids,) if first else ()
    kwargs = {"target": input_ids} if last else {}
    losses = []
    with loss_parallel() if LOSS_PARALLEL else contextlib.nullcontext():
        out = schedule.step(*args, losses=losses, **kwargs)
    if not last:
        return None, None
    return sum(_full(l) for l in losses) / len(losses), out


def _pipeline_figures(pipe, ids, want_logits, want_loss, want_grads, want_params, lr):
    """self_check()'s sharded run under pipeline parallelism: the figures of this rank's chunks
    (loss and logits on the rank of the last chunk, 0 elsewhere) and the names of their
    parameters."""
    import torch.distributed as dist

    schedule, modules, mesh = pipe
    loss, logits = pipeline_step(schedule, modules, mesh, ids)
    figures = {"logits": 0.0, "loss": 0.0}
    if loss is not None:
        figures["logits"] = _rel(_full(logits).detach(), want_logits.detach())
        figures["loss"] = _rel(loss.detach(), want_loss)
    worst, names = ("", 0.0), []
    for chunk in modules:
        for n, p in chunk.named_parameters():
            names.append(n)
            e = _rel(_full(p.grad), want_grads[n])
            if e >= worst[1]:
                worst = (n, e)
    params = 0.0
    for chunk in modules:
        torch.optim.SGD(chunk.parameters(), lr=lr).step()
        for n, p in chunk.named_parameters():
            params = max(params, _rel(_full(p.detach()), want_params[n]))
    # Each parameter on exactly one pp coordinate: no chunk dropped or kept one twice.
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, (mesh[PP_DIM].get_local_rank(), names))
    holders = {}
    for pp_rank, ns in everyone:
        for n in ns:
            holders.setdefault(n, set()).add(pp_rank)
    twice = sorted(n for n, h in holders.items() if len(h) > 1)
    if sorted(holders) != sorted(want_grads) or twice:
        raise AssertionError("the chunks' parameters differ from the unsharded model's: %s%s"
                             % (sorted(set(holders) ^ set(want_grads)),
                                "; on several stages: %s" % twice if twice else ""))
    figures.update({"grads": worst[1], "worst_grad": worst[0], "params": params})
    return figures, sorted(holders)
