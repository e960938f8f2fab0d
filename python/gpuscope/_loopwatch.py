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

import functools
import itertools
from array import array
from typing import Any, FrozenSet, List, Optional, Tuple

# dis (and the opcode tables) is imported by the first loop's analysis, not
# by `import gpuscope`: most imports never analyse a loop.


@functools.lru_cache(maxsize=1)
def _jumps() -> FrozenSet[int]:
    import dis

    return frozenset(getattr(dis, "hasjump", None) or (list(dis.hasjrel) + list(dis.hasjabs)))

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
    # One pass over the instructions, keeping a few numbers of each rather
    # than the Instruction objects: a module of thousands of lines has tens
    # of thousands of them, and holding them all (tens of MB) would leave the
    # CPU's caches cold for the step that begins right after this call.
    units = len(code.co_code) // 2
    if not 0 <= offset < 2 * units or offset % 2:
        return None
    number = array("i", [-1]) * units  # instruction number at each offset // 2; -1: none
    offsets = array("i")  # by instruction number
    jumps = array("i")  # the jump's target offset, or -1
    falls = bytearray()  # 1: control can go on to the next instruction
    loop = None
    import dis

    jump_ops = _jumps()
    for ins in dis.get_instructions(code):
        number[ins.offset >> 1] = len(offsets)
        offsets.append(ins.offset)
        falls.append(ins.opname not in _NO_FALLTHROUGH)
        jumps.append(ins.argval if ins.opcode in jump_ops and isinstance(ins.argval, int) else -1)
        if ins.offset == offset:
            loop = ins
    if loop is None or loop.opname != "FOR_ITER" or not isinstance(loop.argval, int):
        return None
    count = len(offsets)

    def at(o: int) -> int:
        return number[o >> 1] if 0 <= o < 2 * units and not o % 2 else -1

    try:
        handlers = [(e.start, e.end, at(e.target)) for e in dis.Bytecode(code).exception_entries]
    except AttributeError:  # Python < 3.11: no exception table
        handlers = []

    def successors(i: int) -> List[int]:
        out = []
        if falls[i] and i + 1 < count:
            out.append(i + 1)
        if jumps[i] >= 0:
            out.append(at(jumps[i]))
        o = offsets[i]
        out.extend(target for start, end, target in handlers if start <= o < end)
        return out

    def reach(starts: List[int], stop: bytearray) -> bytearray:
        seen = bytearray(count)
        todo = [i for i in starts if 0 <= i < count and not stop[i]]
        while todo:
            i = todo.pop()
            if seen[i]:
                continue
            seen[i] = 1
            todo.extend(k for k in successors(i) if k >= 0 and not stop[k] and not seen[k])
        return seen

    # What follows the loop: from its exit, never through its FOR_ITER (an
    # outer loop comes back to it).
    first = number[offset >> 1]
    stop = bytearray(count)
    stop[first] = 1
    after = reach([at(int(loop.argval))], stop)
    after[first] = 1
    body = reach([first + 1], after)
    body[first] = 1
    ranges: List[Tuple[int, int]] = []
    for i in itertools.compress(range(count), body):
        o = offsets[i]
        end = offsets[i + 1] if i + 1 < count else o + 2
        if ranges and ranges[-1][1] == o:
            ranges[-1] = (ranges[-1][0], end)
        else:
            ranges.append((o, end))
    while len(ranges) > _MAX_LOOP_RANGES:  # merge the closest neighbours (errs toward "inside")
        gaps = [ranges[k + 1][0] - ranges[k][1] for k in range(len(ranges) - 1)]
        k = gaps.index(min(gaps))
        ranges[k:k + 2] = [(ranges[k][0], ranges[k + 1][1])]
    return tuple(ranges)
