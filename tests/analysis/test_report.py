"""Figures and the report, regenerated from records: the same records give the same bytes."""
from __future__ import annotations

import json
import shutil

import pytest

from commbench.analysis import report
from commbench.analysis.plots import plot_all
from commbench.analysis.report import Block, write_report

from ..conftest import commbench
from ..helpers import write_record


@pytest.fixture(autouse=True)
def quick_model_section(monkeypatch, request):
    """The model section costs ~20 s (ledgered AlexNet steps); its own test below runs it once."""
    if request.node.name != "test_the_model_section_checks_figure_5":
        monkeypatch.setattr(report, "model_blocks", lambda: [Block("h2", "Performance model (stubbed)")])


def test_the_model_section_checks_figure_5():
    blocks = report.model_blocks()
    assert blocks[0].text == "Performance model: TernGrad Figure 5"
    table = next(b for b in blocks if b.kind == "table")
    assert all(row[3] == "3.04x" for row in table.body) and len(table.body) == 2
    assert "does not reproduce the paper's 3.04x" in blocks[1].text  # 5.71x and 8.65x under the stated assumptions


def small_results(root):
    """A threshold sweep, a worker sweep and a delay sweep on LeNet, with training histories."""
    for i, t in enumerate([0.001, 0.01, 0.1]):
        write_record(root, f"bgt-{i}", method="bgt", params={"threshold": t}, top1=0.9 - t, bytes_sent=int(1e9 * t))
    for w in (1, 2, 4):
        write_record(root, f"base-w{w}", workers=w, top1=0.90, images_per_s=100.0 * w)
        write_record(root, f"tern-w{w}", method="terngrad", workers=w, params={"clip": 2.5, "layerwise": True},
                     top1=0.90 + 0.01 * w, images_per_s=150.0 * w)
    for k in (1, 2, 3):
        write_record(root, f"ssd-k{k}", method="ssdsgd", params={"k": k, "local_rule": "glu"}, top1=0.9 - k / 100)
    for w in (1, 2, 4):  # weak scaling, 8 images per worker: a throughput sweep
        record = write_record(root, f"speed-w{w}", workers=w, steps=20, top1=0.5, images_per_s=50.0 * w)
        record["config"].update(global_batch=8 * w, batch_per_worker=8)
        (root / "runs" / f"speed-w{w}.json").write_text(json.dumps(record))
    for path in (root / "runs").glob("*.json"):  # a training curve for each run
        record = json.loads(path.read_text())
        record["history"] = [{"step": s, "train_loss": 2.3 / s, "top1": None, "bytes_sent": s} for s in (1, 2, 4)]
        path.write_text(json.dumps(record))


def test_each_figure_is_drawn_when_the_records_support_it(tmp_path):
    small_results(tmp_path / "results")
    names = {p.name for p in plot_all(tmp_path / "results", tmp_path / "figures", paper=True)}
    # one experiment each, named after the settings held fixed (the 2-worker runs: 10,000 steps, batch 64)
    for stem in ("bytes-accuracy_lenet-mnist_mnist_w2_dist_b64_s10000_momentum",  # every method of the setting
                 "workers-accuracy_lenet-mnist_mnist_b64_s10000_momentum",
                 "accuracy-vs-bytes_lenet-mnist_mnist_w2_dist_b64_s10000_momentum",  # the papers' (--paper)
                 "accuracy-vs-workers_lenet-mnist_mnist_b64_s10000_momentum",
                 "accuracy-vs-delay_lenet-mnist_mnist_w2_b64_s10000_momentum",
                 "training-curves_lenet-mnist_mnist_w2_dist_b64_s10000_momentum",
                 "throughput-vs-workers_lenet-mnist_mnist_pw8_s20_momentum"):
        assert {f"{stem}.png", f"{stem}.pdf"} <= names, stem
    # the throughput sweep's runs (20 steps, 8 per worker) are not in the 10,000-step accuracy figures
    assert not any("s20" in n for n in names if not n.startswith(("throughput", "training")))
    mine = {p.name for p in plot_all(tmp_path / "results", tmp_path / "only-mine")}
    assert mine < names  # without --paper: the same figures less the papers' own
    assert not any(n.startswith(("accuracy-vs-bytes", "accuracy-vs-delay", "accuracy-vs-workers")) for n in mine)
    (tmp_path / "empty").mkdir()
    assert plot_all(tmp_path / "empty", tmp_path / "none") == []


