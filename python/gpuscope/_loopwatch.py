"""The loop watch's bytecode analysis.

A ``for`` loop does not tell its iterator when it is left by ``break``,
``return`` or an exception, and a ``steps()`` iterator kept in a variable
outlives its loop. So the iterator (bindings/hot_steps_iter.cc) notes where
its loop is: the frame calling ``next()`` from a ``FOR_ITER``, and the
bytecode offsets of that loop's body, which ``_loop_range()`` works out here
from ``dis``, once per loop (cached). The session's next scope then checks
whether that frame is still inside those offsets; if not, the loop was left
and its step ends at its last recorded scope.

The analysis reads the whole code object the loop is in (a script's module
can hold thousands of instructions: milliseconds), so the iterator asks for
it before it takes the step's begin timestamp: it is gpuscope's set-up, not
part of the user's first step.
"""

from __future__ import annotations

import dis
import functools
from typing import Any, List, Optional, Tuple

_JUMPS = frozenset(getattr(dis, "hasjump", None) or (list(dis.hasjrel) + list(dis.hasjabs)))
# Instructions after which control does not fall through to the next one.
_NO_FALLTHROUGH = frozenset({
    "RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
    "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE", "JUMP", "JUMP_NO_INTERRUPT",
})
_MAX_LOOP_RANGES = 32  # as bindings/hot_steps_iter.cc holds (kMaxLoopRanges)


@functools.lru_cache(maxsize=256)
def _loop_range(code: Any, offset: int) -> Optional[Tuple[Tuple[int, int], ...]]:
    """The bytecode offsets inside the ``for`` loop whose ``FOR_ITER`` is at
    byte ``offset`` of ``code``, as ``((begin, end), ...)`` ranges: while the
    frame's current instruction is in one, it is running the loop's body;
    anywhere else (after a ``break``, in the ``else:`` clause, in code after
    the loop) it has left the loop. None when the instruction there is not a
    ``FOR_ITER`` (a bare ``next(it)``).

    The body is what control can reach from the ``FOR_ITER`` (exception
    handlers included) without passing through the loop's exit: from CPython
    3.12 on the compiler lays a body out in several pieces, its handlers and
    the code after a ``raise`` moved past the code that follows the loop.

    Called from C when a ``steps()`` iterator is iterated by a loop, so that a
    loop left by ``break``, ``return`` or an exception ends its step; cached.
    The call comes before the step's begin timestamp, so that its cost is in
    no step.
    """
    instructions = list(dis.get_instructions(code))
    index = {ins.offset: i for i, ins in enumerate(instructions)}
    loop = instructions[index[offset]] if offset in index else None
    if loop is None or loop.opname != "FOR_ITER" or not isinstance(loop.argval, int):
        return None
    try:
        handlers = [(e.start, e.end, e.target) for e in dis.Bytecode(code).exception_entries]
    except AttributeError:  # Python < 3.11: no exception table
        handlers = []

    def successors(i: int) -> List[int]:
        ins = instructions[i]
        out = []
        if ins.opname not in _NO_FALLTHROUGH and i + 1 < len(instructions):
            out.append(instructions[i + 1].offset)
        if ins.opcode in _JUMPS and isinstance(ins.argval, int):
            out.append(ins.argval)
        out.extend(target for start, end, target in handlers if start <= ins.offset < end)
        return out

    def reach(starts: List[int], stop: set) -> set:
        seen: set = set()
        todo = [o for o in starts if o in index and o not in stop]
        while todo:
            o = todo.pop()
            if o in seen:
                continue
            seen.add(o)
            todo.extend(n for n in successors(index[o]) if n in index and n not in stop and n not in seen)
        return seen

    # What follows the loop: from its exit, never through its FOR_ITER (an
    # outer loop comes back to it).
    after = reach([int(loop.argval)], {offset})
    body = reach([instructions[index[offset] + 1].offset], {offset} | after) | {offset}
    ranges: List[Tuple[int, int]] = []
    for o in sorted(body):
        i = index[o]
        end = instructions[i + 1].offset if i + 1 < len(instructions) else o + 2
        if ranges and ranges[-1][1] == o:
            ranges[-1] = (ranges[-1][0], end)
        else:
            ranges.append((o, end))
    while len(ranges) > _MAX_LOOP_RANGES:  # merge the closest neighbours (errs toward "inside")
        gaps = [ranges[k + 1][0] - ranges[k][1] for k in range(len(ranges) - 1)]
        k = gaps.index(min(gaps))
        ranges[k:k + 2] = [(ranges[k][0], ranges[k + 1][1])]
    return tuple(ranges)
