# File: python/kiln_test.py — pytest suite of the Python module `kiln`: ONNX
# conformance cases and the tiny CNN through kiln.InferenceSession, judged by
# the test data's expected outputs and kiln's reference interpreter; feeds
# that must be refused; the ONNX Runtime conventions of the API.
#
#   bazel test //python:kiln_test     (python/run_pytest.sh runs this file)
import json
import os
import threading
import weakref

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import kiln

NODE_DATA = "/usr/share/libonnx-testdata/data/node"
TINY_CNN = os.environ.get("KILN_TINY_CNN", "models/tiny_cnn")
README = os.environ.get("KILN_README", "README.md")

# ONNX conformance cases (Debian's libonnx-testdata), chosen to cover the
# API's dtypes (f32, f16, f64, i64, bool), several inputs and outputs, and
# each kind of kernel (loop code, oneDNN calls, a reference fallback call).
CASES = [
    "test_conv_with_strides_padding",
    "test_gemm_default_single_elem_vector_bias",
    "test_matmul_2d",
    "test_add_bcast",
    "test_softmax_axis_1",
    "test_maxpool_2d_pads",
    "test_batchnorm_example",
    "test_gather_0",
    "test_argmax_default_axis_example",
    "test_reduce_mean_keepdims_example",
    "test_concat_2d_axis_0",
    "test_and_bcast3v1d",
    "test_equal",
    "test_where_example",
    "test_cast_FLOAT_to_DOUBLE",
    "test_cast_FLOAT_to_FLOAT16",
    "test_transpose_default",
    "test_nonzero_example",
]

# ONNX Runtime's NodeArg.type strings, by ONNX element type.
ORT_TYPES = {
    onnx.TensorProto.FLOAT: "tensor(float)",
    onnx.TensorProto.FLOAT16: "tensor(float16)",
    onnx.TensorProto.DOUBLE: "tensor(double)",
    onnx.TensorProto.INT64: "tensor(int64)",
    onnx.TensorProto.INT32: "tensor(int32)",
    onnx.TensorProto.INT8: "tensor(int8)",
    onnx.TensorProto.UINT8: "tensor(uint8)",
    onnx.TensorProto.BOOL: "tensor(bool)",
}


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    """One JIT cache for the whole run (kernels shared between sessions)."""
    if "TEST_TMPDIR" in os.environ:
        return os.path.join(os.environ["TEST_TMPDIR"], "kiln_cache")
    return str(tmp_path_factory.mktemp("kiln_cache"))


def load_case(case_dir):
    """The model's declared inputs/outputs and every data set, read with onnx."""
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    init = {t.name for t in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in init]
    outputs = list(model.graph.output)
    sets = []
    for d in sorted(os.listdir(case_dir)):
        if not d.startswith("test_data_set_"):
            continue
        path = os.path.join(case_dir, d)

        def read(kind, n):
            return [numpy_helper.to_array(onnx.load_tensor(os.path.join(path, f"{kind}_{k}.pb")))
                    for k in range(n)]

        sets.append((read("input", len(inputs)), read("output", len(outputs))))
    assert sets, f"{case_dir} has no test_data_set_*"
    return inputs, outputs, sets


def assert_close(got, ref, what):
    """kilnc check's rule: |got-ref| <= atol*max(1, max|ref|) + rtol*|ref|."""
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype}, expected {ref.dtype}"
    assert got.shape == ref.shape, f"{what}: shape {got.shape}, expected {ref.shape}"
    if ref.dtype == np.bool_ or np.issubdtype(ref.dtype, np.integer):
        np.testing.assert_array_equal(got, ref, err_msg=what)
        return
    g, r = got.astype(np.float64), ref.astype(np.float64)
    atol, rtol = (2.0**-10, 2.0**-8) if ref.dtype == np.float16 else (1e-5, 1e-3)
    scale = max(1.0, float(np.max(np.abs(r)))) if r.size else 1.0
    bad = np.abs(g - r) > atol * scale + rtol * np.abs(r)
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {r.size} elements differ, "
                           f"max |got-ref| {float(np.max(np.abs(g - r)))}")


def declared_shape(value_info):
    return [d.dim_value for d in value_info.type.tensor_type.shape.dim]


