"""Packaging beyond what pyproject.toml can say: the top-level `grammar/` and `stdlib/` folders
ship inside the wheel as the package data folders `tilelang/grammar` and `tilelang/stdlib`."""

import os

from setuptools import find_packages, setup

DATA = {"tilelang.grammar": "grammar", "tilelang.stdlib": "stdlib"}


def data_packages() -> list[str]:
    """Every folder under grammar/ and stdlib/, named as the package it becomes."""
    names = []
    for package, folder in DATA.items():
        for here, dirs, _ in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            rel = os.path.relpath(here, folder)
            names.append(package if rel == "." else package + "." + rel.replace(os.sep, "."))
    return names


setup(packages=find_packages(include=["tilelang", "tilelang.*"]) + data_packages(),
      package_dir=dict(DATA))
