"""Distributed layouts: which thread holds which element of a tile."""
