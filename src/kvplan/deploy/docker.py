"""``docker run`` command lines (alone, or inside a shell script) and Dockerfiles.

Flags read (https://docs.docker.com/reference/cli/docker/container/run/): ``--gpus`` (``all``, ``N``,
``device=0,1``), ``-m/--memory``, ``--shm-size`` (default 64 MB), ``--ipc host``, ``-e/--env``,
``--entrypoint``. Everything after the image is the command (or the image's entrypoint arguments).
"""

from __future__ import annotations

from kvplan import validate
from kvplan.deploy import images
from kvplan.deploy.model import Container
from kvplan.deploy.quantity import docker_bytes
from kvplan.deploy.shell import find_in_tokens, split_words
from kvplan.errors import KvplanError

DOCKER_DEFAULT_SHM = 64 * 2**20  # "--shm-size: Size of /dev/shm ... default 64MB"
# run/create flags that take a value (the rest are booleans); from `docker run --help`
_VALUED = {
    "-a", "--attach", "--add-host", "--annotation", "--blkio-weight", "--blkio-weight-device", "--cap-add",
    "--cap-drop", "--cgroup-parent", "--cgroupns", "--cidfile", "-c", "--cpu-shares", "--cpu-period", "--cpu-quota",
    "--cpu-rt-period", "--cpu-rt-runtime", "--cpus", "--cpuset-cpus", "--cpuset-mems", "--detach-keys", "--device",
    "--device-cgroup-rule", "--device-read-bps", "--device-read-iops", "--device-write-bps", "--device-write-iops",
    "--dns", "--dns-option", "--dns-search", "--domainname", "--entrypoint", "-e", "--env", "--env-file", "--expose",
    "--gpus", "--group-add", "--health-cmd", "--health-interval", "--health-retries", "--health-start-interval",
    "--health-start-period", "--health-timeout", "-h", "--hostname", "--ip", "--ip6", "--ipc", "--isolation",
    "--kernel-memory", "-l", "--label", "--label-file", "--link", "--link-local-ip", "--log-driver", "--log-opt",
    "--mac-address", "-m", "--memory", "--memory-reservation", "--memory-swap", "--memory-swappiness", "--mount",
    "--name", "--network", "--net", "--network-alias", "--oom-score-adj", "--pid", "--pids-limit", "--platform",
    "-p", "--publish", "--pull", "--restart", "--runtime", "--security-opt", "--shm-size", "--stop-signal",
    "--stop-timeout", "--storage-opt", "--sysctl", "--tmpfs", "-u", "--user", "--userns", "--ulimit", "--uts",
    "-v", "--volume", "--volume-driver", "--volumes-from", "-w", "--workdir",
}


def _gpus(value: str) -> int | None:
    v = value.strip().strip('"').strip("'")
    if v == "all":
        return None  # every GPU of the host: the node's count
    if v.startswith("device="):
        return len([d for d in v[len("device="):].split(",") if d.strip()])
    if v.isdigit():
        return validate.count("docker run --gpus", v, 0, validate.MAX_RANKS)
    for part in v.split(","):  # "count=2,capabilities=gpu"
        if part.startswith("count="):
            c = part[len("count="):]
            return None if c == "all" else validate.count("docker run --gpus count", c, 0, validate.MAX_RANKS) \
                if c.isdigit() else None
    return None


