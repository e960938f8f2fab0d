"""Which child processes are the data loader's workers.

The telemetry counts the CPU of the process's descendants, and judges the
input pipeline by the CPU the loader uses: its workers', not that of every
child process (a compiler, an evaluation job, a tokenizer server). torch
names its DataLoader workers ("pt_data_worker"), which the sampler finds by
itself wherever they sit in the process tree (a forkserver's workers are
grandchildren); what it cannot see is a loader *without* workers, whose
work runs in the training process. ``s.steps(loader)`` and ``gpuscope run``
tell it both, through ``note_loader``.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable, List

from . import _gpuscope


def add_loader_workers(pids: Iterable[int]) -> None:
    """Names your data loader's worker processes (pids; ``[]`` for a loader
    whose work runs in the training process), for loaders gpuscope does not
    know: their CPU then counts as the loader's (``telemetry.worker_cores``,
    which the input-bound rules judge the loader by) and the process's other
    child processes apart (``telemetry.child_cores``). A torch DataLoader
    needs nothing: ``s.steps(loader)`` and ``gpuscope run`` name its workers,
    and torch's workers are found by their name anywhere in the process tree.
    Process-wide and additive; pids that exit count for nothing."""
    _gpuscope._add_loader_workers([int(p) for p in pids])


def worker_pids(loader: Any, iterator: Any) -> "List[int] | None":
    """The worker pids of a torch DataLoader's iterator ([] for one without
    workers), or None when `loader` is not a torch DataLoader."""
    dataloader = sys.modules.get("torch.utils.data.dataloader")
    if dataloader is None or not isinstance(loader, dataloader.DataLoader):
        return None
    workers = getattr(iterator, "_workers", None) or []
    return [int(w.pid) for w in workers if getattr(w, "pid", None)]


def note_loader(loader: Any, iterator: Any) -> None:
    """Names a torch DataLoader's workers to the telemetry; anything else is
    left alone (its children keep an unknown role). Never raises."""
    try:
        pids = worker_pids(loader, iterator)
        if pids is not None:
            _gpuscope._add_loader_workers(pids)
    except Exception:  # noqa: BLE001 - a loader we do not understand is not an error
        pass


_gpuscope._set_loader_note(note_loader)
