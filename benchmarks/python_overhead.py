# File: benchmarks/python_overhead.py — what a call through the Python module
# costs above the C++ API: kiln.InferenceSession.run against
# CompiledModel::Run (the module's _time_cpp_run) on one compiled model and
# the same inputs, one call of each per round, alternately; prints medians,
# and the median of run() minus the C++ Run inside that same call (the
# module's own cost, free of the model's run-to-run noise), split into the
# module's code (from entering its run method to leaving it, the C++ Run
# excluded) and the rest (the interpreter's call and return, the caller's
# timer, freeing the returned list).
#
# A module built before `_last_call_bounds_ns` existed prints no split.
#
#   tools/install_python.sh
#   /usr/bin/python3 benchmarks/python_overhead.py models/tiny_cnn/model.onnx ~/.cache/kiln/zoo/resnet50/model.onnx
#   /usr/bin/python3 benchmarks/python_overhead.py --relu   # a 1-element Relu: the fixed cost alone
import argparse
import statistics
import time

import numpy as np

import kiln

NUMPY = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_,
}


def relu_model():
    import onnx
    from onnx import helper
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu1", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def measure(name, model, threads, min_time, min_rounds):
    sess = kiln.InferenceSession(model, threads=threads)
    rng = np.random.default_rng(0)
    feeds = {}
    for a in sess.get_inputs():
        feeds[a.name] = rng.standard_normal(a.shape).astype(NUMPY[a.type])
    for _ in range(3):  # warm-up: pooled context, caches
        sess.run(None, feeds)
        sess._time_cpp_run(feeds, 1)
    py, cpp, before, after, inside = [], [], [], [], []
    split = hasattr(sess, "_last_call_bounds_ns")
    start = time.perf_counter()
    while len(py) < min_rounds or time.perf_counter() - start < min_time:
        t0 = time.perf_counter_ns()
        sess.run(None, feeds)
        t1 = time.perf_counter_ns()
        py.append((t1 - t0) * 1e-9)
        # The same call's own cost: run() before and after the C++ Run inside it.
        run_start, run_end = sess._last_run_bounds_ns
        before.append((run_start - t0) * 1e-9)
        after.append((t1 - run_end) * 1e-9)
        if split:
            entered, left = sess._last_call_bounds_ns
            inside.append((run_start - entered + left - run_end) * 1e-9)
        cpp.extend(sess._time_cpp_run(feeds, 1))
    own = [b + a for b, a in zip(before, after)]
    # What running any Python code costs with the caches the model's run left
    # behind: calls that do no model work, right after a C++ Run and right
    # after themselves (an empty call; get_inputs; a 1000-float numpy array).
    floors = {"empty call": lambda: None, "get_inputs()": sess.get_inputs,
              "np.empty(1000)": lambda: np.empty(1000, np.float32)}
    floor_text = []
    for label, fn in floors.items():
        cold, warm = [], []
        for _ in range(min(len(py), 30)):
            sess._time_cpp_run(feeds, 1)
            t0 = time.perf_counter_ns()
            fn()
            t1 = time.perf_counter_ns()
            fn()
            t2 = time.perf_counter_ns()
            cold.append((t1 - t0) * 1e-9)
            warm.append((t2 - t1) * 1e-9)
        floor_text.append(f"{label} after a C++ Run {statistics.median(cold) * 1e6:.2f} us, "
                          f"after itself {statistics.median(warm) * 1e6:.2f} us")
    mp, mc = statistics.median(py), statistics.median(cpp)
    paired = statistics.median(p - c for p, c in zip(py, cpp))
    print(f"{name}: {len(py)} rounds, threads {threads}: python run() median {mp * 1e6:.1f} us, "
          f"C++ Run median {mc * 1e6:.1f} us, difference of medians {(mp - mc) * 1e6:+.1f} us, "
          f"median paired difference {paired * 1e6:+.1f} us; "
          f"run() minus its own C++ Run: median {statistics.median(own) * 1e6:.2f} us "
          f"(before {statistics.median(before) * 1e6:.2f}, after {statistics.median(after) * 1e6:.2f}), "
          f"p90 {sorted(own)[int(0.9 * (len(own) - 1))] * 1e6:.2f} us; "
          + (f"of which inside the module's run method {statistics.median(inside) * 1e6:.2f} us, "
             f"outside it {statistics.median(o - i for o, i in zip(own, inside)) * 1e6:.2f} us; "
             if split else "")
          + "; ".join(floor_text))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("models", nargs="*")
    p.add_argument("--relu", action="store_true", help="also a 1-element Relu model")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--min-time", type=float, default=5.0, help="seconds per model")
    p.add_argument("--min-rounds", type=int, default=30)
    args = p.parse_args()
    if args.relu:
        measure("relu[1]", relu_model(), args.threads, args.min_time, args.min_rounds)
    for m in args.models:
        measure(m, m, args.threads, args.min_time, args.min_rounds)


if __name__ == "__main__":
    main()
