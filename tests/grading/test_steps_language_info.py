"""KernelLanguageInfo: notebooks the tools generate carry the kernel's own language_info, forged ones
are replaced (tests/steps_common.py says how these tests are built)."""

from __future__ import annotations

import json

import nbformat
from ipykernel.ipkernel import IPythonKernel
from nbformat.v4 import new_notebook

from utils.grading.steps.language_info import KernelLanguageInfo, kernel_language_info, stamp
from steps_common import notebook


def test_a_generated_notebook_gets_the_kernels_full_language_info():
    nb = notebook(metadata={"language_info": {"name": "python"}, "kernelspec": {"name": "python3"}})
    nb, _ = KernelLanguageInfo()(nb, {})
    assert nb.metadata.language_info == IPythonKernel.language_info and set(nb.metadata.language_info) > {
        "name", "version", "mimetype", "codemirror_mode", "pygments_lexer", "file_extension"}
    assert nb.metadata.kernelspec == {"name": "python3"}


def test_a_forged_language_info_is_replaced_by_the_kernels():
    nb = notebook(metadata={"language_info": "<script>"})
    nb, _ = KernelLanguageInfo().preprocess(nb, {})
    assert nb.metadata.language_info == IPythonKernel.language_info


def test_each_notebook_gets_a_copy_of_the_kernels_language_info():
    info = kernel_language_info()
    info["codemirror_mode"]["version"] = 99                             # one notebook's edit
    assert kernel_language_info() == IPythonKernel.language_info
    assert IPythonKernel.language_info["codemirror_mode"]["version"] != 99


def test_stamp_leaves_checkpoints_alone(tmp_path):
    (tmp_path / ".ipynb_checkpoints").mkdir()
    for path in (tmp_path / "a.ipynb", tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb"):
        nbformat.write(new_notebook(), str(path))
    assert stamp(tmp_path) == [tmp_path / "a.ipynb"]
    checkpoint = json.loads((tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb").read_text())
    assert "language_info" not in checkpoint["metadata"]
