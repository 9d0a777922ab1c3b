"""OVMAN simulation layer: worlds (embedded procedural homes, AI2-THOR adapter), tours, changes, recordings."""