@pytest.mark.parametrize("case", CASES)
def test_conformance_case(case, cache_dir):
    case_dir = os.path.join(NODE_DATA, case)
    assert os.path.isdir(case_dir), f"{case_dir} missing: run tools/bootstrap.sh"
    inputs, outputs, sets = load_case(case_dir)
    model = os.path.join(case_dir, "model.onnx")
    sess = kiln.InferenceSession(model, threads=1, cache_dir=cache_dir)
    ref = kiln.InferenceSession(model, engine="reference")

    # The interface, as the model declares it.
    for got, want in ((sess.get_inputs(), inputs), (sess.get_outputs(), outputs)):
        assert [a.name for a in got] == [v.name for v in want]
        assert [a.type for a in got] == [ORT_TYPES[v.type.tensor_type.elem_type] for v in want]
    for a, v in zip(sess.get_inputs(), inputs):
        assert a.shape == declared_shape(v)

    names = [a.name for a in sess.get_inputs()]
    for n, (ins, expected) in enumerate(sets):
        feeds = dict(zip(names, ins))
        before = [x.copy() for x in ins]
        got = sess.run(None, feeds)
        want = ref.run(None, feeds)
        assert len(got) == len(expected) == len(want)
        for k, (g, e, r) in enumerate(zip(got, expected, want)):
            assert_close(r, e, f"{case} set {n} output {k}: reference vs test data")
            assert_close(g, e, f"{case} set {n} output {k}: compiled vs test data")
            assert_close(g, r, f"{case} set {n} output {k}: compiled vs reference")
        for x, b in zip(ins, before):
            np.testing.assert_array_equal(x, b, err_msg=f"{case}: run wrote into an input")


@pytest.fixture(scope="module")
def tiny(cache_dir):
    return kiln.InferenceSession(os.path.join(TINY_CNN, "model.onnx"), threads=1,
                                 cache_dir=cache_dir)


@pytest.fixture(scope="module")
def tiny_data():
    _, _, sets = load_case(TINY_CNN)
    (x,), (probs,) = sets[0]
    return x, probs


def test_tiny_cnn_matches_test_data_and_reference(tiny, tiny_data):
    x, probs = tiny_data
    ref = kiln.InferenceSession(os.path.join(TINY_CNN, "model.onnx"), engine="reference")
    assert [(a.name, a.type, a.shape) for a in tiny.get_inputs()] == [
        ("input", "tensor(float)", [1, 3, 32, 32])]
    assert [(a.name, a.type, a.shape) for a in tiny.get_outputs()] == [
        ("probs", "tensor(float)", [1, 10])]
    (got,) = tiny.run(None, {"input": x})
    (want,) = ref.run(["probs"], {"input": x})
    assert_close(want, probs, "tiny_cnn: reference vs test data (PyTorch)")
    assert_close(got, probs, "tiny_cnn: compiled vs test data (PyTorch)")
    assert_close(got, want, "tiny_cnn: compiled vs reference")


def test_outputs_outlive_the_session_and_later_runs(cache_dir, tiny_data):
    x, probs = tiny_data
    sess = kiln.InferenceSession(os.path.join(TINY_CNN, "model.onnx"), cache_dir=cache_dir)
    (first,) = sess.run(None, {"input": x})
    (second,) = sess.run(None, {"input": np.zeros_like(x)})
    del sess
    assert_close(first, probs, "first run after a second run and the session's end")
    assert not np.array_equal(first, second)


def test_later_runs_never_write_an_array_something_refers_to(tiny, tiny_data):
    """run returns arrays of earlier runs again once nothing refers to them;
    a name, a view, a list, a weak reference or an in-place change of shape
    or flags keeps an array from being written by later runs."""
    x, _ = tiny_data
    ref = kiln.InferenceSession(os.path.join(TINY_CNN, "model.onnx"), engine="reference")
    feeds = [x, np.zeros_like(x), (x * 0.5).astype(np.float32), -x]
    want = [ref.run(None, {"input": f})[0] for f in feeds]
    kept = [tiny.run(None, {"input": f})[0] for f in feeds]
    view = tiny.run(None, {"input": feeds[0]})[0][0, :3]
    out = tiny.run(None, {"input": feeds[1]})[0]
    weak = weakref.ref(out)
    del out
    reshaped = tiny.run(None, {"input": feeds[2]})[0]
    reshaped.shape = (10,)
    del reshaped
    frozen = tiny.run(None, {"input": feeds[2]})[0]
    frozen.flags.writeable = False
    del frozen
    for n in range(6):
        (got,) = tiny.run(None, {"input": feeds[n % 2 + 2]})
        assert got.shape == (1, 10) and got.flags.writeable and got.flags.c_contiguous
        assert got is not weak()
        assert_close(got, want[n % 2 + 2], f"run {n} of a loop")
    for k in range(len(feeds)):
        assert_close(kept[k], want[k], f"output {k} kept in a list")
    assert_close(view, want[0][0, :3], "a view of a dropped output")
    if weak() is not None:
        assert_close(weak(), want[1], "a weakly referenced output")


