"""The release files agree with each other: extras, Python versions, license."""
from __future__ import annotations

import configparser
import re
import tomllib
from pathlib import Path
from typing import Set

ROOT = Path(__file__).resolve().parents[2]
USER_EXTRAS = ("embedded", "hiredis", "testing", "cron", "dashboard", "otel")


def setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def requirements(extra: str) -> Set[str]:
    lines = setup_cfg()["options.extras_require"][extra].splitlines()
    return {line.strip() for line in lines if line.strip() and not line.strip().startswith("#")}


def test_the_all_extra_is_every_user_extra_and_no_tool() -> None:
    union: Set[str] = set()
    for extra in USER_EXTRAS:
        union |= requirements(extra)
    assert requirements("all") == union
    assert "test" not in setup_cfg()["options.extras_require"]
    assert not requirements("dev") & union  # the project's tools stay apart


def test_the_classifiers_name_each_python_the_makefile_tests_and_no_other() -> None:
    metadata = setup_cfg()["metadata"]
    claimed = set(re.findall(r"Programming Language :: Python :: (3\.\d+)\b",
                             metadata["classifiers"]))
    makefile = (ROOT / "Makefile").read_text()
    tested = {"3.11"}  # the default python3, which runs the whole suite
    for name in ("NEWEST", "BETWEEN"):
        match = re.search(rf"^{name} := (.*)$", makefile, flags=re.MULTILINE)
        assert match, f"the Makefile sets no {name}"
        tested |= set(match.group(1).split())
    assert claimed == tested
    lowest = min(claimed, key=lambda version: tuple(map(int, version.split("."))))
    assert setup_cfg()["options"]["python_requires"] == f">={lowest}"


def test_license_file_and_metadata_agree() -> None:
    metadata = setup_cfg()["metadata"]
    text = (ROOT / "LICENSE").read_text()
    assert metadata["license"] == "MIT"
    assert text.startswith("MIT License") and "the minitask authors" in text
    assert "License :: OSI Approved :: MIT License" in metadata["classifiers"]


def test_pyproject_names_the_setuptools_build_backend() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["build-system"]["build-backend"] == "setuptools.build_meta"
    assert any(req.startswith("setuptools") for req in pyproject["build-system"]["requires"])


def test_changelog_has_an_unreleased_section_and_the_versioning_policy() -> None:
    text = (ROOT / "CHANGELOG.rst").read_text()
    headings = re.findall(r"^(.+)\n=+$", text, flags=re.MULTILINE)
    assert {"Unreleased", "Versioning policy"} <= set(headings)
    assert "written by a newer minitask" in text
