"""Minimal safetensors and .npy helpers for the golden tests, written from the format's
description (8-byte little-endian header length, JSON header, raw little-endian data), not
from Shardscope's reader."""
import json
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64,
           "I32": np.int32}


def save(path, tensors, dtypes=None, metadata=None):
    """tensors: dict name -> array; dtypes: optional name -> "BF16"/"F16"/... to store as."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, a in tensors.items():
        want = (dtypes or {}).get(name)
        a = np.ascontiguousarray(a)
        if want == "BF16":
            bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
            # Round to nearest even, as torch does.
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            blob, code = bits.astype("<u2").tobytes(), "BF16"
        else:
            code = want or {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64",
                            np.dtype(np.float16): "F16", np.dtype(np.int64): "I64",
                            np.dtype(np.int32): "I32"}[a.dtype]
            blob = a.astype(np.dtype(_DTYPES[code]).newbyteorder("<")).tobytes()
        header[name] = {"dtype": code, "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        dt = np.dtype(_DTYPES[e["dtype"]]).newbyteorder("<")
        out[name] = np.frombuffer(body[b:end], dtype=dt).reshape(e["shape"])
    return out
