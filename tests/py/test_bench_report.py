"""scripts/bench.py's report says how each step was measured: with `--only`, the steps run
now with this run's settings (`--reps 1` reads "once"), the others with the saved run's."""

import argparse
import copy
import importlib.util
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_bench():
    spec = importlib.util.spec_from_file_location("bench", ROOT / "scripts" / "bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def saved_run():
    with open(ROOT / "benchmarks" / "last-run.json") as f:
        return json.load(f)


def report(bench, run, tmp_path):
    out = tmp_path / "BENCHMARKS.md"
    args = argparse.Namespace(**run["meta"]["args"])
    bench.report_from_run(args, run, str(out))
    return out.read_text()


def test_an_only_run_with_one_rep_says_once_and_keeps_the_other_steps_settings(tmp_path):
    bench = load_bench()
    earlier = saved_run()
    earlier["meta"].pop("step_args", None)
    earlier["meta"]["args"]["reps"] = 3
    this_run = dict(earlier["meta"]["args"], reps=1)
    run = copy.deepcopy(earlier)
    run["meta"]["step_args"] = bench.merged_step_args(
        earlier["meta"], {"throughput": this_run, "rb": this_run}
    )
    text = report(bench, run, tmp_path)
    assert "Each cell was measured once," in text
    assert "measured 3 times" not in text
    assert "1 run per server" in text
    # unix and bgsave were not measured by this run: the saved run's 3 repeats.
    assert "3 runs each" in text
    assert "Medians of 3 runs" in text


def test_a_full_run_reports_its_repeats(tmp_path):
    bench = load_bench()
    run = saved_run()
    args = dict(run["meta"]["args"], reps=5)
    run["meta"]["step_args"] = {name: args for name in bench.STEPS}
    text = report(bench, run, tmp_path)
    assert "Each cell was measured 5 times," in text
    assert "5 runs per server" in text
