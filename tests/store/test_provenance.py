"""The CPU a run's times were measured on, read from /proc/cpuinfo: times compare only on the same CPU."""
import subprocess

from commbench.store.provenance import code_changed_since, cpu_identity, git_state

# two processors of a 2-core virtual machine, as /proc/cpuinfo lists them (abridged)
AMD = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 avx avx2 fma bmi2
processor\t: 1
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 avx avx2 fma bmi2
"""
INTEL = """processor\t: 0
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile avx512vl
"""


def test_the_model_carries_its_generation_and_the_speed_flags_it_has():
    assert cpu_identity(AMD) == ("AMD EPYC (cpu family 25, model 1)", ["avx2"])
    assert cpu_identity(INTEL) == ("Intel(R) Xeon(R) Platinum 8488C (cpu family 6, model 143)",
                                   ["avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"])


def test_two_generations_of_one_vague_name_read_apart():
    other = AMD.replace("model\t\t: 1\n", "model\t\t: 17\n")
    assert cpu_identity(other)[0] != cpu_identity(AMD)[0]


def test_a_cpuinfo_without_flags_or_family_still_names_the_model():
    assert cpu_identity("model name\t: Some CPU\n") == ("Some CPU", [])


def test_the_code_changes_with_a_commit_or_an_edit_outside_results_only(tmp_path):
    """A sweep's records are committed while it runs: HEAD moves, its code does not."""
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.email=t@t", "-c", "user.name=t", *args], check=True,
                       capture_output=True)

    (tmp_path / "results").mkdir()
    (tmp_path / "a.py").write_text("A = 1\n")
    (tmp_path / "results" / "r.json").write_text("{}\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "one")
    loaded, dirty = git_state(tmp_path)
    assert dirty is False and not code_changed_since(loaded, tmp_path)
    (tmp_path / "results" / "r.json").write_text("{\"step\": 2}\n")
    git("commit", "-qam", "records")
    assert git_state(tmp_path)[0] != loaded and not code_changed_since(loaded, tmp_path)
    (tmp_path / "a.py").write_text("A = 2\n")
    assert code_changed_since(loaded, tmp_path)  # edited, not committed
    git("commit", "-qam", "code")
    assert code_changed_since(loaded, tmp_path)  # committed
    assert not code_changed_since("f" * 40, tmp_path)  # a commit git does not know: it cannot tell
