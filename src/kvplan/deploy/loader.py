"""Files (or a directory, or ``-`` for stdin) -> engine containers.

Every file is hostile input: regular files only (no FIFOs, devices or symlink loops), at most ``MAX_FILE_BYTES``,
UTF-8 text, YAML through ``yaml.safe_load_all`` semantics with a node budget (``deploy.yamlsafe``: aliases expanded,
no tags that construct objects), at most ``MAX_FILES`` per directory. Kind of file, by its content: a Dockerfile
(``FROM``), YAML (Compose ``services:`` or Kubernetes ``apiVersion``/``kind``), an sbatch script (``#SBATCH``), shell
text with ``docker run``, or shell text with the launch itself.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import replace
from pathlib import Path

from kvplan import validate
from kvplan.deploy.model import Container
from kvplan.errors import KvplanError

MAX_FILE_BYTES = 16 * 2**20
MAX_FILES = 500
_YAML_EXT = {".yaml", ".yml", ".json"}
_SCRIPT_EXT = {".sh", ".bash", ".sbatch", ".slurm", ".txt", ".cmd", ""}
_DOCKER_RUN = re.compile(r"\bdocker\s+(?:container\s+)?run\b")


def _read(path: Path) -> str:
    try:
        st = os.stat(path)
    except OSError as e:
        raise KvplanError(f"cannot read {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise KvplanError(f"{path} is not a regular file", "give a manifest, compose file or script")
    if st.st_size > MAX_FILE_BYTES:
        raise KvplanError(f"{path} is {st.st_size / 2**20:.0f} MiB; deployment files are far smaller",
                          f"limit {MAX_FILE_BYTES // 2**20} MiB")
    data = path.read_bytes()[:MAX_FILE_BYTES]
    return _decode(data, str(path))


def _decode(data: bytes, name: str) -> str:
    if b"\x00" in data[:8192]:
        raise KvplanError(f"{name} is binary, not a deployment file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise KvplanError(f"{name} is not UTF-8 text") from None


def _yaml_docs(text: str, source: str) -> list:
    from kvplan.deploy import yamlsafe

    try:
        return yamlsafe.load_all(text)
    except yamlsafe.yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise KvplanError(f"{source}: not valid YAML{where}: {getattr(e, 'problem', None) or e}") from None
    except yamlsafe.YamlBudgetError as e:
        raise KvplanError(f"{source}: {e}", "deployment files are far smaller; aliases that expand a small file "
                          "into a huge tree are refused") from None
    except RecursionError:
        raise KvplanError(f"{source}: YAML nested too deeply") from None


def _stack(doc: object, source: str, kinds: list[str], files: dict[str, dict[str, str]]) -> list[Container] | None:
    """The containers of the Kubernetes documents a serving stack renders from ``doc`` (its values or its own
    resource kind), asked of every engine; None when no engine's stack reads ``doc``."""
    from kvplan.deploy import kube
    from kvplan.engines import all_engines

    for e in all_engines():
        notes: list[str] = []
        got = e.stack_documents(doc, source, notes)
        if got is None:
            continue
        name, docs = got
        kinds += [name, *notes]
        out: list[Container] = []
        for d in docs:
            own = [str(n) for n in d.pop("_notes", ())]
            out += [replace(c, notes=(*c.notes, f"rendered from {name} as its controller or chart renders it",
                                      *own, *notes)) for c in kube.from_kube(d, source, files)]
        return out
    return None


def _items(docs: list, source: str) -> list:
    """The documents with each ``kind: List`` (``kubectl get ... -o yaml``) replaced by its items, so a serving
    stack's own kinds inside one are read too."""
    out: list = []
    for d in docs:
        if isinstance(d, dict) and d.get("kind") == "List" and "apiVersion" in d:
            out += validate.sequence(f"{source}: List items", d.get("items"))
        else:
            out.append(d)
    return out


def _node_server(doc: object, source: str) -> tuple[str, int, str, dict[str, dict[str, str]]] | None:
    """A per-node cache server ``doc`` runs (asked of every engine), else None."""
    from kvplan.engines import all_engines

    for e in all_engines():
        got = e.node_servers(doc, source)
        if got is not None:
            return got
    return None


def _beside(out: list[Container], servers: list[tuple[str, int, str, dict]]) -> list[Container]:
    """Each container with the per-node servers of the same input (their host memory and notes)."""
    if not servers:
        return out
    held, names = sum(s[1] for s in servers), ", ".join(s[0] for s in servers)
    return [replace(c, node_host_bytes=c.node_host_bytes + held, node_host_source=names,
                    notes=(*c.notes, *(s[2] for s in servers))) for c in out]