def test_deleting_every_generated_file_and_running_again_gives_the_same_report(tmp_path):
    small_results(tmp_path / "results")
    under_way = tmp_path / "results" / "checkpoints" / "run-under-way"  # a run the paper tables cannot count yet
    (under_way / "step-000000250").mkdir(parents=True)
    (under_way / "latest.json").write_text(json.dumps({"step": 250, "folder": "step-000000250", "files": []}))
    out = tmp_path / "report"
    write_report(tmp_path / "results", out, paper=True)
    first = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    shutil.rmtree(out)
    write_report(tmp_path / "results", out, paper=True)
    second = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert first.keys() == second.keys() and first == second
    md = first[out.relative_to(out) / "report.md"].decode()
    assert "15 run records" in md
    assert ("![accuracy-vs-bytes: lenet-mnist, mnist, w2, dist, b64, s10000, momentum]"
            "(figures/accuracy-vs-bytes_lenet-mnist_mnist_w2_dist_b64_s10000_momentum.png)") in md
    assert "Table 2" in md and "missing" in md  # the paper tables, with the rows these records cannot fill
    assert "Not in these tables yet, 1 run checkpointed part-way (a sweep of its grid resumes it): run-under-way " \
           "at step 250." in md
    page = first[out.relative_to(out) / "report.html"].decode()
    assert page.count("data:image/png;base64,") == md.count("![") > 0  # self-contained


def test_the_report_changes_when_a_record_does(tmp_path):
    small_results(tmp_path / "results")
    write_report(tmp_path / "results", tmp_path / "a")
    write_record(tmp_path / "results", "bgt-0", method="bgt", params={"threshold": 0.001}, top1=0.5)
    write_report(tmp_path / "results", tmp_path / "b")
    assert (tmp_path / "a" / "report.md").read_text() != (tmp_path / "b" / "report.md").read_text()


def test_plot_and_report_commands(tmp_path):
    small_results(tmp_path / "results")
    proc = commbench("plot", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "figs"))
    assert proc.returncode == 0, proc.stderr
    assert str(tmp_path / "figs" / "workers-accuracy_lenet-mnist_mnist_b64_s10000_momentum.pdf") \
        in proc.stdout.splitlines()
    proc = commbench("report", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "rep"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "rep" / "report.html").is_file()
    bad = commbench("plot", "--results", str(tmp_path / "nowhere"))
    assert bad.returncode == 2 and "nowhere" in bad.stderr


