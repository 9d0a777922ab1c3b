"""OVMAN evaluation: task semantics, episode generation and certification, benchmark, statistics."""
