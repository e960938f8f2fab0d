"""gs.count_flops(): a model's FLOPs for one batch, counted once with
torch.utils.flop_counter.FlopCounterMode, for ``Session(flops_per_step=...)``
or ``flops_per_sample=...`` (docs/mfu.md)."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence


def count_flops(model: Any, example_inputs: Any, *, backward: bool = True,
                loss_fn: Optional[Callable[[Any], Any]] = None) -> int:
    """The FLOPs of one forward pass of ``model`` on ``example_inputs`` (a
    tensor, or a tuple of positional arguments), plus its backward pass when
    ``backward`` (the default), for the WHOLE batch given: divide by its
    batch size for ``flops_per_sample``. One micro-batch's count times the
    micro-batches of an optimizer step is ``flops_per_step``.

    Counted by ``torch.utils.flop_counter.FlopCounterMode`` (matrix
    multiplies, convolutions, attention: 2 FLOPs per multiply-add; elementwise
    ops count 0). The backward is run on ``loss_fn(output)`` (default: the
    output's ``.loss`` when it has one, as Hugging Face models given labels
    do, else the sum of the output, or of its first element when it is a
    tuple); parameters' ``.grad`` are put back as they were. The
    backward of a layer whose input needs no gradient (the first one) skips
    the input gradient, so a backward is about twice the forward, not
    exactly. Runs the model once: call it before training, on the device and
    dtype you train in.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    inputs: Sequence[Any] = example_inputs if isinstance(example_inputs, tuple) \
        else (example_inputs,)
    params = [p for p in model.parameters()] if hasattr(model, "parameters") else []
    saved = [p.grad for p in params]
    counter = FlopCounterMode(display=False)
    try:
        with counter:
            if backward:
                output = model(*inputs)
                loss = loss_fn(output) if loss_fn is not None else _default_loss(output)
                loss.backward()
            else:
                with torch.no_grad():
                    model(*inputs)
    finally:
        for p, g in zip(params, saved):
            p.grad = g
    return int(counter.get_total_flops())


def _default_loss(output: Any) -> Any:
    """A scalar to run the backward from: output.loss, else the (first)
    output summed (a sum counts no FLOPs)."""
    loss = getattr(output, "loss", None)
    if loss is not None:
        return loss
    if isinstance(output, (tuple, list)):
        output = output[0]
    return output.sum()
