"""OVMAN per-visit 3D instance mapping from RGB-D, instance segments and pose."""
