"""``--device`` resolution (``commands.cli.resolve_device``): processes share the GPUs a machine has, and a device
it does not have is a one-line error. CUDA is faked through ``torch.cuda``'s two queries (the test machine has none)."""

import pytest
import torch

from transformers_gazeflow.commands.cli import resolve_device


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


@pytest.mark.parametrize("name", [None, "cpu"])
def test_no_device_or_cpu_is_the_cpu(name):
    assert resolve_device(name, local_rank=3) == "cpu"


@pytest.mark.parametrize(("local_rank", "expected"), [(0, "cuda:0"), (1, "cuda:1"), (2, "cuda:0"), (5, "cuda:1")])
def test_cuda_under_a_launcher_takes_the_process_gpu_and_more_processes_than_gpus_share_them(
    two_gpus, local_rank, expected
):
    assert resolve_device("cuda", local_rank=local_rank) == expected


def test_a_numbered_gpu_is_kept_whatever_the_process(two_gpus):
    assert resolve_device("cuda:1", local_rank=0) == "cuda:1"


def test_a_gpu_the_machine_lacks_is_one_line_naming_the_ones_it_has(two_gpus):
    with pytest.raises(ValueError, match=r"^--device cuda:2: this machine has 2 CUDA device\(s\), cuda:0 to cuda:1$"):
        resolve_device("cuda:2")


def test_cuda_without_a_gpu_says_why_and_what_to_use(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(
        ValueError, match=r"^--device cuda: this torch \(.*\) was built without CUDA; use --device cpu$"
    ):
        resolve_device("cuda")
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    with pytest.raises(ValueError, match=r"no CUDA GPU is visible \(driver, CUDA_VISIBLE_DEVICES\); use --device cpu$"):
        resolve_device("cuda", local_rank=1)
