"""``import torch`` as the CPU stand-in of tests/fake_torch.py, for running gpu/check.sh whole on a machine without
a GPU: put this folder and tests/ first on PYTHONPATH. One stand-in runtime serves the whole process, as one device
does. The sanitizer here is a mode that sees nothing: the stand-in runs no real kernels for PyTorch's sanitizer to
watch, so its lines in a replay report say nothing about the sanitizer."""

import sys
import types

import fake_torch

_stand_in = fake_torch.new()

__version__ = _stand_in.__version__
version = types.SimpleNamespace(cuda="stand-in")
int64 = _stand_in.int64
zeros = _stand_in.zeros

cuda = types.ModuleType("torch.cuda")
cuda.__dict__.update(vars(_stand_in.cuda))


class CUDASanitizerErrors(Exception):
    errors: tuple = ()


class CUDASanitizerDispatchMode:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_sanitizer = types.ModuleType("torch.cuda._sanitizer")
_sanitizer.gpu_trace = types.SimpleNamespace()
_sanitizer.CUDASanitizerErrors = CUDASanitizerErrors
_sanitizer.CUDASanitizerDispatchMode = CUDASanitizerDispatchMode
cuda._sanitizer = _sanitizer
sys.modules["torch.cuda"] = cuda
sys.modules["torch.cuda._sanitizer"] = _sanitizer