def test_a_run_from_a_callback_while_run_replaces_a_kept_array(tiny, tiny_data):
    """An array the session keeps and drops for a new one may have a weak
    reference whose callback runs the session again, inside that run."""
    x, probs = tiny_data
    from_callback = []
    out = tiny.run(None, {"input": x})[0]
    weak = weakref.ref(out, lambda _: from_callback.append(tiny.run(None, {"input": -x})[0]))
    del out
    kept = [tiny.run(None, {"input": x})[0] for _ in range(4)]
    assert weak() is None and len(from_callback) == 1
    for k, got in enumerate(kept):
        assert_close(got, probs, f"run {k} while a kept array was replaced")
    ref = kiln.InferenceSession(os.path.join(TINY_CNN, "model.onnx"), engine="reference")
    assert_close(from_callback[0], ref.run(None, {"input": -x})[0], "the callback's run")


def test_run_arguments_by_keyword_and_output_names(tiny, tiny_data):
    x, probs = tiny_data
    (a,) = tiny.run(output_names=None, input_feed={"input": x})
    (b,) = tiny.run(None, {"input": x}, run_options=None)
    c, d = tiny.run(["probs", "probs"], {"input": x})
    for got in (a, b, c, d):
        assert_close(got, probs, "tiny_cnn")
    with pytest.raises(TypeError, match="missing required argument 'input_feed'"):
        tiny.run(None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'feeds'"):
        tiny.run(None, feeds={"input": x})
    with pytest.raises(TypeError, match="multiple values for argument 'output_names'"):
        tiny.run(None, {"input": x}, output_names=None)
    with pytest.raises(TypeError, match="RunOptions"):
        tiny.run(None, {"input": x}, object())
    with pytest.raises(TypeError, match="at most 3 arguments"):
        tiny.run(None, {"input": x}, None, None)


def test_bytes_model_and_pathlike(cache_dir, tiny_data):
    import pathlib
    x, probs = tiny_data
    path = pathlib.Path(TINY_CNN) / "model.onnx"
    for model in (path.read_bytes(), path):
        (got,) = kiln.InferenceSession(model, cache_dir=cache_dir).run(None, {"input": x})
        assert_close(got, probs, f"tiny_cnn from {type(model).__name__}")


def test_unaligned_and_readonly_inputs(tiny, tiny_data):
    x, probs = tiny_data
    # A contiguous array at an odd address is copied, not refused.
    raw = np.empty(x.nbytes + 1, np.uint8)
    unaligned = np.frombuffer(raw.data, dtype=np.uint8, count=x.nbytes, offset=1)
    unaligned = unaligned.view(np.float32).reshape(x.shape)
    unaligned[...] = x
    assert not unaligned.flags.aligned
    # Aligned for float32 but not to 64 bytes: borrowed as it is.
    offset = np.empty(x.size + 1, np.float32)[1:].reshape(x.shape)
    offset[...] = x
    assert offset.flags.aligned and offset.ctypes.data % 64 != 0
    readonly = x.copy()
    readonly.flags.writeable = False
    for feed in (unaligned, offset, readonly):
        (got,) = tiny.run(None, {"input": feed})
        assert_close(got, probs, "tiny_cnn on an unaligned/read-only input")


def test_runs_from_several_threads(tiny, tiny_data):
    x, probs = tiny_data
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(tiny.run(None, {"input": x})[0])
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 15
    for r in results:
        assert_close(r, probs, "tiny_cnn from a thread")


def test_report_and_explain(tiny):
    report = json.loads(tiny.report())
    assert report["kernels"], report
    assert any(k["backend"] == "onednn" for k in report["kernels"])
    text = tiny.explain()
    for k in report["kernels"]:
        assert k["name"] in text


def test_shapes_bind_dynamic_dims(cache_dir):
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    data = model.SerializeToString()
    sess = kiln.InferenceSession(data, shapes={"x": [3, 4]}, cache_dir=cache_dir)
    assert sess.get_inputs()[0].shape == [3, 4]
    feed = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    (got,) = sess.run(None, {"x": feed})
    np.testing.assert_array_equal(got, np.maximum(feed, 0))
    # Unbound, the dim takes any size at run (a specialization per size).
    unbound = kiln.InferenceSession(data, cache_dir=cache_dir)
    assert unbound.get_inputs()[0].shape == ["N", 4]
    assert any("any size" in w for w in unbound.warnings), unbound.warnings



def test_model_with_dynamic_dims_runs_any_size(tmp_path, cache_dir):
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "relu_dynamic.onnx"
    onnx.save(model, str(path))
    # A session over the file and one over its bytes: both specialize.
    for source in (str(path), model.SerializeToString()):
        sess = kiln.InferenceSession(source, cache_dir=cache_dir)
        assert sess.get_inputs()[0].shape == ["N", 4]
        for n in (2, 5, 2):
            feed = np.linspace(-1, 1, 4 * n, dtype=np.float32).reshape(n, 4)
            (got,) = sess.run(None, {"x": feed})
            assert got.shape == (n, 4)
            np.testing.assert_array_equal(got, np.maximum(feed, 0))
        with pytest.raises(ValueError, match=r"input 'x'.*dim 1"):
            sess.run(None, {"x": np.zeros((2, 3), np.float32)})


# ---------------------------------------------------------------- refusals


@pytest.fixture(scope="module")
def add(cache_dir):
    return kiln.InferenceSession(os.path.join(NODE_DATA, "test_add_bcast", "model.onnx"),
                                 cache_dir=cache_dir)


def add_feeds():
    return {"x": np.ones((3, 4, 5), np.float32), "y": np.ones((5,), np.float32)}


@pytest.mark.parametrize("change, error, message", [
    (lambda f: f.update(z=f["x"]), ValueError, r"unknown input 'z'.*'x', 'y'"),
    (lambda f: f.pop("y"), ValueError, r"missing input 'y'"),
    (lambda f: f.update(x=f["x"].astype(np.float64)), TypeError,
     r"input 'x': expected tensor\(float\), got tensor\(double\)"),
    (lambda f: f.update(y=f["y"].astype(np.int64)), TypeError,
     r"input 'y': expected tensor\(float\), got tensor\(int64\)"),
    (lambda f: f.update(x=f["x"].astype(">f4")), TypeError, r"input 'x': expected tensor\(float\)"),
    (lambda f: f.update(x=f["x"][0]), ValueError, r"input 'x': expected rank 3 .*got rank 2"),
    (lambda f: f.update(x=np.ones((3, 4, 6), np.float32)), ValueError,
     r"input 'x': expected shape \[3,4,5\], got \[3,4,6\]"),
    (lambda f: f.update(x=np.ones((3, 4, 10), np.float32)[:, :, ::2]), ValueError,
     r"input 'x' is not C-contiguous"),
    (lambda f: f.update(x=np.asfortranarray(f["x"])), ValueError, r"input 'x' is not C-contiguous"),
    (lambda f: f.update(y=[1.0] * 5), TypeError, r"input 'y': expected a numpy.ndarray"),
    (lambda f: f.update({3: f["x"]}), TypeError, r"input names must be str"),
])
def test_bad_feeds_are_refused_naming_the_input(add, change, error, message):
    feeds = add_feeds()
    change(feeds)
    with pytest.raises(error, match=message):
        add.run(None, feeds)


def test_bad_run_arguments(add):
    with pytest.raises(TypeError, match="input_feed must be a dict"):
        add.run(None, [np.ones((3, 4, 5), np.float32)])
    with pytest.raises(ValueError, match=r"unknown output 'nope'"):
        add.run(["nope"], add_feeds())
    with pytest.raises(TypeError, match="output_names"):
        add.run("sum", add_feeds())
    # After refusals the session still runs.
    (got,) = add.run(None, add_feeds())
    np.testing.assert_array_equal(got, np.full((3, 4, 5), 2, np.float32))


def test_compile_errors_carry_the_status_message(tmp_path, cache_dir):
    with pytest.raises(kiln.CompileError, match="NOT_FOUND.*no_such_model.onnx"):
        kiln.InferenceSession(str(tmp_path / "no_such_model.onnx"))
    with pytest.raises(kiln.CompileError, match="INVALID_ARGUMENT"):
        kiln.InferenceSession(b"this is not an ONNX model")
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(kiln.CompileError, match="NoSuchOp") as e:
        kiln.InferenceSession(model.SerializeToString(), cache_dir=cache_dir)
    assert isinstance(e.value, RuntimeError)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"engine": "gpu"}, ValueError, "engine='gpu'"),
    ({"threads": -1}, ValueError, "threads=-1"),
    ({"precision": "f8"}, ValueError, "precision="),
    ({"isa": "avx9000"}, kiln.CompileError, "avx9000"),
    ({"shapes": {"input": [1, -3, 32, 32]}}, ValueError, "negative"),
    ({"shapes": {"input": "1x3"}}, TypeError, "sequence of ints"),
    ({"providers": ["CUDAExecutionProvider"]}, ValueError, "CPU only"),
    ({"sess_options": object()}, TypeError, "SessionOptions"),
])
def test_bad_session_arguments(kwargs, error, message, cache_dir):
    with pytest.raises(error, match=message):
        kiln.InferenceSession(os.path.join(TINY_CNN, "model.onnx"), cache_dir=cache_dir,
                              **kwargs)


