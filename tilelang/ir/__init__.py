"""Tile ir stage."""
