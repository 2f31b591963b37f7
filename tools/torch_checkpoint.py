#!/usr/bin/env python3
"""Convert a safetensors checkpoint to a PyTorch zip checkpoint (pytorch_model.bin).

Writes what torch.save(state_dict, path) writes -- a zip archive of stored
(uncompressed) entries archive/data.pkl (the pickled OrderedDict, protocol 2),
archive/data/<key> (each storage's little-endian bytes, data aligned to 64
bytes), archive/byteorder ("little") and archive/version -- with torch when it
is importable (--writer auto), else with the pure-Python writer below (the
same layout, opcode for opcode as torch's protocol-2 pickle of a state dict,
including state_dict()'s `_metadata` attribute set by BUILD). It is how the
tests make pytorch_model.bin fixtures at run time (src/io/torch_checkpoint.h
reads them).

--share-storage puts every tensor of one dtype into one storage (views at
element offsets), as torch does for tensors sliced from one buffer.
--shards N writes pytorch_model-0000i-of-0000N.bin and pytorch_model.bin.index.json.

Usage:
  python3 tools/torch_checkpoint.py HEAD/model.safetensors HEAD/pytorch_model.bin
  python3 tools/torch_checkpoint.py HEAD/model.safetensors HEAD --shards 2
"""
import argparse
import collections
import json
import os
import struct
import sys
import zipfile

# safetensors dtype -> (torch storage type, element bytes)
STORAGES = {"F32": ("FloatStorage", 4), "F16": ("HalfStorage", 2), "BF16": ("BFloat16Storage", 2),
            "I32": ("IntStorage", 4), "I64": ("LongStorage", 8), "BOOL": ("BoolStorage", 1),
            "U8": ("ByteStorage", 1), "I8": ("CharStorage", 1)}


def read_safetensors(path):
    """{name: (dtype name, shape, raw bytes)} in file order."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = collections.OrderedDict()
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        begin, end = e["data_offsets"]
        out[name] = (e["dtype"], list(e["shape"]), raw[8 + n + begin:8 + n + end])
    return out


class PickleWriter:
    """Protocol-2 opcodes as pickle.Pickler emits them for torch's reduce tuples."""

    def __init__(self):
        self.out = bytearray(b"\x80\x02")
        self.memo = {}  # (kind, value) -> memo index of a global or string
        self.num_memo = 0

    def put(self):
        i = self.num_memo
        self.num_memo += 1
        self.out += (b"q" + bytes([i])) if i < 256 else (b"r" + struct.pack("<I", i))
        return i

    def get_or_put(self, key, emit):
        if key in self.memo:
            i = self.memo[key]
            self.out += (b"h" + bytes([i])) if i < 256 else (b"j" + struct.pack("<I", i))
            return
        emit()
        self.memo[key] = self.put()

    def global_(self, module, name):
        self.get_or_put(("g", module, name),
                        lambda: self.out.extend(b"c" + f"{module}\n{name}\n".encode()))

    def string(self, s):
        def emit():
            b = s.encode()
            self.out.extend(b"X" + struct.pack("<I", len(b)) + b)
        self.get_or_put(("s", s), emit)

    def int_(self, v):
        if 0 <= v < 256:
            self.out += b"K" + bytes([v])
        elif 0 <= v < 65536:
            self.out += b"M" + struct.pack("<H", v)
        elif -2**31 <= v < 2**31:
            self.out += b"J" + struct.pack("<i", v)
        else:
            self.out += b"\x8a\x08" + struct.pack("<q", v)

    def tuple_(self, items):
        if not items:
            self.out += b")"
            return
        if len(items) > 3:
            self.out += b"("
        for v in items:
            self.int_(v)
        self.out += {1: b"\x85", 2: b"\x86", 3: b"\x87"}.get(len(items), b"t")
        self.put()

    def ordered_dict(self):
        self.global_("collections", "OrderedDict")
        self.out += b")R"
        self.put()

    def tensor(self, storage_type, key, numel, offset, shape):
        stride, s = [], 1
        for d in reversed(shape):
            stride.insert(0, s)
            s *= d
        self.global_("torch._utils", "_rebuild_tensor_v2")
        self.out += b"("
        self.out += b"("  # persistent id ('storage', type, key, location, numel)
        self.string("storage")
        self.global_("torch", storage_type)
        self.string(key)
        self.string("cpu")
        self.int_(numel)
        self.out += b"t"
        self.put()
        self.out += b"Q"
        self.int_(offset)
        self.tuple_(shape)
        self.tuple_(stride)
        self.out += b"\x89"  # requires_grad False
        self.ordered_dict()  # backward hooks
        self.out += b"t"
        self.put()
        self.out += b"R"
        self.put()

    def state_dict(self, entries):
        """entries: [(name, storage type, key, numel, offset, shape)]."""
        self.ordered_dict()
        self.out += b"("
        for name, storage_type, key, numel, offset, shape in entries:
            self.string(name)
            self.tensor(storage_type, key, numel, offset, shape)
        self.out += b"u"
        # state_dict()'s _metadata: {"_metadata": OrderedDict({"": {"version": 1}})}
        self.out += b"}"
        self.put()
        self.string("_metadata")
        self.ordered_dict()
        self.string("")
        self.out += b"}"
        self.put()
        self.string("version")
        self.int_(1)
        self.out += b"ss"
        self.out += b"sb."
        return bytes(self.out)


