"""How a checkpoint stores one linear layer, from its ``quantization_config`` (the tensors on disk, not kernels).

Per method, the tensors written for a linear of logical shape [out, in] (names as in the released checkpoints
and the engines' ``create_weights``: vLLM/SGLang ``layers/quantization/*``):

- unquantized: ``weight`` [out, in] in the model dtype
- fp8 block (DeepSeek-V3, Qwen3-FP8; ``weight_block_size`` [bo, bi]): ``weight`` F8_E4M3 [out, in] +
  ``weight_scale_inv`` F32 [ceil(out/bo), ceil(in/bi)] (``Fp8LinearMethod.create_weights``)
- fp8 per tensor (quant_method fp8 without blocks, modelopt FP8): ``weight`` F8 + ``weight_scale`` F32 [] +
  ``input_scale`` F32 [] (static activations)
- compressed-tensors (``config_groups``): int ``pack-quantized`` → ``weight_packed`` I32 [out, in·bits/32] +
  ``weight_scale`` [out, in/group] (channel: [out, 1]) + ``weight_shape`` I64 [2]; int8/fp8 → ``weight`` +
  ``weight_scale`` [out, 1]; NVFP4 → ``weight_packed`` U8 [out, in/2] + ``weight_scale`` F8_E4M3 [out, in/16] +
  ``weight_global_scale``/``input_global_scale`` F32 [1]
- modelopt NVFP4: ``weight`` U8 [out, in/2] + ``weight_scale`` F8_E4M3 [out, in/16] + ``weight_scale_2`` and
  ``input_scale`` F32 [] (``ModelOptFp4LinearMethod.create_weights``): 4.5 bits per weight plus 8 bytes per
  linear (per expert for MoE); the ``exclude_modules`` / ``ignore`` modules stay in the model dtype
- AWQ: ``qweight`` I32 [in, out/8], ``qzeros`` I32 [in/g, out/8], ``scales`` F16 [in/g, out]
- GPTQ: ``qweight`` I32 [in·bits/32, out], ``qzeros`` I32 [in/g, out·bits/32], ``scales`` F16 [in/g, out],
  ``g_idx`` I32 [in]
- mxfp4 (gpt-oss experts only; see ``models.synth``)

Routers, embeddings, norms and vision towers are never quantized here (every released checkpoint above keeps
them in the model dtype); ``lm_head`` only when the config says so.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any

from kvplan.errors import KvplanError

Tensor = tuple[str, tuple[int, ...], str]  # (suffix, shape, safetensors dtype)
TORCH_TO_ST = {"bfloat16": "BF16", "float16": "F16", "float32": "F32", "half": "F16", "float": "F32",
               "bf16": "BF16", "fp16": "F16", "fp32": "F32"}


def st_dtype(torch_name: str) -> str:
    return TORCH_TO_ST.get(str(torch_name).replace("torch.", ""), "BF16")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class LinearFormat:
    method: str  # none, fp8_block, fp8_tensor, fp8_channel, int_pack, int8_channel, nvfp4_ct, nvfp4_mo, awq, gptq
    bits: int = 16
    group: int = 0
    block: tuple[int, int] = (128, 128)
    scale_dtype: str = "BF16"
    static_input: bool = False

    def tensors(self, out: int, inp: int, dtype: str) -> list[Tensor]:
        m = self.method
        if m == "none":
            return [("weight", (out, inp), dtype)]
        if m == "fp8_block":
            bo, bi = self.block
            return [("weight", (out, inp), "F8_E4M3"), ("weight_scale_inv", (_cdiv(out, bo), _cdiv(inp, bi)), "F32")]
        if m == "fp8_tensor":
            t = [("weight", (out, inp), "F8_E4M3"), ("weight_scale", (), "F32")]
            return t + ([("input_scale", (), "F32")] if self.static_input else [])
        if m in ("fp8_channel", "int8_channel"):
            w = "F8_E4M3" if m == "fp8_channel" else "I8"
            t = [("weight", (out, inp), w), ("weight_scale", (out, 1), self.scale_dtype)]
            return t + ([("input_scale", (1,), "F32")] if self.static_input else [])
        if m == "int_pack":
            per = 32 // self.bits
            scale = (out, _cdiv(inp, self.group)) if self.group > 0 else (out, 1)
            return [("weight_packed", (out, _cdiv(inp, per)), "I32"), ("weight_scale", scale, self.scale_dtype),
                    ("weight_shape", (2,), "I64")]
        if m == "nvfp4_ct":
            return [("weight_packed", (out, inp // 2), "U8"), ("weight_scale", (out, _cdiv(inp, 16)), "F8_E4M3"),
                    ("weight_global_scale", (1,), "F32"), ("input_global_scale", (1,), "F32")]
        if m == "nvfp4_mo":
            return [("weight", (out, inp // 2), "U8"), ("weight_scale", (out, _cdiv(inp, 16)), "F8_E4M3"),
                    ("weight_scale_2", (), "F32"), ("input_scale", (), "F32")]
        if m == "awq":
            per, g = 32 // self.bits, self.group
            return [("qweight", (inp, _cdiv(out, per)), "I32"), ("qzeros", (_cdiv(inp, g), _cdiv(out, per)), "I32"),
                    ("scales", (_cdiv(inp, g), out), "F16")]
        if m == "gptq":
            per, g = 32 // self.bits, self.group if self.group > 0 else inp
            return [("qweight", (_cdiv(inp, per), out), "I32"), ("qzeros", (_cdiv(inp, g), _cdiv(out, per)), "I32"),
                    ("scales", (_cdiv(inp, g), out), "F16"), ("g_idx", (inp,), "I32")]
        raise KvplanError(f"unknown linear format {m!r}")


NONE = LinearFormat("none")


@dataclass(frozen=True)
class QuantScheme:
    """The checkpoint's quantization: which linears are stored how."""

    method: str  # quant_method as written ("" when unquantized)
    default: LinearFormat = NONE
    ignore: tuple[str, ...] = ()
    lm_head: bool = False  # lm_head quantized too
    targets: tuple[tuple[str, LinearFormat], ...] = field(default=())  # compressed-tensors per-target formats

    @property
    def quantized(self) -> bool:
        return self.default.method != "none" or bool(self.targets)

    def is_ignored(self, module: str) -> bool:
        return any(_match(p, module) for p in self.ignore)

    def format_for(self, module: str, is_expert: bool) -> LinearFormat:
        """Format of the linear at ``module`` (HF module path, layer numbers filled in or ``{L}``)."""
        if not self.quantized or self.is_ignored(module):
            return NONE
        for target, fmt in self.targets:
            if target in ("Linear", "FusedMoE") or _match(target, module):
                return fmt
        return self.default


