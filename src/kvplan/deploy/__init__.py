"""Deployments: the engine launch inside a Docker command, a Compose file, Kubernetes manifests or a Slurm
script, with the limits that decide whether it survives (the container's memory limit, its /dev/shm, the GPUs it
was given).

``read_deployments(paths)`` turns files into :class:`~kvplan.deploy.model.Container` records (one per engine
container, never running anything: YAML through a safe loader, shell text only tokenised); ``check`` plans each
one with its limits as the host budget.
"""

from __future__ import annotations

from kvplan.deploy.model import Container

__all__ = ["Container"]
