

def _matches(name, pattern):
    """A module name against a PLAN-style key: fnmatch per dot-separated component."""
    parts, keys = name.split("."), pattern.split(".")
    return len(parts) == len(keys) and all(fnmatch.fnmatchcase(p, k) for p, k in zip(parts, keys))


def _modules(model, pattern):
    """The modules a key names; a pipeline chunk's stand-ins for what other chunks run
    (pipeline_placeholder) are none of them."""
    return [(name, m) for name, m in model.named_modules()
            if name and _matches(name, pattern) and not getattr(m, "pipeline_placeholder", False)]


def _check_mesh(mesh):
    names = tuple(mesh.mesh_dim_names or ())
    for axis, size in zip(MESH_DIM_NAMES, MESH_SHAPE):
        if size > 1 and (axis not in names or mesh[axis].size() != size):
            raise ValueError(
                "parallelize: the plan needs a mesh axis '%s' of size %d; the mesh given has %s"
                % (axis, size, dict(zip(names, mesh.shape)) if names else "no dim names")
            )


def _renamer(model):
    """The plan names modules as the hub's checkpoints do, which transformers renames for some
    models (ViT's encoder.layer.N.attention.attention.query is layers.N.attention.q_proj in
    transformers 5): a key that names no module gets transformers' own checkpoint renamings."""
    import re

    rules = []
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightRenaming

        for r in get_model_conversion_mapping(model) or []:
            if type(r) is WeightRenaming and len(r.target_patterns) == 1:
                rules += [(source, r.target_patterns[0]) for source in r.source_patterns]
    except ImportError:  # an older transformers keeps the checkpoints' names
        pass

    def renamed(key):
        key += "."  # the renamings are of parameter names: "^embed_out\." (GPT-NeoX)
        for source, target in rules:
            key = re.sub(source, target, key)
        return key[:-1]

    def rename(key):
        if _modules(model, key) or not rules:
            return key
        if _modules(model, renamed(key)):
            return renamed(key)
        # A module the renamings name only through its children (ViT's attention.attention,
        # whose attention.attention.query is attention.q_proj): the renamed child's parent.
        parts = key.split(".")
        for child in PLAN:
            head = child.split(".")[:len(parts)]
            if child.count(".") <= key.count(".") or not _matches(key, ".".join(head)):
                continue
            if not _modules(model, renamed(child)):
                continue
            parent = renamed(child).rsplit(".", child.count(".") - key.count("."))[0]
            # The child's wildcards (a layer's index) as the key has them.
            values = iter([p for p, h in zip(parts, head) if h == "*"])
            parent = ".".join(next(values, c) if c == "*" else c for c in parent.split("."))
            if _modules(model, parent):
                return parent
        return key

    return rename


