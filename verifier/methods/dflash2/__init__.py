"""DFlash 2 drafters (`DFlash2DraftModel`): z-lab's DFlash backbone with a dynamic convolution around every
attention and MLP block and a candidate selector that picks the drafted path (see `model.py`)."""
