"""The samples' models (samples/python: the demo MLP, the linear model) are importable by the tests."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "samples", "python"))
