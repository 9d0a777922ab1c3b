"""OVMAN's shared vocabulary: typed values, frame conversions and the typed config. No ROS imports."""