def parallelize(model, mesh=None, device_type="cuda"):
    """Applies the plan to a Hugging Face model on every rank, once torch.distributed is
    initialized: tensor parallelism (PLAN) on mesh[TP_DIM], then FSDP2 fully_shard over the
    data-parallel axes DP_DIMS (each block of FSDP_BLOCKS, then the whole model). @mesh: a
    DeviceMesh with the axes MESH_DIM_NAMES (a larger one of yours is fine: only these axes
    are used); None builds MESH_SHAPE with init_device_mesh. Returns the mesh."""
    if mesh is None:
        mesh = init_device_mesh(device_type, MESH_SHAPE, mesh_dim_names=MESH_DIM_NAMES)
    _check_mesh(mesh)
    rename = _renamer(model)
    if TP_DIM is not None and PLAN:
        tp = mesh[TP_DIM]
        plan = {rename(key): style for key, style in PLAN.items()}
        missing = [key for key in plan if not _modules(model, key)]
        # A pipeline chunk holds only some of the modules (the stand-ins for the others are
        # none of them); a whole model must hold them all.
        if missing and PP_DIM is None:
            raise ValueError("parallelize: no module of the model is named %s; the plan was made "
                             "for %s" % (", ".join(missing), MODEL))
        # Each key as the modules it names in this model; one module under several names
        # (T5's shared embedding is encoder.embed_tokens and decoder.embed_tokens) takes its
        # style once.
        seen, once = set(), {}
        for key, style in plan.items():
            for name, m in _modules(model, key):
                if id(m) not in seen:
                    once[name] = style
                    seen.add(id(m))
        parallelize_module(model, tp, once)
        # A fused projection's parent splits its output in local parts (GPT-2's split_size).
        for pattern, groups in ((rename(k), v) for k, v in FUSED.items()):
            for name, _ in _modules(model, pattern):
                parent = model.get_submodule(name.rpartition(".")[0])
                if hasattr(parent, "split_size"):
                    parent.split_size //= tp.size()
        # DTensor hands a module's local output over as a view, which autograd forbids to
        # modify in place; transformers adds to some in place (Falcon's parallel MLP output,
        # mlp_output += attention_output): a RowwiseParallel output is handed over as its own.
        for pattern, style in plan.items():
            if isinstance(style, RowwiseParallel):
                for _, m in _modules(model, pattern):
                    m.register_forward_hook(lambda _, __, out: out.clone() if isinstance(out, torch.Tensor)
                                            and not isinstance(out, DTensor) and out._is_view() else out)
        # Attention on this rank's heads: the head counts transformers reads, made local.
        for pattern, kv_split in ((rename(k), v) for k, v in HEADS.items()):
            for _, m in _modules(model, pattern):
                local_heads(m, tp, kv_split)
        # Each style registers its own parameter: one tensor used twice (tied embedding and
        # lm_head) is made one parameter again.
        # The owner's own module may have no style (T5's shared, which transformers 5 does not
        # call: encoder.embed_tokens is its user): the first user's distributed parameter is
        # then the one all of them share. A pipeline chunk may hold only some of them (the
        # export refuses a parameter used on two stages).
        for owner in dict.fromkeys(o for _, o in TIED):
            names = [n for n in [owner] + [u for u, o in TIED if o == owner]
                     if _modules(model, n.rpartition(".")[0])]
            if len(names) < 2:
                continue
            params = [model.get_parameter(n) for n in names]
            keep = next((p for p in params if isinstance(p, DTensor)), params[0])
            for name in names:
                module, _, attr = name.rpartition(".")
                setattr(model.get_submodule(module), attr, keep)
    experts = _expert_parallel(model, mesh, rename)
    dp = [axis for axis in DP_DIMS if mesh[axis].size() > 1]
    if dp:
        from torch.distributed.fsdp import fully_shard

        # The expert weights are split over EP_DIM, not FSDP's: _expert_parallel reduces their
        # gradients itself.
        ignored = {p for m in experts for p in m.parameters()}
        dp_mesh = mesh[dp[0]] if len(dp) == 1 else mesh[tuple(dp)]
        for pattern in map(rename, FSDP_BLOCKS):
            for _, block in _modules(model, pattern):
                fully_shard(block, mesh=dp_mesh, ignored_params=ignored)
        fully_shard(model, mesh=dp_mesh, ignored_params=ignored)
    return mesh


def _expert_parallel(model, mesh, rename):
    """EXPERTS on mesh[EP_DIM] (ExpertParallel): each rank keeps its experts' weights, the
    tokens go to them and back by all_to_all. Returns the experts modules.

    The batch is split over every axis of DP_DIMS, EP_DIM among them, and the loss is each
    rank's mean: an expert weight's gradient arrives as the sum over the ranks of EP_DIM of
    their tokens' gradients (the backward all_to_all), so it is summed over the other
    data-parallel axes and divided by the number of data-parallel ranks, which makes it the
    gradient of the global mean, as FSDP's average does for every other parameter."""
    if EP_DIM is None or not EXPERTS:
        return []
    import torch.distributed as dist

    ep = mesh[EP_DIM]
    others = [axis for axis in DP_DIMS if axis != EP_DIM and mesh[axis].size() > 1]
    replicas = 1
    for axis in DP_DIMS:
        replicas *= mesh[axis].size()
    # Summed over each other data-parallel axis in turn: over all of them together.
    groups = [mesh[axis].get_group() for axis in others]

    # On each gradient as it arrives (a tensor hook, not the accumulated .grad), so that
    # accumulating over several backward passes stays a sum of means.
    def reduce(g):
        g = g / replicas
        local = g.to_local() if isinstance(g, DTensor) else g
        for group in groups:
            dist.all_reduce(local, group=group)
        return g

    found = []
    for key, style in EXPERTS.items():
        key = rename(key)
        modules = _modules(model, key)
        if not modules and PP_DIM is None:
            raise ValueError("parallelize: no module of the model is named %s; the plan was made "
                             "for %s" % (key, MODEL))
        for name, m in modules:
            parallelize_module(m, ep, style)
            # The routing groups are the batch rows: the experts get the tokens flattened.
            expert_rows(model.get_submodule(name.rpartition(".")[0]), m)
            for p in m.parameters():
                p.register_hook(reduce)
            found.append(m)
    return found


def positions(input_ids):
    """The position ids to pass to the model: under sequence parallelism transformers would
    count them from the local (split) sequence length."""
    return torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)


def local_rows(mesh, batch):
    """The rows of a global batch that this rank feeds in: split over DP_DIMS, whole over TP."""
    index, count = 0, 1
    for axis in DP_DIMS:
        size = mesh[axis].size()
        index = index * size + mesh[axis].get_local_rank()
        count *= size
    per = batch // count
    return slice(index * per, (index + 1) * per)


