"""The command line and `drafters up`: the composition root, the only layer that sees every other."""
