"""framejit.cuda: the CUDA devices framejit sees (through the driver, dlopen'ed: no toolkit needed).

Tensors go there with ``framejit.tensor(x, device="cuda")`` or ``t.cuda()``; operations on them
run as PTX kernels on framejit's own stream per device, in order. Reading a tensor back
(``t.cpu()``, ``t.tolist()`` through ``cpu()``) waits for the kernels that write it;
``synchronize()`` waits for everything issued, for timing.
"""

from . import _C


def device_count():
    """How many CUDA devices the driver sees (0 without a usable driver)."""
    return _C._cuda_device_count()[0]


def is_available():
    """Whether framejit can run on a CUDA device here."""
    return device_count() > 0


def why_unavailable():
    """The driver's reason there is no device ("" when there is one)."""
    n, why = _C._cuda_device_count()
    return "" if n else (why or "the CUDA driver sees no device")


def get_device_name(device=0):
    return _C._cuda_device_name(_index(device))


def synchronize(device=0):
    """Waits until everything framejit issued on `device` has run."""
    _C._cuda_synchronize(_index(device))


def _index(device):
    if isinstance(device, int):
        return device
    text = str(device)
    if text == "cuda":
        return 0
    if text.startswith("cuda:"):
        return int(text[5:])
    raise ValueError(f"framejit.cuda: not a CUDA device: {device!r}")
