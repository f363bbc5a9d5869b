"""One module per experiment; each defines ``EXPERIMENT`` for the bench registry."""
