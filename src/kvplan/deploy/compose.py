"""Docker Compose services (https://docs.docker.com/reference/compose-file/services/).

Read per service: ``image``, ``entrypoint`` and ``command`` (string or list; a string is split like a shell
would), ``environment`` (map or list), ``shm_size``, ``ipc``, ``mem_limit`` or ``deploy.resources.limits.memory``,
GPUs from ``deploy.resources.reservations.devices`` (``count``/``device_ids``) or ``gpus``. ``${VAR:-default}``
is interpolated from the file's own environment and defaults.
"""

from __future__ import annotations

import shlex
from typing import Any

from kvplan.deploy import images
from kvplan.deploy.docker import DOCKER_DEFAULT_SHM
from kvplan.deploy.model import Container
from kvplan.deploy.quantity import docker_bytes
from kvplan.deploy.shell import find_in_tokens, substitute
from kvplan.errors import KvplanError


def is_compose(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("services"), dict) and "kind" not in doc


def _tokens(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as e:
            raise KvplanError(f"{where}: cannot split {value[:60]!r}: {e}") from None
    if isinstance(value, list) and all(isinstance(t, (str, int, float)) for t in value):
        return [str(t) for t in value]
    raise KvplanError(f"{where}: expected a string or a list of strings")


def _environment(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if isinstance(value, list):
        out = {}
        for item in value:
            k, _, v = str(item).partition("=")
            out[k] = v
        return out
    raise KvplanError(f"{where}: environment must be a map or a list")


def _gpus(svc: dict) -> int | None:
    devices = (((svc.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get("devices") or []
    for d in devices if isinstance(devices, list) else []:
        if not isinstance(d, dict) or "gpu" not in (d.get("capabilities") or []) and d.get("driver") != "nvidia":
            continue
        if isinstance(d.get("device_ids"), list):
            return len(d["device_ids"])
        c = d.get("count")
        return None if c in (None, "all") else int(c) if str(c).isdigit() else None
    g = svc.get("gpus")
    if isinstance(g, int) or (isinstance(g, str) and g.isdigit()):
        return int(g)
    return None


def from_compose(doc: dict, source: str) -> list[Container]:
    out = []
    for name, svc in doc["services"].items():
        where = f"{source}: service {name}"
        if not isinstance(svc, dict):
            raise KvplanError(f"{where} is not a mapping")
        env = _environment(svc.get("environment"), where)
        missing: list[str] = []
        argv = [substitute(t, env, missing=missing) for t in
                [*(_tokens(svc.get("entrypoint"), where) or images.entrypoint(svc.get("image")) or ()),
                 *_tokens(svc.get("command"), where)]]
        hit = find_in_tokens(argv, env)
        if hit is None:
            continue  # a router, a database, a client: not an engine
        limits = ((svc.get("deploy") or {}).get("resources") or {}).get("limits") or {}
        mem = limits.get("memory") or svc.get("mem_limit")
        ipc_host = svc.get("ipc") == "host"
        shm = svc.get("shm_size")
        if ipc_host:
            shm_bytes, shm_src = None, "ipc: host (the host's /dev/shm)"
        elif shm is not None:
            shm_bytes, shm_src = docker_bytes(shm, f"{where} shm_size"), f"shm_size: {shm}"
        else:
            shm_bytes, shm_src = DOCKER_DEFAULT_SHM, "docker's default 64 MB (no shm_size, no ipc: host)"
        notes = tuple(f"${{{v}}} is not set in the file; left as written" for v in sorted(set(missing)))
        out.append(Container(
            source=source, workload=f"service {name}", name=str(svc.get("container_name") or name),
            argv=tuple(images.with_engine_env(hit.argv, env)), env=env, image=svc.get("image"),
            memory_limit_bytes=docker_bytes(mem, f"{where} memory") if mem is not None else None,
            memory_limit_source=(f"deploy.resources.limits.memory: {mem}" if limits.get("memory") else
                                 f"mem_limit: {mem}") if mem is not None else None,
            shm_bytes=shm_bytes, shm_source=shm_src, ipc_host=ipc_host, gpus=_gpus(svc),
            engine_version=images.tag_version(svc.get("image")), notes=notes))
    return out
