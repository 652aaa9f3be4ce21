"""The zoo's quantizers and sign methods (methods/zoo/: qsgd, natural, u8bit, fp8, onebit, signsgd, signum,
efsignsgd): bytes by hand, the paper's math on constructed cases, unbiasedness and variance bounds measured by the
contract report's own checks, error feedback's identity, Signum's momentum, and the Elias code."""
from __future__ import annotations

import pytest
import torch

from commbench.analysis.contract import check, inputs
from commbench.analysis.contract.feedback import feedback
from commbench.analysis.contract.fixture import Fixture
from commbench.analysis.contract.subjects import Subject
from commbench.methods import Worker, registry
from commbench.methods.codecs import elias
from commbench.methods.codecs.bits import unpack_bits
from commbench.methods.comm import SimCommunicator
from commbench.methods.comm.ledger import ByteLedger
from commbench.methods.kit import Group
from commbench.methods.kit.compressor import Sender
from commbench.methods.zoo.qsgd import QSGDEliasCompressor, QSGDParams
from commbench.methods.zoo.u8bit import dynamic_tree

SHAPES = {"fc.weight": (4, 3), "fc.bias": (4,), "out.weight": (2, 4), "out.bias": (2,)}  # 26 elements
ZOO = ("qsgd", "natural", "u8bit", "fp8", "onebit", "signsgd", "signum", "efsignsgd")


def workers(n, shapes=SHAPES):
    out = []
    for rank in range(n):
        params = {k: torch.zeros(s, requires_grad=True) for k, s in shapes.items()}
        out.append(Worker(rank, params, torch.optim.SGD(params.values(), lr=0.0), seed=100 + rank))
    return out


def grads(n, seed=0, shapes=SHAPES, scale=1e-3):
    g = torch.Generator().manual_seed(seed)
    return [{k: torch.randn(s, generator=g) * scale for k, s in shapes.items()} for _ in range(n)]


def averaged(name, gs, step=0, shapes=SHAPES, **params):
    """Every worker's exchanged gradient after one step of method ``name`` (lr 0: nothing moves)."""
    cls = registry.get(name)
    comm, ws = SimCommunicator(len(gs)), workers(len(gs), shapes)
    method = cls(comm, ws, registry.params_for(name, params), {})
    method.step(gs, lr=0.0, step=step)
    return [{k: w.params[k].grad.clone() for k in shapes} for w in ws], comm, method


def flat(d):
    return torch.cat([d[k].reshape(-1) for k in SHAPES])


# -- bytes by hand: 26 elements in 4 tensors -----------------------------------------------------------------
@pytest.mark.parametrize("name, params, payload", [
    ("qsgd", {"min_size": 1, "bucket": 8}, 5 * 4 + 13),                   # 5 buckets' norms, 26 x 4 bits
    ("qsgd", {"min_size": 1, "bucket": 8, "levels": 127}, 5 * 4 + 26),    # 8 bits a level
    ("qsgd", {"min_size": 1, "bucket": 8, "levels": 1}, 5 * 4 + 7),       # 2 bits a level: 52 bits
    ("qsgd", {"min_size": 10, "bucket": 8}, 2 * 4 + 6 + 4 * 14),          # fc.weight only; 14 float32 all-reduced
    ("natural", {}, 26 + 4),                                               # exponent bytes, sign bits
    ("u8bit", {}, 4 * 4 + 26),                                             # a scale per tensor, a byte each
    ("fp8", {"block": 8}, 5 * 4 + 26),                                     # a scale per block, a byte each
    ("onebit", {}, (3 + 1 + 4 + 1) * 8 + 4),                               # two means per column, a bit each
    ("onebit", {"granularity": "tensor"}, 4 * 8 + 4),
    ("signsgd", {}, 4),
    ("signum", {}, 4),
    ("efsignsgd", {}, 4 * 4 + 4),                                          # a scale per tensor, a bit each
])
def test_bytes_by_hand(name, params, payload):
    _, comm, _ = averaged(name, grads(2), **params)
    assert comm.ledger.sent[0] == comm.ledger.sent[1] == comm.ledger.received[0] == payload
    plain = name == "qsgd" and params["min_size"] > 1  # the tensors under min_size: a plain all-reduce
    assert comm.ledger.calls["allgather"] == 1 and comm.ledger.calls["allreduce"] == int(plain)


