"""scripts/check_layers.py on planted cases: a definition in the wrong
layer, and a public header that uses a higher layer's, are each reported;
the repository as it is passes."""

import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_layers.py"


def run(root):
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True)


def copy_tree(tmp_path):
    for part in ("include", "lib"):
        shutil.copytree(ROOT / part, tmp_path / part)
    return tmp_path


def test_the_repository_follows_its_layering():
    result = run(ROOT)
    assert result.returncode == 0, result.stdout
    assert "every include and definition follows the layering" in result.stdout


def test_a_member_of_a_core_type_defined_in_export_is_reported(tmp_path):
    root = copy_tree(tmp_path)
    (root / "lib/export/planted.cc").write_text(
        '#include "gpuscope/summary.h"\n\n'
        "namespace gpuscope {\n\n"
        "const PhaseStats* Summary::FindPhase(std::string_view name) const {\n"
        "  return nullptr;\n"
        "}\n\n"
        "}  // namespace gpuscope\n")
    result = run(root)
    assert result.returncode == 1
    assert ("lib/export/planted.cc:5: defines Summary::FindPhase, which gpuscope/summary.h "
            "declares: that header is the core layer's, so define it under lib/core/") in result.stdout


def test_a_session_method_defined_in_export_is_reported(tmp_path):
    # What Session::TraceJson() was: the facade's method, defined beside the
    # encoder so that it could read the session's internals.
    root = copy_tree(tmp_path)
    (root / "lib/export/planted.cc").write_text(
        '#include "gpuscope/session.h"\n\n'
        "namespace gpuscope {\n\n"
        "void Session::Flush() {}\n\n"
        "}  // namespace gpuscope\n")
    result = run(root)
    assert result.returncode == 1
    assert "lib/export/planted.cc:5: defines Session::Flush, which gpuscope/session.h" in result.stdout


def test_a_free_function_of_a_public_header_defined_in_a_higher_layer_is_reported(tmp_path):
    root = copy_tree(tmp_path)
    core = root / "lib/core/summary.cc"
    text = core.read_text()
    start = text.index("std::string_view SourceName(Source source) {")
    end = text.index("\n}\n", start) + 3
    core.write_text(text[:start] + text[end:])
    (root / "lib/analysis/planted.cc").write_text(
        '#include "gpuscope/summary.h"\n\n'
        "namespace gpuscope {\n\n"
        + text[start:end] +
        "\n}  // namespace gpuscope\n")
    result = run(root)
    assert result.returncode == 1
    assert "lib/analysis/planted.cc:5: defines SourceName, which gpuscope/summary.h" in result.stdout


def test_internal_and_file_local_functions_of_the_same_name_are_not_public(tmp_path):
    root = copy_tree(tmp_path)
    (root / "lib/export/planted.cc").write_text(
        "namespace gpuscope {\n"
        "namespace {\n\n"
        "int SourceName(int x) {\n  return x;\n}\n\n"
        "}  // namespace\n\n"
        "namespace internal {\n\n"
        "int FormatReport(int x) {\n  return x;\n}\n\n"
        "}  // namespace internal\n"
        "}  // namespace gpuscope\n")
    result = run(root)
    assert result.returncode == 0, result.stdout


def test_a_public_header_using_a_higher_layers_header_is_reported(tmp_path):
    root = copy_tree(tmp_path)
    summary = root / "include/gpuscope/summary.h"
    summary.write_text(summary.read_text().replace(
        "#define GPUSCOPE_SUMMARY_H_\n",
        '#define GPUSCOPE_SUMMARY_H_\n#include "gpuscope/diagnose.h"\n', 1))
    result = run(root)
    assert result.returncode == 1
    assert ('include/gpuscope/summary.h: includes "gpuscope/diagnose.h": the core layer\'s header '
            "may not use the analysis layer's") in result.stdout


def test_a_public_header_without_a_layer_is_reported(tmp_path):
    root = copy_tree(tmp_path)
    (root / "include/gpuscope/new_thing.h").write_text("#pragma once\n")
    result = run(root)
    assert result.returncode == 1
    assert "include/gpuscope/new_thing.h: a public header with no layer" in result.stdout
