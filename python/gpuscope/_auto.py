"""Automatic instrumentation of a PyTorch training loop, from public hooks
only, for the zero-code runner (``gpuscope run``; docs/zero-code.md).

What is inferred, and how:

- **step**: one optimizer step. A step ends when the first optimizer that
  ever stepped (the *primary* one; with several, as in a GAN, the others'
  steps are phases inside it) finishes ``step()``
  (``register_optimizer_step_post_hook``), and the next one begins at once,
  so step time is the time from one optimizer step to the next, and
  gradient accumulation (several forward/backward passes per step) counts
  one step. The first step begins at the first event below. The step open
  when the program ends (work after the last optimizer step) is dropped,
  so steps equal optimizer steps.
- **data**: the time inside ``next()`` of any ``DataLoader`` iterator.
- **forward**: from entering to leaving the outermost ``nn.Module`` call
  (global module hooks until the first optimizer step; then a wrapper of
  the ``forward`` of the modules trained, those holding the optimizer's
  parameters, only, so that a model of thousands of modules costs one
  wrapper call per forward, not two hooks per module).
- **backward**: ``Tensor.backward()`` and ``torch.autograd.backward()``.
- **sync**: ``torch.cuda.synchronize()``, and ``.item()`` and ``.cpu()`` of
  a CUDA tensor (a read the host waits for); **checkpoint**:
  ``torch.save()``.
- **optimizer**: ``Optimizer.step()`` (step pre- and post-hooks); with a
  closure (``step(closure)``, as Lightning calls it), from the closure's
  return, so the forward and backward it runs stay phases of their own.

Only the thread that first does any of this is recorded (the training
loop); calls from other threads (DataLoader pin-memory threads,
DataParallel replicas) are left alone. Nothing here ever raises into the
training script: a failure turns the instrumentation off and is said once.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Tuple

from . import _gpuscope


class AutoInstrument:
    """Hooks ``session`` into torch; ``install()``, then ``finish()`` at the
    end (drops the step open after the last optimizer step) and
    ``uninstall()``."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.optimizer_steps = 0
        self._owner: Optional[int] = None
        self._step: Any = None                 # the open step scope, entered
        self._open: List[Tuple[str, Any]] = []  # auto phases open, innermost last
        self._forward_depth = 0
        self._in_backward = False
        self._primary: Any = None              # the optimizer whose steps end steps
        self._undo: List[Callable[[], None]] = []
        self._global_forward: List[Any] = []   # handles of the global module hooks
        self._targeted = False
        self._roots_seen: dict = {}            # outermost modules called before targeting
        self._off = False
        self._scopes: dict = {}                # phase name -> the session's cached phase scope
        self._in_data = False
        self._end_pending = False              # an optimizer step ended inside the script's own scope

    # -- the state machine, on the owner thread -----------------------------

    def _mine(self) -> bool:
        """Whether this call is the training thread's (the first one seen)
        and the instrumentation is on. The hooks run it first, every call."""
        me = threading.get_ident()
        if me == self._owner:
            return not self._off
        if self._owner is None and not self._off:
            self._owner = me
            return True
        return False

    def _fail(self, e: BaseException) -> None:
        self._off = True
        _gpuscope._log_once("auto:failed", f"gpuscope run: automatic instrumentation is off from "
                                           f"here on ({type(e).__name__}: {str(e)[:160]})")

    def _ensure_step(self) -> None:
        if self._end_pending:
            self._settle()
        if self._step is None:
            step = self.session.step()
            step.__enter__()
            self._step = step

    def _settle(self) -> None:
        """Ends the step whose optimizer step came while the script held a
        scope of its own open (``with gs.phase("opt"): opt.step()``), once
        that scope has closed: ending it earlier would close the script's
        scope under it. The next step begins at once."""
        if self.session._open_scopes() > 1:
            return  # still inside the script's scope
        self._end_pending = False
        self._end_step()
        step = self.session.step()
        step.__enter__()
        self._step = step

    def _enter(self, name: str) -> None:
        if self._step is None or self._end_pending:
            self._ensure_step()
        scope = self._scopes.get(name)
        if scope is None:
            scope = self._scopes[name] = self.session.phase(name)
        scope.__enter__()
        self._open.append((name, scope))

    def _exit(self, name: str) -> None:
        # Close up to and including the innermost `name` (a phase left open
        # by an exception is closed with its parent).
        while self._open:
            open_name, scope = self._open.pop()
            scope.__exit__(None, None, None)
            if open_name == name:
                return

    def _end_step(self) -> None:
        while self._open:
            self._open.pop()[1].__exit__(None, None, None)
        if self._step is not None:
            if self.session._open_scopes() > 1:  # the script's own scope is open
                self._end_pending = True
                return
            step, self._step = self._step, None
            step.__exit__(None, None, None)

    # -- hooks ----------------------------------------------------------------

    # _data() and _backward() are _wrapped() (below) for the calls made every
    # step, with a flag where _wrapped() scans the open phases.
    def _data(self, original: Callable[..., Any], it: Any) -> Any:
        if self._in_data or not self._mine():
            return original(it)
        try:
            self._enter("data")
        except Exception as e:  # noqa: BLE001 - never into the script
            self._fail(e)
            return original(it)
        self._in_data = True
        try:
            return original(it)
        except BaseException as e:
            self.session._record_oom(e)  # an OOM in the loader's pinning or collate
            raise
        finally:
            self._in_data = False
            try:
                self._exit("data")
            except Exception as e:  # noqa: BLE001
                self._fail(e)

    def _backward(self, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._in_backward or not self._mine():
            return original(*args, **kwargs)
        try:
            self._enter("backward")
        except Exception as e:  # noqa: BLE001
            self._fail(e)
            return original(*args, **kwargs)
        self._in_backward = True
        try:
            return original(*args, **kwargs)
        except BaseException as e:
            self.session._record_oom(e)  # an OOM, recorded while backward is open
            raise
        finally:
            self._in_backward = False
            try:
                self._exit("backward")
            except Exception as e:  # noqa: BLE001
                self._fail(e)

    def _wrapped(self, name: str, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``original(*args, **kwargs)`` inside phase ``name`` (not nested in
        itself; left alone on other threads)."""
        if not self._mine() or any(n == name for n, _ in self._open):
            return original(*args, **kwargs)
        try:
            self._enter(name)
        except Exception as e:  # noqa: BLE001
            self._fail(e)
            return original(*args, **kwargs)
        try:
            return original(*args, **kwargs)
        except BaseException as e:
            # A CUDA out-of-memory error, recorded while its phase is open
            # (free when nothing is raised: exceptions cost only when thrown).
            self.session._record_oom(e)
            raise
        finally:
            try:
                self._exit(name)
            except Exception as e:  # noqa: BLE001
                self._fail(e)

    def _forward_pre(self, module: Any, args: Any) -> None:
        if not self._mine():
            return
        self._forward_depth += 1
        if self._forward_depth == 1:
            if not self._targeted and len(self._roots_seen) < 64:
                self._roots_seen.setdefault(id(module), module)
            try:
                self._enter("forward")
            except Exception as e:  # noqa: BLE001
                self._fail(e)

    def _forward_post(self, module: Any, args: Any, output: Any) -> None:
        if self._forward_depth == 0 or not self._mine():
            return
        self._forward_depth -= 1
        if self._forward_depth == 0:
            try:
                self._exit("forward")
            except Exception as e:  # noqa: BLE001
                self._fail(e)

    def _optimizer_pre(self, optimizer: Any, args: Any, kwargs: Any) -> Any:
        if not self._mine():
            return None
        # `args` holds the optimizer itself first, then step()'s own.
        closure = kwargs.get("closure") if kwargs else None
        if closure is None and len(args) > 1 and callable(args[1]):
            closure = args[1]
        if closure is None:
            self._safe(lambda: self._enter("optimizer"))
            return None
        # step(closure), as Lightning calls it: the closure runs forward and
        # backward inside step(). The optimizer phase begins when it returns,
        # so that they stay phases of their own.
        auto = self

        def closure_then_optimizer(*a: Any, **k: Any) -> Any:
            out = closure(*a, **k)
            if not any(name == "optimizer" for name, _ in auto._open):
                auto._safe(lambda: auto._enter("optimizer"))
            return out

        if kwargs and "closure" in kwargs:
            return args, {**kwargs, "closure": closure_then_optimizer}
        return (args[0], closure_then_optimizer, *args[2:]), kwargs

    def _optimizer_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self._mine():
            return

        def post() -> None:
            self._exit("optimizer")
            if self._primary is None:
                self._primary = optimizer
                self._target_forward(optimizer)
            if optimizer is self._primary:
                self.optimizer_steps += 1
                self._end_step()
                if not self._end_pending:
                    self._ensure_step()  # the next step begins now

        self._safe(post)

    def _safe(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - never into the script
            self._fail(e)

    # -- install / uninstall -------------------------------------------------

    def install(self) -> None:
        import torch
        from torch.utils.data import dataloader

        from . import _memory

        _memory.watch(self.session)  # torch is imported now: its allocator is sampled
        auto = self
        base = dataloader._BaseDataLoaderIter
        original_next = base.__next__

        def __next__(it: Any) -> Any:
            return auto._data(original_next, it)

        base.__next__ = __next__  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(base, "__next__", original_next))
        # Every new iterator (each epoch, or once with persistent workers)
        # names its workers, so that the telemetry tells them apart from the
        # script's other child processes.
        from . import _loader

        loader_class = dataloader.DataLoader
        original_iter = loader_class.__iter__

        def __iter__(loader: Any) -> Any:
            it = original_iter(loader)
            _loader.note_loader(loader, it)
            return it

        loader_class.__iter__ = __iter__  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(loader_class, "__iter__", original_iter))

        original_tensor_backward = torch.Tensor.backward

        def tensor_backward(*args: Any, **kwargs: Any) -> Any:
            return auto._backward(original_tensor_backward, *args, **kwargs)

        torch.Tensor.backward = tensor_backward  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(torch.Tensor, "backward", original_tensor_backward))
        original_autograd_backward = torch.autograd.backward

        def autograd_backward(*args: Any, **kwargs: Any) -> Any:
            return auto._backward(original_autograd_backward, *args, **kwargs)

        torch.autograd.backward = autograd_backward
        self._undo.append(lambda: setattr(torch.autograd, "backward", original_autograd_backward))

        # Synchronizations and checkpoints, where a call marks them cheaply:
        # torch.cuda.synchronize(), .item() and .cpu() of a CUDA tensor
        # (a device-to-host read waits for the GPU), torch.save().
        original_sync = torch.cuda.synchronize

        def synchronize(*args: Any, **kwargs: Any) -> Any:
            return auto._wrapped("sync", original_sync, *args, **kwargs)

        torch.cuda.synchronize = synchronize
        self._undo.append(lambda: setattr(torch.cuda, "synchronize", original_sync))
        for method in ("item", "cpu"):
            original_method = getattr(torch.Tensor, method)

            def read(t: Any, *args: Any, __original: Any = original_method, **kwargs: Any) -> Any:
                if not t.is_cuda:
                    return __original(t, *args, **kwargs)
                return auto._wrapped("sync", __original, t, *args, **kwargs)

            setattr(torch.Tensor, method, read)
            self._undo.append(lambda m=method, o=original_method: setattr(torch.Tensor, m, o))
        original_save = torch.save

        def save(*args: Any, **kwargs: Any) -> Any:
            return auto._wrapped("checkpoint", original_save, *args, **kwargs)

        torch.save = save
        self._undo.append(lambda: setattr(torch, "save", original_save))

        from torch.optim.optimizer import (register_optimizer_step_post_hook,
                                           register_optimizer_step_pre_hook)

        for handle in (register_optimizer_step_pre_hook(self._optimizer_pre),
                       register_optimizer_step_post_hook(self._optimizer_post)):
            self._undo.append(handle.remove)
        from torch.nn.modules import module as nn_module

        self._global_forward = [
            nn_module.register_module_forward_pre_hook(self._forward_pre),
            nn_module.register_module_forward_hook(self._forward_post, always_call=True),
        ]
        self._undo.append(self._remove_global_forward)

    def _remove_global_forward(self) -> None:
        for handle in self._global_forward:
            handle.remove()
        self._global_forward = []

    def _target_forward(self, optimizer: Any) -> None:
        """After the first optimizer step: hooks on the modules trained (the
        outermost modules called so far that hold the optimizer's
        parameters) replace the global ones."""
        if self._targeted:
            return
        self._targeted = True
        params = {id(p) for group in optimizer.param_groups for p in group["params"]}
        roots = [m for m in self._roots_seen.values()
                 if any(id(p) in params for p in m.parameters())]
        self._roots_seen = {}
        if not roots:
            return  # the model was never called through nn.Module: keep the global hooks
        self._remove_global_forward()
        for m in roots:
            self._wrap_forward(m)
        self._forward_depth = 0  # the step that just ended had no forward in flight

    def _wrap_forward(self, module: Any) -> None:
        """``module.forward`` (the instance's) wrapped in the forward phase:
        cheaper than module hooks, whose dispatch takes torch's slow call
        path, and called as hooks are, by ``module(...)``."""
        auto = self
        had_own = "forward" in module.__dict__
        original = module.forward

        def forward(*args: Any, **kwargs: Any) -> Any:
            if auto._forward_depth or not auto._mine():
                return original(*args, **kwargs)
            auto._forward_depth = 1
            try:
                auto._enter("forward")
            except Exception as e:  # noqa: BLE001
                auto._fail(e)
            try:
                return original(*args, **kwargs)
            except BaseException as e:
                auto.session._record_oom(e)  # an OOM, recorded while forward is open
                raise
            finally:
                auto._forward_depth = 0
                try:
                    auto._exit("forward")
                except Exception as e:  # noqa: BLE001
                    auto._fail(e)

        module.forward = forward

        def undo() -> None:
            if had_own:
                module.forward = original
            else:
                module.__dict__.pop("forward", None)

        self._undo.append(undo)

    def finish(self) -> None:
        """Drops the step open after the last optimizer step (it has no
        optimizer step of its own), closing any phase left open."""
        if self._owner is not None and self._owner != threading.get_ident():
            return  # the session is another thread's: leave it
        try:
            while self._open:
                self._open.pop()[1].__exit__(None, None, None)
            if self._end_pending:  # a real optimizer step, its end deferred: keep it
                self._end_pending = False
                self._end_step()
            elif self._step is not None:
                step, self._step = self._step, None
                step._cancel()
        except Exception as e:  # noqa: BLE001
            self._fail(e)

    def uninstall(self) -> None:
        self._off = True  # a wrapper the script kept (`from torch import save`) passes through
        while self._undo:
            try:
                self._undo.pop()()
            except Exception:  # noqa: BLE001 - best effort
                pass


def guard_profiler(session: Any) -> Callable[[], None]:
    """Hands CUPTI to ``torch.profiler`` when the script starts one: the
    runner's session takes CUPTI (older versions too: it owns the process),
    and a profiler that finds it taken would record no GPU activity. On a
    profiler's ``start()`` (``with profile(...)``, a schedule's first
    step, ``torch.autograd.profiler.profile``), a session whose source is
    ``cupti`` releases it and goes on with CUDA events, said once. Returns
    the function that removes the guard."""
    import torch.autograd.profiler as legacy
    import torch.profiler as prof

    def release() -> None:
        try:
            if session.source == "cupti":
                session.release_cupti()
                _gpuscope._log_once("auto:profiler",
                                    "gpuscope run: the script started torch.profiler: CUPTI is "
                                    "handed to it; GPU numbers from CUDA events from here on "
                                    "(idle % becomes a lower bound)")
        except Exception:  # noqa: BLE001 - the profiler must start whatever happens here
            pass

    undo: List[Callable[[], None]] = []
    for cls, name in ((prof.profile, "start"), (legacy.profile, "__enter__")):
        original = getattr(cls, name)

        def wrapper(self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
            release()
            return __original(self, *args, **kwargs)

        setattr(cls, name, wrapper)
        undo.append(lambda cls=cls, name=name, original=original: setattr(cls, name, original))

    def remove() -> None:
        for u in undo:
            u()

    return remove