def test_emulated_network_runs_sit_beside_the_model_prediction(tmp_path):
    from commbench.analysis.perfmodel.measured import comparison

    root = tmp_path / "results"

    def put(run_id, workers, net, global_batch, train_s, bytes_sent, images_per_s):
        write_record(root, run_id, task="alexnet-imagenet", workers=workers, steps=4, bytes_sent=bytes_sent,
                     images_per_s=images_per_s)
        path = root / "runs" / f"{run_id}.json"
        record = json.loads(path.read_text())
        record["config"].update(net=net, global_batch=global_batch)
        record["metrics"].update(train_s=train_s, wire_bytes_measured=2 * bytes_sent)
        path.write_text(json.dumps(record))

    put("one", 1, None, 8, train_s=2.0, bytes_sent=0, images_per_s=16.0)       # 0.5 s per step of 8 images
    put("two", 2, "1gbit", 16, train_s=9.0, bytes_sent=int(1e9), images_per_s=8.0)  # 1.25e8 B per worker-step
    [row] = comparison(root)
    # Eq. 8 with i = 1, j = 2: T = 0.5 + (50e-6 + 1.25e8 / 1.25e8) * log2(2) = 1.50005 s; Eq. 9: 2 * 8 / T
    assert row["modelled_images_per_s"] == pytest.approx(16 / 1.50005)
    assert row["model_error_pct"] == pytest.approx(100 * (16 / 1.50005 - 8) / 8)
    assert row["wire_bytes_per_step"] == pytest.approx(5e8) and row["net"] == "1gbit"
    blocks = report.network_blocks(root)
    assert blocks[-1].body[0][6:8] == ("10.67", "+33%")
    assert row["loopback_modelled_images_per_s"] is None and blocks[-1].body[0][8:10] == ("—", "—")

    # The same 2 workers on the host's loopback took 1.25 s a step: that is the compute time of the second
    # prediction, T = 1.25 + 1.00005 s, 2 * 8 / T images/s.
    put("loop", 2, None, 16, train_s=5.0, bytes_sent=int(1e9), images_per_s=12.8)
    [row] = comparison(root)
    assert row["loopback_modelled_images_per_s"] == pytest.approx(16 / 2.25005)
    assert row["loopback_model_error_pct"] == pytest.approx(100 * (16 / 2.25005 - 8) / 8)
    assert report.network_blocks(root)[-1].body[0][8:10] == ("7.11", "-11%")


def test_a_parameter_server_run_is_priced_by_its_busiest_links(tmp_path):
    """SSD-SGD through one server: 2 workers push 1.0e9 B and pull 0.5e9 B in 4 steps, so the server's link
    carries 1.5e9 B against 0.75e9 B on each worker's; at 1gbit (1.25e8 B/s) that is 3 s a step, plus the
    1-worker run's 0.5 s of compute."""
    from commbench.analysis.perfmodel.measured import comparison

    root = tmp_path / "results"
    write_record(root, "one", task="alexnet-imagenet", method="ssdsgd", workers=1, steps=4, bytes_sent=0)
    write_record(root, "ps", task="alexnet-imagenet", method="ssdsgd", workers=2, steps=4,
                          bytes_sent=int(1e9), images_per_s=4.0)
    for run_id, changes in (("one", {"global_batch": 8, "net": None}), ("ps", {"global_batch": 16, "net": "1gbit"})):
        path = root / "runs" / f"{run_id}.json"
        rec = json.loads(path.read_text())
        rec["config"].update(changes)
        rec["metrics"].update(train_s=2.0, server_bytes_received=int(1e9), server_bytes_sent=int(5e8),
                              bytes_received=int(5e8))
        rec["env"] = {"parameter_servers": 1}
        path.write_text(json.dumps(rec))
    [row] = comparison(root)
    assert row["network_term"] == "PS links (ledger)"
    assert row["modelled_images_per_s"] == pytest.approx(16 / (0.5 + 1.5e9 / 1.25e8 / 4))


