"""Engines that run a pair for the harness: PyTorch (pytorch.py) and llama.cpp (llamacpp/)."""
