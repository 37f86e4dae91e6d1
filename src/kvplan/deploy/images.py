"""Engine container images: the entrypoint an image runs when a manifest gives only arguments, which engine an image
is, the environment variables an engine reads, and the engine version an image tag names.

Which image runs which entrypoint, which words name an engine's images and which variables it reads are engine
knowledge: each registered Engine lists them (``image_entrypoints``, ``image_hints``, ``env_prefixes``;
``kvplan/engines/<engine>/deploy.py`` with their sources); this module only asks.
"""

from __future__ import annotations

import re

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
    """The ENTRYPOINT an engine image runs (None: unknown image, or one without an entrypoint)."""
    if not image:
        return None
    from kvplan.engines import all_engines

    repo = repository(image)
    for eng in all_engines():
        if repo in eng.image_entrypoints:
            return eng.image_entrypoints[repo]
    return None


def engine_env_prefixes() -> tuple[str, ...]:
    """Prefixes of the environment variables any registered engine reads (kept with the launch command)."""
    from kvplan.engines import all_engines

    return tuple(p for eng in all_engines() for p in eng.env_prefixes)


def is_image_of(image: str | None, engine_name: str) -> bool:
    """True when the image's repository names that engine (``lmsysorg/sglang``, ``vllm/vllm-openai``)."""
    if not image:
        return False
    from kvplan.engines import get_engine

    repo = repository(image).lower()
    return any(h in repo for h in get_engine(engine_name).image_hints)


def tag_version(image: str | None) -> str | None:
    """The version a tag names (``v0.5.9-cu129`` -> 0.5.9, ``..._vllm_0.6.4`` -> 0.6.4), else None. Only an engine
    image's tag is the engine's version (``is_image_of``); callers check that."""
    if not image or ":" not in image.rsplit("/", 1)[-1]:
        return None
    tag = image.rsplit(":", 1)[1]
    hits = _VERSION.findall(tag)
    return hits[-1] if hits else None


def with_engine_env(argv: list[str], env: dict[str, str]) -> list[str]:
    """Prefix the variables the engines read (``engine_env_prefixes``) that the command itself does not set."""
    have = {t.split("=", 1)[0] for t in argv if "=" in t and not t.startswith("-")}
    prefixes = engine_env_prefixes()
    return [f"{k}={v}" for k, v in env.items() if k.startswith(prefixes) and k not in have and v] + argv