def causal_lm_loss(logits, input_ids):
    """Next-token cross-entropy (mean over the tokens): inside loss_parallel() when the
    logits are split over the vocabulary (LOSS_PARALLEL); call backward() inside it too."""
    labels = torch.cat([input_ids[:, 1:], torch.full_like(input_ids[:, :1], -100)], 1)
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)


def _full(t):
    return t.full_tensor() if isinstance(t, DTensor) else t


def _rel(got, want, floor=0.0):
    scale = max(want.abs().max().item(), floor)
    return (got - want).abs().max().item() / (scale if scale > 0 else 1.0)




def _randomize(model, seed):
    """Every parameter drawn again: Hugging Face's init (zero biases, unit norms) would hide a
    bias added twice or a norm weight misapplied."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g)
            if p.dim() >= 2:
                p.copy_(0.3 * r)
            elif name.endswith("bias"):
                p.copy_(0.1 * r)
            else:
                p.copy_(1.0 + 0.1 * r)


def _plan_capacity(reference, config, seq):
    """The unsharded model with the plan's capacity, from the config rather than from EXPERTS
    (so a wrong capacity in the script shows): C = min(seq, ceil(capacity_factor x top_k x seq
    / experts)) slots per expert and batch row, capacity_factor Shardscope's field of the
    config (1.25 when absent). Where C < seq a token past an expert's C slots gets nothing
    from it, in the plan and so in the reference, which runs that routing on one rank with
    every expert (moe_experts() without the exchange); otherwise (dropless) the experts keep
    Hugging Face's own forward."""
    import math

    if EP_DIM is None:
        return
    factor = getattr(config, "capacity_factor", None)
    factor = 1.25 if factor is None else float(factor)
    rename = _renamer(reference)
    for key, style in EXPERTS.items():
        for name, m in _modules(reference, rename(key)):
            experts, top_k = m.gate_up_proj.shape[0], config.num_experts_per_tok
            capacity = min(seq, math.ceil(factor * top_k * seq / experts))
            if capacity >= seq:
                continue

            def forward(hidden_states, top_k_index, top_k_weights, m=m, capacity=capacity):
                return moe_experts(m, hidden_states, top_k_index, top_k_weights, experts=m.gate_up_proj.shape[0],
                                   capacity=capacity, rows=m.expert_rows)

            m.forward = forward
            expert_rows(reference.get_submodule(name.rpartition(".")[0]), m)


