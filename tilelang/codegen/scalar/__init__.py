"""Scalar semantics of every elementwise op: the ScalarEmitter (`emitter`) and its math, casts and constants."""
