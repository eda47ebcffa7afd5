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


def test_the_aof_step_has_its_own_table(tmp_path):
    bench = load_bench()
    run = saved_run()
    cell = {"decisions_per_sec": 1000.0, "decisions_per_cpu_s": 2000.0, "server_cores": 0.5,
            "p50_us": 100, "p99_us": 900, "p999_us": 1500, "errors": 0}
    run["aof"] = {
        "getset|50|16|always|sluice": [dict(cell, decisions_per_sec=3000.0)],
        "getset|50|16|always|redis": [cell],
        "throttle|50|1|everysec|redis": [{"unavailable": "no CL.THROTTLE"}],
    }
    text = report(bench, run, tmp_path)
    assert "## With the append-only file" in text
    assert "| getset | 50 | 16 | always | 3,000 | 1,000 | 3.00× |" in text
    assert "| throttle | 50 | 1 | everysec | not measured | not measured |" in text
    # A saved run without the step has no such section.
    run.pop("aof")
    assert "## With the append-only file" not in report(bench, run, tmp_path)