def storages_of(tensors, share):
    """[(name, storage type, key, numel, offset, shape)] and {key: bytes}."""
    entries, blobs, by_dtype = [], {}, {}
    for name, (dtype, shape, data) in tensors.items():
        storage_type, size = STORAGES[dtype]
        key = by_dtype.get(dtype) if share else None
        if key is None:
            key = str(len(blobs))
            blobs[key] = bytearray()
            if share:
                by_dtype[dtype] = key
        offset = len(blobs[key]) // size
        blobs[key] += data
        entries.append([name, storage_type, key, size, offset, shape])
    for e in entries:
        e[3] = len(blobs[e[2]]) // e[3]  # element size -> the storage's numel
    return [tuple(e) for e in entries], blobs


def write_stored(zf, name, data):
    """A stored entry whose data starts at a multiple of 64, as torch's writer aligns it."""
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_STORED
    header = 30 + len(name.encode())
    pad = (-(zf.fp.tell() + header + 4)) % 64
    info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad  # the "FB" padding field
    zf.writestr(info, bytes(data))


def write_python(tensors, path, share):
    entries, blobs = storages_of(tensors, share)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        write_stored(zf, "archive/data.pkl", PickleWriter().state_dict(entries))
        write_stored(zf, "archive/byteorder", b"little")
        for key, data in blobs.items():
            write_stored(zf, f"archive/data/{key}", data)
        write_stored(zf, "archive/version", b"3\n")


def write_torch(tensors, path):
    import numpy as np
    import torch
    state = collections.OrderedDict()
    for name, (dtype, shape, data) in tensors.items():
        np_dtype = {"F32": np.float32, "F16": np.float16, "BF16": np.int16, "I32": np.int32,
                    "I64": np.int64, "BOOL": np.bool_, "U8": np.uint8, "I8": np.int8}[dtype]
        t = torch.from_numpy(np.frombuffer(data, np_dtype).copy()).reshape(shape)
        state[name] = t.view(torch.bfloat16) if dtype == "BF16" else t
    torch.save(state, path)


def have_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


def write(tensors, path, writer="auto", share=False):
    if writer == "torch" or (writer == "auto" and have_torch() and not share):
        write_torch(tensors, path)
    else:
        write_python(tensors, path, share)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("src", help="a .safetensors file")
    p.add_argument("out", help="the .bin to write, or with --shards the folder")
    p.add_argument("--writer", default="auto", choices=["auto", "torch", "python"])
    p.add_argument("--share-storage", action="store_true", help="one storage per dtype")
    p.add_argument("--shards", type=int, default=0)
    a = p.parse_args()
    tensors = read_safetensors(a.src)
    if a.shards <= 0:
        write(tensors, a.out, a.writer, a.share_storage)
        return 0
    names = list(tensors)
    weight_map = {}
    for i in range(a.shards):
        file = f"pytorch_model-{i + 1:05d}-of-{a.shards:05d}.bin"
        part = collections.OrderedDict((n, tensors[n]) for n in names[i::a.shards])
        write(part, os.path.join(a.out, file), a.writer, a.share_storage)
        weight_map.update({n: file for n in part})
    with open(os.path.join(a.out, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
