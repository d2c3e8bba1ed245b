"""_dynamo.py — framejit as a torch.compile backend (torch >= 2): `torch.compile(model,
backend="framejit")`, or `backend=framejit.dynamo_backend`.

Dynamo hands a backend an FX GraphModule in torch IR: its generated `forward` is plain Python over
torch functions, Tensor methods and operators. framejit compiles that forward like any function:
its tracer turns the calls into framejit's Graph IR through the torch op table, and what it cannot
lower runs as the GraphModule's own calls (a partial graph, with the reason in framejit.explain),
never as a failure of the whole graph.
"""


def dynamo_backend(gm, example_inputs):
    """The backend: framejit's compile of the GraphModule's forward."""
    import framejit

    del example_inputs  # framejit guards on the inputs it sees at each call

    def run(*args):
        return gm(*args)  # a module call: its forward is inlined (Note [Torch modules])

    return framejit.compile(run)


def register():
    """Makes "framejit" a backend name for torch.compile; once, when torch >= 2 is imported."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or int(torch.__version__.split(".")[0]) < 2:
        return False
    from torch._dynamo import list_backends, register_backend

    if "framejit" not in list_backends(exclude_tags=()):
        register_backend(name="framejit")(dynamo_backend)
    return True
