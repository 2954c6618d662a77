#!/usr/bin/env python3
"""Issue 16's ONNX part against the Hugging Face model itself.

transformers builds LlamaForCausalLM of tests/data/onnx/llama-2l.json (2 layers, hidden 64,
8 heads on 4 kv heads) with a fixed seed, writes it with `save_pretrained` (model.safetensors)
and computes the logits of random tokens in torch f32; torch.onnx.export (TorchScript
exporter, symbolic batch and sequence) writes the same model as model.onnx. Then

    shardscope-cli propagate model.onnx --mesh dp=2,mp=4 --policy megatron --batch 2 --seq 8 -o P
    shardscope-cli run P --weights DIR --tokens T.npy --outputs OUT --outputs-reference REF

must give, sharded (OUT) and on one device (REF), the Hugging Face logits within 1e-4
relative: the graph read from the ONNX file is the model's forward, its parameters carry the
model's own names (the checkpoint is found by them) and shapes, and the plan runs. Also under
dp and with attn_implementation "sdpa" (torch's scaled_dot_product_attention export).

Runs in $SHARDSCOPE_FRAMEWORK_VENV/torch (default .venv-frameworks/ in the checkout; made by
tools/framework-venv.sh, which installs onnx there for this test); skipped, with the reason,
where that Python cannot import torch, transformers and onnx, or the CLI reads no ONNX. TAP.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV = os.environ.get("SHARDSCOPE_FRAMEWORK_VENV") or os.path.join(ROOT, ".venv-frameworks")
VENV_PYTHON = os.path.join(VENV, "torch", "bin", "python")
CLI = os.environ.get("SHARDSCOPE_CLI")
B, S = 2, 8
TOL = 1e-4
CASES = [("eager", "megatron", "dp=2,mp=4"), ("eager", "dp", "dp=2,mp=4"),
         ("sdpa", "megatron", "dp=2,mp=2")]


def skip(reason):
    print("1..0 # SKIP %s" % reason)
    sys.exit(0)


def in_venv():
    if os.environ.get("SHARDSCOPE_ONNX_REFERENCE_CHILD"):
        return
    if not CLI or not os.access(CLI, os.X_OK):
        skip("$SHARDSCOPE_CLI names no built shardscope-cli")
    if not os.access(VENV_PYTHON, os.X_OK):
        skip("no framework venv at %s (tools/framework-venv.sh makes it)" % VENV)
    probe = subprocess.run([VENV_PYTHON, "-c", "import torch, transformers, onnx, safetensors"],
                           capture_output=True)
    if probe.returncode != 0:
        skip("%s cannot import torch, transformers, onnx and safetensors (tools/framework-venv.sh "
             "installs them)" % VENV_PYTHON)
    env = dict(os.environ, SHARDSCOPE_ONNX_REFERENCE_CHILD="1")
    os.execve(VENV_PYTHON, [VENV_PYTHON, os.path.abspath(__file__)] + sys.argv[1:], env)


def export(dir, attention):
    """The model of tests/data/onnx/make-fixtures.py: its checkpoint, tokens, logits, ONNX."""
    import importlib.util

    import numpy as np
    import torch

    spec = importlib.util.spec_from_file_location(
        "make_fixtures", os.path.join(ROOT, "tests", "data", "onnx", "make-fixtures.py"))
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    model, config = fixtures.llama_model(attention)
    model.save_pretrained(dir)
    ids = fixtures.export_llama(model, config, os.path.join(dir, "model.onnx"), B, S)
    np.save(os.path.join(dir, "tokens.npy"), ids.numpy())
    with torch.no_grad():
        return model(ids, torch.ones_like(ids)).numpy()


def rel_error(a, b):
    import numpy as np
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def main():
    in_venv()
    import warnings

    from safetensors.numpy import load_file
    warnings.filterwarnings("ignore")
    print("1..%d" % len(CASES))
    failed = 0
    with tempfile.TemporaryDirectory(prefix="onnx-reference-") as tmp:
        exported = {}
        for n, (attention, policy, mesh) in enumerate(CASES, 1):
            dir = os.path.join(tmp, attention)
            if attention not in exported:
                os.makedirs(dir)
                exported[attention] = export(dir, attention)
            hf = exported[attention]
            plan, out, ref = (os.path.join(dir, name) for name in
                              ("plan-%d.json" % n, "out-%d.safetensors" % n, "ref-%d.safetensors" % n))
            steps = [[CLI, "propagate", os.path.join(dir, "model.onnx"), "--mesh", mesh, "--policy",
                      policy, "--batch", str(B), "--seq", str(S), "-o", plan],
                     [CLI, "run", plan, "--weights", dir, "--tokens", os.path.join(dir, "tokens.npy"),
                      "--outputs", out, "--outputs-reference", ref, "--repeat", "1"]]
            what = "%s export, %s on %s" % (attention, policy, mesh)
            for step in steps:
                done = subprocess.run(step, capture_output=True, text=True)
                if done.returncode != 0:
                    if "reads no ONNX" in done.stderr:
                        print("ok %d - %s # SKIP the CLI reads no ONNX files" % (n, what))
                        break
                    print("not ok %d - %s: %s failed: %s" % (n, what, step[1], done.stderr.strip()))
                    failed += 1
                    break
            else:
                errors = [rel_error(load_file(path)["logits"], hf) for path in (out, ref)]
                good = all(e <= TOL for e in errors)
                failed += not good
                print("%s %d - %s: logits against Hugging Face, sharded %.2g, one device %.2g"
                      % ("ok" if good else "not ok", n, what, errors[0], errors[1]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
