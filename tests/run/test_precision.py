"""bf16 autocast as a recorded setting: forward and backward in bfloat16, channels_last for convolutional models,
and everything the methods see (gradients in the standard layout), the weights and the wire in fp32."""
from __future__ import annotations

import torch

from commbench.config import identity_of, resolve
from commbench.methods.comm import SimCommunicator
from commbench.run.precision import autocast_args, compute_context, strict_fp32
from commbench.run.train import Trainer


def trainer(precision: str) -> Trainer:
    cfg = resolve({"task": "resnet20-cifar10", "dataset": "synthetic", "method": "baseline", "backend": "sim",
                   "workers": 2, "global_batch": 8, "steps": 2, "threads": 1, "precision": precision})
    return Trainer(cfg, SimCommunicator(2), checkpoints=None)


def test_bf16_autocast_computes_in_bfloat16_and_hands_the_methods_fp32_gradients_in_the_standard_layout():
    t = trainer("bf16-autocast")
    conv = next(m for m in t.models[0].modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last) and conv.weight.dtype == torch.float32
    seen = []
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        handle = conv.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
        grads = t.local_gradients()
        handle.remove()
    assert seen and set(seen) == {torch.bfloat16}  # the convolution ran in bfloat16
    for g in grads:
        assert all(grad.dtype == torch.float32 and grad.is_contiguous() for grad in g.values())  # what codecs read
    # the sim's workers share one set of parameters: .grad holds the last worker's backward, element by element,
    # and the earlier worker's gradients are its own (kept, not overwritten by the next backward)
    shared = t.workers[-1].params
    assert all(torch.equal(grad, shared[name].grad) for name, grad in grads[-1].items())
    assert any(not torch.equal(grad, grads[-1][name]) for name, grad in grads[0].items())
    assert any(not p.grad.is_contiguous() for p in t.workers[0].params.values())  # stored channels_last


def test_fp32_is_untouched_and_out_of_the_run_id():
    t = trainer("fp32")
    assert all(p.is_contiguous() for p in t.models[0].parameters()) and not t.channels_last
    fp32 = resolve({"task": "resnet20-cifar10", "method": "baseline"})
    bf16 = resolve({"task": "resnet20-cifar10", "method": "baseline", "precision": "bf16-autocast"})
    assert "precision" not in identity_of(fp32.to_dict())
    assert bf16.run_id != fp32.run_id and bf16.precision == "bf16-autocast"


def test_the_autocast_a_device_gets():
    """CUDA gets the same switch with CUDA's autocast (selected here; untested on a GPU)."""
    assert autocast_args("cuda", "bf16-autocast") == {"device_type": "cuda", "dtype": torch.bfloat16}
    assert autocast_args("cpu", "bf16-autocast") == {"device_type": "cpu", "dtype": torch.bfloat16}
    assert autocast_args("cuda", "fp32") is None
    with compute_context(torch.device("cpu"), "bf16-autocast"):
        assert torch.is_autocast_enabled("cpu")
    with compute_context(torch.device("cpu"), "fp32"):
        assert not torch.is_autocast_enabled("cpu")


def test_fp32_on_a_gpu_turns_tf32_off_and_leaves_the_cpu_and_autocast_alone():
    cudnn, cublas = torch.backends.cudnn, torch.backends.cuda.matmul  # process-wide switches: restored below
    before = cudnn.allow_tf32, cublas.allow_tf32
    try:
        cudnn.allow_tf32 = cublas.allow_tf32 = True
        strict_fp32(torch.device("cpu"), "fp32")
        strict_fp32(torch.device("cuda", 0), "bf16-autocast")
        assert cudnn.allow_tf32 and cublas.allow_tf32
        strict_fp32(torch.device("cuda", 0), "fp32")
        assert not cudnn.allow_tf32 and not cublas.allow_tf32
    finally:
        cudnn.allow_tf32, cublas.allow_tf32 = before


def test_the_paper_tables_name_the_precision_as_a_departure():
    from commbench.analysis.papers.conditions import condition_markers
    from commbench.analysis.papers.reference import load_references

    [ref] = [r for r in load_references("ssdsgd") if r.source == "Table 2" and r.method == "baseline"
             and r.task == "resnet20-cifar10"]
    cfg = resolve({"task": "resnet20-cifar10", "method": "baseline", "precision": "bf16-autocast"})
    assert "precision: bf16-autocast for the paper's fp32" in condition_markers(cfg, ref)
