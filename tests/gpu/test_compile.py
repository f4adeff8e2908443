"""``prepare_for_inference(compile=True)`` on the device: on CUDA with ``mode="reduce-overhead"`` (CUDA graphs), one
graph for every S and both solvers (no recompile), no CUDA-graph skip, and the eager fast path's trajectories."""

import json

from ..conftest import run_python

COMPILE_CHECK = """
import copy, json, sys, torch
from torch._dynamo.utils import counters
from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.generation.inference import prepare_for_inference

device = torch.device(sys.argv[1])
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)
model = GazeFlowModel(GazeFlowConfig.tiny()).eval().to(device)
mode = "reduce-overhead" if device.type == "cuda" else None
eager = prepare_for_inference(copy.deepcopy(model))
compiled = prepare_for_inference(copy.deepcopy(model), compile=True, compile_mode=mode)
pixels = torch.randn(1, 12, 3, 32, 32, generator=torch.Generator().manual_seed(2)).to(device)  # 2 windows, batched


def run(network, steps, solver):
    return network.generate(pixel_values_videos=pixels, num_samples=4, num_steps=steps, solver=solver,
                            generator=torch.Generator().manual_seed(0)).trajectories


difference = 0.0
with torch._dynamo.config.patch(error_on_recompile=True):
    for solver in ("euler", "heun"):
        for steps in (1, 2, 5):
            difference = max(difference, (run(compiled, steps, solver) - run(eager, steps, solver)).abs().max().item())
    repeat = [run(compiled, 5, "heun") for _ in range(3)]
print(json.dumps({
    "mode": mode,
    "max_difference": difference,
    "repeat_identical": all(torch.equal(repeat[0], r) for r in repeat[1:]),
    "graphs": counters["stats"]["unique_graphs"],
    "cudagraph_skips": counters["inductor"]["cudagraph_skips"],
}))
"""


def test_compiled_sampler_is_one_graph_for_every_step_count_and_matches_eager(device):
    report = json.loads(run_python(COMPILE_CHECK, str(device)).strip().splitlines()[-1])
    assert report["graphs"] == 1, report  # Euler and Heun at S = 1, 2, 5: one graph (a recompile would have raised)
    assert report["cudagraph_skips"] == 0, report  # on CUDA: the graph really replays as a CUDA graph
    assert report["max_difference"] < 1e-4, report
    assert report["repeat_identical"], report  # replays read fresh inputs: outputs are not stale static buffers