def test_modelmeta_and_providers(tmp_path, cache_dir):
    """ONNX Runtime's get_modelmeta(), get_providers() and get_provider_options(),
    for a session over a file and one over bytes, compiled and reference."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "meta_graph", [x], [y],
                              doc_string="the graph")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="exporter", producer_version="9.1",
                              domain="ai.example", model_version=7, doc_string="a model")
    helper.set_model_props(model, {"author": "someone", "labels": "a,b"})
    path = tmp_path / "meta.onnx"
    onnx.save(model, str(path))
    for source in (str(path), model.SerializeToString()):
        for engine in ("compiled", "reference"):
            sess = kiln.InferenceSession(source, threads=1, cache_dir=cache_dir, engine=engine)
            meta = sess.get_modelmeta()
            assert (meta.producer_name, meta.producer_version, meta.domain) == (
                "exporter", "9.1", "ai.example")
            assert (meta.version, meta.description) == (7, "a model")
            assert (meta.graph_name, meta.graph_description) == ("meta_graph", "the graph")
            assert meta.custom_metadata_map == {"author": "someone", "labels": "a,b"}
            assert sess.get_providers() == ["CPUExecutionProvider"]
            assert sess.get_provider_options() == {"CPUExecutionProvider": {}}


def test_deterministic_runs_are_bit_identical_at_one_and_two_threads(tiny_data, cache_dir):
    x, probs = tiny_data
    path = os.path.join(TINY_CNN, "model.onnx")
    got = [kiln.InferenceSession(path, cache_dir=cache_dir, threads=t, deterministic=True)
           .run(None, {"input": x})[0] for t in (1, 2)]
    assert got[0].tobytes() == got[1].tobytes()
    assert_close(got[0], probs, "tiny_cnn deterministic")


def test_cpu_provider_is_accepted(tiny_data, cache_dir):
    x, probs = tiny_data
    sess = kiln.InferenceSession(os.path.join(TINY_CNN, "model.onnx"), cache_dir=cache_dir,
                                 providers=["CPUExecutionProvider"])
    assert_close(sess.run(None, {"input": x})[0], probs, "tiny_cnn with providers=")


def test_readme_example_runs(cache_dir, monkeypatch):
    """The README's Python example, as written, from the repository root."""
    text = open(README).read()
    section = text[text.index("## Python"):]
    start = section.index("```python\n") + len("```python\n")
    code = section[start:section.index("```", start)]
    assert "kiln.InferenceSession" in code
    monkeypatch.chdir(os.path.dirname(os.path.abspath(README)))
    monkeypatch.setenv("XDG_CACHE_HOME", cache_dir)
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    probs = scope["probs"]
    assert probs.shape == (1, 10) and probs.dtype == np.float32
    assert abs(float(probs.sum()) - 1.0) < 1e-5  # the model ends in Softmax
