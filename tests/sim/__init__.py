"""Tests of ovman_sim."""