def self_check(config, *, layers=None, batch=None, seq=None, seed=0, lr=0.1, tolerance=1e-4, device_type="cpu",
               mesh=None):
    """Runs the plan against the unsharded model on random weights: logits, loss, every
    gradient and every parameter after one SGD step, each as the largest error relative to
    the largest reference value, the worst over all ranks. @config: a config.json, its folder
    or a transformers config. Returns the figures (a dict); the same on every rank."""
    import torch.distributed as dist
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageClassification, AutoModelForSeq2SeqLM

    if not dist.is_initialized():
        dist.init_process_group("gloo" if device_type == "cpu" else "nccl")
    if isinstance(config, str):
        config = AutoConfig.from_pretrained(config)
    layers = layers or LAYERS
    if layers:
        config.num_hidden_layers = layers
    batch, seq = batch or BATCH, seq or SEQ
    # An image classifier (ViT): random images and labels, the loss a cross-entropy per image.
    image = any("ImageClassification" in a for a in (getattr(config, "architectures", None) or []))
    torch.manual_seed(seed)
    # An encoder-decoder (T5): random encoder and decoder tokens, the loss a cross-entropy of
    # the decoder's logits against random labels.
    seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    auto = AutoModelForImageClassification if image else AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
    reference = auto.from_config(config, dtype=torch.float32).to(device_type)
    _randomize(reference, seed)
    reference.eval()  # dropout off on both sides
    model = copy.deepcopy(reference)
    _plan_capacity(reference, config, seq)
    if PP_DIM is None:
        mesh = parallelize(model, mesh=mesh, device_type=device_type)
    else:  # this rank's chunks, parallelized each
        if image or seq2seq:
            raise ValueError("self_check: the pipelined check runs causal language models")
        pipe = build_pipeline(model, mesh=mesh, device_type=device_type, seq=seq)
        mesh = pipe[2]
    rows = local_rows(mesh, batch)
    g = torch.Generator().manual_seed(seed + 1)
    if image:
        pixels = torch.randn(batch, config.num_channels, config.image_size, config.image_size, generator=g)
        labels = torch.randint(0, config.num_labels, (batch,), generator=g).to(device_type)
        pixels = pixels.to(device_type)

        def forward(m, r):
            return m(pixel_values=pixels[r]).logits

        def loss_of(logits, r):
            return F.cross_entropy(logits, labels[r])
    elif seq2seq:
        ids = torch.randint(0, config.vocab_size, (batch, seq), generator=g).to(device_type)
        dec = torch.randint(0, config.vocab_size, (batch, seq), generator=g).to(device_type)
        labels = torch.randint(0, config.vocab_size, (batch, seq), generator=g).to(device_type)

        def forward(m, r):
            return m(input_ids=ids[r], decoder_input_ids=dec[r]).logits

        def loss_of(logits, r):
            return F.cross_entropy(logits.flatten(0, 1), labels[r].flatten())
    else:
        ids = torch.randint(0, config.vocab_size, (batch, seq), generator=g).to(device_type)
        pos = positions(ids)

        def forward(m, r):
            return m(ids[r], position_ids=pos).logits

        def loss_of(logits, r):
            return causal_lm_loss(logits, ids[r])
    everything = slice(0, batch)

    want_logits = forward(reference, everything)
    loss_of(want_logits, everything).backward()
    want_loss = loss_of(want_logits[rows], rows).detach()
    tp = mesh[TP_DIM].size() if TP_DIM is not None else 1
    fused = {}
    rename = _renamer(reference)
    for pattern, groups in FUSED.items():
        for name, m in _modules(reference, rename(pattern)):
            for pname, _ in m.named_parameters(recurse=False):
                # A Linear's rows (dim 0), a Conv1D's columns (the last dim).
                fused[name + "." + pname] = (groups, 0 if isinstance(m, nn.Linear) else -1)
    def as_planned(name, t):
        return regroup(t, fused[name][0], tp, fused[name][1]) if name in fused else t
    want_grads = {n: as_planned(n, p.grad) for n, p in reference.named_parameters()}
    torch.optim.SGD(reference.parameters(), lr=lr).step()
    want_params = {n: as_planned(n, p.detach()) for n, p in reference.named_parameters()}

    if PP_DIM is not None:
        figures, names = _pipeline_figures(pipe, ids[rows], want_logits[rows], want_loss,
                                           want_grads, want_params, lr)
        return _gather_figures(figures, names, tolerance)
    logits = forward(model, rows)
    if LOSS_PARALLEL:
        with loss_parallel():
            loss = loss_of(logits, rows)
            loss.backward()
    else:
        loss = loss_of(logits, rows)
        loss.backward()
    figures = {"logits": _rel(_full(logits).detach(), want_logits[rows].detach()),
               "loss": _rel(_full(loss).detach(), want_loss)}
    worst = ("", 0.0)
    names = [n for n, _ in model.named_parameters()]
    if sorted(names) != sorted(want_grads):
        raise AssertionError("parameters differ from the unsharded model's: %s"
                             % sorted(set(names) ^ set(want_grads)))
    # A gradient's scale is at least 1e-2 of the model's largest gradient entry: one that is
    # zero in exact arithmetic (a key bias: softmax ignores a constant added to every score,
    # as in OPT's and BERT's k_proj) is f32 round-off on both sides (OPT's, sharded, differs
    # by 1.1e-4 of a floor of 1e-3 of the largest entry).
    floor = 1e-2 * max(g.abs().max().item() for g in want_grads.values())
    for n, p in model.named_parameters():
        e = _rel(_full(p.grad), want_grads[n], floor)
        if e >= worst[1]:
            worst = (n, e)
    figures["grads"] = worst[1]
    figures["worst_grad"] = worst[0]
    torch.optim.SGD(model.parameters(), lr=lr).step()
    figures["params"] = max(_rel(_full(p.detach()), want_params[n]) for n, p in model.named_parameters())
    return _gather_figures(figures, names, tolerance)


def _gather_figures(figures, names, tolerance):
    """The worst of every rank's figures, the same on each."""
    import torch.distributed as dist

    keys = ("logits", "loss", "grads", "params")
    t = torch.tensor([figures[k] for k in keys], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    figures.update(zip(keys, t.tolist()))
    figures["ok"] = all(figures[k] <= tolerance for k in keys)
    figures["parameters"] = len(names)
    figures["tolerance"] = tolerance
    return figures


def main(argv=None):
    """torchrun --nproc-per-node N THIS.py --config CONFIG [--layers L] [--batch B] [--seq S]"""
    import argparse
    import json

    parser = argparse.ArgumentParser(description="Self-check of plan %r against the unsharded model "
                                     "(random weights, CPU, gloo)" % PLAN_NAME)
    parser.add_argument("--config", required=True, help="the model's config.json or its folder")
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--seq", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    figures = self_check(args.config, layers=args.layers, batch=args.batch, seq=args.seq, seed=args.seed,
                         tolerance=args.tolerance, device_type=args.device)
    import torch.distributed as dist

    if dist.get_rank() == 0:
        print("self-check " + json.dumps(figures, sort_keys=True), flush=True)
    dist.destroy_process_group()
    return 0 if figures["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
