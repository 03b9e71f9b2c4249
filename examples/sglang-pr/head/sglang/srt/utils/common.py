import torch


def is_cuda():
    return torch.cuda.is_available() and torch.version.cuda is not None


def is_hip():
    return torch.version.hip is not None


def is_xpu():
    return hasattr(torch, "xpu") and torch.xpu.is_available()
