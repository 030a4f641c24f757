"""Ahead-of-time export: a module's kernels as plain C99 that a C or C++ host links without
Python (`tilec --emit c FILE.tile -o NAME.c`, docs/cli.md "C export", docs/abi.md).

- `export.py` compiles the variants every kernel is shipped in and collects what the C text
  needs (cubins, launch artifacts, the parameter layout);
- `c_text.py` writes `NAME.h` and `NAME.c` from that, and nothing else.
"""
