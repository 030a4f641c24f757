"""Tile: a block/tile GPU language compiled to PTX and cubin.

The public Python API lives here; the compiler stages live in subpackages
(frontend → sema → ir → codegen → runtime), with the emulator and the reference
interpreter as back ends.
"""

__version__ = "0.1.0"
