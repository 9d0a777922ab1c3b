"""OVMAN navigation: occupancy grid, A*, collision-sweep blocking, executor."""