def parse_text(text: str, source: str, name_hint: str = "") -> list[Container]:
    """Containers in one file's text."""
    from kvplan.deploy import compose, docker, images, kube, shell, slurm

    stripped = text.lstrip()
    first = stripped.split(None, 1)[0].upper() if stripped else ""
    if name_hint.lower().startswith("dockerfile") or name_hint.lower().endswith(".dockerfile") or first == "FROM" \
            or (first.startswith("#") and re.search(r"(?m)^\s*FROM\s+\S", text) and
                re.search(r"(?m)^\s*(CMD|ENTRYPOINT)\b", text) and not slurm.is_sbatch(text)):
        return [docker.from_dockerfile(text, source)]
    if slurm.is_sbatch(text):
        return [slurm.from_sbatch(text, source)]
    yaml_keys = r"(?m)^(apiVersion|kind|services|servingEngineSpec)\s*:"
    if Path(name_hint).suffix.lower() in _YAML_EXT or re.search(yaml_keys, text):
        docs = _items(_yaml_docs(text, source), source)
        out: list[Container] = []
        kinds: list[str] = []
        servers = [s for s in (_node_server(d, source) for d in docs) if s is not None]
        files = {**kube.config_maps(docs, source), **{k: v for s in servers for k, v in s[3].items()}}
        for doc in docs:
            if (server := _node_server(doc, source)) is not None:
                kinds.append(server[0])
            elif compose.is_compose(doc):
                out += compose.from_compose(doc, source)
                kinds.append("compose services")
            elif (stack := _stack(doc, source, kinds, files)) is not None:  # a serving stack's own kind or values
                out += stack
            elif kube.is_kube(doc):
                kinds.append(doc["kind"])
                if doc["kind"] not in kube.SKIPPED_KINDS:
                    out += kube.from_kube(doc, source, files)
            elif isinstance(doc, dict):
                kinds.append("a mapping without apiVersion/kind or services")
            else:
                kinds.append(type(doc).__name__)
        if not out:
            seen = ", ".join(dict.fromkeys(kinds)) or "nothing"
            raise KvplanError(f"{source}: no SGLang or vLLM container found (documents: {seen})",
                              "kvplan reads Pods, Deployments, StatefulSets, Jobs, LeaderWorkerSets, Compose services, "
                              "vLLM production-stack values, KServe LLMInferenceServices")
        return _beside(out, servers)
    for m in _DOCKER_RUN.finditer(text):  # docker run ... (shell text)
        line_start = text.rfind("\n", 0, m.start()) + 1
        chunk = re.sub(r"\\\r?\n", " ", text[line_start:])
        cmds = [c for c in shell._commands(chunk)]
        for cmd in cmds[:1]:
            i = next((k for k, t in enumerate(cmd) if t.rsplit("/", 1)[-1] == "docker"), None)
            if i is not None:
                return [docker.from_run(cmd[i:], source)]
    hit = shell.find_in_script(text)
    if hit is None:
        raise KvplanError(f"{source}: no SGLang or vLLM launch command found",
                          "give a Compose file, Kubernetes manifest, Dockerfile, sbatch script or docker run line")

    return [Container(source=source, workload="script", name=Path(source).name,
                      argv=tuple(images.with_engine_env(hit.argv, hit.env)), env=hit.env,
                      notes=tuple(f"${v} is not set in the script; left as written" for v in hit.unresolved))]


def _files(path: Path) -> list[Path]:
    if path.is_symlink() and path.is_dir():
        raise KvplanError(f"{path} is a symlinked directory", "give the directory itself")
    if not path.is_dir():
        return [path]
    out = []
    for root, dirs, names in os.walk(path, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for n in sorted(names):
            p = Path(root) / n
            if n.startswith(".") or p.is_symlink():
                continue
            if p.suffix.lower() in _YAML_EXT | _SCRIPT_EXT or n.lower().startswith(("dockerfile", "compose")):
                out.append(p)
            if len(out) > MAX_FILES:
                raise KvplanError(f"{path}: more than {MAX_FILES} files", "point -f at the deployment's folder")
    return out


def read_deployments(paths: list[str]) -> list[Container]:
    """Every engine container in the given files / directories (``-`` reads stdin)."""
    out: list[Container] = []
    for given in paths:
        if given == "-":
            out += parse_text(_decode(sys.stdin.buffer.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES], "stdin"), "stdin")
            continue
        p = Path(validate.path("-f", given, hint="a manifest, compose file, script or folder"))
        try:
            files = _files(p)
        except OSError as e:
            raise KvplanError(f"{p}: cannot read ({e.strerror})") from None
        found_here = []
        errors = []
        for f in files:
            try:
                found_here += parse_text(_read(f), str(f), f.name)
            except KvplanError as e:
                if not p.is_dir():
                    raise
                errors.append(str(e))
        if p.is_dir() and not found_here:
            raise KvplanError(f"{p}: no SGLang or vLLM deployment in {len(files)} file(s)",
                              errors[0] if errors else "the folder holds no manifest, compose file or script")
        out += found_here
    return out
