"""Session(...)'s options come from one table (_gpuscope._SESSION_OPTIONS):
the keywords the C type parses, the Python signature and docstring, the stub,
C++ Options{}'s defaults and `gpuscope run`'s flags all agree with it."""

import ast
import inspect
import pathlib

import pytest

import gpuscope as gs
from gpuscope import _gpuscope, _runner

TABLE = _gpuscope._SESSION_OPTIONS
NAMES = [o["name"] for o in TABLE]


def test_the_table_is_the_signature_and_the_docstring():
    params = inspect.signature(gs.Session).parameters
    assert list(params) == NAMES
    for o in TABLE:
        p = params[o["name"]]
        assert p.default == o["default"] and type(p.default) is type(o["default"]), o["name"]
        assert p.annotation == o["type"], o["name"]
        assert f"``{o['name']}``:" in gs.Session.__doc__, o["name"]
        assert " ".join(o["doc"].split()[:6]) in " ".join(gs.Session.__doc__.split()), o["name"]
    assert params["window"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(params[n].kind is inspect.Parameter.KEYWORD_ONLY for n in NAMES[1:])


def test_every_keyword_in_the_table_is_accepted_and_read_back(clock):
    # The C type takes each keyword (its default given explicitly), and
    # _options gives back what it parsed.
    for o in TABLE:
        if o["name"] == "clock":
            continue
        s = gs.Session(clock=clock, **{o["name"]: o["default"]})
        assert s._options[o["name"]] == o["default"] or o["name"] == "stream", o["name"]
        s.close()
    with pytest.raises(TypeError, match="'bogus' is an invalid keyword argument"):
        _gpuscope._Session(bogus=1)
    with pytest.raises(TypeError):
        gs.Session(bogus=1)
    with pytest.raises(TypeError, match="at most 1 positional"):
        gs.Session(512, True)


def test_defaults_agree_with_cxx_options():
    # "options_default" is what C++ Options{} holds, read through the same
    # converter that reads a session's options back.
    for o in TABLE:
        assert o["default"] == o["options_default"], o["name"]
        assert type(o["default"]) is type(o["options_default"]), o["name"]
    s = gs.Session(enabled=False)
    assert s._options == {
        o["name"]: (False if o["name"] == "enabled" else o["default"]) for o in TABLE}
    s.close()


def test_ranges_are_the_ones_options_validate_checks(clock):
    for o in TABLE:
        if o["range"] is None or not isinstance(o["default"], int) or isinstance(o["default"], bool):
            continue
        lo, hi = o["range"]
        for bad in (lo - 1, hi + 1):
            with pytest.raises(ValueError):
                gs.Session(clock=clock, **{o["name"]: bad})
        if o["name"] not in ("queue_capacity", "window"):  # the large ones allocate
            for good in (lo, hi):
                gs.Session(clock=clock, **{o["name"]: good}).close()


def test_the_stub_declares_the_tables_signature():
    stub = pathlib.Path(gs.__file__).with_name("_gpuscope.pyi")
    tree = ast.parse(stub.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_Session")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    positional = [a.arg for a in init.args.args[1:]]
    keyword = [a.arg for a in init.args.kwonlyargs]
    assert positional == NAMES[:1] and keyword == NAMES[1:]
    defaults = [ast.literal_eval(d) for d in init.args.defaults + init.args.kw_defaults]
    assert defaults == [o["default"] for o in TABLE]
    # And its types: the table's (typing's spelling) and the stub's (PEP 604)
    # name the same alternatives.
    annotations = [a.annotation for a in init.args.args[1:] + init.args.kwonlyargs]
    for o, annotation in zip(TABLE, annotations):
        assert type_names(ast.parse(o["type"], mode="eval").body) == type_names(annotation), o["name"]


def type_names(node):
    """The alternatives a type annotation admits, as names: Optional[X] and
    X | None are {X, None}, Union[...] its members, typing.Any is Any."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return type_names(node.left) | type_names(node.right)
    if isinstance(node, ast.Subscript):
        outer = ast.unparse(node.value).removeprefix("typing.")
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        members = frozenset().union(*(type_names(n) for n in inner))
        if outer == "Optional":
            return members | {"None"}
        if outer == "Union":
            return members
        return frozenset({f"{outer}[{', '.join(sorted(members))}]"})
    if isinstance(node, ast.Constant) and node.value is None:
        return frozenset({"None"})
    return frozenset({ast.unparse(node).removeprefix("typing.")})


def test_rank_options_round_trip_through_cxx(clock):
    s = gs.Session(clock=clock)
    assert (s._options["rank_interval"], s._options["rank_timeout_s"]) == (30.0, None)
    s.close()
    s = gs.Session(clock=clock, rank_interval=None, rank_timeout_s=2.5)
    assert (s._options["rank_interval"], s._options["rank_timeout_s"]) == (None, 2.5)
    s.close()
    s = gs.Session(clock=clock, rank_interval=2)
    assert s._options["rank_interval"] == 2.0
    s.close()
    assert not hasattr(gs._session, "_RANK_OPTIONS")
    for kw, value, message in (
            ("rank_interval", 0.05, "rank_interval=0.05: use a number of seconds, at least 0.1, "
                                    "or None to exchange only in sync_ranks()"),
            ("rank_interval", 0, "rank_interval=0: use a number of seconds, at least 0.1"),
            ("rank_interval", "x", "rank_interval='x': use a number of seconds"),
            ("rank_interval", float("inf"), "rank_interval=inf: "),
            ("rank_interval", True, "rank_interval=True: "),
            ("rank_timeout_s", 0, "rank_timeout_s=0: use a number of seconds above 0"),
            ("rank_timeout_s", -1.5, "rank_timeout_s=-1.5: use a number of seconds above 0"),
            ("rank_timeout_s", float("nan"), "rank_timeout_s=nan: ")):
        with pytest.raises(ValueError) as e:
            gs.Session(clock=clock, **{kw: value})
        assert str(e.value).startswith(message), (kw, value, str(e.value))


def test_run_flags_come_from_the_table(capsys):
    from gpuscope import _cli

    flagged = [o["name"] for o in TABLE if o["flag"]]
    assert flagged == ["warmup", "stall_after", "flops_per_step", "peak_flops", "peak_precision", "run_id"]
    assert [o["name"] for o in _runner.SESSION_FLAGS] == flagged
    assert _cli.main(["run", "--help"]) == 0
    out, _ = capsys.readouterr()
    for name in flagged:
        assert "--" + name.replace("_", "-") in out, name
    assert "bf16, fp16, tf32, fp32, fp8 (default bf16)" in " ".join(out.split())
    args = _cli.build_parser().parse_args(["run", "--warmup", "3", "--peak-precision", "fp16", "x.py"])
    o, error = _runner._options(args)
    assert error is None and o.session_options == {"warmup": 3, "peak_precision": "fp16"}
    o, error = _runner._options(_cli.build_parser().parse_args(["run", "--warmup", "2000000", "x.py"]))
    assert o is None and error.startswith("--warmup takes a whole number of steps (0 to 1048576)")
    o, error = _runner._options(_cli.build_parser().parse_args(["run", "--stall-after", "90", "x.py"]))
    assert error is None and o.session_options == {"stall_after": 90.0}
    for bad in ("0", "-1", "inf", "soon"):
        o, error = _runner._options(_cli.build_parser().parse_args(["run", "--stall-after", bad, "x.py"]))
        assert o is None and error.startswith("--stall-after takes a number of seconds (above 0)"), bad
