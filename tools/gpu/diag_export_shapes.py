"""One-off: where torch.export's recorded shapes differ from a real run, node by node."""
import sys
import torch
import torch.fx
sys.path.insert(0, ".")
from tests.models.zoo import ZOO

dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
zm = ZOO["recurrent"]()
model = zm.model.to(dev)
args = tuple(a.to(dev) for a in zm.inputs)
print("torch", torch.__version__)
for label, ep in [("export", torch.export.export(model, args))]:
    for stage, prog in [("as exported", ep), ("decomposed", ep.run_decompositions())]:
        gm = prog.module()
        print("==", label, stage)
        class Watch(torch.fx.Interpreter):
            def run_node(self, n):
                out = super().run_node(n)
                val = n.meta.get("val")
                if isinstance(out, torch.Tensor) and hasattr(val, "shape"):
                    if tuple(out.shape) != tuple(val.shape):
                        print("MISMATCH", n.op, n.target, "recorded", tuple(val.shape), "real", tuple(out.shape),
                              "args", [getattr(a, "name", a) for a in n.args][:4])
                return out
        Watch(gm).run(*args)
        for n in prog.graph.nodes:
            if n.op == "call_function" and any(k in str(n.target) for k in ("lstm", "rnn", "stack", "squeeze", "unsqueeze")):
                v = n.meta.get("val")
                shapes = [tuple(x.shape) for x in v] if isinstance(v, (tuple, list)) else tuple(getattr(v, "shape", ()))
                print(" ", n.name, n.target, shapes)
