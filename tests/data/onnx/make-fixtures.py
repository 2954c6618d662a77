#!/usr/bin/env python3
"""Makes the ONNX fixtures of tests/test-onnx-import.c, so the C tests need no Python.

    python3 tests/data/onnx/make-fixtures.py            # the small models (needs `onnx`)
    python3 tests/data/onnx/make-fixtures.py --llama    # also llama-2l.onnx and the fuzz
                                                        # seeds (needs torch, transformers)

Run from any folder; it writes next to itself. The small models are built with the onnx
package's helpers (onnx.helper), one per mapping or refusal the test checks; llama-2l.onnx is
transformers' LlamaForCausalLM of llama-2l.json (2 layers, hidden 64, 8 heads, 4 kv heads)
exported by torch.onnx.export (the TorchScript exporter, dynamo=False, constant folding on, as
its defaults are) with symbolic batch and sequence dims, eager attention, weights drawn from
seed 0 and perturbed so that no two are equal (torch merges equal initializers, which would
make two norms one tensor). Made with onnx 1.23.2, torch 2.15.0 and transformers 5.24.0
(tools/framework-venv.sh's torch environment plus onnx).
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(0)


def weight(name, *shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.02, name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def scalar(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def save(name, nodes, inputs, outputs, initializers, opset=17):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="shardscope-make-fixtures")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, name + ".onnx"))


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def mlp():
    """Gemm (transB) + Relu + MatMul with a bias Add, symbolic batch: 8x16 -> 32 -> 4.
    Parameters: 16*32 + 32 + 32*4 + 4 = 676."""
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["a"], name="/act/Relu"),
        helper.make_node("MatMul", ["a", "fc2.weight"], ["m"], name="/fc2/MatMul"),
        helper.make_node("Add", ["m", "fc2.bias"], ["y"], name="/fc2/Add"),
    ]
    save("mlp", nodes, [f32("x", ["batch", 16])], [f32("y", ["batch", 4])],
         [weight("fc1.weight", 32, 16), weight("fc1.bias", 32), weight("fc2.weight", 32, 4),
          weight("fc2.bias", 4)])


def block():
    """An encoder block as exporters write it: LayerNormalization, the erf GeLU subgraph,
    Softmax, Transpose, Reshape with a 0 and a -1, Concat, Split, Slice, ReduceMean, Cast
    (to the same type: dropped), Dropout (dropped), Identity (dropped), Neg, Exp, Tanh, Sub,
    Div by a constant (a 1-element parameter). Input [2, 8, 16]."""
    nodes = [
        helper.make_node("LayerNormalization", ["x", "ln.weight", "ln.bias"], ["n"], name="/ln/LayerNormalization", epsilon=1e-6),
        helper.make_node("MatMul", ["n", "fc.weight"], ["h"], name="/fc/MatMul"),
        helper.make_node("Div", ["h", "sqrt2"], ["d"], name="/act/Div"),
        helper.make_node("Erf", ["d"], ["e"], name="/act/Erf"),
        helper.make_node("Add", ["e", "one"], ["e1"], name="/act/Add"),
        helper.make_node("Mul", ["h", "e1"], ["g0"], name="/act/Mul"),
        helper.make_node("Mul", ["g0", "half"], ["g"], name="/act/Mul_1"),
        helper.make_node("Softmax", ["g"], ["s"], name="/attn/Softmax", axis=-1),
        helper.make_node("Cast", ["s"], ["s2"], name="/attn/Cast", to=TensorProto.FLOAT),
        helper.make_node("Dropout", ["s2"], ["s3"], name="/attn/Dropout"),
        helper.make_node("Identity", ["s3"], ["s4"], name="/attn/Identity"),
        helper.make_node("Reshape", ["s4", "shape"], ["r"], name="/view/Reshape"),
        helper.make_node("Transpose", ["r"], ["t"], name="/view/Transpose", perm=[0, 2, 1, 3]),
        helper.make_node("Split", ["t", "split"], ["p0", "p1"], name="/view/Split", axis=1),
        helper.make_node("Concat", ["p1", "p0"], ["c"], name="/view/Concat", axis=1),
        helper.make_node("Slice", ["c", "starts", "ends", "axes"], ["sl"], name="/view/Slice"),
        helper.make_node("ReduceMean", ["sl"], ["m"], name="/view/ReduceMean", axes=[3], keepdims=0),
        helper.make_node("Neg", ["m"], ["ng"], name="/tail/Neg"),
        helper.make_node("Exp", ["ng"], ["ex"], name="/tail/Exp"),
        helper.make_node("Tanh", ["ex"], ["th"], name="/tail/Tanh"),
        helper.make_node("Sub", ["th", "m"], ["sb"], name="/tail/Sub"),
        helper.make_node("Div", ["sb", "four"], ["y"], name="/tail/Div"),
    ]
    save("block", nodes, [f32("x", [2, 8, 16])], [f32("y", [2, 4, 3])],
         [weight("ln.weight", 16), weight("ln.bias", 16), weight("fc.weight", 16, 32),
          scalar("sqrt2", np.sqrt(2)), scalar("one", 1.0), scalar("half", 0.5),
          ints("shape", [0, 8, 4, -1]), ints("split", [1, 3]), ints("starts", [1]),
          ints("ends", [4]), ints("axes", [2]), scalar("four", 4.0)])


def newer_ops():
    """Opset 23: Attention (causal, GQA 4 query heads on 2 kv heads), RMSNormalization, Gelu
    with approximate="tanh"; and a Conv with the tanh GeLU subgraph torch writes for
    gelu(approximate="tanh"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    nodes = [
        helper.make_node("Attention", ["q", "k", "v"], ["a"], name="/attn/Attention", is_causal=1),
        helper.make_node("RMSNormalization", ["y", "norm.weight"], ["n"], name="/norm/RMSNormalization", epsilon=1e-6),
        helper.make_node("Gelu", ["n"], ["g"], name="/act/Gelu", approximate="tanh"),
    ]
    save("opset23", nodes, [f32("q", [2, 4, 8, 8]), f32("k", [2, 2, 8, 8]), f32("v", [2, 2, 8, 8]),
                            f32("y", [2, 8, 16])],
         [f32("a", [2, 4, 8, 8]), f32("g", [2, 8, 16])], [weight("norm.weight", 16)], opset=23)
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], name="/conv/Conv",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Pow", ["c", "three"], ["c3"], name="/act/Pow"),
        helper.make_node("Mul", ["c3", "k0"], ["c3k"], name="/act/Mul"),
        helper.make_node("Add", ["c", "c3k"], ["inner"], name="/act/Add"),
        helper.make_node("Mul", ["inner", "k1"], ["outer"], name="/act/Mul_1"),
        helper.make_node("Tanh", ["outer"], ["t"], name="/act/Tanh"),
        helper.make_node("Add", ["t", "one"], ["t1"], name="/act/Add_1"),
        helper.make_node("Mul", ["c", "half"], ["ch"], name="/act/Mul_2"),
        helper.make_node("Mul", ["ch", "t1"], ["y"], name="/act/Mul_3"),
    ]
    save("conv", nodes, [f32("x", ["batch", 3, 8, 8])], [f32("y", ["batch", 4, 4, 4])],
         [weight("conv.weight", 4, 3, 3, 3), weight("conv.bias", 4), scalar("three", 3.0),
          scalar("k0", 0.044715), scalar("k1", np.sqrt(2 / np.pi)), scalar("one", 1.0),
          scalar("half", 0.5)])


