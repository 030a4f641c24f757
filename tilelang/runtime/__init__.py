"""Tile runtime stage."""
