"""Tile sema stage."""
