"""The version of Tile, apart from the package root so that modules inside the package (the
compiler's identity, the command lines, the language server) name it without importing the
root, whose imports run the other way."""

__version__ = "0.1.0"
