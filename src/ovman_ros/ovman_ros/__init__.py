"""Shared ROS 2 plumbing of the OVMAN nodes: the node base and its spin loop, the config as
parameters, the wire format of camera bundles, and message conversions."""
