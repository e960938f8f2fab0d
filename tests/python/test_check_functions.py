"""scripts/check_functions.py on planted cases: a function over the limit
without a reason is reported, one with a "// Long:" reason is not, and
lambdas, blocks and classes are not mistaken for functions."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_functions.py"


def run(root, *args):
    return subprocess.run([sys.executable, str(SCRIPT), str(root), *args], capture_output=True,
                          text=True)


def plant(tmp_path, text):
    (tmp_path / "lib" / "core").mkdir(parents=True)
    (tmp_path / "lib" / "core" / "planted.cc").write_text(text)
    return tmp_path


def body(n):
    return "".join(f"  x += {i};\n" for i in range(n))


def test_the_repository_passes():
    result = run(ROOT)
    assert result.returncode == 0, result.stdout


def test_a_long_function_without_a_reason_is_reported(tmp_path):
    root = plant(tmp_path, '#include "core/planted.h"\n\nnamespace gpuscope::internal {\n\n'
                 "// Adds.\nint Sum(int x) {\n" + body(85) + "  return x;\n}\n\n"
                 "}  // namespace gpuscope::internal\n")
    result = run(root)
    assert result.returncode == 1
    assert "lib/core/planted.cc:6: 88 lines (int Sum(int x) {)" in result.stdout


def test_a_reason_above_it_is_enough(tmp_path):
    root = plant(tmp_path, "namespace gpuscope::internal {\n\n"
                 "// Adds, one term a line.\n// Long: a table of terms, read top to bottom.\n"
                 "int Sum(int x) {\n" + body(85) + "  return x;\n}\n\n"
                 "}  // namespace gpuscope::internal\n")
    assert run(root).returncode == 0


def test_the_limit_counts_signature_to_closing_brace(tmp_path):
    root = plant(tmp_path, "namespace gpuscope::internal {\n\nint Sum(int x,\n        int y) {\n"
                 + body(76) + "  return x;\n}\n\n}  // namespace gpuscope::internal\n")
    assert run(root).returncode == 0  # 80 lines: at the limit
    assert run(root, "--limit", "79").returncode == 1


def test_lambdas_blocks_and_members_count_toward_their_function(tmp_path):
    # A class whose member is short, a function whose lambda and loop are
    # long: the function is reported once, the class and the lambda not.
    text = ("namespace gpuscope::internal {\n\nclass Counter {\n public:\n"
            "  int Add(int x) {\n    return x + 1;\n  }\n};\n\n"
            "int Long(int x) {\n  const auto add = [&](int y) {\n" + body(40) +
            "    return y;\n  };\n  for (int i = 0; i < 3; ++i) {\n" + body(40) +
            "  }\n  return add(x);\n}\n\n}  // namespace gpuscope::internal\n")
    result = run(plant(tmp_path, text))
    assert result.returncode == 1
    assert result.stdout.count("lib/core/planted.cc") == 1 and "(int Long(int x) {)" in result.stdout
