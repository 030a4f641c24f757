"""Tile codegen stage."""