def test_a_two_node_run_sits_beside_the_two_level_model(tmp_path):
    """4 workers, 2 per node, 100 Mbit/s between nodes; 2.5e6 B per worker and step. The loopback profile (the
    same 4 workers on one host) took 0.25 s a step. Two levels (i = 2, j = 2): T = 0.25 + (50e-6 + 2.5e6 /
    1.25e7) * log2(2) = 0.45005 s; every link slow (i = 1, j = 4): T = 0.25 + 0.20005 * 2 = 0.6501 s."""
    from commbench.analysis.perfmodel.measured import two_level_comparison

    root = tmp_path / "results"

    def put(run_id, node_link, nodes, train_s, images_per_s):
        write_record(root, run_id, workers=4, steps=10, bytes_sent=int(4 * 10 * 2.5e6), images_per_s=images_per_s)
        path = root / "runs" / f"{run_id}.json"
        record = json.loads(path.read_text())
        record["config"].update(node_link=node_link, global_batch=256, net=None)
        record["metrics"].update(train_s=train_s)
        record["env"] = {"nodes": nodes}
        path.write_text(json.dumps(record))

    put("slow", "100mbit", ["node1", "node2"], train_s=5.0, images_per_s=512.0)
    [row] = two_level_comparison(root)
    assert row["two_level_images_per_s"] is None and row["workers_per_node"] == 2  # no profile yet
    put("loop", None, ["host"], train_s=2.5, images_per_s=1024.0)
    [row] = two_level_comparison(root)
    assert row["two_level_images_per_s"] == pytest.approx(256 / 0.45005)
    assert row["one_level_images_per_s"] == pytest.approx(256 / 0.6501)
    assert row["two_level_error_pct"] == pytest.approx(100 * (256 / 0.45005 - 512) / 512)
    assert row["profile_run_id"] == "loop"
    # the ring: an all-reduce (received <= sent) puts 2 (N-1)/N |g| = 3.75e6 B on each node's link a step
    assert row["ring_link_bytes_per_step"] == pytest.approx(3.75e6)
    assert row["ring_images_per_s"] == pytest.approx(256 / (0.25 + 3.75e6 / 1.25e7))
    path = root / "runs" / "slow.json"  # an all-gather: each worker receives its 3 peers' payloads
    record = json.loads(path.read_text())
    record["metrics"]["bytes_received"] = 3 * record["metrics"]["bytes_sent"]
    path.write_text(json.dumps(record))
    assert two_level_comparison(root)[0]["ring_link_bytes_per_step"] == pytest.approx(7.5e6)
    [block] = [b for b in report.two_level_blocks(root) if b.kind == "table"]
    assert block.body[0][2:4] == ("4 (2 x 2)", "100mbit") and block.body[0][7:9] == ("568.83", "+11%")


def test_a_users_report_puts_their_runs_first_and_the_papers_only_when_asked(tmp_path):
    small_results(tmp_path / "results")
    write_report(tmp_path / "results", tmp_path / "mine")
    md = (tmp_path / "mine" / "report.md").read_text()
    assert "## All runs" in md and "Paper tables" not in md and "bytes-accuracy" in md
    page = (tmp_path / "mine" / "report.html").read_text()
    assert "<code>" in page and "`" not in page.split("<body>")[1]  # inline code rendered, not shown raw


