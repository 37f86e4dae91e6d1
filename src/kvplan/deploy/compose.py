"""Docker Compose services (https://docs.docker.com/reference/compose-file/services/).

Read per service: ``image``, ``entrypoint`` and ``command`` (string or list; a string is split like a shell
would), ``environment`` (map or list), ``shm_size``, ``ipc``, ``mem_limit`` or ``deploy.resources.limits.memory``,
GPUs from ``deploy.resources.reservations.devices`` (``count``/``device_ids``) or ``gpus``. ``${VAR:-default}``
is interpolated from the file's own environment and defaults.
"""

from __future__ import annotations

from typing import Any

from kvplan import validate
from kvplan.deploy import images
from kvplan.deploy.docker import DOCKER_DEFAULT_SHM
from kvplan.deploy.model import Container
from kvplan.deploy.quantity import docker_bytes
from kvplan.deploy.shell import find_in_tokens, split_words, substitute
from kvplan.errors import KvplanError


def is_compose(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("services"), dict) and "kind" not in doc


def _tokens(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return split_words(validate.text(f"{where} command", value, max_len=validate.MAX_ARG), where)
    if isinstance(value, list) and all(isinstance(t, (str, int, float)) for t in value):
        return [validate.text(f"{where} command", t, scalar=True, max_len=validate.MAX_ARG) for t in value]
    raise KvplanError(f"{where}: expected a string or a list of strings")


def _environment(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return {validate.text(f"{where} environment name", k, scalar=True, max_len=1024):
                "" if v is None else validate.text(f"{where} environment {str(k)[:60]}", v, scalar=True,
                                                   max_len=validate.MAX_ARG) for k, v in value.items()}
    if isinstance(value, list):
        out = {}
        for item in value:
            k, _, v = validate.text(f"{where} environment", item, scalar=True, max_len=validate.MAX_ARG).partition("=")
            out[k] = v
        return out
    raise KvplanError(f"{where}: environment must be a map or a list")


def _gpus(svc: dict, where: str) -> int | None:
    deploy = validate.mapping(f"{where} deploy", svc.get("deploy"))
    res = validate.mapping(f"{where} deploy.resources", deploy.get("resources"))
    res_ = validate.mapping(f"{where} deploy.resources.reservations", res.get("reservations"))
    for d in validate.sequence(f"{where} deploy.resources.reservations.devices", res_.get("devices")):
        caps = d.get("capabilities") if isinstance(d, dict) else None
        if not isinstance(d, dict) or (not isinstance(caps, list) or "gpu" not in caps) and d.get("driver") != "nvidia":
            continue
        if isinstance(d.get("device_ids"), list):
            return len(d["device_ids"])
        c = d.get("count")
        return None if c in (None, "all") else int(c) if isinstance(c, (int, str)) and str(c).isdigit() \
            and len(str(c)) < 8 else None
    g = svc.get("gpus")
    if (isinstance(g, int) and not isinstance(g, bool) and 0 <= g <= validate.MAX_RANKS) or \
            (isinstance(g, str) and g.isdigit() and len(g) < 8):
        return int(g)
    return None


def _size(value: Any, what: str) -> int:
    return docker_bytes(validate.text(what, value, scalar=True, max_len=64), what)


def from_compose(doc: dict, source: str) -> list[Container]:
    out = []
    for name, svc in doc["services"].items():
        where = f"{source}: service {str(name)[:63]}"
        if not isinstance(svc, dict):
            raise KvplanError(f"{where} is not a mapping")
        image = validate.optional_text(f"{where} image", svc.get("image"), max_len=validate.MAX_IMAGE)
        env = _environment(svc.get("environment"), where)
        missing: list[str] = []
        argv = [substitute(t, env, missing=missing) for t in
                [*(_tokens(svc.get("entrypoint"), where) or images.entrypoint(image) or ()),
                 *_tokens(svc.get("command"), where)]]
        hit = find_in_tokens(argv, env)
        if hit is None:
            continue  # a router, a database, a client: not an engine
        deploy = validate.mapping(f"{where} deploy", svc.get("deploy"))
        resources = validate.mapping(f"{where} deploy.resources", deploy.get("resources"))
        limits = validate.mapping(f"{where} deploy.resources.limits", resources.get("limits"))
        mem = limits.get("memory") or svc.get("mem_limit")
        ipc_host = svc.get("ipc") == "host"
        shm = svc.get("shm_size")
        if ipc_host:
            shm_bytes, shm_src = None, "ipc: host (the host's /dev/shm)"
        elif shm is not None:
            shm_bytes, shm_src = _size(shm, f"{where} shm_size"), f"shm_size: {shm}"
        else:
            shm_bytes, shm_src = DOCKER_DEFAULT_SHM, "docker's default 64 MB (no shm_size, no ipc: host)"
        mem_bytes = _size(mem, f"{where} memory") if mem is not None else None
        notes = tuple(f"${{{v}}} is not set in the file; left as written" for v in sorted(set(missing)))
        out.append(Container(
            source=source, workload=f"service {str(name)[:63]}", name=str(svc.get("container_name") or name)[:253],
            argv=tuple(images.with_engine_env(hit.argv, env)), env=env, image=image,
            memory_limit_bytes=mem_bytes,
            memory_limit_source=(f"deploy.resources.limits.memory: {mem}" if limits.get("memory") else
                                 f"mem_limit: {mem}") if mem is not None else None,
            shm_bytes=shm_bytes, shm_source=shm_src, ipc_host=ipc_host, gpus=_gpus(svc, where),
            engine_version=images.tag_version(image), notes=notes))
    return out
