"""Engine container images: the entrypoint an image runs when a manifest gives only arguments, and the engine
version its tag names.

Entrypoints read from the images' Dockerfiles (pinned):
- ``vllm/vllm-openai``: ``ENTRYPOINT ["vllm", "serve"]`` since v0.8.x, ``["python3", "-m",
  "vllm.entrypoints.openai.api_server"]`` before
  (https://github.com/vllm-project/vllm/blob/v0.11.0/docker/Dockerfile, target ``vllm-openai``);
  both are the same server for kvplan.
- ``lmsysorg/sglang``, ``rocm/vllm*``, ``rocm/sgl-dev``: no entrypoint (the manifest gives the command).
"""

from __future__ import annotations

import re

# image repository (without registry) -> entrypoint tokens
ENTRYPOINTS: dict[str, tuple[str, ...]] = {
    "vllm/vllm-openai": ("vllm", "serve"),
    "vllm/vllm-openai-rocm": ("vllm", "serve"),
}
ENGINE_ENV_PREFIXES = ("VLLM_", "SGLANG_", "SGL_", "LMCACHE_")  # env the engines read (kept in the command)
_VERSION = re.compile(r"(?:^|[^0-9.])v?(\d+\.\d+\.\d+(?:\.post\d+|rc\d+|\.\d+)?)(?![0-9])")


def repository(image: str) -> str:
    """``docker.io/vllm/vllm-openai:v0.8.5`` -> ``vllm/vllm-openai``."""
    name = image.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    parts = name.split("/")
    if len(parts) > 2 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]  # registry host
    return "/".join(parts)


def entrypoint(image: str | None) -> tuple[str, ...] | None:
    return ENTRYPOINTS.get(repository(image)) if image else None


def tag_version(image: str | None) -> str | None:
    """The engine version a tag names (``v0.5.9-cu129`` -> 0.5.9, ``..._vllm_0.6.4`` -> 0.6.4), else None."""
    if not image or ":" not in image.rsplit("/", 1)[-1]:
        return None
    tag = image.rsplit(":", 1)[1]
    hits = _VERSION.findall(tag)
    return hits[-1] if hits else None
