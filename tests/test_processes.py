"""training.processes.leave_process_group: every process tears its group down only after the others are done."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from transformers_gazeflow.training import processes
from transformers_gazeflow.training.processes import WORKER_DRAIN_SECONDS, leave_process_group


class RecordingAccelerator:
    def __init__(self, num_processes: int, calls: list):
        self.num_processes, self.calls = num_processes, calls

    def wait_for_everyone(self):
        self.calls.append("wait_for_everyone")

    def end_training(self):
        self.calls.append("end_training")


@pytest.mark.parametrize(
    "num_processes, wait, expected",
    [
        (2, True, ["wait_for_everyone", ("sleep", WORKER_DRAIN_SECONDS), "end_training"]),
        (2, False, [("sleep", WORKER_DRAIN_SECONDS), "end_training"]),
        (1, True, ["end_training"]),
    ],
)
def test_order_of_the_teardown(monkeypatch, num_processes, wait, expected):
    calls = []
    monkeypatch.setattr(processes.time, "sleep", lambda seconds: calls.append(("sleep", seconds)))
    leave_process_group(RecordingAccelerator(num_processes, calls), wait_for_everyone=wait)
    assert calls == expected


SCRIPT = textwrap.dedent("""
    import json, sys, time, torch
    from accelerate import Accelerator
    from transformers_gazeflow.training.processes import leave_process_group
    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(torch.nn.Linear(3, 1))  # a DDP wrapper: its reducer holds the group to the end
    loss = model(torch.ones(2, 3)).sum()
    accelerator.backward(loss)
    gathered = accelerator.gather(torch.tensor([float(accelerator.process_index)]))
    saved = None
    if accelerator.is_main_process:
        time.sleep(1.0)  # the main process saves while the other one is done
        saved = time.time()
    leave_process_group(accelerator)
    with open(f"{sys.argv[1]}/rank{accelerator.process_index}.json", "w") as record:
        json.dump({"rank": accelerator.process_index, "saved": saved, "left": time.time(),
                   "gathered": gathered.tolist()}, record)
""")


def test_two_processes_leave_together(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        "29541",
        str(script),
        str(tmp_path),
    ]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    records = {rank: json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)}
    assert records[0]["gathered"] == records[1]["gathered"] == [0.0, 1.0]
    # the second process left only after the main process had finished saving
    assert records[1]["left"] >= records[0]["saved"]
