"""Training and evaluating the learned segmenter on embedded-world renders."""
