"""The libraries' part of the reference's cache key is the environment's, not the process's path."""

from __future__ import annotations

import sys

from utils.grading import fingerprint


def _fake_dist(folder, name: str, version: str, kind: str = "dist-info"):
    info = folder / f"{name.replace('-', '_')}-{version}.{kind}"
    info.mkdir(parents=True)
    (info / ("METADATA" if kind == "dist-info" else "PKG-INFO")).write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_the_same_libraries_whatever_else_the_path_holds(tmp_path, monkeypatch):
    """What pytest-xdist's processes have and a grading worker has not: the checkout on the path
    (twice, with its *.egg-info) and setuptools' vendored packages. Against the key read over all of
    sys.path, those processes named the reference differently and each work folder ran it again."""
    site = tmp_path / "env" / "lib" / "site-packages"
    _fake_dist(site, "numpy", "2.0.0")
    _fake_dist(site, "prefill-decode-course", "0.1.0")
    checkout, vendored = tmp_path / "checkout", tmp_path / "setuptools" / "_vendor"
    _fake_dist(checkout, "prefill-decode-course", "0.1.0", kind="egg-info")
    _fake_dist(vendored, "zipp", "3.0.0")

    def versions(path):
        monkeypatch.setattr(sys, "path", [str(p) for p in path])
        fingerprint.library_versions.cache_clear()
        try:
            return fingerprint.library_versions()
        finally:
            fingerprint.library_versions.cache_clear()

    plain = versions([site])
    assert plain.splitlines()[1:] == ["numpy==2.0.0", "prefill-decode-course==0.1.0"]
    assert versions([checkout, site, checkout, site, vendored]) == plain
    # a library that is really there counts: one more folder of site-packages on the path
    other = tmp_path / "user" / "site-packages"
    _fake_dist(other, "rich", "13.0.0")
    assert "rich==13.0.0" in versions([site, other]).splitlines()