def _match(pattern: str, module: str) -> bool:
    """compressed-tensors ``re:`` patterns (re.match), modelopt globs, else exact / dotted-component match."""
    mod = module.replace("{L}", "0")
    if pattern.startswith("re:"):
        try:
            return re.match(pattern[3:], mod) is not None or re.match(pattern[3:], module) is not None
        except re.error:
            return False
    if "*" in pattern or "?" in pattern:
        return fnmatch.fnmatchcase(mod, pattern) or fnmatch.fnmatchcase(mod, pattern + ".*")
    return mod == pattern or mod.endswith("." + pattern) or ("." + pattern + ".") in ("." + mod + ".") \
        or mod.startswith(pattern + ".")


def _ct_format(w: dict[str, Any], fmt: str) -> LinearFormat:
    bits = int(w.get("num_bits") or 0)
    kind = str(w.get("type") or "int")
    strategy = str(w.get("strategy") or "")
    gs = int(w.get("group_size") or 0) if strategy in ("group", "tensor_group", "") else 0
    if kind == "float" and bits == 4:
        return LinearFormat("nvfp4_ct", bits=4, group=16)
    if kind == "float" and bits == 8:
        if strategy == "block":
            bs = w.get("block_structure") or [128, 128]
            return LinearFormat("fp8_block", 8, block=(int(bs[0]), int(bs[1])))
        return LinearFormat("fp8_channel", 8, scale_dtype="BF16") if strategy == "channel" else \
            LinearFormat("fp8_tensor", 8)
    if kind == "int" and bits == 8 and "pack" not in fmt:
        return LinearFormat("int8_channel", 8, scale_dtype="BF16")
    if kind == "int" and bits in (2, 4, 8):
        return LinearFormat("int_pack", bits, group=gs, scale_dtype="BF16")
    raise KvplanError(f"compressed-tensors weights of {bits}-bit {kind} ({strategy}) are not modelled",
                      "pass a checkpoint directory (safetensors headers) or --weights-gib")