@pytest.mark.parametrize("name", ZOO)
def test_every_worker_gets_the_same_average_and_registers_as_a_kit_method(name):
    out, _, method = averaged(name, grads(3, seed=1), **({"min_size": 1} if name == "qsgd" else {}))
    assert all(torch.equal(flat(out[0]), flat(o)) for o in out[1:])
    assert registry.get(name).can_bucket(method.params)  # per tensor: overlapped exchange and DDP hook


# -- QSGD ----------------------------------------------------------------------------------------------------
def one_worker(method_name, params, shapes, x, seed, step=0):
    """(compressor, group, payload, decoded) of one worker's one-shot trip."""
    cls = registry.get(method_name)
    c = cls.compressor_for(params)(params, shapes)
    names = [n for n in shapes if n in c.index]
    group = Group(names, [torch.Size(shapes[n]).numel() for n in names], [c.index[n] for n in names], step, 1)
    payload = c.encode(group, x, None, None, Sender(0, seed, ByteLedger()))
    return c, group, payload, c.decode(group, [payload], None)


@pytest.mark.parametrize("levels, norm", [(7, "l2"), (1, "l2"), (127, "l2"), (7, "max")])
def test_qsgd_levels_are_integers_bounded_by_s_around_the_scaled_input(levels, norm):
    params = QSGDParams(levels=levels, bucket=16, min_size=1, norm=norm)
    x = torch.randn(40, generator=torch.Generator().manual_seed(levels)) * 1e-3
    c, group, payload, y = one_worker("qsgd", params, {"w": (40,)}, x, seed=3)
    blocks = c.blocks(group.sizes, 16, x.device)
    rows = blocks.rows(x)
    scale = (rows.norm(dim=1) if norm == "l2" else rows.abs().amax(dim=1))[blocks.row]
    level = (y * levels / scale).round()  # the decoded value is level * scale / s
    assert torch.allclose(y * levels / scale, level, atol=1e-4) and level.abs().max() <= levels
    scaled = x.abs() * levels / scale  # the level is one of the two integers around s|v|/||v||, with x's sign
    assert (level.abs() >= (scaled - 1e-4).floor()).all() and (level.abs() <= (scaled + 1e-4).ceil()).all()
    assert (torch.sign(level) * torch.sign(x) >= 0).all()


@pytest.fixture(scope="module")
def small():
    """The contract report's synthetic inputs on small tensors, ten steps of error feedback."""
    return inputs(None, shapes={"dense.weight": (48, 40), "conv.weight": (8, 3, 3, 3), "dense.bias": (48,)},
                  feedback_steps=10)


@pytest.mark.parametrize("params, bound", [
    ({"levels": 7, "bucket": 512, "min_size": 1}, min(512 / 49, 512 ** 0.5 / 7)),
    ({"levels": 1, "bucket": 128, "min_size": 1}, min(128, 128 ** 0.5)),
    ({"levels": 127, "bucket": 512, "min_size": 1}, min(512 / 127 ** 2, 512 ** 0.5 / 127)),
    ({"levels": 7, "bucket": 512, "min_size": 1, "coding": "elias"}, min(512 / 49, 512 ** 0.5 / 7)),
])
def test_qsgd_is_unbiased_and_its_variance_is_within_lemma_3_1(small, params, bound):
    """The contract report's own measurement: unbiased (z tests over draws), omega <= min(d/s^2, sqrt(d)/s)."""
    cls = registry.get("qsgd")
    found = check(Subject("qsgd", cls, registry.params_for("qsgd", params), "the input"), small, draws=60,
                  repeats=0)
    assert found.bias.holds and found.failures == [], found.failures
    assert 0 < found.estimates[0].model.spread <= bound
    # the fixed-width payload is declared byte for byte; the Elias code's length depends on the levels drawn
    assert all(w.exact is (None if params.get("coding") == "elias" else True) for w in found.wires)