def refused(name, node, inputs, outputs, initializers, opset=17):
    save(name, [node], inputs, outputs, initializers, opset)


def refusals():
    # An op Shardscope has no type for.
    refused("unmapped-topk", helper.make_node("TopK", ["x", "k"], ["v", "i"], name="/head/TopK"),
            [f32("x", [2, 8])], [f32("v", [2, 3]), helper.make_tensor_value_info("i", TensorProto.INT64, [2, 3])],
            [ints("k", [3])])
    # Sigmoid on its own (only x * Sigmoid(x) is SiLU).
    refused("sigmoid-alone", helper.make_node("Sigmoid", ["x"], ["y"], name="/gate/Sigmoid"),
            [f32("x", [2, 8])], [f32("y", [2, 8])], [])
    # A symbolic dim neither --batch nor --seq sets.
    refused("unknown-dim", helper.make_node("Relu", ["x"], ["y"], name="/act/Relu"),
            [f32("x", ["batch", "past_len"])], [f32("y", ["batch", "past_len"])], [])
    # External data outside the model's folder.
    w = weight("w", 4, 4)
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="../secret.bin")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="/fc/MatMul")],
                              "external", [f32("x", [2, 4])], [f32("y", [2, 4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, os.path.join(HERE, "external-outside.onnx"))


def llama_model(attention="eager", **overrides):
    """transformers' LlamaForCausalLM of llama-2l.json (with @overrides), its forward taking
    input_ids and attention_mask and giving the logits, weights from seed 0 perturbed so that
    no two are equal. Returns (model, config)."""
    import torch
    import transformers

    config = json.load(open(os.path.join(HERE, "llama-2l.json")))
    config.update(overrides)
    config = transformers.LlamaConfig(**{k: v for k, v in config.items()
                                         if k not in ("architectures", "model_type", "torch_dtype")})
    config._attn_implementation = attention
    torch.manual_seed(0)

    class Export(transformers.LlamaForCausalLM):
        def forward(self, input_ids, attention_mask):
            return super().forward(input_ids=input_ids, attention_mask=attention_mask,
                                   use_cache=False).logits

    model = Export(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return model, config


def export_llama(model, config, path, batch=2, seq=16):
    """torch.onnx.export with symbolic batch and sequence. Returns the example tokens."""
    import torch

    ids = torch.randint(0, config.vocab_size, (batch, seq))
    dims = {0: "batch", 1: "sequence"}
    torch.onnx.export(model, (ids, torch.ones_like(ids)), path,
                      input_names=["input_ids", "attention_mask"], output_names=["logits"],
                      dynamic_axes={"input_ids": dims, "attention_mask": dims, "logits": dims},
                      opset_version=17, dynamo=False)
    return ids


def llama(path, attention="eager", **overrides):
    model, config = llama_model(attention, **overrides)
    export_llama(model, config, path)
    print(os.path.basename(path) + ":", sum(p.numel() for p in model.parameters()), "parameters")


if __name__ == "__main__":
    mlp()
    block()
    newer_ops()
    refusals()
    if "--llama" in sys.argv:
        llama(os.path.join(HERE, "llama-2l.onnx"))
        # The fuzz seed: one layer of hidden 16 (tests/fuzz/onnx/seeds/).
        seeds = os.path.join(HERE, "..", "..", "fuzz", "onnx", "seeds")
        os.makedirs(seeds, exist_ok=True)
        llama(os.path.join(seeds, "llama-1l-h16.onnx"), hidden_size=16, intermediate_size=32,
              num_attention_heads=2, num_key_value_heads=1, vocab_size=32, num_hidden_layers=1)
        # torch's F.scaled_dot_product_attention path (transformers' default attention).
        llama(os.path.join(HERE, "llama-1l-h16-sdpa.onnx"), attention="sdpa", hidden_size=16,
              intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, vocab_size=32,
              num_hidden_layers=1)
        for name in ("mlp", "block", "conv", "opset23"):
            with open(os.path.join(HERE, name + ".onnx"), "rb") as f, \
                 open(os.path.join(seeds, name + ".onnx"), "wb") as out:
                out.write(f.read())
