"""The gpuscope command line as a whole (_cli.py): argparse subcommands,
`--help` for each, an unknown command's error naming the commands, the
script's arguments after `gpuscope run script.py` (or `-m module`) passed
through untouched whatever they look like, compare's options defined once
for `compare` and `run --baseline`, and no import cycle between the CLI
modules."""

import ast
import importlib
import json
import os
import pathlib
import re
import subprocess
import sys

from gpuscope import _cli, _runner

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = pathlib.Path(_cli.__file__).resolve().parent
ECHO = "import json, sys\nprint('ARGV=' + json.dumps(sys.argv[1:]))\n"


def gpuscope(*args, cwd=HERE, timeout=180):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for var in ("GPUSCOPE_DISABLE", "GPUSCOPE_SIMULATE"):
        env.pop(var, None)
    return subprocess.run([sys.executable, "-m", "gpuscope", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def script_argv(stdout):
    lines = [line for line in stdout.splitlines() if line.startswith("ARGV=")]
    assert len(lines) == 1, stdout
    return json.loads(lines[0][len("ARGV="):])


def parse_run(argv):
    """`gpuscope run ARGV` through the CLI's own parser: (options, error)."""
    args, extras = _cli.build_parser().parse_known_args(["run", *argv])
    assert extras == []
    return _runner._options(args)


def subparsers():
    """{command: its parser} of the CLI's parser."""
    parser = _cli.build_parser()
    action, = (a for a in parser._actions if a.dest == "command")
    return action.choices


def run_parser():
    return subparsers()["run"]


def tricky_arguments():
    """Arguments a script may take that look like gpuscope's own: every
    option string of `gpuscope run` (with a value, with =value, cut short),
    the end-of-options marker, help flags, commands, negative numbers,
    empty and spaced strings."""
    names = [s for action in run_parser()._actions for s in action.option_strings]
    assert {"--out", "--baseline", "--max-regression", "--statistic", "--min-steps", "-m", "-h"} <= set(names)
    out = []
    for name in names:
        out += [name, f"{name}=1", name[:3]]
    return out + ["--", "-", "", " x", "-1", "-1e5", "--p", "--no", "run", "compare", "--help=x", "-mx"]


def test_script_arguments_that_look_like_ours_are_the_scripts():
    tricky = tricky_arguments()
    for tail in [[t] for t in tricky] + [tricky, tricky[::-1], ["--", *tricky], ["x", "--", "--out", "d"]]:
        o, error = parse_run(["--out", "d", "--no-html", "train.py", *tail])
        assert error is None and o.script == "train.py" and o.module is None and o.args == tail, (tail, error)
        assert o.out == "d" and not o.html and o.report
        o, error = parse_run(["--status", "0", "-m", "pkg.train", *tail])
        assert error is None and o.module == "pkg.train" and o.script is None and o.args == tail, (tail, error)
        assert o.status == 0.0


def test_the_end_of_options_marker_and_missing_targets():
    o, error = parse_run(["--", "train.py", "--out", "x"])
    assert error is None and o.script == "train.py" and o.args == ["--out", "x"] and o.out is None
    o, error = parse_run(["-m", "--", "pkg.train", "--", "a"])
    assert error is None and o.module == "pkg.train" and o.args == ["--", "a"]
    assert parse_run([]) == (None, "no script given")
    assert parse_run(["--no-html"]) == (None, "no script given")
    assert parse_run(["-m"]) == (None, "-m needs a module name")


def test_an_unmodified_script_gets_its_arguments_untouched(tmp_path):
    (tmp_path / "echo_argv.py").write_text(ECHO)
    (tmp_path / "echopkg").mkdir()
    (tmp_path / "echopkg" / "__init__.py").write_text("")
    (tmp_path / "echopkg" / "echo.py").write_text(ECHO)
    theirs = ["--out", "x", "--help", "-h", "-m", "y", "--baseline", "none.json", "--max-regression", "-1",
              "--status=0", "--p", "--", "--no-html", ""]
    ours = ["--no-html", "--no-report", "--status", "0"]
    p = gpuscope("run", "--out", tmp_path / "a", *ours, "echo_argv.py", *theirs, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert script_argv(p.stdout) == theirs
    assert (tmp_path / "a" / "run.json").exists() and not (tmp_path / "x").exists()
    p = gpuscope("run", "--out", tmp_path / "b", *ours, "-m", "echopkg.echo", *theirs, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert script_argv(p.stdout) == theirs
    assert (tmp_path / "b" / "run.json").exists()
    # "--" ends gpuscope's options: what follows is the script and its arguments.
    p = gpuscope("run", "--out", tmp_path / "c", *ours, "--", "echo_argv.py", "--out", "x", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert script_argv(p.stdout) == ["--out", "x"] and (tmp_path / "c" / "run.json").exists()


def test_bad_options_are_refused_before_the_script_runs(tmp_path):
    (tmp_path / "echo_argv.py").write_text(ECHO)
    for bad, needle in ((["--baseline", "b.json", "--max-regression", "-1"], "--max-regression must be a number"),
                        (["--baseline", "b.json", "--max-regression", "nan"], "--max-regression must be a number"),
                        (["--baseline", "b.json", "--max-regression", "lots"], "--max-regression"),
                        (["--min-steps", "1"], "--min-steps must be a whole number, 2 or more"),
                        (["--statistic", "p99"], "invalid choice"),
                        (["--warmup", "²"], "--warmup takes a whole number"),
                        (["--no-rep"], "unrecognized arguments: --no-rep"),  # whole option names only
                        (["--status", "--no-html"], "argument --status: expected one argument")):
        p = gpuscope("run", *bad, "echo_argv.py", cwd=tmp_path)
        assert p.returncode == 2, (bad, p.stdout, p.stderr)
        assert needle in p.stderr and p.stderr.startswith(("gpuscope run: ", "usage: gpuscope run")), (bad, p.stderr)
        assert "ARGV=" not in p.stdout and "Traceback" not in p.stderr, (bad, p.stdout, p.stderr)
    assert not any(tmp_path.glob("gpuscope-*"))  # nothing ran, nothing was written


def test_each_command_has_help(capsys):
    for name in _cli.COMMANDS:
        assert _cli.main([name, "--help"]) == 0
        out, err = capsys.readouterr()
        assert out.startswith(f"usage: gpuscope {name} ") and "exit status" in out and err == "", (name, out, err)
    assert _cli.main(["--help"]) == 0
    out, _ = capsys.readouterr()
    # Each command named with its help (on the next line for a long name).
    assert all(re.search(rf"^ +{name}\s+[A-Z]", out, re.M) for name in _cli.COMMANDS), out


def test_run_help_lists_every_option_and_runs_nothing(tmp_path):
    (tmp_path / "echo_argv.py").write_text(ECHO)
    p = gpuscope("run", "--help", "echo_argv.py", cwd=tmp_path)
    assert p.returncode == 0 and p.stderr == "" and "ARGV=" not in p.stdout
    assert p.stdout.startswith("usage: gpuscope run [options] (script.py | -m module) [args...]")
    for action in run_parser()._actions:
        for name in action.option_strings:
            assert re.search(rf"^ +(-h, )?{re.escape(name)}\b", p.stdout, re.M), name


def test_compare_options_are_defined_once(capsys):
    """compare's options are the same options on `gpuscope compare` and on
    `gpuscope run` (for --baseline): type, default, choices and help."""
    options = ("--max-regression", "--statistic", "--min-steps")

    def described(name):
        actions = subparsers()[name]._option_string_actions
        return [(a.dest, a.type, a.default, a.choices, a.metavar, a.help) for a in map(actions.get, options)]
    assert described("compare") == described("run")
    helps = {}
    for name in ("compare", "run"):
        assert _cli.main([name, "--help"]) == 0
        out = capsys.readouterr().out
        helps[name] = out[out.index("  --max-regression"):out.index("(default 30)")]
    assert helps["compare"] == helps["run"]


def test_unknown_commands_and_usage_errors_name_what_to_do():
    p = gpuscope("frobnicate")
    assert p.returncode == 2 and p.stdout == ""
    assert "gpuscope: unknown command 'frobnicate'; the commands are doctor, compare, run," in p.stderr
    assert "usage: gpuscope doctor" in p.stderr and "gpuscope run [options]" in p.stderr
    p = gpuscope("--json", "doctor")  # gpuscope has no options of its own but --help
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith("gpuscope: unknown option '--json'; the commands are doctor, compare, run,")
    p = gpuscope("compare", "a.json", "b.json", "--bogus")
    assert p.returncode == 2 and p.stderr.startswith("usage: gpuscope compare")
    assert "gpuscope compare: error: unrecognized arguments: --bogus" in p.stderr
    p = gpuscope()
    assert p.returncode == 2 and p.stderr.startswith("usage: gpuscope doctor")


def _package_imports(path):
    """The gpuscope modules a module imports, at top level or in a
    function: 'gpuscope' for the package itself."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                names = [node.module] if node.module else [a.name for a in node.names]
                found.update(f"gpuscope.{n}" for n in names)
            elif node.module and (node.module == "gpuscope" or node.module.startswith("gpuscope.")):
                found.add(node.module)
                if node.module == "gpuscope":
                    found.update(f"gpuscope.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "gpuscope")
    return found


def test_the_cli_modules_import_no_cycle():
    """`python -m gpuscope` runs __main__.py as __main__: a module that
    imported gpuscope.__main__ back would load a second copy of it. No
    module imports __main__, and the CLI's modules form no cycle."""
    modules = {f"gpuscope.{p.stem}": p for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    modules["gpuscope"] = PACKAGE / "__init__.py"
    graph = {name: _package_imports(path) & set(modules) for name, path in modules.items()}
    assert not [m for m, imports in graph.items() if "gpuscope.__main__" in imports]
    cli = ("gpuscope.__main__", "gpuscope._cli", "gpuscope._commands", "gpuscope._runner")

    def reaches(start, goal):
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                if nxt == goal:
                    return True
                seen.add(nxt)
                todo.append(nxt)
        return False
    assert not [m for m in cli if reaches(m, m)], graph


def test_the_console_script_entry_point_is_the_cli():
    text = (HERE.parent.parent / "pyproject.toml").read_text()
    module, func = re.search(r'^gpuscope = "([\w.]+):(\w+)"$', text, re.M).groups()
    assert getattr(importlib.import_module(module), func) is _cli.main
