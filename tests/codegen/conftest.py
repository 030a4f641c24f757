"""The helpers the code-generation tests share (gen_support, wgmma_support, test_launch_support)
sit here, beside the folders that mirror tilelang/codegen (emit/, lower/, lower/tensorcore/,
layouts/, scalar/, target/): this folder goes on the import path for the tests below it."""

from __future__ import annotations

import pathlib
import sys

HERE = str(pathlib.Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
