"""From LLVM IR to a loadable kernel: LLVM's compile to PTX (compile.py), the PTX header and
directives (ptx_header.py), nvJitLink (link.py) and the register fitting after it
(register_fit.py). Imports nothing of the emitting layers (docs/codegen.md, "Layers")."""