def test_elias_round_trips_levels_and_writes_the_omega_code():
    assert elias.decode_levels(elias.encode_levels(torch.zeros(9, dtype=torch.int16)), 9, 7).eq(0).all()
    g = torch.Generator().manual_seed(5)
    for n, density in ((1, 1.0), (37, 0.3), (5000, 0.05), (3000, 0.9)):
        level = torch.randint(-127, 128, (n,), generator=g) * (torch.rand(n, generator=g) < density)
        assert torch.equal(elias.decode_levels(elias.encode_levels(level), n, 127), level.to(torch.int32))
    far = torch.zeros(1 << 17, dtype=torch.int16)
    far[0], far[-1] = -1, 100  # a gap of 2^17 - 1 and a level of 100: groups of 17 and 7 bits
    assert torch.equal(elias.decode_levels(elias.encode_levels(far), far.numel(), 127), far.to(torch.int32))
    # one record: Elias(gap 2) = "10 0", sign "1", Elias(|level| 4) = "10 100 0", padded with 1s to whole bytes
    stream = elias.encode_levels(torch.tensor([0, -4], dtype=torch.int16))
    assert "".join(str(int(b)) for b in unpack_bits(stream, 8 * stream.numel())) == "1001101000111111"


def test_qsgd_elias_bytes_by_hand():
    """x = (0, 0, 0, 1): its level is exactly s = 7 (s|v|/||v|| = 7, no rounding left), the other three 0. One
    record: Elias(gap 4) = "10 100 0", sign "0", Elias(7) = "10 111 0": 13 bits, 2 bytes, behind the float32 norm;
    the variable-size all-gather announces its size first (8 bytes)."""
    x = torch.tensor([0.0, 0.0, 0.0, 1.0])
    out, comm, _ = averaged("qsgd", [{"w": x}, {"w": x}], shapes={"w": (4,)}, min_size=1, bucket=4,
                            coding="elias")
    assert comm.ledger.sent[0] == 8 + 4 + 2 and torch.equal(out[0]["w"], x)


def test_qsgd_with_elias_averages_exactly_as_without_it_and_sends_its_own_size():
    gs = grads(2, seed=2, shapes={"w": (3000,)})
    plain, plain_comm, _ = averaged("qsgd", gs, shapes={"w": (3000,)}, min_size=1, levels=1, bucket=512)
    coded, comm, method = averaged("qsgd", gs, shapes={"w": (3000,)}, min_size=1, levels=1, bucket=512,
                                   coding="elias")
    assert isinstance(method.exchange.compressor, QSGDEliasCompressor) and not method.exchange.compressor.same_size
    assert torch.equal(plain[0]["w"], coded[0]["w"]) and torch.equal(coded[0]["w"], coded[1]["w"])
    # s = 1 on buckets of 512: about sqrt(d) nonzero levels of 512, so the code beats 2 bits an element
    assert 8 < comm.ledger.sent[0] < plain_comm.ledger.sent[0] - 8 * 6  # the size announcement: 8 bytes