def _modelopt(method: str, quant: dict[str, Any]) -> QuantScheme:
    """ModelOpt checkpoints: ``hf_quant_config.json`` writes ``quantization: {quant_algo, exclude_modules}``; the
    config.json copy (modelopt >= 0.3x) writes ``quant_algo`` and ``ignore`` beside HF-style ``config_groups``.
    Both are read the way SGLang's / vLLM's ``ModelOptFp4Config.from_config`` do (``quant_algo`` "NVFP4" -> FP4,
    anything else FP8; modules in ``ignore`` / ``exclude_modules`` stay in the model dtype;
    https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/layers/quantization/modelopt_quant.py,
    https://github.com/vllm-project/vllm/blob/v0.18.0/vllm/model_executor/layers/quantization/modelopt.py)."""
    got = quant.get("quantization")
    inner: dict[str, Any] = got if isinstance(got, dict) else {}
    algo = str(quant.get("quant_algo") or inner.get("quant_algo") or "").upper()
    excl = quant.get("exclude_modules") or inner.get("exclude_modules") or quant.get("ignore") or []
    fp4 = "FP4" in algo or method == "modelopt_fp4"
    fmt = LinearFormat("nvfp4_mo", 4, group=16) if fp4 else LinearFormat("fp8_tensor", 8, static_input=True)
    return QuantScheme(method, fmt, tuple(str(p) for p in excl))


def scheme_from_config(quant: dict[str, Any] | None, model_dtype: str = "bfloat16") -> QuantScheme:
    """A ``QuantScheme`` from config.json's ``quantization_config`` (None/{} → unquantized)."""
    if not quant:
        return QuantScheme("")
    method = str(quant.get("quant_method") or "").lower()
    if method in ("fp8", "fbgemm_fp8") and quant.get("weight_block_size"):
        bs = quant["weight_block_size"]
        fmt = LinearFormat("fp8_block", 8, block=(int(bs[0]), int(bs[1])))
        ignore = quant.get("modules_to_not_convert") or quant.get("ignored_layers") or []
        return QuantScheme(method, fmt, tuple(str(p) for p in ignore))
    if method in ("fp8", "fbgemm_fp8"):
        ignore = quant.get("modules_to_not_convert") or quant.get("ignored_layers") or []
        fmt = LinearFormat("fp8_channel", 8, scale_dtype="F32") if method == "fbgemm_fp8" else \
            LinearFormat("fp8_tensor", 8, static_input=quant.get("activation_scheme") == "static")
        return QuantScheme(method, fmt, tuple(str(p) for p in ignore))
    if method == "compressed-tensors" or (not method and quant.get("config_groups")):
        fmt_name = str(quant.get("format") or "")
        targets: list[tuple[str, LinearFormat]] = []
        for grp in (quant.get("config_groups") or {}).values():
            w = (grp or {}).get("weights") or {}
            if not w:
                continue
            lf = _ct_format(w, str(grp.get("format") or fmt_name))
            targets.extend((str(t), lf) for t in (grp.get("targets") or ["Linear"]))
        return QuantScheme("compressed-tensors", NONE, tuple(str(p) for p in quant.get("ignore") or []),
                           targets=tuple(targets))
    if method in ("modelopt", "modelopt_fp4"):
        return _modelopt(method, quant)
    if method in ("awq", "gptq"):
        bits = int(quant.get("bits") or quant.get("w_bit") or 4)
        gs = int(quant.get("group_size") or quant.get("q_group_size") or 128)
        ignore = quant.get("modules_to_not_convert") or []
        return QuantScheme(method, LinearFormat(method, bits, group=gs), tuple(str(p) for p in ignore))
    if method == "mxfp4":  # gpt-oss: experts only (see models.synth); every linear stays in the model dtype
        return QuantScheme(method, NONE, ("self_attn", "router", "embed_tokens", "lm_head"))
    raise KvplanError(f"weights of a {method!r} checkpoint cannot be derived from its config",
                      "pass a checkpoint directory (safetensors headers are read) or --weights-gib (per rank)")