def test_error_bars_over_seeds_in_the_every_method_figure(tmp_path):
    """Three methods of one setting with two seeds each: one point per method, with error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from commbench.analysis.plots import _all_methods_vs_bytes, runs_frame

    for method, top1, sent in (("baseline", 0.98, 1000), ("terngrad", 0.97, 100), ("bgt", 0.95, 10)):
        for seed in (1, 2):
            write_record(tmp_path, f"{method}-{seed}", method=method, seed=seed, top1=top1 + seed / 1000,
                         bytes_sent=sent * seed)
    fig, ax = plt.subplots()
    assert _all_methods_vs_bytes(ax, runs_frame(tmp_path))
    bars = [c for c in ax.containers if c.has_yerr]
    assert len(bars) == 3 and {t.get_text().split(" (")[0] for t in ax.get_legend().get_texts()} == \
        {"baseline", "terngrad", "bgt"}
    plt.close(fig)


def _every_method_axes(tmp_path, methods, history=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from commbench.analysis.plots import _all_methods_vs_bytes, runs_frame

    for method, top1, sent in methods:
        write_record(tmp_path, method, method=method, top1=top1, bytes_sent=sent)
    frame = runs_frame(tmp_path)
    if history is not None:
        frame["history"] = [history(row) for _, row in frame.iterrows()]
    fig, ax = plt.subplots()
    assert _all_methods_vs_bytes(ax, frame)
    fig.canvas.draw()
    return fig, ax


def test_methods_at_the_same_bytes_and_accuracy_are_both_seen_and_the_legend_says_one_was_moved(tmp_path):
    import matplotlib.pyplot as plt

    fig, ax = _every_method_axes(tmp_path, [("baseline", 0.9, 1000), ("fp16", 0.9, 1000), ("bgt", 0.8, 10)])
    dots = {c.get_label(): c.lines[0].get_window_extent(fig.canvas.get_renderer()) for c in ax.containers}
    fp16 = next(k for k in dots if k.startswith("fp16"))
    base = next(k for k in dots if k.startswith("baseline"))
    assert abs(dots[fp16].x0 - dots[base].x0) >= 4  # points apart on the screen, not on top of each other
    moved = [k for k in dots if "same point as another" in k]
    assert len(moved) == 1 and not any("same point" in k for k in dots if k.startswith("bgt"))
    plt.close(fig)


def test_each_method_is_drawn_as_its_curve_from_the_history(tmp_path):
    import matplotlib.pyplot as plt

    def history(row):  # three evaluations on the way to the final point
        return [{"step": s, "top1": row["top1"] * s / 3, "bytes_sent": row["gb_sent"] * 1e9 * s / 3}
                for s in (1, 2, 3)]

    fig, ax = _every_method_axes(tmp_path, [("baseline", 0.9, 1000), ("bgt", 0.8, 10)], history)
    curves = [line for line in ax.get_lines() if len(line.get_xdata()) == 3]
    assert len(curves) == 2 and sorted(max(c.get_ydata()) for c in curves) == pytest.approx([0.8, 0.9])
    plt.close(fig)


@pytest.mark.parametrize("sent", [(2.9e9, 3.0e9, 3.1e9), (0.9e9, 1.6e9, 3e9), (1e7, 3e8, 3e9), (1e6, 1e8, 6e9)],
                         ids=["within 7%", "within a decade", "over two decades", "over four decades"])
def test_log_axis_tick_labels_do_not_overlap(tmp_path, sent):
    """Methods whose bytes differ by a few percent (fp32 against bf16 compute) gave matplotlib's log axis nine
    minor labels such as 2.925x10^0 in a row, running into each other."""
    import matplotlib.pyplot as plt

    fig, ax = _every_method_axes(tmp_path, list(zip(("baseline", "terngrad", "bgt"), (0.9, 0.89, 0.8), sent)))
    renderer, (lo, hi) = fig.canvas.get_renderer(), ax.get_xlim()
    labels = [*ax.xaxis.get_majorticklabels(), *ax.xaxis.get_minorticklabels()]
    boxes = sorted((t.get_window_extent(renderer) for t in labels
                    if t.get_text() and t.get_visible() and lo <= t.get_position()[0] <= hi), key=lambda b: b.x0)
    assert len(boxes) >= 2 and all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:]))
    plt.close(fig)


def test_accuracy_against_time_is_a_mean_over_seeds_with_a_band_and_the_declared_target(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from commbench.analysis.plots import _accuracy_vs_time, runs_frame

    for seed, speed in ((1, 1.0), (2, 2.0)):  # seed 2 evaluates at twice the training time of seed 1
        record = write_record(tmp_path, f"b{seed}", seed=seed, config={"eval_target": 0.9})
        record["history"] = [{"step": s, "top1": s / 10, "train_s": s * speed} for s in range(1, 11)]
        (tmp_path / "runs" / f"b{seed}.json").write_text(json.dumps(record))
    fig, ax = plt.subplots()
    assert _accuracy_vs_time(ax, runs_frame(tmp_path))
    [mean] = [line for line in ax.get_lines() if line.get_label().startswith("baseline (n=2)")]
    x, y = mean.get_xdata(), mean.get_ydata()
    at = lambda t: y[abs(x - t).argmin()]  # noqa: E731
    assert at(4.0) == pytest.approx((0.4 + 0.2) / 2)  # seed 1 at its 4th evaluation, seed 2 at its 2nd
    assert len(ax.collections) == 1  # the band between the seeds
    assert any(line.get_label() == "declared target 0.9" for line in ax.get_lines())
    plt.close(fig)