# -- natural compression ---------------------------------------------------------------------------------------
def test_natural_rounds_to_a_neighbouring_power_of_two_unbiased():
    x = torch.tensor([1.5, -0.75, 3.0, 0.0, -0.0, 2.0 ** -130, 1e-3, -6.0e4])
    below = torch.where(x == 0, 0.0, torch.exp2(torch.floor(torch.log2(x.abs()))))
    below[5] = 2.0 ** -127  # a subnormal rounds to 0 or to 2^-126, the smallest normal power: E = 2^-130 still
    draws = torch.stack([one_worker("natural", None, {"w": (8,)}, x, seed=s)[3] for s in range(2000)])
    assert ((draws.abs() == below) | (draws.abs() == 2 * below) | ((draws == 0) & (x == 2.0 ** -130))).all()
    assert ((torch.sign(draws) == torch.sign(x)) | ((draws == 0) & (x.abs() < 1e-30))).all()
    assert (draws[:, 3:5] == 0).all()  # zero stays zero
    # 1.5 goes up with probability 1/2, -0.75 with 1/2, 3.0 with 1/2, 2^-130 with 1/16: 5 sigma of 2000 draws
    share = (draws.abs() == 2 * below).double().mean(dim=0)
    for j, p in ((0, 0.5), (1, 0.5), (2, 0.5), (5, 1 / 16)):
        assert abs(share[j] - p) < 5 * (p * (1 - p) / 2000) ** 0.5, (j, share[j])
    assert torch.equal(draws[:, 2].unique().sort().values, torch.tensor([2.0, 4.0]))


def test_natural_variance_is_within_one_eighth(small):
    found = check(Subject("natural", registry.get("natural"), registry.params_for("natural", {}), "the input"),
                  small, draws=60, repeats=0)
    assert found.bias.holds and found.failures == [] and found.estimates[0].model.spread <= 1 / 8


# -- 8-bit dynamic tree, fp8 -------------------------------------------------------------------------------------
def test_the_dynamic_tree_table_follows_the_papers_construction():
    table = dynamic_tree()
    assert table.numel() == 128 and table[0] == 0 and (table.diff() > 0).all()
    assert torch.isclose(table[1], torch.tensor(0.55e-6, dtype=torch.float64))          # 000000 1: 10^-6, no tree
    assert torch.isclose(table[127], torch.tensor(0.1 + 0.9 * 63.5 / 64, dtype=torch.float64))  # 1 111111
    assert torch.isclose(table[0b0100000], torch.tensor(0.1 * (0.1 + 0.9 * 0.5 / 32), dtype=torch.float64))


def test_u8bit_sends_the_nearest_code_times_the_tensors_maximum():
    x = torch.randn(200, generator=torch.Generator().manual_seed(0)) * 1e-3
    _, _, payload, y = one_worker("u8bit", registry.params_for("u8bit", {}), {"w": (200,)}, x, seed=0)
    scale = x.abs().max()
    assert torch.equal(payload[:4].view(torch.float32)[0], scale)
    table = dynamic_tree().float()
    code = (x.abs()[:, None] / scale - table[None, :]).abs().argmin(dim=1)  # the nearest, by brute force
    assert torch.equal(payload[4:], code.to(torch.uint8) | ((x < 0).to(torch.uint8) << 7))
    assert torch.allclose(y, table[code] * scale * torch.sign(x), rtol=1e-6, atol=0)


