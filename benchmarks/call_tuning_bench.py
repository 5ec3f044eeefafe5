#!/usr/bin/env python3
"""kiln without and with library-call tuning (kilnc --tune-calls) against
ONNX Runtime, interleaved: each round times every model on every runner,
and the table holds the medians of the rounds. Also the cold compile time
(fresh JIT and tuning cache) with and without tuning, and the warm one
(from the cache the cold one filled: no re-tuning).

  benchmarks/call_tuning_bench.py --kilnc-base A --kilnc B --models DIR1,DIR2 \
      --python ~/.cache/kiln/corpus-venv/bin/python --rounds 5 --out out.json

A model folder holds model.onnx and test_data_set_0/input_K.pb (kiln's zoo
and the real-model corpus); dynamic dims are bound to the stored inputs'
shapes. --kilnc-base may be the same binary as --kilnc: its column then runs
with --tune-calls=off.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ORT_SCRIPT = r"""
import sys, time, json, numpy as np, onnx, onnxruntime as ort
from onnx import numpy_helper
d, seconds = sys.argv[1], float(sys.argv[2])
so = ort.SessionOptions()
so.intra_op_num_threads = 1
so.inter_op_num_threads = 1
s = ort.InferenceSession(d + "/model.onnx", so, providers=["CPUExecutionProvider"])
feeds = {}
for k, i in enumerate(s.get_inputs()):
    t = onnx.TensorProto()
    t.ParseFromString(open(f"{d}/test_data_set_0/input_{k}.pb", "rb").read())
    feeds[i.name] = numpy_helper.to_array(t)
for _ in range(3): s.run(None, feeds)
ts = []
t_end = time.perf_counter() + seconds
while time.perf_counter() < t_end or len(ts) < 3:
    t0 = time.perf_counter(); s.run(None, feeds); ts.append((time.perf_counter() - t0) * 1e3)
print(json.dumps({"median_ms": float(np.median(ts))}))
"""


def input_flags(python, d):
    """--shape and --input flags binding the stored inputs (kilnc bench)."""
    code = (
        "import onnx,sys,json\nfrom onnx import numpy_helper\n"
        "m=onnx.load(sys.argv[1]+'/model.onnx',load_external_data=False)\n"
        "inits={i.name for i in m.graph.initializer}\n"
        "ins=[i.name for i in m.graph.input if i.name not in inits]\nout=[]\n"
        "for k,n in enumerate(ins):\n"
        " t=onnx.TensorProto();t.ParseFromString(open(f'{sys.argv[1]}/test_data_set_0/input_{k}.pb','rb').read())\n"
        " out.append([n,list(t.dims),f'{sys.argv[1]}/test_data_set_0/input_{k}.pb'])\n"
        "print(json.dumps(out))\n")
    ins = json.loads(subprocess.check_output([python, "-c", code, d], text=True))
    flags = []
    for n, dims, path in ins:
        if dims:
            flags.append(f"--shape={n}={'x'.join(map(str, dims))}")
        flags.append(f"--input={n}={path}")
    return flags


def kiln_bench(kilnc, d, flags, extra, seconds, cache=None):
    cmd = [kilnc, "bench", os.path.join(d, "model.onnx"), "--json", "--threads=1",
           f"--min-time={seconds}", "--warmup=1"] + flags + extra
    if cache:
        cmd.append(f"--cache-dir={cache}")
    p = subprocess.run(cmd, capture_output=True, text=True)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr[-400:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kilnc-base", required=True)
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--models", required=True, help="comma-separated model folders")
    ap.add_argument("--python", required=True, help="a python with onnx and onnxruntime")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    models = [os.path.expanduser(m) for m in args.models.split(",")]
    caches = {k: tempfile.mkdtemp(prefix=f"tuning_bench_{k}_") for k in ("base", "tuned")}
    runners = {
        "base": (args.kilnc_base, ["--tune-calls=off"] if args.kilnc_base == args.kilnc else []),
        "tuned": (args.kilnc, ["--tune-calls=on"]),
    }
    res = {m: {"base": [], "tuned": [], "ort": [], "compile": {}} for m in models}
    flags = {m: input_flags(args.python, m) for m in models}
    # Compile times: cold (the model's first compile into its runner's cache)
    # and warm (the second, from that cache), untuned and tuned; the caches
    # then serve the timed rounds.
    for m in models:
        for k, (kilnc, extra) in runners.items():
            r = kiln_bench(kilnc, m, flags[m], extra, 0.2, caches[k])
            res[m]["compile"][k] = {"cold_ms": r.get("compile_ms"),
                                    "cold_cache_hit": r.get("compile_cache_hit"),
                                    "warm_ms": r.get("compile_warm_ms")}
        print(m, res[m]["compile"], file=sys.stderr, flush=True)
    for rnd in range(args.rounds):
        for m in models:
            for k, (kilnc, extra) in runners.items():
                r = kiln_bench(kilnc, m, flags[m], extra, args.seconds, caches[k])
                res[m][k].append(r["median_ms"])
            p = subprocess.run([args.python, "-c", ORT_SCRIPT, m, str(args.seconds)],
                               capture_output=True, text=True)
            res[m]["ort"].append(json.loads(p.stdout.strip().splitlines()[-1])["median_ms"])
            print(rnd, m, {k: res[m][k][-1] for k in ("base", "tuned", "ort")},
                  file=sys.stderr, flush=True)
    table = []
    for m in models:
        row = {"model": os.path.basename(m.rstrip("/"))}
        for k in ("base", "tuned", "ort"):
            row[k + "_ms"] = statistics.median(res[m][k])
        row["compile"] = res[m]["compile"]
        row["samples"] = {k: res[m][k] for k in ("base", "tuned", "ort")}
        table.append(row)
    with open(args.out, "w") as f:
        json.dump(table, f, indent=1)
    print("| model | kiln untuned ms | kiln tuned ms | ORT ms | ORT/untuned | ORT/tuned | "
          "cold compile untuned s | cold compile tuned s | tuned/untuned | warm tuned s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in table:
        c = r["compile"]
        cb, ct = c["base"]["cold_ms"] / 1e3, c["tuned"]["cold_ms"] / 1e3
        print(f"| {r['model']} | {r['base_ms']:.2f} | {r['tuned_ms']:.2f} | {r['ort_ms']:.2f} | "
              f"{r['ort_ms'] / r['base_ms']:.2f}x | {r['ort_ms'] / r['tuned_ms']:.2f}x | "
              f"{cb:.1f} | {ct:.1f} | {ct / cb:.2f}x | {c['tuned']['warm_ms'] / 1e3:.1f} |")


if __name__ == "__main__":
    main()
