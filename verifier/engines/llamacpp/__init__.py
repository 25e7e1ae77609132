"""llama.cpp as a second engine: install, GGUF, conversion, the server process, the engine."""
