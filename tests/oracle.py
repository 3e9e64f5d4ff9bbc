"""An independent float64 oracle for the three directions, from torch's own conv2d and autograd.

Used by the tests only: the project's references must agree with it.
"""
import torch
import torch.nn.functional as F


def _nchw(t, n, ch, h, w):
    return t.contiguous().reshape(n, ch, h, w).double()


def torch_conv(p, tensors):
    """The written tensor of problem `p` in logical order, float64, computed by torch."""
    g = p.g
    pad = (p.pad_w_l, p.pad_w_r, p.pad_h_l, p.pad_h_r)
    kw = dict(stride=(p.stride_h, p.stride_w), dilation=(p.dil_h, p.dil_w), groups=g)
    hp, wp = p.hi + p.pad_h_l + p.pad_h_r, p.wi + p.pad_w_l + p.pad_w_r
    if p.direction.name == "fwd":
        x = F.pad(_nchw(tensors["input"], p.n, g * p.c, p.hi, p.wi), pad)
        w = tensors["filter"].contiguous().reshape(g * p.k, p.c, p.y, p.x).double()
        return F.conv2d(x, w, **kw).reshape(p.n, g, p.k, p.ho, p.wo)
    dy = _nchw(tensors["output"], p.n, g * p.k, p.ho, p.wo)
    if p.direction.name == "bwd_data":
        x = torch.zeros(p.n, g * p.c, hp, wp, dtype=torch.float64, requires_grad=True)
        w = tensors["filter"].contiguous().reshape(g * p.k, p.c, p.y, p.x).double()
        F.conv2d(x, w, **kw).backward(dy)
        dx = x.grad[:, :, p.pad_h_l:p.pad_h_l + p.hi, p.pad_w_l:p.pad_w_l + p.wi]
        return dx.reshape(p.n, g, p.c, p.hi, p.wi)
    x = F.pad(_nchw(tensors["input"], p.n, g * p.c, p.hi, p.wi), pad)
    w = torch.zeros(g * p.k, p.c, p.y, p.x, dtype=torch.float64, requires_grad=True)
    F.conv2d(x, w, **kw).backward(dy)
    return w.grad.reshape(g, p.k, p.c, p.y, p.x)
