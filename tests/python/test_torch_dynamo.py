"""framejit as a torch.compile backend (torch >= 2; framejit/_dynamo.py): Dynamo's FX graph runs
through framejit, results as eager torch's."""

import pytest

torch = pytest.importorskip("torch")
if int(torch.__version__.split(".")[0]) < 2:
    pytest.skip("torch.compile needs torch >= 2", allow_module_level=True)

import framejit  # noqa: E402
import framejit._dynamo  # noqa: E402

framejit._dynamo.register()
nn = torch.nn


@pytest.mark.parametrize("backend", ["framejit", framejit.dynamo_backend])
def test_torch_compile_with_the_framejit_backend(backend):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(approximate="tanh"), nn.LayerNorm(16), nn.Linear(16, 4)).eval()
    x = torch.randn(5, 8)
    framejit.reset()
    torch._dynamo.reset()
    with torch.no_grad():
        want = m(x)
        cm = torch.compile(m, backend=backend)
        for _ in range(2):
            torch.testing.assert_close(cm(x), want, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(cm(torch.randn(3, 8)).shape, torch.Size([3, 4]))
    assert framejit.stats()["captured"] >= 1
