"""Reading back what a real tracker stored, with the tracker's own readers
(for tests/python/test_trackers.py): TensorBoard's event accumulator, the
records of a W&B offline run, MLflow's client over a local store."""

from __future__ import annotations

import glob
import json
import os
import struct
import time
from typing import Any, Dict, List, Tuple


def tensorboard_scalars(log_dir: str) -> Dict[str, List[Tuple[int, float]]]:
    """tag -> [(step, value)] over every event file in ``log_dir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(log_dir, size_guidance={"scalars": 0, "tensors": 0})
    ea.Reload()
    return {tag: [(e.step, e.value) for e in ea.Scalars(tag)] for tag in ea.Tags()["scalars"]}


def tensorboard_texts(log_dir: str, tag: str) -> List[Tuple[int, str]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(log_dir, size_guidance={"tensors": 0})
    ea.Reload()
    name = tag + "/text_summary"
    if name not in ea.Tags()["tensors"]:
        return []
    return [(e.step, e.tensor_proto.string_val[0].decode()) for e in ea.Tensors(name)]


_BLOCK = 32768  # the records file is LevelDB's log format: 32 KiB blocks
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def wandb_records(run_dir: str, timeout_s: float = 20.0) -> List[Any]:
    """The protobuf records of the offline run under ``run_dir``
    (``wandb/offline-run-*/run-*.wandb``): W&B's own Record type, framed as
    LevelDB's log (7-byte header of crc, length, type) after W&B's 7-byte
    file header. W&B's service may still be writing the file after
    ``finish()`` returns: read until the run's exit record is there."""
    deadline = time.monotonic() + timeout_s
    while True:
        paths = glob.glob(os.path.join(run_dir, "wandb", "offline-run-*", "run-*.wandb"))
        assert len(paths) <= 1, paths
        records = _read_records(paths[0]) if paths else []
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            assert paths, f"no offline run under {run_dir}"
            return records
        time.sleep(0.2)


def _read_records(path: str) -> List[Any]:
    from wandb.proto import wandb_internal_pb2 as pb

    data = open(path, "rb").read()
    assert data[:4] == b":W&B", data[:8]
    pos, pending, out = 7, b"", []
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk = data[pos + 7:pos + 7 + length]
        if kind == 0 or len(chunk) < length:  # not written yet
            break
        pos += 7 + length
        pending = chunk if kind in (_FULL, _FIRST) else pending + chunk
        if kind in (_FULL, _LAST):
            record = pb.Record()
            record.ParseFromString(pending)
            out.append(record)
            pending = b""
    return out


def wandb_history(run_dir: str) -> List[Dict[str, Any]]:
    """Each history row of the offline run, its values decoded."""
    rows = []
    for r in wandb_records(run_dir):
        if r.WhichOneof("record_type") == "history":
            rows.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item})
    return rows


def wandb_of_kind(run_dir: str, kind: str) -> List[Any]:
    return [getattr(r, kind) for r in wandb_records(run_dir) if r.WhichOneof("record_type") == kind]


def mlflow_history(uri: str, run_id: str, key: str) -> List[Tuple[int, float]]:
    from mlflow.tracking import MlflowClient

    return [(m.step, m.value) for m in MlflowClient(uri).get_metric_history(run_id, key)]


def mlflow_artifacts(uri: str, run_id: str, path: str) -> List[str]:
    from mlflow.tracking import MlflowClient

    return sorted(a.path for a in MlflowClient(uri).list_artifacts(run_id, path))