def from_run(tokens: list[str], source: str, env: dict[str, str] | None = None) -> Container:
    """One ``docker run`` (tokens from ``docker`` onward)."""
    i = 2 if len(tokens) > 1 and tokens[1] in ("run", "create") else 3  # docker container run
    opts: dict[str, str] = {}
    run_env: dict[str, str] = {}
    gpus: int | None = None
    gpus_given = False
    entry: list[str] | None = None
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("-") or tok == "--":
            break
        name, eq, val = tok.partition("=")
        if name in _VALUED and not eq:
            if i + 1 >= len(tokens):
                raise KvplanError(f"{source}: docker run {name} needs a value")
            val = tokens[i + 1]
            i += 1
        i += 1
        if name in ("-e", "--env"):
            k, _, v = val.partition("=")
            run_env[k] = v if _ else (env or {}).get(k, "")
        elif name == "--gpus":
            gpus, gpus_given = _gpus(val), True
        elif name == "--entrypoint":
            entry = split_words(val, f"{source}: docker run --entrypoint")
        elif name in _VALUED:
            opts[name] = val
    if i >= len(tokens):
        raise KvplanError(f"{source}: docker run without an image")
    image, command = tokens[i], tokens[i + 1:]
    argv = [*(entry or images.entrypoint(image) or ()), *command]
    merged = {**(env or {}), **run_env}
    hit = find_in_tokens(argv, merged)
    if hit is None:
        raise KvplanError(f"{source}: this docker run does not start SGLang or vLLM ({image})",
                          "give the file with the engine's launch command")
    notes = []
    mem = opts.get("--memory") or opts.get("-m")
    ipc_host = opts.get("--ipc") == "host"
    shm = opts.get("--shm-size")
    if ipc_host:
        shm_bytes, shm_src = None, "--ipc=host (the host's /dev/shm)"
    elif shm:
        shm_bytes, shm_src = docker_bytes(shm, "--shm-size"), f"--shm-size {shm}"
    else:
        shm_bytes, shm_src = DOCKER_DEFAULT_SHM, "docker's default 64 MB (no --shm-size, no --ipc=host)"
    if not gpus_given and "--runtime" not in opts:
        notes.append("no --gpus: the container sees no GPU unless the runtime adds them")
    return Container(source=source, workload="docker run", name=opts.get("--name", "docker run"),
                     argv=tuple(images.with_engine_env(hit.argv, merged)), env=merged, image=image,
                     memory_limit_bytes=docker_bytes(mem, "--memory") if mem else None,
                     memory_limit_source=f"--memory {mem}" if mem else None, shm_bytes=shm_bytes, shm_source=shm_src,
                     ipc_host=ipc_host, gpus=gpus, engine_version=images.tag_version(image), notes=tuple(notes))


def from_dockerfile(text: str, source: str) -> Container:
    """ENTRYPOINT + CMD (exec or shell form) and ENV of the last stage."""
    env: dict[str, str] = {}
    entry: list[str] = []
    cmd: list[str] = []
    image = None
    for raw in text.replace("\\\n", " ").splitlines():
        line = raw.strip()
        word, _, rest = line.partition(" ")
        word = word.upper()
        rest = rest.strip()
        if word == "FROM":
            image = rest.split()[0] if rest else None
            env, entry, cmd = {}, [], []
        elif word == "ENV":
            if "=" in rest.split(" ", 1)[0]:
                env.update((k, v) for k, _, v in (t.partition("=") for t in split_words(rest, f"{source}: ENV")) if _)
            elif rest:
                k, _, v = rest.partition(" ")
                env[k] = v.strip()
        elif word in ("ENTRYPOINT", "CMD"):
            try:
                form = validate.json_value(rest, f"{source}: {word}") if rest.startswith("[") else \
                    ["/bin/sh", "-c", rest]
            except validate.BoundExceeded:
                raise
            except KvplanError:
                form = ["/bin/sh", "-c", rest]  # not JSON: docker runs it as shell form
            if not isinstance(form, list) or not all(isinstance(t, str) for t in form):
                raise KvplanError(f"{source}: {word} is neither a JSON string array nor shell text")
            if word == "ENTRYPOINT":
                entry, cmd = form, []
            else:
                cmd = form
    hit = find_in_tokens([*entry, *cmd], env)
    if hit is None:
        raise KvplanError(f"{source}: the Dockerfile's ENTRYPOINT/CMD does not start SGLang or vLLM",
                          "give the file with the engine's launch command")
    return Container(source=source, workload="Dockerfile", name="Dockerfile",
                     argv=tuple(images.with_engine_env(hit.argv, env)), env=env, image=image,
                     shm_bytes=DOCKER_DEFAULT_SHM,
                     shm_source="docker's default 64 MB unless the run adds --shm-size or --ipc=host",
                     engine_version=images.tag_version(image),
                     notes=("limits come from the docker run / orchestrator that starts this image",))
