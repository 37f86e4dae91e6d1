"""safetensors headers: read exactly (8-byte length + JSON), never the data; hostile files fail in one line."""

from __future__ import annotations

import json
import os
import struct

import pytest

from kvplan.errors import KvplanError
from kvplan.models.tensors import TensorInfo, group_tensors, read_header, read_safetensors_headers


def write_st(path, tensors: dict[str, tuple[str, list[int]]], data_bytes: int | None = None) -> None:
    """A safetensors file per the format spec: u64 little-endian header length, JSON header, data."""
    header, off = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = {"BF16": 2, "F32": 4, "I32": 4, "F8_E4M3": 1, "U8": 1, "I64": 8}[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + b"\0" * (off if data_bytes is None else data_bytes))


def test_reads_names_shapes_dtypes_and_bytes(tmp_path):
    write_st(tmp_path / "model-00001-of-00002.safetensors",
             {"model.embed_tokens.weight": ("BF16", [300, 64]), "model.layers.0.mlp.experts.3.w1.weight_packed":
              ("I32", [96, 8]), "model.layers.0.mlp.experts.3.w1.weight_shape": ("I64", [2])})
    write_st(tmp_path / "model-00002-of-00002.safetensors", {"model.layers.0.self_attn.q_proj.weight_scale_inv":
                                                              ("F32", [1, 1]), "lm_head.weight": ("BF16", [300, 64])})
    ts = {t.name: t for t in read_safetensors_headers(tmp_path)}
    assert ts["model.embed_tokens.weight"] == TensorInfo("model.embed_tokens.weight", (300, 64), "BF16")
    assert ts["model.embed_tokens.weight"].nbytes == 300 * 64 * 2
    assert ts["model.layers.0.mlp.experts.3.w1.weight_packed"].nbytes == 96 * 8 * 4
    assert ts["model.layers.0.mlp.experts.3.w1.weight_shape"].nbytes == 16
    assert len(ts) == 5  # __metadata__ is not a tensor


def test_groups_fold_expert_numbers_and_keep_layers(tmp_path):
    ts = [TensorInfo(f"model.layers.{i}.mlp.experts.{e}.down_proj.weight", (64, 32), "BF16")
          for i in range(3) for e in range(4)]
    groups = group_tensors(ts)
    assert sorted((g.layer, g.count) for g in groups) == [(0, 4), (1, 4), (2, 4)]
    assert groups[0].template == "model.layers.{L}.mlp.experts.#.down_proj.weight"
    assert sorted(t.name for g in groups for t in g.expand()) == sorted(t.name for t in ts)


def test_data_is_never_read(tmp_path):
    # the header promises 2 GiB of tensor data; the file holds none: reading headers still works, fast
    write_st(tmp_path / "big.safetensors", {"w": ("BF16", [32768, 32768])}, data_bytes=0)
    (t,) = read_header(tmp_path / "big.safetensors")
    assert t.nbytes == 2 * 2**30 and os.path.getsize(tmp_path / "big.safetensors") < 200


@pytest.mark.parametrize("payload, why", [
    (b"", "too short"),
    (struct.pack("<Q", 2**40) + b"{}", "implausible"),
    (struct.pack("<Q", 200 * 2**20) + b"{}", "implausible"),  # over the 100 MB cap (and the file)
    (struct.pack("<Q", 5) + b"nope!", "not valid JSON"),
    (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
    (struct.pack("<Q", 40) + b'{"w": {"dtype": "Q9", "shape": [1]}}    ', "unknown dtype"),
    (struct.pack("<Q", 40) + b'{"w": {"dtype": "BF16", "shape": [-1]}}  ', "malformed shape"),
    (struct.pack("<Q", 44) + b'{"w": {"dtype": "BF16", "shape": ["a", 2]}}  ', "malformed shape"),
    (struct.pack("<Q", 4) + b"\xff\xfe\xfd\xfc", "not valid JSON"),
])
def test_garbage_is_one_line_error(tmp_path, payload, why):
    p = tmp_path / "x.safetensors"
    p.write_bytes(payload)
    with pytest.raises(KvplanError) as e:
        read_header(p)
    assert why in str(e.value) and "\n" not in str(e.value)


def test_fifo_is_refused_without_blocking(tmp_path):
    p = tmp_path / "pipe.safetensors"
    os.mkfifo(p)
    with pytest.raises(KvplanError, match="not a regular file"):
        read_header(p)


def test_directory_without_safetensors(tmp_path):
    with pytest.raises(KvplanError, match="no \\*.safetensors"):
        read_safetensors_headers(tmp_path)
