# File: benchmarks/ort_python_overhead.py — ONNX Runtime's own Python call
# overhead, measured as benchmarks/python_overhead.py measures kiln's:
# InferenceSession.run timed from Python (time.perf_counter_ns) minus the
# C++ InferenceSession::Run inside that same call, which ORT's profiler
# records as the "model_run" event (microseconds). Back-to-back calls, one
# thread, seeded random inputs; prints medians.
#
#   ~/.cache/kiln/corpus-venv/bin/python benchmarks/ort_python_overhead.py \
#       models/tiny_cnn/model.onnx ~/.cache/kiln/zoo/resnet50/model.onnx
import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np
import onnxruntime as ort

NUMPY = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_,
}


def measure(model, min_time, min_rounds):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.enable_profiling = True
    opts.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {a.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in a.shape])
             .astype(NUMPY[a.type]) for a in sess.get_inputs()}
    warmup = 3
    for _ in range(warmup):
        sess.run(None, feeds)
    py = []
    start = time.perf_counter()
    while len(py) < min_rounds or time.perf_counter() - start < min_time:
        t0 = time.perf_counter_ns()
        sess.run(None, feeds)
        t1 = time.perf_counter_ns()
        py.append((t1 - t0) * 1e-3)
    with open(sess.end_profiling()) as f:
        events = json.load(f)
    runs = [e["dur"] for e in events if e.get("name") == "model_run"]
    cpp = runs[warmup:warmup + len(py)]
    if len(cpp) != len(py):
        raise SystemExit(f"{model}: {len(runs)} model_run events for {warmup + len(py)} runs")
    own = [p - c for p, c in zip(py, cpp)]
    print(f"{model}: onnxruntime {ort.__version__}, {len(py)} rounds, 1 thread: "
          f"python run() median {statistics.median(py):.1f} us, model_run median "
          f"{statistics.median(cpp):.1f} us; run() minus its own model_run: median "
          f"{statistics.median(own):.1f} us, p90 {sorted(own)[int(0.9 * (len(own) - 1))]:.1f} us")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("models", nargs="+")
    p.add_argument("--min-time", type=float, default=5.0, help="seconds per model")
    p.add_argument("--min-rounds", type=int, default=30)
    args = p.parse_args()
    for m in args.models:
        measure(m, args.min_time, args.min_rounds)


if __name__ == "__main__":
    main()
