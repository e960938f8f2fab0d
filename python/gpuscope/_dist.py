"""Where this process sits in a distributed job, and per-rank file names.

``identity()`` reads the process's rank, local rank and world size from
``torch.distributed`` when it is initialized (never importing torch: only a
torch the program already imported is asked), else from the variables the
launchers set: torchrun's ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``, Slurm's
``SLURM_PROCID``/``SLURM_NTASKS``/``SLURM_LOCALID``, Open MPI's
``OMPI_COMM_WORLD_RANK``/``OMPI_COMM_WORLD_SIZE``/``OMPI_COMM_WORLD_LOCAL_RANK``.
It is None outside a job of two or more ranks, and when what it reads does
not make sense (a rank outside its world, a number that is not one).

``rank_path(path)`` is the name a rank writes ``path`` under, so that the
ranks of a job do not overwrite each other's files: ``{rank}``,
``{local_rank}``, ``{world_size}`` and ``{host}`` in the name are replaced
(outside a job: rank 0 of 1); else, under a job, ``.rank<N>`` goes before
the suffix (``run.json`` -> ``run.rank3.json``).
"""

from __future__ import annotations

import os
import socket
import sys
from typing import NamedTuple, Optional


class RankIdentity(NamedTuple):
    rank: int
    local_rank: int
    world_size: int
    host: str


_LAUNCHERS = (
    ("RANK", "WORLD_SIZE", "LOCAL_RANK"),  # torchrun, torch.distributed.launch
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
)


def _int(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def _from_torch() -> Optional[tuple]:
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        if not (dist.is_available() and dist.is_initialized()):
            return None
        return int(dist.get_rank()), int(dist.get_world_size())
    except Exception:  # a torch in a state we cannot read: not a job we know
        return None


def identity() -> Optional[RankIdentity]:
    """This process's place in a job of two or more ranks, or None."""
    rank = world = local = None
    from_torch = _from_torch()
    if from_torch is not None:
        rank, world = from_torch
        local = _int(os.environ.get("LOCAL_RANK"))
    else:
        for rank_var, world_var, local_var in _LAUNCHERS:
            rank, world = _int(os.environ.get(rank_var)), _int(os.environ.get(world_var))
            if rank is not None and world is not None:
                local = _int(os.environ.get(local_var))
                break
    if rank is None or world is None or world < 2 or not 0 <= rank < world:
        return None
    if local is None or local < 0:
        local = 0
    return RankIdentity(rank, local, world, socket.gethostname())


_FIELDS = ("{rank}", "{local_rank}", "{world_size}", "{host}")


def rank_path(path: "os.PathLike[str] | str") -> str:
    """The name this rank writes ``path`` under (see the module comment)."""
    name = os.fspath(path)
    ident = identity()
    if any(field in name for field in _FIELDS):
        ident = ident or RankIdentity(0, 0, 1, socket.gethostname())
        for field, value in zip(_FIELDS, (ident.rank, ident.local_rank, ident.world_size, ident.host)):
            name = name.replace(field, str(value))
        return name
    if ident is None:
        return name
    head, tail = os.path.split(name)
    stem, dot, suffix = tail.rpartition(".")
    if not dot or not stem:  # no suffix (or a dotfile): append
        return os.path.join(head, f"{tail}.rank{ident.rank}")
    return os.path.join(head, f"{stem}.rank{ident.rank}.{suffix}")