@pytest.mark.parametrize("fmt, dtype", [("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2)])
def test_fp8_is_the_cast_of_each_block_scaled_to_the_formats_largest_value(fmt, dtype):
    x = torch.randn(300, generator=torch.Generator().manual_seed(0)) * 1e-3
    params = registry.params_for("fp8", {"format": fmt, "block": 128})
    _, _, payload, y = one_worker("fp8", params, {"w": (300,)}, x, seed=0)
    for lo in (0, 128, 256):
        part = x[lo:lo + 128]
        scale = part.abs().max() / torch.finfo(dtype).max
        expected = (part / scale).clamp(-torch.finfo(dtype).max, torch.finfo(dtype).max).to(dtype).float() * scale
        assert torch.equal(y[lo:lo + 128], expected)
    assert payload.numel() == 3 * 4 + 300


# -- 1-bit SGD, EF-signSGD: reconstruction values and error feedback -------------------------------------------
def test_onebit_reconstructs_each_column_by_the_means_of_its_two_sides():
    w = torch.tensor([[1.0, -2.0, 0.0], [3.0, -4.0, -1.0], [-5.0, 6.0, 0.5]])
    _, _, _, y = one_worker("onebit", registry.params_for("onebit", {}), {"w": (3, 3)}, w.reshape(-1), seed=0)
    expected = torch.tensor([[2.0, -3.0, 0.25], [2.0, -3.0, -1.0], [-5.0, 6.0, 0.25]])
    assert torch.equal(y.view(3, 3), expected)
    _, _, _, whole = one_worker("onebit", registry.params_for("onebit", {"granularity": "tensor"}), {"w": (3, 3)},
                                w.reshape(-1), seed=0)
    assert torch.equal(whole, torch.where(w < 0, w[w < 0].mean(), w[w >= 0].mean()).reshape(-1))


def test_efsignsgd_sends_the_mean_magnitude_times_the_sign_and_the_average_is_their_mean():
    gs = grads(2, seed=4)
    out, _, _ = averaged("efsignsgd", gs)
    for name in SHAPES:
        sent = [torch.where(g[name] < 0, -g[name].abs().mean(), g[name].abs().mean()) for g in gs]
        assert torch.equal(out[0][name], (sent[0] + sent[1]) / 2)


@pytest.mark.parametrize("name", ["onebit", "efsignsgd", "u8bit"])
def test_error_feedback_sends_everything_it_was_given(small, name):
    params = registry.params_for(name, {"memory": "residual"} if name == "u8bit" else {})
    fx = Fixture.of(registry.get(name), params, small.stream[0].shapes)
    fed = feedback(fx, small.stream)
    assert fed.holds, fed.error  # sent + residual == given (float64)


# -- signSGD with majority vote, Signum ------------------------------------------------------------------------
def test_the_majority_vote_on_a_constructed_case():
    shapes = {"w": (5,)}
    signs = [[1.0, -1.0, 1.0, -1.0, 0.0], [1.0, 1.0, -1.0, -1.0, 0.0], [-1.0, -1.0, -1.0, 1.0, 0.0]]
    out, _, _ = averaged("signsgd", [{"w": 1e-3 * torch.tensor(s)} for s in signs], shapes=shapes)
    assert out[0]["w"].tolist() == [1.0, -1.0, -1.0, -1.0, 1.0]  # the majority; a zero gradient votes +1
    out, _, _ = averaged("signsgd", [{"w": 1e-3 * torch.tensor(s)} for s in signs[:2]], shapes=shapes)
    assert out[0]["w"].tolist() == [1.0, 0.0, 0.0, -1.0, 1.0]  # a tie moves nothing


def test_signum_votes_on_each_workers_momentum_and_checkpoints_it():
    shapes, beta = {"w": (3,)}, 0.9
    cls = registry.get("signum")
    comm, ws = SimCommunicator(3), workers(3, shapes)
    method = cls(comm, ws, registry.params_for("signum", {"momentum": beta}), {})
    first = [{"w": torch.tensor([1.0, 1.0, -1.0])}] * 3
    second = [{"w": torch.tensor([-0.5, -20.0, 5.0])}] * 3  # against the momentum on the first element only
    method.step(first, lr=0.0, step=0)
    method.step(second, lr=0.0, step=1)
    momentum = (1 - beta) * second[0]["w"] + beta * (1 - beta) * first[0]["w"]
    assert torch.allclose(method.state_dict()["momentum"][0], momentum)
    assert ws[0].params["w"].grad.tolist() == torch.sign(momentum).tolist() == [1.0, -1.0, 1.0]  # not sign(g)
    again = cls(SimCommunicator(3), workers(3, shapes), method.params, {})
    again.load_state_dict(method.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict()["momentum"].values(),
                                                method.state_dict()["momentum"].values()))


def test_signum_takes_the_recipes_momentum_and_the_optimizer_steps_plain_sgd():
    from commbench.config import resolve

    cfg = resolve({"task": "lenet-mnist", "method": "signum", "dataset": "synthetic", "workers": 2,
                   "optimizer.name": "momentum", "optimizer.momentum": 0.8})
    assert cfg.method_params["momentum"] == 0.8
    assert cfg.optimizer["name"] == "sgd" and not cfg.optimizer["momentum"]
