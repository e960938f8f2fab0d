#!/usr/bin/env python3
"""Fails on a function in lib/ longer than LIMIT lines without a reason.

A function's length runs from the first line of its signature to its closing
brace. One longer than LIMIT (80) lines says why in a comment that begins
with "Long:" among the comment lines right above its signature, e.g.

  // Long: one pass over the step's records, every measure updated in the
  // same loop so that each record is read once.
  ActivityStepResult AnalyzeActivityStep(const ActivityStepInput& in) {

Functions are found by their braces: a block opened at namespace or class
scope whose head ends in a parameter list (and whatever may follow it:
const, noexcept, override, an initializer list). Lambdas and blocks inside
functions count toward the function they are in.

Usage: check_functions.py [REPO_ROOT] [--limit N]; exit status 1 lists each.
"""

import pathlib
import re
import sys

LIMIT = 80
CONTROL = re.compile(r"^\s*(?:if|for|while|switch|catch|do|else|try)\b")
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
PREPROCESSOR = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.MULTILINE)
STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'')


def blank(text: str) -> str:
    """Comments, literals and preprocessor lines replaced by spaces (offsets
    and lines kept); a preprocessor line ends a statement."""
    keep = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731
    text = COMMENT.sub(keep, STRING.sub(keep, text))
    return PREPROCESSOR.sub(lambda m: ";" + keep(m)[1:], text)


def functions(text: str):
    """(first line, last line, head) of each function defined in `text`."""
    code = blank(text)
    out = []
    stack = []  # (kind, first line of a function)
    head_start = 0  # offset where the current statement's head begins
    for i, c in enumerate(code):
        if c in ";":
            head_start = i + 1
        elif c == "{":
            head = code[head_start:i]
            flat = " ".join(head.split())
            scope = stack[-1][0] if stack else "namespace"
            kind = "block"
            if scope in ("namespace", "class"):
                if re.match(r"^(?:inline\s+)?namespace\b", flat) or flat.startswith('extern "C"') or \
                        flat == "extern":
                    kind = "namespace"
                elif re.search(r"\b(?:class|struct|union)\b[^()]*$", flat):
                    kind = "class"
                elif re.search(r"\benum\b", flat) or "=" in flat.split("(")[0]:
                    kind = "block"
                elif ")" in flat and not CONTROL.match(flat):
                    kind = "function"
            first = code.count("\n", 0, head_start + len(head) - len(head.lstrip())) + 1
            stack.append((kind, first))
            head_start = i + 1
        elif c == "}":
            if stack:
                kind, first = stack.pop()
                if kind == "function":
                    last = code.count("\n", 0, i) + 1
                    out.append((first, last))
            head_start = i + 1
    lines = text.split("\n")
    return [(a, b, lines[a - 1].strip()) for a, b in out]


def reason_above(lines, first: int) -> bool:
    """Whether the comment block right above line `first` has a "Long:" line."""
    i = first - 2
    while i >= 0 and lines[i].strip().startswith("//"):
        if lines[i].strip().startswith("// Long:"):
            return True
        i -= 1
    return False


def violations(root: pathlib.Path, limit: int = LIMIT):
    out = []
    for path in sorted(list((root / "lib").rglob("*.cc")) + list((root / "lib").rglob("*.h"))):
        text = path.read_text()
        lines = text.split("\n")
        for first, last, head in functions(text):
            n = last - first + 1
            if n > limit and not reason_above(lines, first):
                out.append(f"{path.relative_to(root)}:{first}: {n} lines ({head[:60]}): split it, or "
                           f"say why not in a '// Long:' comment above it")
    return out


def main() -> int:
    args = sys.argv[1:]
    limit = LIMIT
    if "--limit" in args:
        i = args.index("--limit")
        limit = int(args[i + 1])
        del args[i:i + 2]
    root = pathlib.Path(args[0] if args else pathlib.Path(__file__).parent.parent).resolve()
    bad = violations(root, limit)
    for line in bad:
        print(line)
    if bad:
        print(f"check_functions: {len(bad)} function(s) over {limit} lines without a reason")
        return 1
    print(f"check_functions: every function in lib/ is at most {limit} lines or says why")
    return 0


if __name__ == "__main__":
    sys.exit(main())
